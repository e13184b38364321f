"""Sweeps: grid expansion and run ids, every bad-YAML message, resume, failures, Dask vs process pool, report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import optim
from experiments.cli import main
from experiments.results.reading import read_results
from experiments.results.store import ResultStore
from experiments.running.tasks import TABLES
from experiments.runs import plan
from experiments.scenario.sweep import load_sweep
from optim.base import Policy
from sim.model import CapsimError, Plan, Snapshot

from .conftest import per_run_layout, small_scenario, write_yaml


def sweep_data(**over: Any) -> dict[str, Any]:
    base = small_scenario()
    d: dict[str, Any] = {
        "name": "t",
        "scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds", "name")},
        "policies": base["policies"],
        "seeds": [0, 1],
        "grid": {"workload.mean_interarrival": [30, 90]},
    }
    d.update(over)
    return d


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "sweep.yaml", sweep_data())


def error_of(path: Path) -> str:
    with pytest.raises(CapsimError) as e:
        load_sweep(path)
    return str(e.value)


# ----- expansion and ids ----------------------------------------------------------------------------------------------


def test_cartesian_and_zipped_grid(tmp_path: Path) -> None:
    zipped = [{"cluster.nodes": [1, 2, 3], "workload.jobs": [3, 6, 9]}]
    sw = load_sweep(write_yaml(tmp_path / "s.yaml", sweep_data(zip=zipped)))
    assert sw.fields == ["workload.mean_interarrival", "cluster.nodes", "workload.jobs"]
    assert len(sw.points) == 2 * 3
    assert {(dict(p.values)["cluster.nodes"], dict(p.values)["workload.jobs"]) for p in sw.points} == \
        {(1, 3), (2, 6), (3, 9)}
    for p in sw.points:
        v = dict(p.values)
        assert p.scenario.cluster.node_count == v["cluster.nodes"] and p.scenario.n_jobs == v["workload.jobs"]
        assert p.scenario.workload.mean_interarrival == v["workload.mean_interarrival"]
    tasks = plan(sw).tasks
    assert len(tasks) == 6 * 2 * 2 and len({t.run_id for t in tasks}) == len(tasks)


def test_run_ids_survive_a_grown_grid(tmp_path: Path) -> None:
    small = {t.run_id for t in plan(load_sweep(write_yaml(tmp_path / "a.yaml", sweep_data()))).tasks}
    grown = sweep_data(grid={"workload.mean_interarrival": [30, 60, 90]}, seeds=[0, 1, 2])
    big = {t.run_id for t in plan(load_sweep(write_yaml(tmp_path / "b.yaml", grown))).tasks}
    assert small < big and len(big) == 3 * 2 * 3


def test_extends_merges_deeply(tmp_path: Path, sweep_file: Path) -> None:
    child = {"extends": "sweep.yaml", "seeds": [5], "scenario": {"workload": {"jobs": 4}},
             "grid": {"cluster.nodes": [1, 3]}}
    sw = load_sweep(write_yaml(tmp_path / "child.yaml", child))
    assert sw.seeds == [5] and sw.fields == ["workload.mean_interarrival", "cluster.nodes"]
    sc = sw.points[0].scenario
    assert sc.n_jobs == 4 and sc.workload.mix == {"J1": 1.0, "J4": 1.0} and sc.predictor.kind == "table"


def test_extends_can_drop_an_inherited_axis(tmp_path: Path, sweep_file: Path) -> None:
    child = {"extends": "sweep.yaml", "grid": {"workload.mean_interarrival": None, "cluster.nodes": [1, 3]}}
    assert load_sweep(write_yaml(tmp_path / "child.yaml", child)).fields == ["cluster.nodes"]


def test_scenario_given_as_a_file(tmp_path: Path, tiny: Path) -> None:
    sw = load_sweep(write_yaml(tmp_path / "s.yaml", {"scenario": "tiny.yaml", "grid": {"cluster.nodes": [1, 2]}}))
    assert len(sw.points) == 2 and [p.label for p in sw.policies] == ["fifo", "edf"] and sw.seeds == [0, 1]


# ----- bad sweep files ------------------------------------------------------------------------------------------------


def test_unknown_top_level_key(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grids={})))
    assert "s.yaml" in msg and "unknown key 'grids'" in msg and "did you mean 'grid'" in msg


def test_grid_path_that_is_not_a_field(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"workload.mean_interarival": [1]})))
    assert "grid.workload.mean_interarival" in msg and "did you mean 'mean_interarrival'" in msg


def test_grid_value_of_the_wrong_type(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"workload.mean_interarrival": [30, "x", -1]})))
    assert "grid.workload.mean_interarrival[1]" in msg and "'x'" in msg
    assert "grid.workload.mean_interarrival[2]" in msg and "found -1" in msg


def test_grid_value_that_breaks_another_field(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"estimator.mape": [0.1]})))
    assert "grid.estimator.mape[0]" in msg and "makes estimator.kind invalid" in msg


def test_grid_value_with_an_unknown_name(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"cluster.vm_types": [["NC6"], ["NC7"]]})))
    assert "grid.cluster.vm_types[1]" in msg and "unknown VM type 'NC7'" in msg


def test_grid_must_not_hold_policies(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"policies": [[{"kind": "fifo"}]]})))
    assert "grid.policies" in msg and "cannot be swept" in msg


def test_zip_lists_of_unequal_length(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(zip=[{"cluster.nodes": [1, 2], "workload.jobs": [4]}])))
    assert "zip[0]" in msg and "equal length" in msg and "cluster.nodes: 2" in msg


def test_field_swept_twice(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(zip=[{"workload.mean_interarrival": [5]}])))
    assert "swept twice" in msg


def test_empty_value_list(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"cluster.nodes": []})))
    assert "grid.cluster.nodes" in msg and "non-empty list" in msg


def test_grid_must_map_to_lists(tmp_path: Path) -> None:
    msg = error_of(write_yaml(tmp_path / "s.yaml", sweep_data(grid={"cluster.nodes": 3})))
    assert "grid.cluster.nodes" in msg and "expected a list" in msg


def test_bad_base_scenario_and_policy(tmp_path: Path) -> None:
    d = sweep_data(policies=[{"kind": "fifo"}, {"kind": "edff"}])
    d["scenario"]["cluster"]["nodes"] = -2
    msg = error_of(write_yaml(tmp_path / "s.yaml", d))
    assert "scenario.cluster.nodes" in msg
    assert msg.startswith("2 problems") or "policies[1].kind" in msg


def test_extends_cycle_and_missing_file(tmp_path: Path) -> None:
    write_yaml(tmp_path / "a.yaml", {"extends": "b.yaml", "grid": {}})
    write_yaml(tmp_path / "b.yaml", {"extends": "a.yaml"})
    assert "cycle" in error_of(tmp_path / "a.yaml")
    msg = error_of(write_yaml(tmp_path / "c.yaml", {"extends": "nowhere.yaml"}))
    assert "nowhere.yaml" in msg and "not found" in msg


def test_every_mistake_reported_at_once(tmp_path: Path) -> None:
    d = sweep_data(grid={"workload.mean_interarrival": ["slow"], "cluster.nodez": [1]},
                   zip=[{"cluster.nodes": [1], "workload.jobs": [1, 2]}])
    msg = error_of(write_yaml(tmp_path / "s.yaml", d))
    assert msg.startswith("3 problems")
    for part in ("grid.workload.mean_interarrival[0]", "grid.cluster.nodez", "zip[0]"):
        assert part in msg


# ----- running: resume, failures, Dask --------------------------------------------------------------------------------


def files_of(d: Path) -> dict[str, float]:
    return {str(p.relative_to(d)): p.stat().st_mtime_ns for p in d.rglob("*.parquet")}


def test_sweep_writes_datasets_and_never_redoes_runs(sweep_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    t = read_results(out).tables
    assert len(t["summary"]) == 2 * 2 * 2 and t["failures"].empty
    assert {"run_id", "workload.mean_interarrival", "policy", "seed"} <= set(t["summary"].columns)
    assert {"run_id", "workload.mean_interarrival", "policy", "seed", "job_id"} <= set(t["jobs"].columns)
    import json

    cfg = json.loads(t["summary"]["config"].iloc[0])
    assert cfg["seed"] == t["summary"]["seed"].iloc[0] and cfg["scenario"]["workload"]["jobs"] == 6
    before = files_of(out)
    capsys.readouterr()
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1"]) == 0
    printed = capsys.readouterr()
    assert "0 runs finished" in printed.err and printed.out == f"{out}\n"  # notes on stderr, the result on stdout
    assert files_of(out) == before


def test_a_grown_grid_runs_only_the_new_points(sweep_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    before = files_of(out)
    grown = write_yaml(tmp_path / "grown.yaml", sweep_data(grid={"workload.mean_interarrival": [30, 60, 90]}))
    capsys.readouterr()
    assert main(["sweep", str(grown), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    text = capsys.readouterr().err
    assert "4 runs finished" in text and "8 were already done" in text
    after = files_of(out)
    assert all(after[k] == v for k, v in before.items()) and len(after) == len(before) + 1 + len(TABLES), \
        "the 4 new runs in one new batch, the old batch untouched"
    assert len(read_results(out).tables["summary"]) == 12


def test_resume_after_a_kill_in_the_per_run_layout(sweep_file: Path, tmp_path: Path) -> None:
    """A folder of one file per table and run (before batches), a run killed between its files (jobs written,
    summary not) and a stale temp file: only that run is redone, into a batch; the other runs' files stay."""
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    complete = read_results(out).tables
    victim = per_run_layout(out)[3]
    (out / "summary" / f"{victim}.parquet").unlink()
    (out / "decisions" / f"{victim}.parquet").unlink()
    (out / "jobs" / f"{victim}.parquet").write_bytes(b"PAR1 half-written garbage")
    (out / "nodes" / ".tmp-abc123.parquet").write_bytes(b"partial")
    partial = read_results(out).tables
    assert len(partial["summary"]) == 7 and victim not in set(partial["jobs"]["run_id"])
    before = files_of(out)
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    after = files_of(out)
    assert not list(out.rglob(".tmp-*")) and not list(out.rglob(f"{victim}.parquet"))
    kept = {k: v for k, v in before.items() if victim not in k and ".tmp-" not in k}
    assert {k: v for k, v in after.items() if k in before} == kept
    new = sorted(k for k in after if k not in before)
    assert len(new) == 1 + len(TABLES) and all("/part-" in k for k in new)
    again = read_results(out).tables
    for name in ("summary", "jobs", "nodes"):
        cols = [c for c in complete[name].columns if "wall" not in c]
        pd.testing.assert_frame_equal(complete[name][cols], again[name][cols])


