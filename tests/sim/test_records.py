"""Records and metrics: fixed columns and dtypes, byte-identical Parquet, truth vs estimator, shared estimates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.engine import DECISION_COLUMNS, JOB_COLUMNS, NODE_COLUMNS, SEGMENT_COLUMNS, Simulation
from sim.model import Assignment, CapsimError, DecisionInfo, Plan
from sim.records import Table
from tests.sim.helpers import BIG, SLOW, SMALL, A, B, FirstFit, Scripted, cluster, job, preempt_job0_at_10, table

SUMMARY_KEYS = {"vm_cost", "idle_cost", "tardiness_cost", "total_cost", "late_jobs", "deadline_met", "mean_lateness",
                "p95_lateness", "jobs", "mean_jct", "p95_jct", "mean_wait", "makespan", "gpu_utilisation", "decisions",
                "decision_wall_sum", "decision_wall_p95", "fallbacks", "deterministic", "gavel_mean_jct",
                "gavel_makespan", "gavel_utilisation", "gavel_dropped", "revocations", "lost_gpu_hours",
                "spot_cost_share", "rejected", "rounded_up_jobs", "colocated_share"}
JOBS = [job(0, A, 0.0, deadline=90.0), job(1, B, 3.5, deadline=40.0), job(2, A, 3.5), job(3, B, 200.0)]


def test_columns_dtypes_and_summary_keys():
    r = Simulation(cluster(2), JOBS, FirstFit(), table()).run()
    for df, cols in ((r.jobs, JOB_COLUMNS), (r.nodes, NODE_COLUMNS), (r.decisions, DECISION_COLUMNS),
                     (r.segments, SEGMENT_COLUMNS)):
        assert list(df.columns) == list(cols)
        assert [str(t) for t in df.dtypes] == list(cols.values())
    assert set(r.summary) == SUMMARY_KEYS
    assert all(type(v) is float for v in r.summary.values())
    assert r.summary["late_jobs"] == 2 and r.summary["jobs"] == 4 and r.summary["deadline_met"] == 0.5


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


class Sample(Table):
    """Every kind of column annotation the record tables use."""

    count: list[int]
    share: list[float]
    label: list[str]
    note: list[str | None]
    score: list[float | None]
    size: list[int | None]


def test_a_table_declares_names_order_and_dtypes_once():
    assert Sample.dtypes == {"count": "int64", "share": "float64", "label": "object", "note": "object",
                             "score": "float64", "size": "Int64"}
    t = Sample()
    for count, score, size in ((3, None, None), (4, 0.5, 7)):
        t.count.append(count)
        t.share.append(count / 8)
        t.label.append(f"r{count}")
        t.note.append(None)
        t.score.append(score)
        t.size.append(size)
    df = t.frame()
    assert list(df.columns) == list(Sample.dtypes) and [str(d) for d in df.dtypes] == list(Sample.dtypes.values())
    assert df["score"].isna().tolist() == [True, False] and df["size"].isna().tolist() == [True, False]
    assert df["size"].iloc[1] == 7 and df["note"].tolist() == [None, None]
    empty = Sample().frame()
    assert empty.empty and [str(d) for d in empty.dtypes] == list(Sample.dtypes.values())


def test_a_row_missing_a_column_is_caught():
    t = Sample()
    t.count.append(1)
    with pytest.raises(ValueError, match="unequal length"):
        t.frame()


def test_decision_rows_put_each_field_in_its_own_column():
    info = DecisionInfo(status="optimal", solver="HiGHS", objective=1.5, gap=0.25, variables=7, constraints=3,
                        fallback="fifo", reason="time limit")
    script = Scripted(lambda s: Plan(vms=FirstFit().decide(s).vms, start=FirstFit().decide(s).start, info=info)
                      if s.waiting else Plan())
    r = Simulation(cluster(2), [job(0, A, 0.0), job(1, B, 0.0)], script, table()).run()
    first, last = r.decisions.iloc[0], r.decisions.iloc[-1]
    assert (first.decision, first.time, first.trigger, first.status, first.solver, first.objective, first.gap,
            first.variables, first.constraints, first.fallback, first.reason) == (
        0, 0.0, "arrival", "optimal", "HiGHS", 1.5, 0.25, 7, 3, "fifo", "time limit")
    assert (first.waiting, first.running, first.started, first.preempted, first.moved) == (2, 0, 2, 0, 0)
    assert first.policy.startswith("scripted")
    assert (last.status, last.solver, last.fallback) == ("ok", None, None)
    assert pd.isna(last.objective) and pd.isna(last.variables) and (last.time, last.running) == (100.0, 0)


def test_node_rows_of_a_vm_stopped_while_booting_and_of_a_shared_vm():
    pol = Scripted(lambda s: Plan(vms={0: "slow"}, keep_idle={0}) if s.time == 0.0 else
                   (Plan(vms={0: "big"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1))) if s.waiting else Plan()),
                   share=True)
    r = Simulation(cluster(1, (SMALL, BIG, SLOW), decision_interval=5.0), [job(0, A, 0.0), job(1, B, 0.0)], pol,
                   table()).run()
    boot, shared = r.nodes.iloc[0], r.nodes.iloc[1]
    assert (boot.vm_type, boot.start_time, boot.ready_time, boot.stop_time, boot.jobs) == ("slow", 0.0, 5.0, 5.0, 0)
    assert boot.cost == pytest.approx(0.005) and boot.busy_gpu_seconds == 0.0
    assert (shared.vm_type, shared.gpus, shared.start_time, shared.stop_time, shared.jobs) == ("big", 2, 5.0, 105.0, 2)
    assert (shared.billed_seconds, shared.busy_gpu_seconds, shared.price_per_hour) == (100.0, 150.0, 7.2)
    assert r.summary["idle_cost"] == pytest.approx(0.005)


@pytest.mark.parametrize("alternate", [True, False])
def test_decision_info_columns_follow_each_row_when_plans_alternate_infos(alternate):
    # The info columns are built per distinct info (all rows at once when every plan carries one info object) and
    # gathered row by row: rows must keep their own.
    infos = [DecisionInfo(status="optimal", solver="HiGHS", objective=2.0, variables=4, constraints=1),
             DecisionInfo(status="time_limit", gap=0.5, fallback="fifo", reason="limit"), Plan().info]
    if not alternate:
        infos = [infos[0]] * 3
    count = [0]

    def script(s):
        count[0] += 1
        plan = FirstFit().decide(s)
        return Plan(vms=plan.vms, start=plan.start, info=infos[(count[0] * 2) % 3])

    r = Simulation(cluster(1), [job(i, A if i % 2 else B, 20.0 * i) for i in range(6)], Scripted(script),
                   table()).run()
    d = r.decisions
    assert len(d) == count[0] > 6
    for i, row in enumerate(d.itertuples()):
        info = infos[((i + 1) * 2) % 3]
        for name in ("status", "solver", "objective", "gap", "variables", "constraints", "fallback", "reason"):
            want, got = getattr(info, name), getattr(row, name)
            assert (pd.isna(got) if want is None else got == want), (i, name, got, want)
    assert str(d.variables.dtype) == "Int64" and str(d.objective.dtype) == "float64"


def test_rows_spilled_into_arrays_frame_as_rows_kept_in_lists(monkeypatch):
    # A run's numeric columns move their rows into arrays every SPILL rows: a frame is the same whichever way.
    import sim.records

    def tables():
        jobs = [job(i, A if i % 2 else B, (7.0 if i < 15 else 300.0) * i) for i in range(30)]
        r = Simulation(cluster(2), jobs, FirstFit(), table()).run()
        return r.jobs, r.nodes, r.decisions, r.segments

    kept = tables()
    monkeypatch.setattr(sim.records, "SPILL", 4)  # the spills fall mid-run, every table several times
    spilled = tables()
    assert len(kept[2]) > 3 * 4 and len(kept[3]) > 3 * 4 and len(kept[1]) > 2 * 4
    for a, b in zip(kept, spilled):
        pd.testing.assert_frame_equal(a.drop(columns=["wall_time"], errors="ignore"),
                                      b.drop(columns=["wall_time"], errors="ignore"))
    assert list(spilled[2]["decision"]) == list(range(len(spilled[2])))


@pytest.mark.parametrize("spill", [1, 2, 3, 5])
def test_a_co_located_segment_completed_later_is_found_after_the_rows_spill(monkeypatch, tmp_path, spill):
    # A pair's segment split at an instant and completed by the member leaving at that same instant is rewritten by
    # row (sim/sharing): rows are counted from the table's first row, so a spill in between (or at the split itself)
    # neither loses the row nor writes another (it raised IndexError). Gavel's fifo_packed on a busy 6-GPU cluster
    # co-locates pairs all run long.
    import sim.records
    from studies.gavel_replay import replay, write_trace

    trace = write_trace(tmp_path / "t.trace", 60, 150.0, 3)
    kept = replay(trace, "fifo_packed", servers="2:2:2").segments
    monkeypatch.setattr(sim.records, "SPILL", spill)
    spilled = replay(trace, "fifo_packed", servers="2:2:2").segments
    assert kept["partner"].notna().sum() > 20 and len(kept) > 20 * spill
    pd.testing.assert_frame_equal(kept, spilled)


def test_packed_columns_hold_exactly_what_numpy_converts():
    from sim.records import packed
    floats = [0.1, -0.0, float("nan"), float("inf"), 1e-310, 2**53 + 1, np.float64(1 / 3), np.float32(0.1), True]
    got = packed(floats, np.float64, len(floats))
    assert got.dtype == np.float64 and got.flags.writeable
    assert got.tobytes() == np.fromiter(floats, dtype=np.float64, count=len(floats)).tobytes()
    ints = [0, -1, 2**63 - 1, -(2**63), True, np.int64(7), np.int32(-3)]
    assert packed(iter(ints), np.int64, len(ints)).tolist() == np.array(ints, dtype=np.int64).tolist()
    # what struct does not take as a C number goes through numpy as before (a float in an integer column: truncated)
    assert packed([1.5, 2], np.int64, 2).tolist() == [1, 2] and np.isnan(packed([None], np.float64, 1)[0])
    assert packed([], np.float64, 0).shape == (0,)
    # a long column is packed a chunk at a time (SPILL values), each chunk on its own path
    from sim.records import SPILL
    many = [i / 7 for i in range(2 * SPILL + 5)]
    assert packed(iter(many), np.float64, len(many)).tobytes() == np.array(many).tobytes()
    mixed = list(range(2 * SPILL + 5))
    mixed[SPILL + 3] = 2.5
    assert packed(iter(mixed), np.int64, len(mixed)).tolist() == [int(v) for v in mixed]
