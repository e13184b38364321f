"""The ElasticFlow replay scenario through ``capsim run``: every table written, the trace's GPU request kept, and
the verdicts those of ElasticFlow's own runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.cli import main
from studies.elasticflow_replay import REPLAY, reference


def test_capsim_run_replays_cluster10_as_elasticflow_did(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["run", str(REPLAY), "--out", str(out), "--quiet", "--workers", "1",
                 "--policies", "elasticflow,elasticflow_edf"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == ["policy", "seeds", "deadlines", "met", "rejected", "jobs", "mean", "JCT", "(s)", "makespan",
                      "(s)"], "a replay's own metrics, not cost columns that are all 0"
    jobs = pd.read_parquet(out / "jobs")
    trace = pd.read_csv(REPLAY.parent / "../../sim/data/elasticflow/cluster10.csv").set_index("job_id")
    summary = pd.read_csv(out / "summary.csv").set_index("policy")
    for kind in ("elasticflow", "elasticflow_edf"):
        mine = jobs[jobs.policy == kind].set_index("name")
        assert len(mine) == len(trace) == 260
        assert (mine.gpu_request == trace.num_gpu.loc[mine.index]).all()
        ref = reference("cluster10", kind).set_index("job_id")
        assert (mine.status.loc[ref.index] == ref.status).all()
        assert summary.loc[kind, "deadline_met"] == pytest.approx((mine.status == "on_time").mean(), abs=1e-9)
        assert summary.loc[kind, "rejected"] == (mine.status == "rejected").sum()
    assert len(pd.read_parquet(out / "nodes")) == 2 * 32 and len(pd.read_parquet(out / "decisions")) > 0


def test_the_fig8b_driver_runs_on_two_workers_and_resumes(tmp_path: Path) -> None:
    # --fig8b on capsim's pool: every run's row in --out (verdicts as in ElasticFlow's own run of cluster10), and a
    # second call runs only what is not there yet
    from studies.elasticflow_replay import main as study

    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "cluster10.csv").write_bytes((REPLAY.parent / "../../sim/data/elasticflow/cluster10.csv").read_bytes())
    out = tmp_path / "rows.csv"
    study(["--fig8b", str(traces), "--traces", "cluster10", "--policies", "tiresias,elasticflow_gandiva",
           "--workers", "2", "--out", str(out)])
    rows = pd.read_csv(out).set_index("policy")
    assert sorted(rows.index) == ["elasticflow_gandiva", "tiresias"] and (rows.jobs == 260).all()
    for kind in rows.index:
        ref = reference("cluster10", kind)
        assert rows.deadline_met[kind] == pytest.approx((ref.status == "on_time").mean())
    assert (rows.cpu_s > 0).all() and (rows.wall_s > 0).all()
    study(["--fig8b", str(traces), "--traces", "cluster10", "--policies", "tiresias,themis", "--workers", "2",
           "--out", str(out)])
    assert sorted(pd.read_csv(out).policy) == ["elasticflow_gandiva", "themis", "tiresias"]


def test_at_the_240_s_slot_of_the_papers_script_cluster10_gives_its_bars(tmp_path: Path, capsys) -> None:
    # ElasticFlow's earlier run_fig8b.sh passed --scheduling_slot=240: Tiresias and Themis then land on the paper's
    # plotted bars for trace 10 (0.473, 0.431; at 60 s, the released script, they give 0.477 and 0.473). The rows go
    # into a file written before the slot was recorded: its header is widened and its rows keep the 60 s slot.
    from studies.elasticflow_replay import FIG8B_PUBLISHED
    from studies.elasticflow_replay import main as study

    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "cluster10.csv").write_bytes((REPLAY.parent / "../../sim/data/elasticflow/cluster10.csv").read_bytes())
    out = tmp_path / "rows.csv"
    study(["--fig8b", str(traces), "--traces", "cluster10", "--policies", "tiresias", "--out", str(out)])
    pd.read_csv(out).drop(columns="slot").to_csv(out, index=False)
    study(["--fig8b", str(traces), "--traces", "cluster10", "--policies", "tiresias,themis", "--slot", "240",
           "--out", str(out)])
    rows = pd.read_csv(out)
    assert sorted(zip(rows.slot, rows.policy)) == [(60, "tiresias"), (240, "themis"), (240, "tiresias")]
    at240 = rows[rows.slot == 240].set_index("policy")
    for kind in ("tiresias", "themis"):
        assert at240.deadline_met[kind] == pytest.approx(FIG8B_PUBLISHED[kind][9], abs=5e-4)
    assert rows[rows.slot == 60].deadline_met.iloc[0] == pytest.approx(
        (reference("cluster10", "tiresias").status == "on_time").mean())
    capsys.readouterr()
    study(["--rows", str(out), "--slot", "240"])
    table = capsys.readouterr().out
    assert "| cluster10 | 32x8 | 260 | 0.473 / 0.473 | 0.431 / 0.431 |" in table