def test_runs_a_killed_writer_left_in_the_spool_are_read_and_stored_by_the_next_command(
        sweep_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """Every finished run is in the spool the moment it arrives: a writer killed before compacting (no batch made)
    loses none of them, a record it was cutting short is left out, and the next command stores the runs as a batch
    without running them again."""
    from experiments.results import spool

    reference = tmp_path / "ref"
    assert main(["sweep", str(sweep_file), "--out", str(reference), "--workers", "1", "--quiet"]) == 0
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(ResultStore, "_compact", lambda self, rids: None)  # as if killed before any batch was made
        assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert not files_of(out)
    (segment,) = (out / spool.SPOOL).glob("*.log")
    with open(segment, "ab") as f:
        f.write(b"CAPSREC1" + b"\x40" * 20)  # a record cut short by the kill
    left = read_results(out).tables
    assert len(left["summary"]) == 8 and len(left["jobs"]) == len(read_results(reference).tables["jobs"])
    capsys.readouterr()
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "stored 8 finished runs that a stopped command left" in err and "8 already done, 0 to run" in err
    assert not (out / spool.SPOOL).exists()
    assert sorted(files_of(out)) == sorted(files_of(reference)), "the same batches as a command never stopped"
    _same_results(reference, out)


def test_a_stopped_sweep_does_no_file_work_after_the_signal_and_the_next_command_stores_its_runs(
        sweep_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """SIGTERM after the third run of a ``--force`` sweep: the command ends with those runs in the spool (no batch
    written, the older summary.csv removed: it would not hold them), readers see each run once, and the next command
    stores them without running them again."""
    import signal

    from experiments.results import spool
    from experiments.running import interrupts

    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    before = files_of(out)
    assert (out / "summary.csv").exists()
    write = ResultStore.write

    def write_then_stop(self: ResultStore, o: Any) -> None:
        write(self, o)
        if len(self._spooled or {}) == 3:
            interrupts.on_signal(signal.SIGTERM, None)

    with monkeypatch.context() as m:
        m.setattr(ResultStore, "write", write_then_stop)
        assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--force", "--quiet"]) == 143
    assert files_of(out) == before and not (out / "summary.csv").exists()
    assert len(list((out / spool.SPOOL).glob("*.log"))) == 1
    assert read_results(out).tables["summary"]["run_id"].is_unique
    assert len(read_results(out).tables["summary"]) == 8
    capsys.readouterr()
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "stored 3 finished runs that a stopped command left" in err and "8 already done, 0 to run" in err
    assert not (out / spool.SPOOL).exists() and (out / "summary.csv").exists()
    reference = tmp_path / "ref"
    assert main(["sweep", str(sweep_file), "--out", str(reference), "--workers", "1", "--quiet"]) == 0
    ta, tb = read_results(reference).tables, read_results(out).tables
    for name in ("summary", "jobs", "nodes", "decisions"):
        cols = [c for c in ta[name].columns if "wall" not in c]
        pd.testing.assert_frame_equal(ta[name][cols], tb[name][cols])


def test_a_signal_in_the_middle_of_writing_a_batch_stops_at_once_and_loses_no_run(
        sweep_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """Writing a batch is not waited for: a signal stops it between two of its files (the command must end within
    2 s, and a batch of 1,000 runs takes seconds under load); its runs stay in the spool, the file already written
    is recorded by no line and removed by the next command, which stores the runs as one batch."""
    import signal

    from experiments.results import batches, store
    from experiments.running import interrupts

    monkeypatch.setattr(store, "BATCH_RUNS", 4)
    parquet, calls = batches._parquet, []

    def parquet_then_stop(table: Any) -> bytes:
        calls.append(1)
        if len(calls) == 2:  # the batch's summary file is written, its jobs file is being encoded
            interrupts.on_signal(signal.SIGTERM, None)
        return parquet(table)

    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(batches, "_parquet", parquet_then_stop)
        assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 143
    assert len(list((out / "summary").glob("part-*.parquet"))) == 1 and not (out / "jobs").exists()
    assert len(read_results(out).tables["summary"]) == 4, "the batch's runs are read from the spool"
    capsys.readouterr()
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1"]) == 0
    assert "stored 4 finished runs that a stopped command left" in capsys.readouterr().err
    reference = tmp_path / "ref"
    assert main(["sweep", str(sweep_file), "--out", str(reference), "--workers", "1", "--quiet"]) == 0
    assert sorted(files_of(out)) == sorted(files_of(reference))
    _same_results(reference, out)


@pytest.mark.slow
def test_killed_sweep_process_resumes(sweep_file: Path, tmp_path: Path) -> None:
    """Kill a real sweep process part-way (SIGKILL), then run again: everything finishes, nothing is corrupt."""
    import signal
    import subprocess
    import sys
    import time

    d = sweep_data(seeds="0-9")
    d["scenario"]["workload"]["jobs"] = 60
    f = write_yaml(tmp_path / "big.yaml", d)
    out = tmp_path / "out"
    exe = str(Path(sys.executable).with_name("capsim"))
    proc = subprocess.Popen([exe, "sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(ResultStore(out).finished()) < 3 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = ResultStore(out).finished()
    assert 3 <= len(first) < 40, "the sweep should have been killed part-way"
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    t = read_results(out).tables
    assert len(t["summary"]) == 2 * 2 * 10 and first <= set(t["summary"]["run_id"])
    assert t["jobs"].groupby("run_id").size().eq(60).all()


def test_a_bad_trace_in_the_grid_is_refused_up_front(tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text("submit_time,application,framework,iterations,batch_size,name\n0,deepspeech,tensorflow,2528,4,J1\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("submit_time,application,framework,iterations,batch_size,name\n0,deepspeech,jax,2528,4,J1\n")
    d = sweep_data(grid={"workload.trace": ["good.csv", "bad.csv"]})
    d["scenario"]["workload"] = {}
    msg = error_of(write_yaml(tmp_path / "s.yaml", d))
    assert "grid.workload.trace[1]" in msg and "bad.csv: row 1, column 'framework'" in msg and "good.csv" not in msg


class _BreaksOnOneNode(Policy):
    """FIFO, except that it raises on a one-node cluster (a failure only a run can find)."""

    def decide(self, snapshot: Snapshot) -> Plan:
        if len(snapshot.nodes) == 1:
            raise RuntimeError("no plan for one node")
        return optim.build("fifo").decide(snapshot)


def test_failing_run_is_recorded_and_others_finish(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(optim.base.POLICIES._kinds, "breaks1", _BreaksOnOneNode)
    d = sweep_data(policies=[{"kind": "breaks1"}], grid={"cluster.nodes": [1, 2]})
    f = write_yaml(tmp_path / "s.yaml", d)
    out = tmp_path / "out"
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "2 of 4 runs failed" in err and "no plan for one node" in err
    t = read_results(out).tables
    assert len(t["summary"]) == 2 and set(t["summary"]["cluster.nodes"]) == {2}
    fails = t["failures"]
    assert len(fails) == 2 and set(fails["cluster.nodes"]) == {1}
    assert fails["traceback"].str.contains("RuntimeError").all() and fails["config"].str.contains("scenario").all()


def _same_results(a: Path, b: Path) -> None:
    for name in ("jobs", "nodes"):
        fa = sorted(p.name for p in (a / name).glob("*.parquet"))
        assert fa == sorted(p.name for p in (b / name).glob("*.parquet")) and fa
        for n in fa:
            assert (a / name / n).read_bytes() == (b / name / n).read_bytes(), f"{name}/{n}"
    ta, tb = read_results(a).tables, read_results(b).tables
    for name in ("summary", "decisions"):
        cols = [c for c in ta[name].columns if "wall" not in c]
        pd.testing.assert_frame_equal(ta[name][cols], tb[name][cols])


def test_dask_and_process_pool_agree(tmp_path: Path, monkeypatch) -> None:
    """The same results on Dask, whose tiny runs go in chunks (here: the first 8 alone, then the other 4 in one)."""
    distributed = pytest.importorskip("distributed")
    from experiments.running import dispatch

    sweep_file = write_yaml(tmp_path / "sweep.yaml", sweep_data(seeds="0-2"))
    os.environ.setdefault("DASK_TEMPORARY_DIRECTORY", str(tmp_path / "dask"))
    pool, dsk = tmp_path / "pool", tmp_path / "dask-out"
    assert main(["sweep", str(sweep_file), "--out", str(pool), "--workers", "2", "--quiet"]) == 0
    monkeypatch.setattr(dispatch, "CHUNK_SECONDS", 1e6)
    submit, chunks = distributed.Client.submit, []

    def spy(self: Any, fn: Any, *args: Any, **kw: Any) -> Any:
        chunks.append(len(args[0]))
        return submit(self, fn, *args, **kw)

    monkeypatch.setattr(distributed.Client, "submit", spy)
    assert main(["sweep", str(sweep_file), "--out", str(dsk), "--dask", "local:2", "--quiet"]) == 0
    assert chunks == [1] * 8 + [4]
    _same_results(pool, dsk)
    assert not (dsk / ".dask-tmp").exists()


# ----- report (formats and intervals: test_report.py) -----------------------------------------------------------------


def test_report_on_a_directory_that_is_not_a_sweep(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "not a result directory" in capsys.readouterr().err


def test_report_shows_the_latest_sweep_unless_all(sweep_file: Path, tmp_path: Path, capsys) -> None:
    """Runs of an earlier, different base scenario stay in DIR but do not mix into the report."""
    out = tmp_path / "out"
    assert main(["sweep", str(sweep_file), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    d = sweep_data()
    d["scenario"]["workload"]["jobs"] = 4
    changed = write_yaml(tmp_path / "changed.yaml", d)
    assert main(["sweep", str(changed), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert len(ResultStore(out).finished()) == 16
    latest = read_results(out)
    assert len(latest.summary) == 8 and set(latest.jobs.groupby("run_id").size()) == {4}
    assert len(read_results(out, all_runs=True).tables["summary"]) == 16
    capsys.readouterr()
    assert main(["report", str(out), "--format", "csv"]) == 0
    assert set(pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))["n"]) == {2}


def test_report_and_plot_a_run_directory(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["run", str(tiny), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--format", "csv"]) == 0
    df = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert list(df.policy) == ["fifo", "edf"] and set(df.n) == {2}
    assert main(["plot", str(out), "--only", "pareto,timeline"]) == 0
    assert (out / "figures" / "pareto.png").stat().st_size > 1000


@pytest.mark.slow
def test_dask_scheduler_address(sweep_file: Path, tmp_path: Path) -> None:
    """``--dask tcp://...`` uses an existing cluster; its results equal the in-process ones."""
    distributed = pytest.importorskip("distributed")
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["sweep", str(sweep_file), "--out", str(local), "--workers", "1", "--quiet"]) == 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  local_directory=str(tmp_path / "dask")) as cluster:
        assert main(["sweep", str(sweep_file), "--out", str(remote), "--dask", cluster.scheduler_address,
                     "--quiet"]) == 0
    _same_results(local, remote)


def test_unreachable_dask_scheduler(sweep_file: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("distributed")
    assert main(["sweep", str(sweep_file), "--out", str(tmp_path / "o"), "--dask", "local:x", "--quiet"]) == 2
    assert "local:N" in capsys.readouterr().err


def test_expansion_covers_the_product_property(tmp_path_factory) -> None:
    """Random grids and zips: points = product of axis lengths, every combination once, ids unique and stable."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=15, deadline=None)
    @given(ia=st.lists(st.integers(10, 100), min_size=1, max_size=3, unique=True),
           nodes=st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True),
           seeds=st.integers(1, 3))
    def check(ia, nodes, seeds) -> None:
        d = tmp_path_factory.mktemp("h")
        data = sweep_data(grid={"workload.mean_interarrival": ia}, seeds=list(range(seeds)),
                          zip=[{"cluster.nodes": nodes, "workload.jobs": [2 * n for n in nodes]}])
        sw = load_sweep(write_yaml(d / "s.yaml", data))
        combos = {(v["workload.mean_interarrival"], v["cluster.nodes"], v["workload.jobs"])
                  for v in (dict(p.values) for p in sw.points)}
        assert len(sw.points) == len(combos) == len(ia) * len(nodes)
        assert combos == {(a, n, 2 * n) for a in ia for n in nodes}
        ids = [t.run_id for t in plan(sw).tasks]
        assert len(ids) == len(set(ids)) == len(ia) * len(nodes) * 2 * seeds
        assert ids == [t.run_id for t in plan(load_sweep(d / "s.yaml")).tasks]

    check()
