"""The MLPerf study's readings of the published model, checked by hand on the published job times."""

from __future__ import annotations

import pytest

from studies.mlperf import MODELS, Model, estimate, hms, published_check, reduction, shapes_within, simulate_batch

P = [hms(t) for t in ("4:33:04", "3:12:18", "2:57:51", "1:09:07", "1:48:14", "4:05:28", "4:29:21", "15:07:34",
                      "6:08:37")]
V = [hms(t) for t in ("3:01:13", "3:09:12", "2:23:26", "1:09:34", "1:22:50", "2:48:18", "2:59:55", "10:53:32",
                      "5:46:00")]
IC, SSD, OD, RM, SA, RT, TL, SR, RF = range(9)


def test_half_the_jobs_to_the_v100s_by_hand() -> None:
    # priority: IC, TL, RT, SR and half the SA jobs (the highest speed-ups) on the V100s, the rest on the P100s
    v_work = V[IC] + V[TL] + V[RT] + V[SR] + V[SA] / 2
    p_work = P[SA] / 2 + P[OD] + P[RF] + P[SSD] + P[RM]
    busy = 1 - (v_work + p_work) / ((sum(P) + sum(V)) / 2)
    makespan = 1 - max(v_work, p_work) / max(sum(V) / 2, sum(P) / 2)
    assert reduction(Model("per_machine", "same", "busy"), 0.5) == pytest.approx(100 * busy)
    assert reduction(Model("per_machine", "same", "makespan"), 0.5) == pytest.approx(100 * makespan)
    assert reduction(Model("per_type", "same", "busy"), 0.5) == reduction(Model("per_machine", "same", "busy"), 0.5)
    # totals are linear in the jobs and, for the makespan, inverse in the machines
    e200, p200 = estimate(Model(), 200, 0.5, machines=8)
    assert estimate(Model(), 10_000, 0.5, machines=8) == pytest.approx((50 * e200, 50 * p200))
    assert e200 == pytest.approx(200 / 9 * sum(P) / 2 / 4)


def test_balanced_priority_finishes_both_gpu_types_together() -> None:
    m = Model("per_machine", "balanced", "makespan")
    even, prio = estimate(m, 900, 0.5, machines=2)
    assert prio < even and reduction(m, 0.5) > reduction(Model("per_machine", "same", "makespan"), 0.5)


def test_the_published_figures_and_the_readings_that_reach_them() -> None:
    lines = published_check()
    assert "8.241 %" in lines[0] and "17.404 %" in lines[1] and "8.248 %" in lines[2]  # 4509 is 4059 mistyped
    assert len(MODELS) == 8
    assert (3, 5) in shapes_within(Model("per_machine", "same", "busy"))
    assert not shapes_within(Model("per_machine", "same", "makespan"))


def test_the_simulated_question_cuts_less_than_the_fluid_readings() -> None:
    got = simulate_batch(90, 2, 2)
    for what in ("makespan", "busy"):
        assert got["gpu_priority"][what] < got["even"][what]
    for rule in ("even", "gpu_priority"):  # ten runs of each benchmark, each on a P100 or a V100
        assert 10 * sum(map(min, P, V)) <= got[rule]["busy"] <= 10 * sum(map(max, P, V))
