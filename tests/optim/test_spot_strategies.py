"""Spot strategies: the component contract, the omniscient DP against brute force, guarantees on random markets,
and each strategy's rules on hand-made states."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optim.spot import build, registry
from optim.spot.omniscient import cheapest_plan
from sim.availability import AvailabilitySeries
from sim.model import CapsimError
from sim.spot_ticks import run_spot_job
from sim.spotjob import SpotJob, SpotStrategy, TickMarket, TickView, Use

N, S, D = Use.NONE, Use.SPOT, Use.ON_DEMAND
MARKET = TickMarket(600, 1.0, 3.0)
KINDS = tuple(registry(aliases=False))
RANDOM = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def test_every_strategy_is_registered_once_with_the_documented_names():
    assert set(KINDS) == {"on_demand", "only_spot", "spot_greedy", "uniform_progress", "time_sliced", "omniscient"}


@pytest.mark.parametrize("kind", KINDS)
def test_parameters_are_stored_under_their_names_and_rebuild_an_equal_strategy(kind):
    cls = registry()[kind]
    s = build(kind)
    assert isinstance(s, SpotStrategy) and s.describe() == kind
    assert tuple(s.get_params()) == cls.param_names()  # type: ignore[attr-defined]
    flipped = {n: not d for n, d in cls.param_defaults().items() if isinstance(d, bool)}  # type: ignore[attr-defined]
    q = build(kind, **{**s.get_params(), **flipped})
    assert build(kind, **q.get_params()).get_params() == q.get_params()


def series(bits) -> AvailabilitySeries:
    return AvailabilitySeries.ticks("r", [bool(b) for b in bits], MARKET.gap)


def brute_force(avail, job: SpotJob, model: str) -> float:
    """The omniscient model's optimum by trying every plan: ``gap`` per tick used, less ``overhead`` per launch (a
    tick whose use differs from the previous tick's and is not idle); the ILP counts the first tick's launch as one
    overhead owed up front instead."""
    n = math.ceil(job.deadline / MARKET.gap)
    best = math.inf
    for plan in itertools.product((N, S, D), repeat=n):
        if any(u is S and not avail[i] for i, u in enumerate(plan)):
            continue
        later = sum(1 for i in range(1, n) if plan[i] is not N and plan[i] is not plan[i - 1])
        launches = later + 1 if model == "ilp" else later + (plan[0] is not N)
        if MARKET.gap * sum(u is not N for u in plan) >= job.work + job.overhead * launches:
            best = min(best, sum(MARKET.tick_cost(u) for u in plan))
    return best


@pytest.mark.parametrize("model", ["ilp", "exact"])
@pytest.mark.parametrize("bits, work, overhead", [
    ((0, 1, 1, 0, 1, 1), 1800, 180),
    ((1, 0, 1, 0, 1, 0), 1500, 720),
    ((0, 0, 1, 1, 1, 1), 1200, 300),
    ((1, 1, 1, 1, 1, 1), 3000, 0),
    ((0, 1, 0, 1, 0, 1), 600, 60),
])
def test_the_dp_finds_the_brute_force_optimum(bits, work, overhead, model):
    job = SpotJob(work, 3600, overhead)
    found = cheapest_plan(bits, job, MARKET, model)
    want = brute_force(bits, job, model)
    if math.isinf(want):
        assert found is None
        return
    assert found is not None
    cost, plan = found
    assert cost == pytest.approx(want, rel=1e-12)
    assert sum(MARKET.tick_cost(u) for u in plan) == pytest.approx(cost, rel=1e-12)
    assert all(bits[i] or u is not S for i, u in enumerate(plan))


def test_the_ilp_pays_the_first_launch_twice_when_its_plan_starts_idle():
    job = SpotJob(1300, 3000, 300)
    ilp = cheapest_plan((0, 1, 1, 1, 1), job, MARKET, "ilp")
    exact = cheapest_plan((0, 1, 1, 1, 1), job, MARKET, "exact")
    assert ilp is not None and exact is not None
    assert exact[1] == [N, S, S, S, N] and exact[0] == pytest.approx(3 * MARKET.tick_cost(S))
    assert ilp[0] == pytest.approx(4 * MARKET.tick_cost(S))  # 1300 + 2 x 300 needs a fourth tick


markets = st.lists(st.booleans(), min_size=30, max_size=60)
jobs = st.tuples(st.integers(1, 30), st.integers(1, 30), st.sampled_from([0, 60, 180, 600, 720, 1500]))


@RANDOM
@given(markets, jobs)
def test_deadline_aware_strategies_meet_every_deadline_that_leaves_two_overheads(bits, job_args):
    work_ticks, deadline_ticks, overhead = job_args
    job = SpotJob(work_ticks * 300.0, deadline_ticks * 600.0, overhead)
    if math.ceil((job.work + 2 * overhead) / 600) * 600 > job.deadline:
        return
    for kind, params in (("spot_greedy", {}), ("uniform_progress", {}), ("omniscient", {"model": "exact"})):
        r = run_spot_job(build(kind, **params), job, series(bits), MARKET)
        assert r.deadline_met, (kind, r.finish, job)


@RANDOM
@given(markets, jobs)
def test_money_adds_up_spot_runs_only_when_available_and_the_optimum_is_a_lower_bound(bits, job_args):
    work_ticks, deadline_ticks, overhead = job_args
    job = SpotJob(work_ticks * 300.0, deadline_ticks * 600.0, overhead)
    s = series(bits)
    omni = build("omniscient", model="exact")
    best = run_spot_job(omni, job, s, MARKET)
    ilp = build("omniscient")
    run_spot_job(ilp, job, s, MARKET)
    if not math.isnan(omni.plan_cost_):
        assert best.cost == pytest.approx(omni.plan_cost_, rel=1e-12), "the exact model's plan replays at its cost"
        assert ilp.plan_cost_ >= omni.plan_cost_ - 1e-9
    for kind in KINDS:
        for params in ({}, {"variant": "strawman"}) if kind == "spot_greedy" else ({},):
            r = run_spot_job(build(kind, **params), job, s, MARKET)
            uses = r.uses.astype(int)
            assert not np.any((uses == 1) & ~r.available), kind
            billed = MARKET.tick_cost(S) * np.sum(uses == 1) + MARKET.tick_cost(D) * np.sum(uses == 2)
            assert r.cost == pytest.approx(billed, rel=1e-12, abs=1e-12)
            assert r.spot_seconds == 600 * np.sum(uses == 1) and r.on_demand_seconds == 600 * np.sum(uses == 2)
            if r.deadline_met and not math.isnan(omni.plan_cost_):
                last = MARKET.tick_cost(Use(["none", "spot", "on_demand"][uses[-1]])) if r.post_finish_ticks else 0
                assert omni.plan_cost_ <= r.cost - last + 1e-9, kind


def view(tick=0, available=True, current=N, done=0.0, left=0.0, work=6000.0, deadline=9000.0, overhead=300.0,
         last_tick=0.0) -> TickView:
    job = SpotJob(work, deadline, overhead)
    return TickView(tick, tick * 600.0, available, current, current, False, done, last_tick, left, job, MARKET)


def test_greedy_runs_spot_waits_without_it_and_goes_on_demand_at_two_overheads_of_slack():
    g = build("spot_greedy")
    assert g.decide(view(available=True)) is S
    assert g.decide(view(available=False)) is N
    # 6000 s of work, 2 x 300 overhead: 6600 s rounded to 11 ticks; 9000 s left is 15 ticks -> still waiting
    assert g.decide(view(tick=3, available=False)) is N
    assert g.decide(view(tick=4, available=False)) is D      # 15 - 4 = 11 ticks left: the safety net
    assert g.decide(view(tick=4, available=True, current=S)) is S      # on spot: one overhead of margin still there
    assert g.decide(view(tick=5, available=True, current=S, left=100)) is D  # paying its overhead: not settled
    assert g.decide(view(tick=5, available=True, current=S)) is S
    assert g.decide(view(done=6000.0, available=True)) is N  # done: nothing (Thrifty)


def test_the_strawman_keeps_any_spot_vm_near_the_deadline_and_asks_for_a_tick_when_done():
    g = build("spot_greedy", variant="strawman")
    assert g.decide(view(tick=5, available=True, current=S, left=100)) is S
    # 5700 s of work: with one overhead 10 ticks, with two 11; the paper's greedy leaves at 15 - 4 ticks, it at 15 - 5
    assert build("spot_greedy").decide(view(tick=4, available=False, work=5700)) is D
    assert g.decide(view(tick=4, available=False, work=5700)) is N
    assert g.decide(view(tick=5, available=False, work=5700)) is D
    assert g.decide(view(done=6000.0, available=True)) is S
    with pytest.raises(CapsimError, match="variant"):
        build("spot_greedy", variant="greedy").reset(SpotJob(1, 1), MARKET)


def test_uniform_progress_falls_back_to_on_demand_behind_pace_and_stays_until_two_overheads_ahead():
    up = build("uniform_progress")
    # pace 6000/9000: at tick 3 (1800 s) it owes 1200 s of work
    assert up.decide(view(tick=3, available=False, done=1000)) is D
    assert up.decide(view(tick=3, available=False, done=1300)) is N
    assert up.decide(view(tick=3, available=True, done=1000)) is S
    # on demand, spot back: it stays until ahead of the pace at t + 2d = 2400 s, i.e. 1600 s of work
    assert up.decide(view(tick=3, available=True, current=D, done=1600)) is D
    assert up.decide(view(tick=3, available=True, current=D, done=1700)) is S


def test_time_sliced_owes_each_slice_its_share_and_validates_its_slices():
    t = build("time_sliced", slice_hours=1.0, done_check=True)
    job = SpotJob(3600.0, 4 * 3600.0, 0.0)  # four 1-h slices of 900 s each
    t.reset(job, MARKET)
    v = lambda tick, done, last=0.0, avail=False, cur=N: TickView(  # noqa: E731
        tick, tick * 600.0, avail, cur, cur, False, done, last, 0.0, job, MARKET)
    # slice 0, nothing done: 900 s owed; waiting through tick 4 would leave 600 s: on demand at tick 4, not before
    assert [t.decide(v(i, 0.0)) for i in range(4)] == [N, N, N, N]
    assert t.decide(v(4, 0.0)) is D
    with pytest.raises(CapsimError, match="whole number"):
        build("time_sliced", slice_hours=0.25 / 60).reset(job, MARKET)
    with pytest.raises(CapsimError, match="gain"):
        build("time_sliced", gain="median").reset(job, MARKET)
    done = build("time_sliced", done_check=True)
    done.reset(job, MARKET)
    assert done.decide(v(0, 3600.0, avail=True)) is N


def test_omniscient_needs_the_future_and_runs_on_demand_when_no_plan_meets_the_deadline():
    with pytest.raises(CapsimError, match="future"):
        build("omniscient").reset(SpotJob(600, 600), MARKET)
    r = run_spot_job(build("omniscient"), SpotJob(1800, 1200), series([1] * 6), MARKET)
    assert r.finish == 1800 and not r.deadline_met and r.on_demand_seconds == 1800
    with pytest.raises(CapsimError, match="model"):
        build("omniscient", model="lp").reset(SpotJob(600, 600), MARKET, [True])
