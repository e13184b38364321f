"""``capsim plot``: every figure is written as PNG and PDF, non-empty, and opens; colours stay fixed per policy."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import pytest

from experiments.cli import main
from experiments.plots import pareto_front, policy_colours

from .conftest import small_scenario, write_yaml


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("plots")
    base = small_scenario()
    sweep = {"scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds")},
             "policies": [{"kind": "fifo"}, {"kind": "edf"}], "seeds": [0, 1],
             "grid": {"workload.mean_interarrival": [30, 90]}}
    f = write_yaml(d / "s.yaml", sweep)
    assert main(["sweep", str(f), "--out", str(d / "out"), "--workers", "1", "--quiet"]) == 0
    return d / "out"


EXPECTED = ["cost_breakdown", "tardiness_late", "pareto", "cdf_jct_lateness", "cost_vs_mean_interarrival",
            "decision_time", "timeline"]


def test_every_figure_is_written_and_opens(sweep_dir: Path, capsys) -> None:
    assert main(["plot", str(sweep_dir)]) == 0
    figs = sweep_dir / "figures"
    for name in EXPECTED:
        png, pdf = figs / f"{name}.png", figs / f"{name}.pdf"
        assert png.stat().st_size > 1000 and pdf.stat().st_size > 1000, name
        img = mpimg.imread(png)
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        head = pdf.read_bytes()
        assert head.startswith(b"%PDF") and b"/FontFile2" in head, f"{name}.pdf must embed TrueType fonts"


def test_timeline_of_a_chosen_run_and_unknown_run(sweep_dir: Path, tmp_path: Path, capsys) -> None:
    import pandas as pd

    run_id = pd.read_parquet(sweep_dir / "summary").run_id.iloc[-1]
    assert main(["plot", str(sweep_dir), "--out", str(tmp_path / "f"), "--run", run_id, "--only", "timeline"]) == 0
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["timeline.pdf", "timeline.png"]
    assert (tmp_path / "f" / "timeline.png").stat().st_size > 1000
    assert main(["plot", str(sweep_dir), "--run", "nope"]) == 2
    assert "no finished run" in capsys.readouterr().err
    assert main(["plot", str(sweep_dir), "--only", "pie"]) == 2
    assert "unknown figure 'pie'" in capsys.readouterr().err


def test_policy_colours_are_stable() -> None:
    a = policy_colours(["edf", "milp", "mine"])
    b = policy_colours(["milp", "fifo", "edf", "mine"])
    assert a["edf"] == b["edf"] and a["milp"] == b["milp"]
    assert len(set(map(tuple, b.values()))) == 4


def test_pareto_front() -> None:
    import numpy as np

    pts = np.array([[1.0, 5.0], [2.0, 2.0], [3.0, 3.0], [4.0, 1.0], [2.5, 2.0]])
    assert list(pareto_front(pts)) == [0, 1, 3]
