"""The one result store: `run` and `sweep` write the same layout, metrics recompute from the stored tables, a metric
declared later shows up in report and plot, and folders of the older layout are read or named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.cli import main
from experiments.results.reading import read_results, recompute_summary
from experiments.results.store import MANIFEST, ResultStore
from experiments.running.tasks import TABLES
from sim import metrics as sim_metrics
from sim.model import CapsimError

from .conftest import per_run_layout, small_scenario, write_yaml


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("store")
    sc = small_scenario(policies=[{"kind": "fifo"}, {"kind": "greedy"}], cluster={"nodes": 2, "billing_quantum": 60,
                                                                                 "vm_types": ["NC6", "NC12"]})
    assert main(["run", str(write_yaml(d / "s.yaml", sc)), "--out", str(d / "out"), "--quiet", "--workers", "1"]) == 0
    return d / "out"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("store-sweep")
    base = small_scenario()
    sweep = {"name": "g", "scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds", "name")},
             "policies": [{"kind": "edf"}, {"kind": "fifo"}], "seeds": [0, 1],
             "grid": {"cluster.nodes": [1, 2]}}
    assert main(["sweep", str(write_yaml(d / "s.yaml", sweep)), "--out", str(d / "out"), "--workers", "1",
                 "--quiet"]) == 0
    return d / "out"


def test_run_and_sweep_write_one_layout(run_dir: Path, sweep_dir: Path) -> None:
    for d, kind, n in ((run_dir, "run", 4), (sweep_dir, "sweep", 8)):
        manifest = json.loads((d / MANIFEST).read_text())
        assert manifest["kind"] == kind and len(manifest["run_ids"]) == n
        for table in ("summary", *TABLES):
            (batch,) = (d / table).glob("*.parquet")  # a few runs: one batch, run_id a column
            assert batch.name.startswith("part-"), (d, table)
            ids = pd.read_parquet(batch, columns=["run_id"]).run_id
            assert set(ids) == set(manifest["run_ids"]) and (table != "summary" or ids.is_unique), (d, table)
    assert json.loads((sweep_dir / MANIFEST).read_text())["grid_fields"] == ["cluster.nodes"]


def test_summary_csv_is_the_flat_export_of_the_finished_runs(run_dir: Path, sweep_dir: Path) -> None:
    for d, first in ((run_dir, ["policy", "seed"]), (sweep_dir, ["cluster.nodes", "policy", "seed"])):
        flat = pd.read_csv(d / "summary.csv")
        stored = read_results(d).tables["summary"]
        assert list(flat.columns[:len(first) + 3]) == first + ["vm_cost", "tardiness_cost", "total_cost"]
        assert "config" not in flat.columns and set(flat.columns) == set(stored.columns) - {"config"}
        assert list(flat.run_id) == list(stored.run_id)
        np.testing.assert_allclose(flat.total_cost, stored.total_cost, rtol=1e-11)
    policies = list(pd.read_csv(sweep_dir / "summary.csv").policy)
    assert policies == ["edf", "edf", "fifo", "fifo"] * 2, "rows follow the grid, the sweep's policy order, seeds"


def test_summary_csv_written_a_few_rows_at_a_time_is_the_same_file(sweep_dir: Path, tmp_path: Path,
                                                                  monkeypatch) -> None:
    import shutil

    from experiments.results import files

    copy = tmp_path / "copy"
    shutil.copytree(sweep_dir, copy)
    (copy / "summary.csv").unlink()
    monkeypatch.setattr(files, "CSV_ROWS", 3)  # 8 runs: slices of 3, 3 and 2 rows
    assert ResultStore(copy).export_summary() == copy / "summary.csv"
    assert (copy / "summary.csv").read_bytes() == (sweep_dir / "summary.csv").read_bytes()


def test_rows_written_in_slices_read_as_the_whole_frame_written_at_once(tmp_path: Path, monkeypatch) -> None:
    """Each slice converts to pandas as the whole table would: an integer column with a missing value in one slice
    is float in every slice (a large integer then prints as a float does), missing values print empty."""
    import pyarrow as pa

    from experiments.results import files

    table = pa.table({"big": pa.array([10**13, 3, None, 7, 2**40], pa.int64()),
                      "n": pa.array([1, 2, 3, 4, 5], pa.int64()),
                      "flag": pa.array([True, None, False, True, True]),
                      "text": pa.array(["a", None, "c,d", "e\"f", ""]),
                      "x": pa.array([0.1, float("nan"), None, 1e-20, 2.5]),
                      "empty": pa.array([None] * 5, pa.string())})
    order = pa.array([4, 0, 3, 1, 2], pa.int64())
    columns = ["n", "big", "x", "flag", "text", "empty"]
    files.write_csv(table.take(order).to_pandas()[columns], tmp_path / "whole.csv")
    monkeypatch.setattr(files, "CSV_ROWS", 2)  # the missing value of "big" is in the last slice only
    files.write_csv_rows(table, order, columns, tmp_path / "slices.csv")
    assert (tmp_path / "slices.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()
    assert b"1e+13" in (tmp_path / "slices.csv").read_bytes()


def test_recompute_gives_the_stored_metrics_exactly(run_dir: Path) -> None:
    tables = read_results(run_dir).tables
    again = recompute_summary(tables, with_segments=ResultStore(run_dir).runs_with("segments"))
    pd.testing.assert_frame_equal(again, tables["summary"], check_exact=True)
    assert (tables["summary"]["gpu_utilisation"] > 0).all()


def test_recompute_without_segments_falls_back_to_the_node_table(run_dir: Path) -> None:
    tables = read_results(run_dir).tables
    again = recompute_summary(tables, with_segments=set())
    names = [m for m in sim_metrics.METRICS if m != "gpu_utilisation"]
    pd.testing.assert_frame_equal(again[names], tables["summary"][names], check_exact=True)
    np.testing.assert_allclose(again.gpu_utilisation, tables["summary"].gpu_utilisation, rtol=1e-12)


def test_recompute_of_chosen_metrics_leaves_the_others(run_dir: Path) -> None:
    tables = read_results(run_dir).tables
    tables["summary"]["late_jobs"] = -1.0
    again = recompute_summary(tables, metrics=["vm_cost"])
    assert (again.late_jobs == -1.0).all() and (again.vm_cost == read_results(run_dir).tables["summary"].vm_cost).all()


@pytest.fixture
def new_metric(monkeypatch):
    """A metric declared after the runs were made: the largest GPU count any job got."""
    m = sim_metrics.Metric("max_gpus", "largest GPU count", "GPUs", 0, lambda t: float(t.jobs["gpus"].max()))
    monkeypatch.setitem(sim_metrics.METRICS, m.name, m)
    return m


def test_a_metric_declared_later_shows_up_in_report(run_dir: Path, new_metric, capsys) -> None:
    assert main(["report", str(run_dir), "--metrics", "max_gpus"]) == 2
    assert "--recompute" in capsys.readouterr().err
    assert main(["report", str(run_dir), "--metrics", "total_cost,max_gpus", "--recompute", "--format", "csv"]) == 0
    df = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    jobs = read_results(run_dir).tables["jobs"]
    for policy, g in jobs.groupby("policy"):
        expected = g.groupby("run_id")["gpus"].max().mean()
        assert df.set_index("policy").loc[policy, "max_gpus_mean"] == pytest.approx(expected)
    assert main(["report", str(run_dir), "--metrics", "max_gpus", "--recompute"]) == 0
    assert "largest GPU count (GPUs)" in capsys.readouterr().out


def test_a_metric_declared_later_shows_up_in_plot(run_dir: Path, new_metric, tmp_path: Path, monkeypatch) -> None:
    from experiments import plots

    labels = []
    real = plots.metric_figure

    def spy(data, metric, width):
        spec = real(data, metric, width)
        labels.append(spec.panels[0].ylabel)
        return spec

    monkeypatch.setattr(plots, "metric_figure", spy)
    assert main(["plot", str(run_dir), "--out", str(tmp_path), "--only", "pareto", "--metrics", "max_gpus",
                 "--recompute"]) == 0
    assert labels == ["largest GPU count (GPUs)"]
    assert (tmp_path / "metric_max_gpus.png").stat().st_size > 1000


def test_unknown_metric_is_named(run_dir: Path, capsys) -> None:
    assert main(["report", str(run_dir), "--metrics", "total_cots"]) == 2
    err = capsys.readouterr().err
    assert "unknown metric 'total_cots'" in err and "did you mean 'total_cost'" in err


def test_metrics_list_describes_every_declared_metric(run_dir: Path, capsys) -> None:
    assert main(["report", str(run_dir), "--metrics", "list"]) == 0
    out = capsys.readouterr().out
    for m in sim_metrics.METRICS.values():
        assert m.name in out and m.description in out


def test_a_folder_of_the_earlier_sweep_layout_is_read(sweep_dir: Path, tmp_path: Path) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(sweep_dir, old)
    per_run_layout(old, journal=False)  # older folders: one file per table and run, no runs recorded (nor checksums)
    shutil.rmtree(old / "segments")
    manifest = json.loads((old / MANIFEST).read_text())
    manifest["run_ids"] = manifest["run_ids"][:3]
    (old / "sweep.json").write_text(json.dumps(manifest))
    (old / MANIFEST).unlink()
    res = read_results(old, recompute=True)
    assert len(res.tables["summary"]) == 3 and res.fields == ["cluster.nodes"] and res.tables["segments"].empty
    assert len(read_results(old, all_runs=True).tables["summary"]) == 8


def test_a_flat_folder_of_an_older_run_is_named(tmp_path: Path) -> None:
    (tmp_path / "jobs.parquet").write_bytes(b"")
    with pytest.raises(CapsimError, match="older `capsim run`"):
        read_results(tmp_path)


def test_a_second_run_into_the_folder_keeps_the_first_runs(run_dir: Path, tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "again"
    shutil.copytree(run_dir, d)
    sc = small_scenario(policies=[{"kind": "edf"}], seeds=[7])
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "--out", str(d), "--quiet", "--workers", "1"]) == 0
    assert list(pd.read_csv(d / "summary.csv").policy) == ["edf"]
    assert len(read_results(d, all_runs=True).tables["summary"]) == 5


def test_rows_are_ordered_as_pandas_orders_their_labels() -> None:
    """``batches.order`` sorts in Arrow exactly as a stable pandas sort of the label columns: a grid value missing or
    NaN last (and equal: the next labels decide), the command's policy order, policies it does not name after them,
    text by code point."""
    import pyarrow as pa

    from experiments.results import batches

    rng = np.random.default_rng(3)
    n = 400
    x = rng.choice([0.5, -1.0, np.nan, 2.0], n).tolist()
    x = [None if i % 7 == 0 else v for i, v in enumerate(x)]
    table = pa.table({"run_id": [f"r{i:04d}" for i in rng.permutation(n)],
                      "grid.x": pa.array(x, pa.float64()),
                      "grid.name": rng.choice(["b", "a", "é", "Z", "ab"], n).tolist(),
                      "policy": rng.choice(["edf", "fifo", "zeta", "alpha"], n).tolist(),
                      "seed": rng.integers(0, 5, n)})
    policies = ["fifo", "edf"]
    df = table.to_pandas()
    df["_p"] = df["policy"].map(lambda p: policies.index(p) if p in policies else len(policies))
    want = df.sort_values(["grid.name", "grid.x", "_p", "policy", "seed", "run_id"], kind="mergesort").index
    got = batches.order(table, ["grid.name", "grid.x"], policies).to_pylist()
    assert got == list(want)


def test_memory_a_batch_freed_goes_back_to_the_system(tmp_path: Path) -> None:
    """What a compaction frees in the C heap stays resident unless given back (``release_free_memory``): a heap
    whose freed blocks lie between live ones keeps them, 40 MB here, in RSS until trimmed. Fresh interpreter: its
    heap holds nothing of the suite's."""
    import platform
    import subprocess
    import sys

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    code = """if True:
        from experiments.results.files import release_free_memory
        def rss():
            return int(next(x for x in open("/proc/self/status") if x.startswith("VmRSS")).split()[1]) >> 10
        big, keep = [], []
        for _ in range(400):
            big.append(b"x" * 100_000)  # from the heap (under the mmap threshold)
            keep.append(b"y" * 20_000)  # from the heap's top too, between them, and kept
        del big
        freed = rss()
        release_free_memory()
        print(freed, rss())
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    freed, released = map(int, out.stdout.split())
    assert freed - released >= 25, (freed, released)


def test_every_batch_gives_its_memory_back(tmp_path: Path, monkeypatch) -> None:
    """The command's RSS between batches (and its end's peak on top of it) does not carry the last batch's
    transient memory: each compaction ends by giving it back."""
    from experiments.results import store

    calls: list[int] = []
    monkeypatch.setattr(store, "BATCH_RUNS", 2)
    monkeypatch.setattr(store, "release_free_memory", lambda: calls.append(1))
    sc = small_scenario(policies=[{"kind": "fifo"}], seeds=[0, 1, 2, 3, 4])
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "--out", str(tmp_path / "out"), "--quiet",
                 "--workers", "1"]) == 0
    assert len(calls) == 3  # batches of 2, 2 and 1 runs
