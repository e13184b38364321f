"""Hardening of result folders and the command line: output paths stay inside the output root, sample sizes are
honest, reports never pool scenarios, every table has one schema, damaged runs are named and run again, one writer
per folder, temporary files belong to their writer, files follow the umask, and no traceback reaches a user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from experiments.cli import EXIT_INTERNAL, main
from experiments.results import files as results
from experiments.results.folders import LOCK, FolderLock
from experiments.results.reading import read_results
from experiments.results.store import JOURNAL, MANIFEST, ResultStore
from experiments.running.tasks import TABLES
from experiments.scenario.names import slug
from experiments.scenario.sweep import load_sweep
from sim.model import CapsimError

from .conftest import per_run_layout, small_scenario, write_yaml


def sweep_data(**over):
    base = small_scenario()
    d = {"name": "h", "scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds", "name")},
         "policies": [{"kind": "fifo"}, {"kind": "edf"}], "seeds": [0, 1], "grid": {"cluster.nodes": [1, 2]}}
    d.update(over)
    return d


@pytest.fixture
def swept(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A finished sweep of 8 runs in batches of 2 (for the whole test): (sweep file, result folder)."""
    monkeypatch.setattr("experiments.results.store.BATCH_RUNS", 2)
    f = write_yaml(tmp_path / "s.yaml", sweep_data())
    out = tmp_path / "out"
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    return f, out


