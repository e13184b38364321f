"""Deadline metrics beside cost: the deadline-satisfaction ratio and lateness, max(0, end − deadline), hand-computed
from job tables and from an engine run."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sim.engine import Simulation
from sim.metrics import METRICS, RunTables
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
