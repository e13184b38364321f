"""Training on a runs table is a public capability; no predictor reaches into another object's private state;
the shipped runs are rebuilt from their source folder, which must be named."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pandas as pd
import pytest

from predictors import build
from predictors.base import fingerprint
from predictors.data.polimi import make
from predictors.measurements import runs
from sim.catalogue import job_types, vm_type
from sim.model import CapsimError

ROOT = Path(__file__).resolve().parents[2]
RAW = Path("/work/shared/data/polimi-gpu-runs")


def test_fit_replaces_the_training_runs() -> None:
    j5, nv6 = job_types()["J5"], vm_type("NV6")
    m = build("measured")
    shipped = m.runtime(j5, nv6, 1)
    only_k80 = runs()[runs()["gpu"] == "K80"]
    assert m.fit(only_k80).runtime(j5, nv6, 1) == math.inf
    assert "never measured on M60" in m.support(j5, nv6, 1)
    assert m.fit(runs()).runtime(j5, nv6, 1) == shipped


def test_fit_checks_the_table() -> None:
    with pytest.raises(CapsimError, match="lacks the columns"):
        build("regression").fit(pd.DataFrame({"gpu": ["M60"]}))
    with pytest.raises(CapsimError, match="empty runs table"):
        build("measured").fit(runs().head(0))


def test_fits_are_shared_by_content_not_by_object() -> None:
    a, b = runs(), runs().copy()
    assert fingerprint(a) == fingerprint(b) != fingerprint(a.iloc[::-1])
    p, q = build("regression").fit(a), build("regression").fit(b)
    key = ("vgg19", "pytorch", False)
    assert p.model(key) is q.model(key)


def test_no_predictor_reads_private_state_of_another_object() -> None:
    bad = []
    for path in sorted((ROOT / "predictors").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert not bad, bad


def test_make_requires_the_source_folder(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        make.main([])
    assert "SOURCE_DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="not a folder"):
        make.main([str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match="no source CSV files"):
        make.main([str(tmp_path)])


@pytest.mark.skipif(not RAW.exists(), reason="raw measurements folder not present")
def test_make_rebuilds_the_shipped_runs_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    make.main([str(RAW), "--out", str(out)])
    assert out.read_bytes() == (ROOT / "predictors" / "data" / "polimi" / "runs.csv").read_bytes()
