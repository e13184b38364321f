"""``capsim run`` end to end: the console script, its outputs, determinism, and a failing policy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import optim
from experiments.cli import main
from experiments.results.tables import metric_label
from optim.base import Policy
from sim.model import Plan, Snapshot

from .conftest import small_scenario, write_yaml


def capsim() -> list[str]:
    exe = Path(sys.executable).with_name("capsim")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "experiments.cli"]


def test_capsim_run_through_the_console_script(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(capsim() + ["run", str(tiny), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "fifo" in proc.stdout and "edf" in proc.stdout and metric_label("total_cost") in proc.stdout
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns[:8]) == ["policy", "seed", "vm_cost", "tardiness_cost", "total_cost", "late_jobs",
                                         "mean_jct", "makespan"]
    assert list(zip(summary.policy, summary.seed)) == [("fifo", 0), ("fifo", 1), ("edf", 0), ("edf", 1)]
    assert (summary.total_cost - summary.vm_cost - summary.tardiness_cost).abs().max() < 1e-9
    jobs = pd.read_parquet(out / "jobs")
    assert len(jobs) == 4 * 6 and {"policy", "seed", "run_id"} <= set(jobs.columns)
    batches = sorted((out / "jobs").glob("*.parquet"))
    assert [p.name for p in batches] == ["part-" + p.stem[5:] + ".parquet" for p in batches] and len(batches) == 1
    assert sorted(jobs.run_id.unique()) == sorted(summary.run_id), "the batch holds every run, run_id a column"
    nodes = pd.read_parquet(out / "nodes")
    for (p, s), cost in nodes.groupby(["policy", "seed"])["cost"].sum().items():
        assert cost == pytest.approx(summary.set_index(["policy", "seed"]).loc[(p, s), "vm_cost"])
    assert len(pd.read_parquet(out / "decisions")) > 0
    assert set(pd.read_parquet(out / "segments")["job_id"]) == set(jobs["job_id"])


def test_bad_scenario_exits_2_with_the_message(tmp_path: Path, capsys) -> None:
    p = write_yaml(tmp_path / "bad.yaml", small_scenario(seeds="x"))
    assert main(["run", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capsim: error: ") and "bad.yaml" in err and "seeds" in err and "Traceback" not in err


def _without_wall(df: pd.DataFrame) -> pd.DataFrame:
    return df[[c for c in df.columns if "wall" not in c]]


def test_same_scenario_and_seed_give_identical_files(tiny: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(tiny), "--out", str(a), "--quiet"]) == 0
    assert main(["run", str(tiny), "--out", str(b), "--quiet", "--workers", "2"]) == 0
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*.parquet"))
    assert files == sorted(str(p.relative_to(b)) for p in b.rglob("*.parquet")) and len(files) == 5, \
        "one batch per table, the same however the workers finished"
    for name in files:
        if name.startswith(("jobs/", "nodes/", "segments/")):
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    for name in ("decisions", "summary"):
        pd.testing.assert_frame_equal(_without_wall(pd.read_parquet(a / name)),
                                      _without_wall(pd.read_parquet(b / name)))
    pd.testing.assert_frame_equal(_without_wall(pd.read_csv(a / "summary.csv")),
                                  _without_wall(pd.read_csv(b / "summary.csv")))


class _Breaks(Policy):
    """A policy that raises at its first decision."""

    def decide(self, snapshot: Snapshot) -> Plan:
        raise RuntimeError("this policy always fails")


def test_failing_policy_keeps_finished_results(tiny: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(optim.base.POLICIES._kinds, "breaks", _Breaks)
    p = write_yaml(tmp_path / "s.yaml", small_scenario(policies=[{"kind": "fifo"}, {"kind": "breaks"}]))
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--quiet", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert "2 of 4 runs failed" in err and "this policy always fails" in err and f"{out}/failures/" in err
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.policy) == {"fifo"} and len(summary) == 2
    failures = pd.read_parquet(out / "failures")
    assert list(failures.policy) == ["breaks", "breaks"] and failures.traceback.str.contains("RuntimeError").all()


def test_policies_and_seeds_options(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main(["run", str(tiny), "--out", str(out), "--quiet", "--policies", "edf,priority", "--seeds", "3"]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert list(zip(summary.policy, summary.seed)) == [("edf", 3), ("priority", 3)]


def test_help_of_every_command(capsys) -> None:
    from experiments.cli import COMMANDS

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for name in ("run", "sweep", "report", "plot"):
        assert name in text
    for name in COMMANDS:
        with pytest.raises(SystemExit):
            main([name, "--help"])


def test_noisy_estimator_against_the_measured_truth_from_yaml(tmp_path: Path) -> None:
    """Policies decide on a noisy estimate; jobs run on the measured truth; the estimate error is what was asked."""
    sc = small_scenario(
        cluster={"nodes": 2},
        workload={"jobs": 12, "mean_interarrival": 120},
        predictor={"kind": "measured"},
        estimator={"kind": "noisy", "base": {"kind": "measured"}, "mape": 0.3, "seed": 1},
        policies=[{"kind": "edf"}, {"kind": "milp", "time_limit": 5}],
        seeds=[0],
    )
    out = tmp_path / "out"
    assert main(["run", str(write_yaml(tmp_path / "noisy.yaml", sc)), "--out", str(out), "--quiet"]) == 0
    jobs = pd.read_parquet(out / "jobs")
    assert len(jobs) == 2 * 12 and jobs["end_time"].notna().all()
    err = (jobs["est_runtime"] / jobs["true_runtime"] - 1).abs()
    assert err.min() > 0 and 0.05 < err.mean() < 1.0
    # the truth is the measured predictor itself: a job's true runtime is its measured runtime on its config
    import predictors
    from sim import catalogue

    measured = predictors.build("measured")
    for r in jobs.head(5).itertuples():
        spec = catalogue.job_types()[r.name]
        assert r.true_runtime == pytest.approx(measured.runtime(spec, catalogue.vm_type(r.vm_type), r.gpus))


def test_run_keeps_finished_runs_and_force_redoes_them(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "o"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1"]) == 0
    first = capsys.readouterr()
    assert "4 to run" in first.err and "fifo" in first.out and "runs finished" not in first.out  # notes on stderr
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")}
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1"]) == 0
    again = capsys.readouterr()
    assert "4 already done, 0 to run" in again.err and "0 runs finished" in again.err
    assert again.out == first.out, "the table of a run whose runs were all done is read back from the folder"
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")} == stamps
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "--force"]) == 0
    forced = capsys.readouterr()
    assert "4 runs finished" in forced.err and forced.out == first.out
    assert all(p.stat().st_mtime_ns != t for p, t in stamps.items() if p.parent.name == "summary")


def test_run_reruns_a_damaged_run_as_sweep_does(tiny: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("experiments.results.store.BATCH_RUNS", 1)  # one run per batch: damage hits one run
    out = tmp_path / "o"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    victim = sorted((out / "jobs").glob("*.parquet"))[0]
    rid = pd.read_parquet(victim).run_id.iloc[0]
    victim.write_bytes(victim.read_bytes()[:-7] + b"garbage")
    capsys.readouterr()
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert f"run {rid} will run again" in err and "1 runs finished" in err and "3 already done" in err


@pytest.mark.parametrize("names", ["edf,edf", "edf, fifo,edf"])
def test_a_policy_named_twice_is_refused_by_run_and_api_alike(tiny: Path, tmp_path: Path, capsys, names) -> None:
    from experiments import api
    from sim.model import CapsimError

    assert main(["run", str(tiny), "--out", str(tmp_path / "o"), "--policies", names]) == 2
    assert "--policies: 'edf' is named twice" in capsys.readouterr().err
    with pytest.raises(CapsimError, match="policies: 'edf' is named twice"):
        api.run(tiny, policies=names)
    with pytest.raises(CapsimError, match="policies: 'edf' is named twice"):
        api.run(tiny, policies=[n.strip() for n in names.split(",")])


def test_a_misspelt_policy_gets_a_suggestion(tiny: Path, capsys) -> None:
    assert main(["run", str(tiny), "--policies", "insertoin"]) == 2
    assert "unknown policy 'insertoin'; did you mean 'insertion'?" in capsys.readouterr().err
