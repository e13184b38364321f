"""Small pieces of the lab: progress line, tables, seeds, aliases, grid labels, atomic writes, dry runs."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from experiments.cli import main
from experiments.results.files import write_parquet
from experiments.results.tables import format_table
from experiments.running.progress import Progress
from experiments.scenario import registered_policies
from experiments.scenario.sweep import grid_value_label

from .conftest import small_scenario, write_yaml


def test_progress_counts_failures_and_eta() -> None:
    out = io.StringIO()
    p = Progress(4, stream=out)
    p.update(True)
    p.update(False)
    line = p.line()
    assert "2/4 runs" in line and "1 failed" in line and "ETA" in line and line.startswith("[#######")
    p.update(True)
    p.update(True)
    assert out.getvalue().rstrip().endswith("ETA 00:00") and "4/4 runs" in out.getvalue()


def test_quiet_progress_writes_nothing() -> None:
    out = io.StringIO()
    p = Progress(2, quiet=True, stream=out)
    p.update(True)
    p.update(True)
    assert out.getvalue() == ""


def test_format_table_aligns() -> None:
    text = format_table(["policy", "cost"], [["fifo", 1234.5], ["milp", 7.0]])
    lines = text.splitlines()
    assert lines[0].startswith("policy") and lines[2].endswith("1,234.50") and lines[3].endswith("7.00")
    assert len({len(x) for x in lines}) == 1


def test_registry_aliases_are_not_run_twice() -> None:
    import optim

    kinds = registered_policies()
    assert "priority" in kinds and len(kinds) == len(set(kinds))
    if "ps" in optim.registry():
        assert "ps" not in kinds


def test_grid_value_labels_are_scalars() -> None:
    assert grid_value_label(30) == 30 and grid_value_label("a.csv") == "a.csv"
    assert grid_value_label([{"count": 2}]) == '[{"count":2}]'


def test_a_table_folder_reads_as_one_dataset_without_temporary_files(tmp_path: Path) -> None:
    df = pd.DataFrame({"policy": ["a", "a"], "seed": [0, 0], "x": [9, 8]})
    write_parquet(df, tmp_path / "t" / "one.parquet")
    (tmp_path / "t" / ".tmp-stale.parquet").write_bytes(b"junk")  # a writer killed half-way: ignored by readers
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t"), df)


def test_sweep_dry_run_lists_runs(tmp_path: Path, capsys) -> None:
    base = small_scenario()
    d = {"scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds")},
         "policies": [{"kind": "fifo"}], "seeds": [0, 1], "grid": {"cluster.nodes": [1, 2]}}
    f = write_yaml(tmp_path / "s.yaml", d)
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all("todo" in ln and "fifo" in ln for ln in lines)
    assert not (tmp_path / "o").exists()
