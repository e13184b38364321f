"""Engine invariants under plans no registered policy makes: a random policy written here preempts, moves, shares
VMs, spreads jobs over several nodes (gangs) and keeps VMs idle, to drive the engine through its rarer paths on random
small worlds.

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
    """Valid but random plans: starts, shares, gangs, preempts and moves on arrivals (and at round boundaries),
    co-locates jobs where GPUs may be shared, keeps some VMs idle."""

    name = "random-test"
    may_preempt: ClassVar[bool] = True
    may_share: ClassVar[bool] = True
    may_gang: ClassVar[bool] = True
    may_colocate: ClassVar[bool] = True

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.rng = random.Random(seed)

    def decide(self, s: Snapshot) -> Plan:
        rng = self.rng
        vms: dict[int, str | None] = {}
        free = {n.index: n.free_gpus for n in s.nodes}
        holders = {n.index: n.vm for n in s.nodes}
        preempt, movers, move, start = [], [], [], []
        if "arrival" in s.trigger or "round" in s.trigger:
            for jv in s.running:
                r = rng.random()
                if r < 0.3:
                    (preempt if r < 0.15 else movers).append(jv)
        leaving = {jv.id for jv in preempt + movers}
        for jv in preempt + movers:
            if jv.partner is None or jv.partner in leaving and jv.id < jv.partner:  # a pair frees its GPUs once
                for n, g in jv.parts or ((jv.node, s.configs[jv.config].gpus),):
                    free[n] += g
        hosts = [(jv.id, jv.node, s.configs[jv.config].gpus, jv.config, jv.job.spec) for jv in s.running
                 if jv.id not in leaving and not jv.parts and (jv.partner is None or jv.partner in leaving)]
        waiting = list(s.waiting)
        rng.shuffle(waiting)
        for jv in movers + waiting:
            pair = self._pair(s, jv, hosts) if jv not in movers else None
            if pair is not None:
                start.append(pair)
                continue
            a = self._gang(s, jv, free, holders) if s.rules.gang and rng.random() < 0.5 else None
            if a is None:
                spot = self._spot(s, jv, free, holders, vms)
                if spot is None:
                    if jv in movers:
                        preempt.append(jv)
                    continue
                a = Assignment(jv.id, *spot)
            (move if jv in movers else start).append(a)
            for n, g in a.parts:
                free[n] -= g
            if not a.gang:
                hosts.append((a.job_id, a.node, a.gpus, _cfg(s, holders[a.node].name, a.gpus), jv.job.spec))
        keep = frozenset(n for n in range(len(s.nodes)) if rng.random() < 0.2)
        return Plan(vms=vms, start=tuple(start), move=tuple(move), preempt=tuple(jv.id for jv in preempt),
                    keep_idle=keep)

    def _pair(self, s, jv, hosts):
        """Sometimes, the job on the GPUs of a host (a job running alone, or started alone by this plan) it may
        share them with."""
        if s.colocation is None or not hosts or self.rng.random() < 0.5:
            return None
        i = self.rng.randrange(len(hosts))
        host, node, gpus, k, spec = hosts[i]
        if not math.isfinite(jv.estimates[k]) or not math.isfinite(s.colocation.slowdowns(jv.job.spec, spec, k)[0]):
            return None
        del hosts[i]
        return Assignment(jv.id, node, gpus, partner=host)

    def _gang(self, s, jv, free, holders):
        """A random gang over two or more hosting nodes of one VM type with free GPUs, if the job can run so."""
        rng = self.rng
        by_type: dict[str, list[int]] = {}
        for n in range(len(s.nodes)):
            vm = holders[n]
            if vm is not None and free[n] > 0 and s.nodes[n].vm is vm:
                by_type.setdefault(vm.name, []).append(n)
        options = [(name, ns) for name, ns in by_type.items() if len(ns) >= 2]
        if not options:
            return None
        name, ns = rng.choice(options)
        picked = rng.sample(ns, rng.randint(2, len(ns)))
        parts = tuple((n, rng.randint(1, free[n])) for n in picked)
        k = config_table(s.configs).index.get((name, sum(g for _, g in parts)))
        if k is None or not math.isfinite(jv.estimates[k]):
            return None
        return Assignment(jv.id, parts[0][0], parts[0][1], gang=parts[1:])

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
        for n in order:  # an empty node, or a VM no job uses (replaced when the job needs another type)
            vm = holders[n]
            if vm is None or (free[n] == vm.gpus and not s.nodes[n].fixed):
                types = [v for v in s.vm_types if s.nodes[n].accepts(v.name)
                         and any(math.isfinite(jv.estimates[_cfg(s, v.name, g)]) for g in range(1, v.gpus + 1))]
                if not types:
                    continue
                vm = rng.choice(types)
                gs = [g for g in range(1, vm.gpus + 1) if math.isfinite(jv.estimates[_cfg(s, vm.name, g)])]
                if gs:
                    if holders[n] is None or holders[n].name != vm.name:
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
