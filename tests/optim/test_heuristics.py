"""The heuristics' shared cost and search: the plan cost is the MILP's objective, kept current move by move; the
published family's randomisation, pool and relinking; insertion's packing and its descent."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optim
from optim.greedy import construct
from optim.heuristics import Decision, Schedule, plan_cost
from optim.heuristics.base import greedy_pool
from optim.heuristics.insertion import descend, insert_cheapest
from optim.heuristics.local_search import best_neighbour
from optim.heuristics.path_relinking import relink
from optim.milp import build_model, solve, to_plan
from sim.catalogue import configurations, gpu, vm_types
from sim.model import DecisionInfo, NodeView, VMType
from tests.instances import instance, runtime_table
from tests.optim.helpers import job, snapshot
from tests.optim.test_milp_model import random_instance

CATALOGUE = tuple(vm_types().values())
TABLE, _ = runtime_table(configurations(CATALOGUE))


def stress(slots: int, jobs: int, seed: int):
    return instance(slots, jobs, seed, TABLE)


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_plan_cost_is_the_milps_objective(seed):
    snap, _ = random_instance(seed)  # decided without preemption: running jobs stay
    model = build_model(snap)
    out = solve(model, "highs", time_limit=30, gap=0.0)
    plan = to_plan(model, DecisionInfo())
    assert plan_cost(snap, plan) == pytest.approx(out.objective, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_plan_cost_of_stress_decisions_matches_the_milp(seed):
    snap = stress(5, 15, seed)
    model = build_model(snap)
    out = solve(model, "highs", time_limit=60, gap=0.0)
    assert plan_cost(snap, to_plan(model, DecisionInfo())) == pytest.approx(out.objective, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_the_cost_stays_current_through_every_kind_of_move(seed):
    rng = np.random.default_rng(seed)
    dec = Decision(stress(6, 18, seed))
    s = Schedule(dec)
    assert s.cost == pytest.approx(s.recompute())
    for _ in range(200):
        j = int(rng.integers(dec.n_jobs))
        n = int(rng.integers(len(s.vm)))
        k = int(rng.integers(len(dec.table.configs)))
        before = s.cost
        if j in s.at and rng.random() < 0.3:
            d = s.delta_remove(j)
            s.remove(j)
        elif j not in s.at and s.at and rng.random() < 0.3:
            b = int(rng.choice(list(s.at)))
            d = s.delta_replace(b, j)
            if d is None:
                continue
            s.replace(b, j)
        elif j in s.at and len(s.at) > 1 and rng.random() < 0.3:
            b = int(rng.choice([i for i in s.at if i != j]))
            d = s.delta_swap(j, b)
            if d is None:
                continue
            s.swap(j, b)
        else:
            d = s.delta_move(j, n, k)
            if d is None:
                continue
            s.move(j, n, k)
        assert s.cost == pytest.approx(before + d, abs=1e-9)
        assert s.cost == pytest.approx(s.recompute(), abs=1e-9)
        for m in range(len(s.vm)):
            assert s.room(m) >= 0
            assert all(s.vm[m] is not None and dec.table.vm_of[c] == s.vm[m].name for c in s.on[m].values())
    assert plan_cost(dec.snapshot, s.to_plan()) == pytest.approx(s.cost)


def test_a_plan_that_overfills_a_vm_is_refused():
    small = VMType("small", gpu("K80"), 1, 3.6)
    snap = snapshot([job(1, [10.0]), job(2, [10.0])], nodes=1, vm_types=(small,))
    from sim.model import Assignment, CapsimError, Plan

    with pytest.raises(CapsimError, match="cannot take"):
        plan_cost(snap, Plan(vms={0: "small"}, start=(Assignment(1, 0, 1), Assignment(2, 0, 1))))


def packing_case():
    """One empty slot, two VM types. A job with a high waiting penalty runs only on the 1-GPU type; three jobs run
    on the 4-GPU type, whose rent per job is low. Each of the three saves less than the first alone, together more."""
    k80, m60 = gpu("K80"), gpu("M60")
    one = VMType("one", k80, 1, 3.6)
    four = VMType("four", m60, 4, 7.2)
    configs = configurations((one, four))  # one x1, four x1..x4
    inf = math.inf
    lone = job(0, [100.0, inf, inf, inf, inf], deadline=150.0, weight=0.2)
    group = [job(i, [inf, 100.0, 90.0, 85.0, 80.0], deadline=150.0, weight=0.1) for i in (1, 2, 3)]
    assert len(configs) == 5
    return snapshot([lone, *group], nodes=[NodeView(0)], vm_types=(one, four))


def test_insertion_packs_a_shared_vm_where_single_starts_would_not():
    snap = packing_case()
    plan = optim.build("insertion").decide(snap)
    model = build_model(snap)
    best = solve(model, "highs", time_limit=30, gap=0.0).objective
    assert dict(plan.vms) == {0: "four"} and sorted(a.job_id for a in plan.start) == [1, 2, 3]
    assert plan_cost(snap, plan) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_descent_never_makes_a_plan_dearer_and_reaches_a_local_optimum(seed):
    dec = Decision(stress(5, 15, seed))
    s = insert_cheapest(Schedule(dec))
    before = s.cost
    s = descend(s, limit=10, rounds=1000)
    assert s.cost <= before + 1e-9
    assert descend(s.copy(), limit=10, rounds=1).cost == pytest.approx(s.cost)


@pytest.mark.parametrize("seed", range(4))
def test_heuristics_beat_or_match_greedy_on_the_shared_cost(seed):
    snap = stress(5, 15, seed)
    greedy = plan_cost(snap, optim.build("greedy").decide(snap))
    for kind in ("random_greedy", "local_search", "path_relinking"):
        assert plan_cost(snap, optim.build(kind, iterations=10).decide(snap)) <= greedy + 1e-9, kind


def test_one_iteration_of_random_greedy_is_greedy():
    snap = stress(5, 15, 1)
    a, b = optim.build("random_greedy", iterations=1).decide(snap), optim.build("greedy").decide(snap)
    assert sorted(a.start, key=lambda x: x.job_id) == sorted(b.start, key=lambda x: x.job_id)
    assert {n: v for n, v in a.vms.items() if v} == dict(b.vms)


def test_randomised_greedy_depends_on_the_seed_and_nothing_else():
    snap = stress(6, 18, 2)
    a = optim.build("random_greedy", iterations=20, seed=3)
    b = optim.build("random_greedy", iterations=20, seed=3)
    other = stress(6, 18, 0)
    a.decide(other)  # a decision taken before does not change the next one
    assert a.decide(snap) == b.decide(snap)
    plans = {tuple(construct(snap, np.random.default_rng(s), alpha=0.3).start) for s in range(10)}
    assert len(plans) > 1, "the randomisation draws different plans"


def test_relinking_moves_and_the_pool_grows():
    dec = Decision(stress(6, 18, 3))
    pool = greedy_pool(dec, np.random.default_rng(0), 30, 0.3, 0.05, 0.2, 10)
    assert len(pool) > 2
    start, guide = pool[0], next(p for p in pool[1:] if len(set(p.key()) ^ set(pool[0].key())) > 2)
    found = relink(start, guide, depth=len(dec.vm0))
    assert found is not None and found.key() not in {start.key(), guide.key()}
    assert found.cost == pytest.approx(found.recompute())


@pytest.mark.parametrize("size, seed", [((6, 18), 4), ((8, 24), 7)])
def test_local_search_improves_greedy_until_no_neighbour_is_cheaper(size, seed):
    dec = Decision(stress(*size, seed))
    s = Schedule.from_plan(dec, construct(dec.snapshot))
    nb = best_neighbour(s, 10)
    assert nb is not None
    while nb is not None:
        assert nb.cost < s.cost and nb.cost == pytest.approx(nb.recompute())
        s, nb = nb, best_neighbour(nb, 10)


def test_parameters_are_checked():
    from sim.model import CapsimError

    with pytest.raises(CapsimError, match="iterations must be a whole number >= 1"):
        optim.build("random_greedy", iterations=0)
    with pytest.raises(CapsimError, match="rounds must be a whole number >= 1"):
        optim.build("insertion", rounds=0)


def test_a_heuristic_that_would_wait_at_a_stall_starts_what_greedy_starts():
    """At a ``stall`` nothing runs and nothing else will happen, so waiting looks free to the shared cost; a search
    that answers with no start is overruled by the greedy construction, else the run would end unfinished."""
    import dataclasses

    from optim.heuristics.path_relinking import PathRelinking

    class Waits(PathRelinking):
        def search(self, dec, rng):  # type: ignore[no-untyped-def]
            return Schedule(dec)

    s = snapshot(waiting=[job(0, (50.0, 40.0, 30.0)), job(1, (60.0, 50.0, 40.0))], nodes=2)
    assert not Waits().decide(s).start
    stalled = dataclasses.replace(s, trigger="stall")
    assert Waits().decide(stalled).start == construct(stalled).start != ()
