"""Random small worlds for property tests, a run that records every decision, and the engine's invariants on a run.

``worlds()`` draws a cluster, either rented (2–4 catalogue VM types, 1–4 slots, some restricted to one type,
optional boot time, billing quantum, restart overhead and periodic decisions; outside round mode sometimes spot
variants of its types, revoked at random or by a recorded market of two zones, with or without checkpoints) or fixed
servers (1–3 VM types with
1–3 always-present servers each, gangs across servers allowed or not), each sometimes in round mode; 3–15 jobs of the
J1–J6 mix with tight or loose deadlines, on fixed servers some asking for a GPU count; an estimator table and,
sometimes, a truth that differs from it; sometimes GPUs that two jobs may share (co-location), with random pair
slowdowns and memory. ``check`` asserts what any run must satisfy whatever the policy;
``recorded_run`` also returns every snapshot the policy saw and the plan it answered.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from optim.base import Policy
from predictors.interference.explicit import GivenPairs
from predictors.table import TablePredictor
from sim.availability import AvailabilitySeries
from sim.catalogue import job_types, vm_types, with_spot
from sim.cluster import Cluster, NodeSlot
from sim.engine import RunResult, Simulation
from sim.model import ClusterRules, Job, Plan, Snapshot
from sim.spot_market import RecordedMarkets

__all__ = ["World", "worlds", "run", "recorded_run", "check", "check_plan_names", "AT_SCALE", "at_scale",
           "features"]

CATALOGUE = tuple(vm_types().values())
SPECS = tuple(job_types().values())


@dataclasses.dataclass(frozen=True)
class World:
    cluster: Cluster
    jobs: list[Job]
    estimator: TablePredictor
    truth: TablePredictor | None
    seed: int
    interference: GivenPairs | None = None
    """The interference model of a world whose GPUs two jobs may share (told and true alike)."""


@st.composite
def worlds(draw, single_gpu: bool = False, spot: bool = True) -> World:
    """A random small world; ``single_gpu``: every job that fixes its GPU count asks for one (for policies that
    schedule single-GPU jobs only, ``single_gpu_only``); ``spot``: rented clusters may rent spot VMs (not for
    policies that schedule the servers they are given, ``plans_capacity`` false)."""
    fixed = draw(st.integers(0, 3)) == 0
    rounds = draw(st.sampled_from([math.inf, math.inf, 60.0]))
    if fixed:
        k = draw(st.integers(1, 3))
        types = tuple(draw(st.lists(st.sampled_from(CATALOGUE), min_size=k, max_size=k, unique_by=lambda v: v.name)))
        slots = tuple(NodeSlot(frozenset({v.name}), fixed=True) for v in types for _ in range(draw(st.integers(1, 3))))
        gang = draw(st.booleans())
    else:
        k = draw(st.integers(2, 4))
        picks = draw(st.lists(st.sampled_from(CATALOGUE), min_size=k, max_size=k, unique_by=lambda v: v.name))
        boot = draw(st.sampled_from([0.0, 0.0, 7.0]))
        types = tuple(dataclasses.replace(v, boot_time=boot) for v in picks)
        slots = tuple(
            NodeSlot(frozenset({draw(st.sampled_from(types)).name}) if draw(st.booleans()) else None)
            for _ in range(draw(st.integers(1, 4)))
        )
        gang = False
    market = "" if fixed or math.isfinite(rounds) or not spot else draw(st.sampled_from(["", "poisson", "replayed"]))
    markets = None
    if market:
        priced = tuple(dataclasses.replace(v, spot_price_per_hour=0.4 * v.price_per_hour) for v in types)
        types = with_spot(priced, 20.0)  # a mean life of 3 min, as long as these jobs
        if market == "replayed":
            markets = RecordedMarkets.build(types, {z: _zone(z, draw(st.integers(0, 2**31))) for z in ("a", "b")})
    cluster = Cluster(types, slots, rules=ClusterRules(billing_quantum=draw(st.sampled_from([0.0, 60.0])),
                      restart_overhead=draw(st.sampled_from([0.0, 5.0])),
                      decision_interval=math.inf if math.isfinite(rounds) else
                      draw(st.sampled_from([math.inf, math.inf, 45.0])),
                      checkpoint_interval=draw(st.sampled_from([math.inf, 30.0])) if market else math.inf,
                      gang=gang, round_length=rounds, jobs_per_gpu=2 if draw(st.integers(0, 3)) == 0 else 1),
                      markets=markets)
    table = {}
    for spec in SPECS:
        for c in cluster.configs:
            if c.gpus == 1 or draw(st.integers(0, 5)) > 0:
                table[f"{spec.name}/{c.vm.name}/{c.gpus}"] = float(draw(st.integers(5, 300)))
    n = draw(st.integers(3, 15))
    submit = sorted(draw(st.lists(st.integers(0, 400), min_size=n, max_size=n)))
    jobs = []
    for i, t in enumerate(submit):
        spec = draw(st.sampled_from(SPECS))
        # a GPU count some one-VM configuration of the cluster runs (so that every policy can place the job)
        counts = sorted({c.gpus for c in cluster.configs if c.gpus <= c.vm.gpus
                         and any(s.accepts(c.vm.name) for s in slots)
                         and f"{spec.name}/{c.vm.name}/{c.gpus}" in table})
        if fixed and draw(st.integers(0, 3)) == 0:  # rented clusters leave the count to the policy, as before
            spec = dataclasses.replace(spec, gpus=1 if single_gpu else draw(st.sampled_from(counts)))
        jobs.append(Job(i, spec, float(t), float(t + draw(st.integers(10, 600))),
                        draw(st.sampled_from([0.003, 0.01, 0.015]))))
    truth = None
    if draw(st.booleans()):
        truth = TablePredictor({k: v * draw(st.sampled_from([0.5, 0.9, 1.3, 2.0])) for k, v in table.items()})
    pairs = None
    if cluster.rules.colocation:
        names = [spec.name for spec in SPECS]
        pairs = GivenPairs({f"{a}+{b}": [draw(st.sampled_from([1.0, 1.3, 1.7, 2.5])) for _ in range(2)]
                            for i, a in enumerate(names) for b in names[i:] if draw(st.integers(0, 4)) > 0},
                           memory={n: float(draw(st.integers(1, 9))) for n in names})
    return World(cluster, jobs, TablePredictor(table), truth, draw(st.integers(0, 1000)), pairs)


def _zone(name: str, seed: int) -> AvailabilitySeries:
    """A recorded market for a random world: available runs of 5 min and outages of 1.5 min on average, in 10-s
    ticks, long enough for any run of these worlds."""
    rng = np.random.default_rng(seed)
    bits: list[bool] = []
    up = bool(rng.integers(2))
    while len(bits) < 40_000:
        bits.extend([up] * (1 + int(rng.exponential(30.0 if up else 9.0))))
        up = not up
    return AvailabilitySeries.ticks(name, bits, 10.0)


class Recorder(Policy):
    """Passes every decision to ``policy`` unchanged and keeps each snapshot with the plan it got."""

    name = "recorder"
    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False

    def __init__(self, policy: Policy):
        self.policy = policy
        self.may_preempt = policy.may_preempt  # type: ignore[misc]
        self.may_share = policy.may_share  # type: ignore[misc]
        self.may_gang = policy.may_gang  # type: ignore[misc]
        self.may_colocate = policy.may_colocate  # type: ignore[misc]
        self.seen: list[tuple[Snapshot, Plan]] = []

    def describe(self) -> str:
        return self.policy.describe()

    def decide(self, snapshot: Snapshot) -> Plan:
        plan = self.policy.decide(snapshot)
        self.seen.append((snapshot, plan))
        return plan


def run(world: World, policy: Policy) -> RunResult:
    return Simulation(world.cluster, world.jobs, policy, world.estimator, world.truth,
                      interference=world.interference).run()


def recorded_run(world: World, policy: Policy) -> tuple[RunResult, list[tuple[Snapshot, Plan]]]:
    rec = Recorder(policy)
    return run(world, rec), rec.seen


def check_plan_names(snapshot: Snapshot, plan: Plan) -> None:
    """The plan names only jobs, nodes and VM types of the snapshot, each job at most once, each in the right list."""
    waiting = {jv.id for jv in snapshot.waiting}
    running = {jv.id for jv in snapshot.running}
    nodes = range(len(snapshot.nodes))
    types = {v.name for v in snapshot.vm_types}
    assert all(a.job_id in waiting for a in plan.start), ("start names a job that is not waiting", plan.start)
    assert all(a.job_id in running for a in plan.move), ("move names a job that is not running", plan.move)
    assert set(plan.preempt) <= running, ("preempt names a job that is not running", plan.preempt)
    named = [a.job_id for a in plan.start + plan.move] + list(plan.preempt)
    assert len(named) == len(set(named)), ("a job is named twice", plan)
    assert all(a.node in nodes and a.gpus >= 1 for a in plan.start + plan.move), ("unknown node or no GPU", plan)
    assert set(plan.vms) <= set(nodes) and set(plan.keep_idle) <= set(nodes), ("unknown node", plan)
    assert all(v is None or v in types for v in plan.vms.values()), ("unknown VM type", dict(plan.vms))


def check(world: World, r: RunResult) -> None:
    """The engine's invariants on one run: every job finishes exactly once, after it arrived; a node hosts one VM at a
    time, of a type its slot accepts; jobs run only while their VM is ready; no GPU is over-subscribed at any instant;
    a gang's parts start and stop together on one VM type and the runs of one job never overlap otherwise; a job that
    asks for a GPU count runs with it; fixed servers run from the first arrival to the end; no two regular decisions
    share an instant; and the money adds up."""
    cluster, jobs = world.cluster, world.jobs
    jt = r.jobs
    assert sorted(jt.job_id) == [j.id for j in jobs]
    assert jt.end_time.notna().all() and (jt.start_time >= jt.submit_time).all()
    assert (jt.end_time >= jt.start_time).all()
    seg = r.segments
    assert set(seg.job_id) == {j.id for j in jobs}
    done = seg.sort_values(["job_id", "end_time"]).groupby("job_id").done.last()
    assert (done == 1.0).all()
    runs = seg.groupby(["job_id", "start_time", "end_time"])
    assert (runs.vm_type.nunique() == 1).all(), "a gang spans one VM type"
    assert (runs.node.nunique() == runs.size()).all(), "a gang names each node once"
    assert (runs.done.nunique() == 1).all(), "a gang's parts end with the same progress"
    final = seg[seg.end_time == seg.groupby("job_id").end_time.transform("max")]
    assert (final.done == 1.0).all() and (final.groupby("job_id").start_time.nunique() == 1).all(), \
        "a job completes at the end of its last run (all of a gang's parts together)"
    by_job = runs.gpus.sum().reset_index().sort_values(["job_id", "start_time"])
    for jid, rows in by_job.groupby("job_id"):
        starts, ends = rows.start_time.to_numpy(), rows.end_time.to_numpy()
        assert (starts[1:] >= ends[:-1]).all(), f"job {jid} runs twice at once outside one gang"
        asked = next(j.spec.gpus for j in jobs if j.id == jid)
        if asked is not None:
            assert (rows.gpus == asked).all(), f"job {jid} asked for {asked} GPUs, ran on {list(rows.gpus)}"
    for n, slot in enumerate(cluster.slots):
        if slot.fixed:
            iv = r.nodes[r.nodes.node == n]
            assert len(iv) == 1 and iv.start_time.iloc[0] == min(j.submit_time for j in jobs), f"fixed node {n}"
            assert iv.stop_time.iloc[0] == jt.end_time.max(), f"fixed node {n} stops at the end"
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
        held = sg.gpus * sg.partner.isna().map({True: 1.0, False: 0.5})  # a pair holds its GPUs once
        events = sorted([(t, 1, g) for t, g in zip(sg.end_time, held)]
                        + [(t, 2, g) for t, g in zip(sg.start_time, held)])
        used = 0
        for t, kind, g in events:
            used += g if kind == 2 else -g
            cap = iv[(iv.start_time <= t) & (t <= iv.stop_time)].vm_type.map(gpus).max()
            assert used <= cap, f"node {n} uses {used} GPUs at t={t}"
    markets = cluster.markets
    if markets is not None:
        for row in r.nodes[r.nodes.spot].itertuples():
            assert markets.available(row.vm_type, row.start_time), f"a {row.vm_type} VM started with no zone free"
    _check_sharing(world, r)
    regular = r.decisions[r.decisions.trigger != "stall"]
    assert not regular.time.duplicated().any(), "two decisions at one instant: simultaneous triggers not folded"
    _check_money(cluster, r)


def _check_sharing(world: World, r: RunResult) -> None:
    """Co-location: only where the rules allow it; two jobs at most per GPU, each pair's segments naming each other
    over the same times, node and GPU count; and both jobs' memory within one GPU's."""
    seg = r.segments
    shared = seg[seg.partner.notna()]
    if shared.empty:
        return
    assert world.cluster.rules.jobs_per_gpu == 2 and world.interference is not None
    key = {(row.job_id, row.partner, row.node, row.gpus, row.start_time, row.end_time) for row in shared.itertuples()}
    for job_id, partner, node, gpus, start, end in key:
        assert (partner, job_id, node, gpus, start, end) in key, f"job {job_id} shares with {partner} alone"
    specs = {j.id: j.spec for j in world.jobs}
    memory = {v.name: v.gpu.memory_gb for v in world.cluster.vm_types}
    for row in shared.itertuples():
        vm = next(v for v in world.cluster.vm_types if v.name == row.vm_type)
        total = sum(world.interference.memory_gb(specs[j], vm, row.gpus) for j in (row.job_id, int(row.partner)))
        assert total <= memory[row.vm_type], f"jobs {row.job_id} and {row.partner} need {total} GiB on one GPU"


def _check_money(cluster: Cluster, r: RunResult) -> None:
    """VM cost = Σ billed seconds × price, billed per the cluster's rule; job shares + idle cost = VM cost; a job's
    tardiness cost is its weight × lateness, and the total is VM cost + tardiness cost."""
    nodes = r.nodes
    on = nodes.stop_time - nodes.start_time
    q = cluster.rules.billing_quantum
    for secs, length in zip(nodes.billed_seconds, on):
        assert secs >= length - 1e-6, f"billed {secs} s for {length} s on"
        if q > 0:
            assert secs < length + q + 1e-6 and math.isclose(secs / q, round(secs / q), abs_tol=1e-9), (secs, q)
        else:
            assert math.isclose(secs, length, rel_tol=1e-12, abs_tol=1e-9)
    for secs, price, cost in zip(nodes.billed_seconds, nodes.price_per_hour, nodes.cost):
        assert math.isclose(cost, secs * price / 3600.0, rel_tol=1e-12, abs_tol=1e-15)
    s = r.summary
    jt = r.jobs
    late = (jt.end_time - jt.deadline).clip(lower=0.0)
    assert ((jt.tardiness_cost - jt.weight * late).abs() <= 1e-9 * (1.0 + jt.tardiness_cost)).all()
    assert math.isclose(jt.tardiness_cost.sum(), s["tardiness_cost"], rel_tol=1e-9, abs_tol=1e-12)
    vm_cost = s["vm_cost"]
    assert math.isclose(float((nodes.billed_seconds * nodes.price_per_hour / 3600.0).sum()), vm_cost,
                        rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(r.jobs.cost_share.sum() + s["idle_cost"], vm_cost, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(s["total_cost"], vm_cost + s["tardiness_cost"], rel_tol=1e-12)


AT_SCALE = 1_000
"""Random worlds per policy in the slow profile (``pytest -m slow``; ``-rP`` shows the printed counts)."""


def features(world: World) -> set[str]:
    """What makes a world hard, for the coverage count of the slow profile."""
    c = world.cluster
    found = set()
    if any(v.boot_time > 0 for v in c.vm_types):
        found.add("boot time")
    if c.rules.billing_quantum > 0:
        found.add("billing quantum")
    if c.rules.restart_overhead > 0:
        found.add("restart overhead")
    if world.truth is not None:
        found.add("estimator != truth")
    if any(s.allowed is not None for s in c.slots):
        found.add("slot groups")
    if math.isfinite(c.rules.decision_interval):
        found.add("periodic decisions")
    if any(v.spot for v in c.vm_types):
        found.add("spot, replayed market" if c.markets is not None else "spot, Poisson")
    if c.rules.colocation:
        found.add("co-location")
    return found


def at_scale(prop: Callable[[World], None], label: str, examples: int = AT_SCALE, single_gpu: bool = False,
             spot: bool = True) -> int:
    """Check ``prop`` on ``examples`` fresh random worlds (no example database, no replay); print and return how
    many ran and how often each feature of ``features`` appeared, and fail if one appeared in under 10 %."""
    from collections import Counter

    from hypothesis import HealthCheck, Phase, given, settings

    seen: Counter[str] = Counter()
    count = [0]

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(world=worlds(single_gpu=single_gpu, spot=spot))
    def check_one(world: World) -> None:
        count[0] += 1
        seen.update(features(world))
        prop(world)

    check_one()
    shares = ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
    print(f"{label}: {count[0]} random worlds checked ({shares})")
    assert count[0] >= examples, f"only {count[0]} worlds were drawn"
    wanted = ("boot time", "billing quantum", "restart overhead", "estimator != truth", "slot groups")
    rare = [k for k in wanted + (("spot, Poisson", "spot, replayed market") if spot else ())
            if seen[k] < examples // 10]
    assert not rare, f"too few worlds with {rare}: {dict(seen)}"
    return count[0]
