"""Engine invariants under plans no registered policy makes: a random policy written here preempts, moves, shares
VMs and keeps VMs idle, to drive the engine through its rarer paths on random small worlds.

The invariants (``tests.optim.worlds.check``): no GPU is over-subscribed at any instant, a node hosts one VM at a
time and jobs run only while it is ready, every job completes exactly once and after it arrived, and the money adds
up (billed seconds x price = VM cost = job shares + idle cost), also when the truth differs from the estimate. Every
registered policy is checked the same way by the conformance suite (``tests/optim/test_conformance.py``).
"""

from __future__ import annotations

import math
import random
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings

from optim.base import Policy
from optim.common import config_table
from sim.model import Assignment, Plan, Snapshot
from tests.optim.worlds import World, at_scale, check, check_plan_names, recorded_run, worlds


class RandomPolicy(Policy):
    """Valid but random plans: starts, shares, preempts and moves on arrivals, keeps some VMs idle."""

    name = "random-test"
    may_preempt: ClassVar[bool] = True
    may_share: ClassVar[bool] = True

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = random.Random(seed)

    def decide(self, s: Snapshot) -> Plan:
        rng = self.rng
        vms: dict[int, str | None] = {}
        free = {n.index: n.free_gpus for n in s.nodes}
        holders = {n.index: n.vm for n in s.nodes}
        preempt, movers, move, start = [], [], [], []
        if "arrival" in s.trigger:
            for jv in s.running:
                r = rng.random()
                if r < 0.3:
                    (preempt if r < 0.15 else movers).append(jv)
                    free[jv.node] += s.configs[jv.config].gpus
        waiting = list(s.waiting)
        rng.shuffle(waiting)
        for jv in movers + waiting:
            spot = self._spot(s, jv, free, holders, vms)
            if spot is None:
                if jv in movers:
                    preempt.append(jv)
                continue
            n, g = spot
            (move if jv in movers else start).append(Assignment(jv.id, n, g))
            free[n] -= g
        keep = frozenset(n for n in range(len(s.nodes)) if rng.random() < 0.2)
        return Plan(vms=vms, start=tuple(start), move=tuple(move), preempt=tuple(jv.id for jv in preempt),
                    keep_idle=keep)

    def _spot(self, s, jv, free, holders, vms):
        rng = self.rng
        order = list(range(len(s.nodes)))
        rng.shuffle(order)
        for n in order:
            vm = holders[n]
            if vm is not None and free[n] > 0:
                gs = [g for g in range(1, free[n] + 1) if math.isfinite(jv.estimates[_cfg(s, vm.name, g)])]
                if gs:
                    return n, rng.choice(gs)
        for n in order:
            if holders[n] is None:
                types = [v for v in s.vm_types if s.nodes[n].accepts(v.name)]
                vm = rng.choice(types)
                gs = [g for g in range(1, vm.gpus + 1) if math.isfinite(jv.estimates[_cfg(s, vm.name, g)])]
                if gs:
                    vms[n] = vm.name
                    holders[n] = vm
                    free[n] = vm.gpus
                    return n, rng.choice(gs)
        return None


def _cfg(s: Snapshot, name: str, g: int) -> int:
    return config_table(s.configs).index[name, g]


def random_plans_keep_the_invariants(world: World) -> None:
    policy = RandomPolicy(world.seed)
    result, seen = recorded_run(world, policy)
    check(world, result)
    for snapshot, plan in seen:
        check_plan_names(snapshot, plan)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds())
def test_engine_invariants_under_random_plans(world):
    random_plans_keep_the_invariants(world)


@pytest.mark.slow
def test_engine_invariants_under_random_plans_at_scale():
    """The slow profile: ``AT_SCALE`` (1,000) random worlds under random preempting plans."""
    at_scale(random_plans_keep_the_invariants, "random preempting policy")
