"""Records and metrics: fixed columns and dtypes, byte-identical Parquet, truth vs estimator, shared estimates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.engine import DECISION_COLUMNS, JOB_COLUMNS, NODE_COLUMNS, SEGMENT_COLUMNS, Simulation
from sim.model import CapsimError, Plan
from tests.sim.helpers import A, B, SLOW, SMALL, FirstFit, Scripted, cluster, job, preempt_job0_at_10, table

SUMMARY_KEYS = {"vm_cost", "idle_cost", "tardiness_cost", "total_cost", "late_jobs", "jobs", "mean_jct", "p95_jct",
                "mean_wait", "makespan", "gpu_utilisation", "decisions", "decision_wall_sum", "decision_wall_p95",
                "fallbacks"}
JOBS = [job(0, A, 0.0, deadline=90.0), job(1, B, 3.5, deadline=40.0), job(2, A, 3.5), job(3, B, 200.0)]


def test_columns_dtypes_and_summary_keys():
    r = Simulation(cluster(2), JOBS, FirstFit(), table()).run()
    for df, cols in ((r.jobs, JOB_COLUMNS), (r.nodes, NODE_COLUMNS), (r.decisions, DECISION_COLUMNS),
                     (r.segments, SEGMENT_COLUMNS)):
        assert list(df.columns) == list(cols)
        assert [str(t) for t in df.dtypes] == list(cols.values())
    assert set(r.summary) == SUMMARY_KEYS
    assert all(type(v) is float for v in r.summary.values())
    assert r.summary["late_jobs"] == 2 and r.summary["jobs"] == 4


def test_parquet_is_byte_identical_across_runs(tmp_path):
    blobs = []
    for i in range(2):
        r = Simulation(cluster(2), JOBS, FirstFit(), table()).run()
        frames = {"jobs": r.jobs, "nodes": r.nodes, "segments": r.segments,
                  "decisions": r.decisions.drop(columns="wall_time")}
        for name, df in frames.items():
            df.to_parquet(tmp_path / f"{name}{i}.parquet", index=False)
        blobs.append({name: (tmp_path / f"{name}{i}.parquet").read_bytes() for name in frames})
    assert blobs[0] == blobs[1]


def test_empty_workload_gives_empty_tables():
    r = Simulation(cluster(1), [], FirstFit(), table()).run()
    assert r.jobs.empty and r.nodes.empty and r.decisions.empty
    assert list(r.jobs.columns) == list(JOB_COLUMNS)
    assert r.summary["total_cost"] == 0.0 and r.summary["decisions"] == 0.0


def test_jobs_run_on_truth_while_the_policy_sees_the_estimate():
    seen = []
    pol = Scripted(lambda s: (seen.extend(j.estimates[0] for j in s.waiting), FirstFit().decide(s))[1])
    r = Simulation(cluster(1), [job(0, A, 0.0)], pol, table(), truth=table(A_small_1=130.0)).run()
    assert seen == [100.0]
    j = r.jobs.iloc[0]
    assert (j.end_time, j.est_runtime, j.true_runtime) == (130.0, 100.0, 130.0)


def test_estimates_cached_once_per_spec_and_read_only():
    calls = []
    pred = table()
    orig = pred.runtimes
    pred.runtimes = lambda specs, configs: (calls.append(len(specs)), orig(specs, configs))[1]
    views = []
    pol = Scripted(lambda s: (views.extend(s.waiting), FirstFit().decide(s))[1])
    Simulation(cluster(4), [job(0, A, 0.0), job(1, A, 0.0), job(2, B, 0.0)], pol, pred).run()
    assert calls == [2]
    a0, a1, b = sorted(views, key=lambda v: v.id)[:3]
    assert a0.estimates is a1.estimates and a0.estimates is not b.estimates
    with pytest.raises(ValueError):
        a0.estimates[0] = 1.0


def test_stopping_a_booting_vm_does_not_hide_a_stall():
    pol = Scripted(lambda s: Plan(vms={0: "slow"}) if s.trigger == "arrival" else Plan())
    with pytest.raises(CapsimError, match="left 1 jobs waiting forever"):
        Simulation(cluster(1, (SMALL, SLOW)), [job(0, A, 0.0)], pol, table()).run()
    assert [s.trigger for s in pol.seen] == ["arrival", "stall"]


def test_segments_trace_a_preempted_job():
    pol = Scripted(preempt_job0_at_10, preempt=True)
    r = Simulation(cluster(1), [job(0, A, 0.0), job(1, B, 10.0)], pol, table()).run()
    seg = r.segments.sort_values(["start_time", "job_id"])
    assert list(zip(seg.job_id, seg.start_time, seg.end_time)) == [(0, 0.0, 10.0), (1, 10.0, 60.0), (0, 60.0, 150.0)]
    assert list(seg.done) == [pytest.approx(0.1), 1.0, 1.0]
    pd.testing.assert_series_equal(r.segments.groupby("job_id").size(), pd.Series([2, 1], index=pd.Index([0, 1],
                                   name="job_id")))
    assert np.isclose(r.jobs.cost_share.sum(), r.summary["vm_cost"])
