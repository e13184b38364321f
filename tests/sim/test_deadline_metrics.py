"""Deadline metrics beside cost: the deadline-satisfaction ratio and lateness, max(0, end − deadline), hand-computed
from job tables and from an engine run; a placeholder deadline (the workload gave none) counts in none of them."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest

from sim.engine import Simulation
from sim.metrics import METRICS, NO_DEADLINE, RunTables
from sim.model import Job
from sim.workload import WorkloadSpec, poisson_jobs, trace_jobs
from tests.sim.helpers import A, B, FirstFit, cluster, job, table


def _tables(lateness: list[float]) -> RunTables:
    return RunTables(pd.DataFrame({"lateness": lateness}), pd.DataFrame(), pd.DataFrame())


def _metrics(t: RunTables) -> tuple[float, float, float]:
    return tuple(METRICS[m].compute(t) for m in ("deadline_met", "mean_lateness", "p95_lateness"))


def test_hand_computed_ratio_and_lateness() -> None:
    # five jobs, two late by 10 s and 100 s: 3/5 on time; mean 110/5; p95 between the 4th and 5th sorted values,
    # 10 + 0.8 x (100 - 10) (numpy's linear interpolation at rank 0.95 x 4 = 3.8)
    assert _metrics(_tables([0.0, 0.0, 10.0, 100.0, 0.0])) == (0.6, 22.0, pytest.approx(82.0))
    assert _metrics(_tables([0.0, 0.0])) == (1.0, 0.0, 0.0)


def test_a_run_without_jobs_has_no_ratio() -> None:
    met, mean, p95 = _metrics(_tables([]))
    assert math.isnan(met) and (mean, p95) == (0.0, 0.0)


def test_from_an_engine_run() -> None:
    # one node: A runs 0–100 (deadline 150, on time), B waits and runs 100–150 (deadline 120, 30 s late)
    jobs = [job(0, A, 0.0, deadline=150.0), job(1, B, 10.0, deadline=120.0)]
    r = Simulation(cluster(1), jobs, FirstFit(), table()).run()
    assert (r.summary["deadline_met"], r.summary["mean_lateness"]) == (0.5, 15.0)
    assert r.summary["p95_lateness"] == pytest.approx(28.5)
    assert r.summary["deadline_met"] == 1 - r.summary["late_jobs"] / r.summary["jobs"]


def test_declared_with_their_direction_and_domain() -> None:
    met = METRICS["deadline_met"]
    assert (met.better, met.lower, met.upper, met.unit) == ("higher", 0.0, 1.0, "")
    assert all(METRICS[m].unit == "s" and METRICS[m].better == "lower" for m in ("mean_lateness", "p95_lateness"))


def _placeholder(j: Job) -> Job:
    return replace(j, deadline_given=False)


def test_a_placeholder_deadline_counts_in_no_metric() -> None:
    # as test_from_an_engine_run, but B's deadline (120, missed by 30 s) is a placeholder: only A's counts
    jobs = [job(0, A, 0.0, deadline=150.0), _placeholder(job(1, B, 10.0, deadline=120.0))]
    r = Simulation(cluster(1), jobs, FirstFit(), table()).run()
    s, j = r.summary, r.jobs.set_index("job_id")
    assert (s["deadline_met"], s["late_jobs"], s["tardiness_cost"], s["mean_lateness"]) == (1.0, 0.0, 0.0, 0.0)
    assert s["total_cost"] == s["vm_cost"] > 0
    assert list(j["status"]) == ["on_time", "no_deadline"]
    assert j.loc[0, "deadline"] == 150.0 and all(math.isnan(j.loc[1, c]) for c in ("deadline", "lateness",
                                                                                     "tardiness_cost"))


def test_without_any_deadline_the_deadline_metrics_are_empty() -> None:
    jobs = [_placeholder(job(0, A, 0.0, deadline=150.0)), _placeholder(job(1, B, 10.0, deadline=120.0))]
    r = Simulation(cluster(1), jobs, FirstFit(), table()).run()
    s = r.summary
    for name in ("tardiness_cost", "late_jobs", "deadline_met", "mean_lateness", "p95_lateness"):
        assert math.isnan(s[name]), name
        assert NO_DEADLINE in METRICS[name].description
    assert s["total_cost"] == s["vm_cost"] > 0 and s["mean_jct"] == 120.0  # A 0-100, B 10-150: (100 + 140) / 2
    assert set(r.jobs["status"]) == {"no_deadline"}


def test_the_same_run_with_given_deadlines_is_unchanged_by_the_flag() -> None:
    jobs = [job(0, A, 0.0, deadline=150.0), job(1, B, 10.0, deadline=120.0)]
    flagged = [replace(j, deadline_given=True) for j in jobs]
    a = Simulation(cluster(1), jobs, FirstFit(), table()).run()
    b = Simulation(cluster(1), flagged, FirstFit(), table()).run()
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert a.summary["tardiness_cost"] == pytest.approx(0.3) and a.summary["late_jobs"] == 1.0


def _trace(deadlines: list[object]) -> pd.DataFrame:
    return pd.DataFrame({"submit_time": [0.0, 10.0, 20.0], "application": "alexnet", "framework": "pytorch",
                         "iterations": 100, "batch_size": 32, "name": "A", "deadline": deadlines})


@pytest.mark.parametrize("deadlines, given", [([500.0, 600.0, 700.0], [True] * 3),
                                              ([None, None, None], [False] * 3),
                                              ([500.0, None, 700.0], [True, False, True])])
def test_a_trace_job_says_whether_its_deadline_was_given(deadlines: list[object], given: list[bool]) -> None:
    c = cluster(1)
    jobs = trace_jobs(_trace(deadlines), table(), c.configs, 0, "t.csv")
    assert [j.deadline_given for j in jobs] == given
    assert all(j.deadline == d for j, d in zip(jobs, deadlines) if d is not None)
    assert all(math.isfinite(j.deadline) for j in jobs)  # a placeholder still steers the policies
    r = Simulation(c, jobs, FirstFit(), table()).run()
    assert list(r.jobs["deadline"].notna()) == given
    assert math.isnan(r.summary["deadline_met"]) == (not any(given))


def test_a_poisson_workload_gives_its_deadlines() -> None:
    spec = WorkloadSpec(n_jobs=5, mean_interarrival=10.0, mix=((A, 1.0),))
    assert all(j.deadline_given for j in poisson_jobs(spec, table(), cluster(1).configs, 0))