# ----- where results go ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/abs", "", ".", "a/b", "my run"])
def test_a_name_that_would_leave_the_output_root_is_refused(tmp_path: Path, name: str, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write_yaml(tmp_path / "s.yaml", small_scenario(name=name))
    assert main(["run", str(p), "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "s.yaml" in err and "name:" in err and "--out" in err
    assert not (tmp_path / "results").exists() and not Path("/tmp/abs").exists()


def test_the_default_folder_is_results_slash_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write_yaml(tmp_path / "s.yaml", small_scenario(name="ok-1.2_b", seeds=[0]))
    assert main(["run", str(p), "--workers", "1", "--quiet"]) == 0
    assert (tmp_path / "results" / "ok-1.2_b" / MANIFEST).is_file()


def test_a_sweep_named_after_its_file_gets_a_safe_name(tmp_path: Path) -> None:
    d = sweep_data()
    del d["name"]
    assert load_sweep(write_yaml(tmp_path / "my sweep (v2).yaml", d)).name == "my-sweep-v2-"
    assert slug("../..") == "sweep" and slug("ok") == "ok"


def test_out_must_be_a_new_empty_or_result_folder(tmp_path: Path, tiny: Path, capsys) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "jobs.parquet").write_bytes(b"")
    for target, words in (("afile", "is a file"), ("other", "notes.txt"), ("flat", "older `capsim run`")):
        assert main(["run", str(tiny), "--out", str(tmp_path / target), "--workers", "1", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert words in err and str(tmp_path / target) in err, err
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert main(["run", str(tiny), "--out", str(tmp_path / "empty"), "--workers", "1", "--quiet"]) == 0
    assert main(["run", str(tiny), "--out", str(tmp_path / "empty"), "--workers", "1", "--quiet"]) == 0


# ----- honest sample sizes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, words", [
    (["--seeds", "0,0"], "distinct seeds"), (["--seeds", "3,1,3"], "3 more than once"),
    (["--policies", "edf,edf"], "'edf' is named twice"), (["--workers", "0"], "--workers"),
    (["--seeds", "0-999999"], "at most 100,000 seeds"),
])
def test_run_options_that_would_miscount_are_refused(tiny: Path, tmp_path: Path, args, words, capsys) -> None:
    assert main(["run", str(tiny), "--out", str(tmp_path / "o"), "--quiet", *args]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _report_csv(d: Path, capsys, *extra: str) -> pd.DataFrame:
    capsys.readouterr()
    assert main(["report", str(d), "--format", "csv", *extra]) == 0
    return pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))


def test_report_never_pools_different_scenarios(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    for name, gap in (("slow", 90), ("fast", 30)):
        sc = small_scenario(name=name, workload={"jobs": 6, "mean_interarrival": gap, "mix": {"J1": 1, "J4": 1}})
        assert main(["run", str(write_yaml(tmp_path / f"{name}.yaml", sc)), "--out", str(out), "--workers", "1",
                     "--quiet"]) == 0
    latest = _report_csv(out, capsys)
    assert list(latest.policy) == ["fifo", "edf"] and (latest.n == 2).all() and "scenario" not in latest
    every = _report_csv(out, capsys, "--all")
    assert sorted(zip(every.scenario, every.policy)) == sorted(
        (s, p) for s in ("slow", "fast") for p in ("fifo", "edf"))
    assert (every.n == 2).all(), "each row is one scenario's two seeds, never four runs of two scenarios"
    summary = read_results(out, all_runs=True).tables["summary"]
    fast = summary[summary.config.str.contains('"mean_interarrival": 30')]
    row = every[(every.scenario == "fast") & (every.policy == "fifo")].iloc[0]
    assert row.total_cost_mean == pytest.approx(fast[fast.policy == "fifo"].total_cost.mean())


def test_report_pools_the_seeds_of_one_scenario_across_commands(tmp_path: Path, tiny: Path, capsys) -> None:
    out = tmp_path / "out"
    for seeds in ("0,1", "2"):
        assert main(["run", str(tiny), "--out", str(out), "--seeds", seeds, "--workers", "1", "--quiet"]) == 0
    every = _report_csv(out, capsys, "--all")
    assert list(every.n) == [3, 3] and "scenario" not in every


def test_runs_of_one_name_but_different_scenarios_get_their_hash(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    for gap in (30, 90):
        sc = small_scenario(workload={"jobs": 6, "mean_interarrival": gap, "mix": {"J1": 1, "J4": 1}})
        assert main(["run", str(write_yaml(tmp_path / f"s{gap}.yaml", sc)), "--out", str(out), "--workers", "1",
                     "--quiet", "--policies", "fifo"]) == 0
    every = _report_csv(out, capsys, "--all")
    assert len(every) == 2 and every.scenario.str.match(r"tiny#[0-9a-f]{8}$").all() and every.scenario.nunique() == 2


# ----- one schema per table ------------------------------------------------------------------------------------------


def test_every_table_of_a_sweep_reads_with_one_read_parquet(tmp_path: Path) -> None:
    d = sweep_data(policies=[{"kind": "fifo"}, {"kind": "milp", "time_limit": 5}], seeds=[0],
                   grid={"cluster.decision_interval": [None, 60], "workload.mean_interarrival": [30, 45.5]})
    out = tmp_path / "out"
    assert main(["sweep", str(write_yaml(tmp_path / "s.yaml", d)), "--out", str(out), "--workers", "1",
                 "--quiet"]) == 0
    for table in ("summary", *TABLES):
        schemas = {str(pq.read_schema(p)) for p in (out / table).glob("*.parquet")}
        assert len(schemas) == 1, (table, schemas)
        df = pd.read_parquet(out / table)
        assert len(df) and df["workload.mean_interarrival"].dtype == float
    decisions = pd.read_parquet(out / "decisions")
    assert decisions[decisions.policy == "fifo"].solver.isna().all()
    assert (decisions[decisions.policy == "milp"].solver == "highs").any()
    assert set(pd.read_parquet(out / "summary")["cluster.decision_interval"].dropna()) == {60}


# ----- damaged runs are named and run again ---------------------------------------------------------------------------


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _batches(out: Path) -> dict[str, list[str]]:
    """The batches of a folder (file stem -> its run ids, in file order)."""
    return {p.stem: list(pd.read_parquet(p, columns=["run_id"]).run_id) for p in sorted((out / "summary").glob("*"))}


def test_a_damaged_file_is_named_left_out_and_run_again(swept, capsys, tmp_path: Path) -> None:
    f, out = swept
    name, rids = sorted(_batches(out).items())[1]
    original = (out / "jobs" / f"{name}.parquet").read_bytes()
    _flip(out / "jobs" / f"{name}.parquet")
    report = _report_csv(out, capsys)
    assert report.n.sum() == 6
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    err = capsys.readouterr().err
    for rid in rids:
        assert f"left out run {rid}: jobs/{name}.parquet does not match its recorded checksum" in err
    assert "Traceback" not in err
    assert main(["plot", str(out), "--out", str(tmp_path / "fig"), "--only", "pareto"]) == 0
    assert rids[0] in capsys.readouterr().err
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert all(f"run {rid} will run again" in err for rid in rids) and "6 already done, 2 to run" in err
    assert (out / "jobs" / f"{name}.parquet").read_bytes() == original, "the same runs make the same batch"
    assert _report_csv(out, capsys).n.sum() == 8


def test_a_missing_file_a_damaged_one_and_an_unrecorded_batch_are_handled(swept, capsys) -> None:
    f, out = swept
    (a, ra), (b, rb), (c, rc), (d, rd) = sorted(_batches(out).items())
    (out / "nodes" / f"{a}.parquet").unlink()
    (out / "summary" / f"{b}.parquet").unlink()
    (out / "decisions" / f"{c}.parquet").write_bytes(b"PAR1 not really")
    lines = [json.loads(line) for line in (out / JOURNAL).read_text().splitlines()]
    kept = [e for e in lines if e.get("batch") != d]  # as if the writer was killed before recording batch d
    (out / JOURNAL).write_text("".join(json.dumps(e) + "\n" for e in kept))
    tables, skipped = ResultStore(out).load_checked()
    assert skipped == {**{r: f"nodes/{a}.parquet is missing" for r in ra},
                       **{r: f"summary/{b}.parquet is missing" for r in rb},
                       **{r: f"decisions/{c}.parquet does not match its recorded checksum (damaged)" for r in rc}}
    assert tables["summary"].empty, "batch d is recorded nowhere: its runs are not finished (its files are strays)"
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert ResultStore(out).load_checked()[1] == {}
    ledger = ResultStore(out).ledger()
    assert set(ledger.done) == {*ra, *rb, *rc, *rd} and not ledger.failed
    assert all(set(ledger.batches[n].files) == {"summary", *TABLES} for n in set(ledger.done.values()))
    assert sorted(_batches(out)) == sorted(set(ledger.done.values())), "no stray file is left"


def test_runs_of_the_per_run_layout_written_before_their_checksum_are_kept_not_redone(swept, capsys) -> None:
    f, out = swept
    rids = per_run_layout(out)
    recorded = {r: ResultStore(out).ledger().batches[r].files for r in rids}
    (out / JOURNAL).unlink()
    (out / "decisions" / f"{rids[2]}.parquet").write_bytes(b"PAR1 not really")
    tables, skipped = ResultStore(out).load_checked()
    assert list(skipped) == [rids[2]] and "not a readable Parquet file" in skipped[rids[2]]
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "summary").glob("*.parquet")}
    capsys.readouterr()
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1"]) == 0
    assert "7 already done, 1 to run" in capsys.readouterr().err
    now = {p.name: p.stat().st_mtime_ns for p in (out / "summary").glob("*.parquet")}
    assert {k: v for k, v in now.items() if k in stamps} == {k: v for k, v in stamps.items() if rids[2] not in k}
    ledger = ResultStore(out).ledger()
    assert {r: ledger.batches[r].files for r in rids if r != rids[2]} == \
        {r: v for r, v in recorded.items() if r != rids[2]}, "the runs kept are recorded now, with their checksums"
    assert ResultStore(out).load_checked()[1] == {}


def test_the_journal_is_appended_to_never_rewritten_and_a_torn_last_line_is_left_out(swept, capsys) -> None:
    f, out = swept
    before = (out / JOURNAL).read_bytes()
    assert sum(b'"batch"' in line for line in before.splitlines()) == 4
    assert json.loads((out / MANIFEST).read_text()).get("runs") is None
    name, rids = sorted(_batches(out).items())[0]
    (out / "jobs" / f"{name}.parquet").write_bytes(b"damaged")
    (out / JOURNAL).write_bytes(before + b'{"batch": "cut sh')  # a writer killed while appending
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    after = (out / JOURNAL).read_bytes()
    assert after.startswith(before + b'{"batch": "cut sh'), "earlier lines are never rewritten"
    added = [json.loads(line) for line in after[len(before):].splitlines()[1:]]  # the cut line ended, then ours
    assert added[0] == {"drop": name} and list(added[1]) == ["spool"]
    # the journal's runs are keyed in id order, the batch's rows in run order: compare the sets
    assert added[2]["batch"] == name and sorted(added[2]["runs"]) == sorted(rids) and len(added) == 3
    assert ResultStore(out).load_checked()[1] == {}


def test_a_damaged_manifest_is_a_clear_error(swept, capsys) -> None:
    _, out = swept
    (out / MANIFEST).write_text("{not json")
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / MANIFEST}: damaged manifest" in err and "Traceback" not in err


