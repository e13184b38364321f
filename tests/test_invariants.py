"""Property tests: on random small worlds, every policy's run keeps the engine's invariants.

No GPU is over-subscribed at any instant, a node hosts one VM at a time and jobs run only while it is ready, every
job completes exactly once and after it arrived, and the money adds up: sum of node costs = sum of job shares +
idle cost = vm_cost, also when the truth differs from the estimate. Every registered policy that builds with no
arguments is checked, plus a random policy written here that preempts, moves, shares VMs and keeps VMs idle, to
drive the engine through its rarer paths.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optim
from optim.base import Policy
from predictors.table import TablePredictor
from sim.catalogue import job_types, vm_types
from sim.cluster import Cluster, NodeSlot
from sim.engine import RunResult, Simulation
from sim.model import Assignment, Job, Plan, Snapshot


class RandomPolicy(Policy):
    """Valid but random plans: starts, shares, preempts and moves on arrivals, keeps some VMs idle."""

    name = "random-test"
    may_preempt: ClassVar[bool] = True
    may_share: ClassVar[bool] = True

    def __init__(self, seed: int = 0):
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
    for k, c in enumerate(s.configs):
        if c.vm.name == name and c.gpus == g:
            return k
    raise KeyError((name, g))


def _buildable() -> list[str]:
    names = []
    for name, cls in sorted(optim.registry().items()):
        try:
            cls()
        except Exception:
            continue
        names.append(name)
    return names


POLICIES = _buildable() + ["random-test"]
CATALOGUE = tuple(vm_types().values())
SPECS = tuple(job_types().values())


@st.composite
def worlds(draw):
    k = draw(st.integers(2, 4))
    picks = draw(st.lists(st.sampled_from(CATALOGUE), min_size=k, max_size=k, unique_by=lambda v: v.name))
    boot = draw(st.sampled_from([0.0, 0.0, 7.0]))
    types = tuple(dataclasses.replace(v, boot_time=boot) for v in picks)
    slots = tuple(
        NodeSlot(frozenset({draw(st.sampled_from(types)).name}) if draw(st.booleans()) else None)
        for _ in range(draw(st.integers(1, 4)))
    )
    cluster = Cluster(types, slots, billing_quantum=draw(st.sampled_from([0.0, 60.0])),
                      restart_overhead=draw(st.sampled_from([0.0, 5.0])),
                      decision_interval=draw(st.sampled_from([math.inf, math.inf, 45.0])))
    table = {}
    for spec in SPECS:
        for c in cluster.configs:
            if c.gpus == 1 or draw(st.integers(0, 5)) > 0:
                table[f"{spec.name}/{c.vm.name}/{c.gpus}"] = float(draw(st.integers(5, 300)))
    n = draw(st.integers(3, 15))
    submit = sorted(draw(st.lists(st.integers(0, 400), min_size=n, max_size=n)))
    jobs = [Job(i, draw(st.sampled_from(SPECS)), float(t), float(t + draw(st.integers(10, 600))),
                draw(st.sampled_from([0.003, 0.01, 0.015]))) for i, t in enumerate(submit)]
    truth = None
    if draw(st.booleans()):
        truth = TablePredictor({k: v * draw(st.sampled_from([0.5, 0.9, 1.3, 2.0])) for k, v in table.items()})
    return cluster, jobs, TablePredictor(table), truth, draw(st.integers(0, 1000))


def check(cluster: Cluster, jobs: list[Job], r: RunResult) -> None:
    jt = r.jobs
    assert sorted(jt.job_id) == [j.id for j in jobs]
    assert jt.end_time.notna().all() and (jt.start_time >= jt.submit_time).all() and (jt.end_time >= jt.start_time).all()
    seg = r.segments
    assert set(seg.job_id) == {j.id for j in jobs}
    done = seg.sort_values(["job_id", "end_time"]).groupby("job_id").done.last()
    assert (done == 1.0).all()
    assert (seg.groupby("job_id").done.apply(lambda d: (d == 1.0).sum()) == 1).all()
    gpus = {v.name: v.gpus for v in cluster.vm_types}
    for n, iv in r.nodes.groupby("node"):
        iv = iv.sort_values("start_time")
        assert (iv.start_time.to_numpy()[1:] >= iv.stop_time.to_numpy()[:-1]).all(), "two VMs on one node"
        slot = cluster.slots[n]
        assert all(slot.accepts(v) for v in iv.vm_type)
    for n, sg in seg.groupby("node"):
        iv = r.nodes[r.nodes.node == n]
        for row in sg.itertuples():
            host = iv[(iv.ready_time <= row.start_time) & (row.end_time <= iv.stop_time) & (iv.vm_type == row.vm_type)]
            assert len(host) >= 1, f"segment {row} outside any ready VM interval on node {n}"
        events = sorted([(t, 1, g) for t, g in zip(sg.end_time, sg.gpus)] + [(t, 2, g) for t, g in zip(sg.start_time, sg.gpus)])
        used = 0
        for t, kind, g in events:
            used += g if kind == 2 else -g
            cap = iv[(iv.start_time <= t) & (t <= iv.stop_time)].vm_type.map(gpus).max()
            assert used <= cap, f"node {n} uses {used} GPUs at t={t}"
    regular = r.decisions[r.decisions.trigger != "stall"]
    assert not regular.time.duplicated().any(), "two decisions at one instant: simultaneous triggers not folded"
    vm_cost = r.summary["vm_cost"]
    assert math.isclose(r.nodes.cost.sum(), vm_cost, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(jt.cost_share.sum() + r.summary["idle_cost"], vm_cost, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(r.summary["total_cost"], vm_cost + r.summary["tardiness_cost"], rel_tol=1e-12)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds())
def test_engine_invariants_hold_for_every_policy(policy, world):
    cluster, jobs, estimator, truth, seed = world
    pol = RandomPolicy(seed) if policy == "random-test" else optim.build(policy)
    r = Simulation(cluster, jobs, pol, estimator, truth).run()
    check(cluster, jobs, r)