# ----- one writer per folder, temporary files of their writer ---------------------------------------------------------


def test_a_held_folder_is_refused_and_a_stale_lock_taken_over(swept, capsys) -> None:
    f, out = swept
    with FolderLock(out, command="capsim sweep other.yaml"):
        assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "another capsim is writing" in err and f"pid {os.getpid()}" in err and "other.yaml" in err
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / LOCK).write_text(json.dumps({"pid": int(dead.stdout), "command": "capsim sweep s.yaml"}))
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert f"took over the lock of pid {int(dead.stdout)}" in capsys.readouterr().err
    assert not (out / LOCK).exists(), "the lock is released when the command ends"


def test_temporary_files_are_removed_only_when_their_writer_is_dead(swept) -> None:
    f, out = swept
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        mine = out / "jobs" / f".tmp-{live.pid}-abc.parquet"
        stale = out / "jobs" / f".tmp-{int(dead.stdout)}-abc.parquet"
        old = out / "nodes" / ".tmp-k2j3h.parquet"
        for p in (mine, stale, old):
            p.write_bytes(b"partial")
        assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 0
        assert mine.exists() and not stale.exists() and not old.exists()
    finally:
        live.kill()
        live.wait()


def test_files_follow_the_umask(tmp_path: Path, monkeypatch) -> None:
    for mask, mode in ((0o022, 0o644), (0o027, 0o640)):
        monkeypatch.setattr(results, "_MODE", None)
        old = os.umask(mask)
        try:
            results.write_parquet(pd.DataFrame({"a": [1]}), tmp_path / f"{mask}.parquet")
            results.write_csv(pd.DataFrame({"a": [1]}), tmp_path / f"{mask}.csv")
        finally:
            os.umask(old)
        for suffix in ("parquet", "csv"):
            assert (tmp_path / f"{mask}.{suffix}").stat().st_mode & 0o777 == mode
    monkeypatch.setattr(results, "_MODE", None)


# ----- no traceback reaches a user ------------------------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_and_a_log(monkeypatch, capsys, tmp_path: Path) -> None:
    from experiments.cli import report

    def broken(args):
        raise KeyError("boom")

    monkeypatch.setattr(report, "run", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert main(["report", "x"]) == EXIT_INTERNAL
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "internal error" in err and "KeyError: 'boom'" in err
    assert "test_hardening.py" in err and "in broken" in err
    log = Path(err.split("the full traceback is in ")[1].split(";")[0])
    assert log.parent == tmp_path and "Traceback" in log.read_text() and "capsim report x" in log.read_text()


def test_an_os_error_names_its_file(monkeypatch, capsys) -> None:
    from experiments.cli import report

    def denied(args):
        raise PermissionError(13, "Permission denied", "/results/x/summary.csv")

    monkeypatch.setattr(report, "run", denied)
    assert main(["report", "x"]) == 2
    assert capsys.readouterr().err.strip() == "capsim: error: /results/x/summary.csv: Permission denied"


def test_report_output_into_a_new_folder_or_a_folder(swept, tmp_path: Path, capsys) -> None:
    _, out = swept
    target = tmp_path / "new" / "deeper" / "t.md"
    assert main(["report", str(out), "--format", "markdown", "-o", str(target)]) == 0
    assert target.read_text().startswith("| node slots |")
    assert main(["report", str(out), "-o", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_the_announced_job_count_is_the_trace_s(tmp_path: Path, capsys) -> None:
    (tmp_path / "jobs.csv").write_text("submit_time,application,framework,iterations,batch_size,name\n"
                                       + "".join(f"{10 * i},deepspeech,tensorflow,2528,4,J1\n" for i in range(3)))
    sc = small_scenario(workload={"trace": "jobs.csv"}, seeds=[0], policies=[{"kind": "fifo"}])
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    assert "3 jobs on 2 nodes" in capsys.readouterr().err


def test_predict_show_goes_on_when_one_predictor_fails(monkeypatch, capsys) -> None:
    import predictors
    from sim.contracts import Predictor

    class Broken(Predictor):
        def runtime(self, spec, vm, gpus):
            raise ValueError("Input X contains NaN.")

    monkeypatch.setitem(predictors.registry(), "broken", Broken)
    monkeypatch.setitem(predictors.base.PREDICTORS._kinds, "broken", Broken)
    assert main(["predict", "show", "resnet50_pt", "--gpu", "V100", "--batch", "32", "--iterations", "100",
                 "--predictors", "broken,analytical"]) == 0
    out = capsys.readouterr().out
    assert "broken" in out and "the predictor failed: ValueError: Input X contains NaN." in out
    assert "analytical" in out and " s  (" in out


def test_yaml_mistakes_are_named_precisely(tmp_path: Path) -> None:
    from experiments.scenario import load_scenario

    p = tmp_path / "s.yaml"
    p.write_text("name: a\nworkload: {jobs: 3}\ncluster: {nodes: 2, decision_interval: yes, billing_quantum: 1e3}\n"
                 "workload: {jobs: 4}\n")
    with pytest.raises(CapsimError) as e:
        load_scenario(p)
    assert str(e.value) == (f"{p}:4: the key 'workload' appears twice in one mapping (also on line 2); YAML keeps "
                            f"only the last, so give it once")
    p.write_text("name: a\ncluster: {nodes: 2, decision_interval: yes, billing_quantum: 1e3}\n")
    with pytest.raises(CapsimError) as e:
        load_scenario(p)
    msg = str(e.value)
    assert "cluster.decision_interval: expected a number, found True (YAML reads yes/no/on/off" in msg
    assert "cluster.billing_quantum: expected a number, found '1e3' (text, not a number" in msg


def test_the_readme_scenario_with_an_inline_vm_warns_nothing(tmp_path: Path) -> None:
    import warnings

    from experiments.running.tasks import Task
    from experiments.scenario import load_scenario

    from .test_readme import scenario_block

    p = tmp_path / "my.yaml"
    p.write_text(scenario_block(), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sc = load_scenario(p)
        task = Task.make(sc, sc.policy_specs()[0], 0)
        assert task.scenario_obj().vm_types()[-1].name == "my-v100"
        task.config_json()


def test_predict_evaluate_progress_in_a_log_is_a_few_lines(monkeypatch, tmp_path: Path, capsys) -> None:
    from predictors import evaluation

    def fake(protocols, names, seed=0, workers=1, progress=None, parallel=None):
        for i in range(1, 501):
            progress(i, 500, f"fitting {i}")
        raise CapsimError("stopped by the test")

    monkeypatch.setattr(evaluation, "evaluate", fake)
    assert main(["predict", "evaluate", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "fitting" in ln]
    assert "\r" not in err and "stopped by the test" in err
    assert len(lines) == 500 and max(map(len, lines)) < 120, "in a log: one short plain line per split, never a bar"


def test_a_workload_beyond_memory_is_refused_before_it_runs(tmp_path: Path, capsys) -> None:
    from experiments.running.tasks import BYTES_PER_JOB, memory_needed, memory_problem

    assert memory_problem(1_000, limit=1 << 30) is None
    why = memory_problem(10_000_000, limit=1 << 30)
    assert why is not None and "10,000,000 jobs" in why and "1.0 GB" in why and "819.2 MB" in why
    assert memory_needed(10_000_000) == BYTES_PER_JOB * 10_000_000  # past the lower bound's limit: jobs only
    from experiments import api
    from experiments.runs import plan
    from experiments.scenario import default_scenario_path

    big = api.load(default_scenario_path(), {"workload.jobs": 100_000_000})
    with pytest.raises(CapsimError, match=r"default.yaml: workload.jobs: 100,000,000 jobs need about .* use at most"):
        plan(big)
