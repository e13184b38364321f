"""What any run must satisfy, whatever the policy (``check_run``), what any plan may name (``check_plan_names``), a
policy wrapper that records every decision (``recorded_run``), and a few small worlds to run policies on
(``small_worlds``: rented and fixed clusters, boots, billing quanta, restart overheads, periodic decisions, rounds,
gangs, an estimator that differs from the truth)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from sim.catalogue import job_types, vm_types
from sim.cluster import Cluster, NodeSlot
from sim.contracts import Interference, Policy, Predictor
from sim.engine import RunResult, Simulation
from sim.model import INFEASIBLE, ClusterRules, Job, JobSpec, Plan, Snapshot, VMType
from sim.vocabulary.mig import maximal_layouts, mig_capable, parse_label

__all__ = ["World", "RuntimeTable", "small_worlds", "run", "recorded_run", "check_run", "check_plan_names"]


class RuntimeTable(Predictor):
    """Runtimes from a table ``{"JOB/VMTYPE/GPUS": seconds}`` (a job spec's ``name`` is its key), inf elsewhere."""

    name = "runtime_table"

    def __init__(self, table: Mapping[str, float]):
        self.table = table

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.table.get(f"{spec.name}/{vm.name}/{gpus}", INFEASIBLE))


@dataclasses.dataclass(frozen=True)
class World:
    """A cluster, its jobs, the estimator the policy is told, the truth (None: the estimator), the run's seed and,
    where two jobs may share a GPU (``ClusterRules.jobs_per_gpu``), the interference model (told and true alike)."""

    cluster: Cluster
    jobs: list[Job]
    estimator: Predictor
    truth: Predictor | None = None
    seed: int = 0
    interference: Interference | None = None


def _world(k: int, types: tuple[VMType, ...], slots: tuple[NodeSlot, ...], rules: ClusterRules, n_jobs: int,
           asks: bool, single_gpu: bool, noisy_truth: bool) -> World:
    """World ``k`` drawn from its own generator: runtimes of 5–300 s, jobs over 400 s with deadlines 10–600 s after
    submission; ``asks``: some jobs ask for a GPU count (1 with ``single_gpu``) a single VM of the cluster runs."""
    rng = np.random.default_rng(k)
    cluster = Cluster(types, slots, rules=rules)
    specs = tuple(job_types().values())
    table = {f"{s.name}/{c.vm.name}/{c.gpus}": float(rng.integers(5, 301)) for s in specs for c in cluster.configs
             if c.gpus == 1 or rng.integers(0, 6) > 0}
    jobs = []
    for i, t in enumerate(sorted(rng.integers(0, 401, size=n_jobs))):
        spec = specs[int(rng.integers(len(specs)))]
        counts = sorted({c.gpus for c in cluster.configs if c.gpus <= c.vm.gpus
                         and f"{spec.name}/{c.vm.name}/{c.gpus}" in table})
        if asks and rng.integers(0, 3) == 0:
            spec = dataclasses.replace(spec, gpus=1 if single_gpu else int(counts[int(rng.integers(len(counts)))]))
        jobs.append(Job(i, spec, float(t), float(t + rng.integers(10, 601)), float(rng.choice([0.003, 0.01, 0.015]))))
    truth = RuntimeTable({key: v * float(rng.choice([0.5, 0.9, 1.3, 2.0])) for key, v in table.items()})
    return World(cluster, jobs, RuntimeTable(table), truth if noisy_truth else None, seed=k)


def small_worlds(single_gpu: bool = False) -> list[World]:
    """Four small worlds every policy must run correctly: rented slots (one restricted) with a billing quantum and a
    restart overhead; rented VMs that boot, periodic decisions and a truth unlike the estimate; fixed servers with
    gangs and jobs asking for GPU counts; fixed servers in rounds. ``single_gpu``: jobs that ask for a count ask for
    one (for policies that schedule single-GPU jobs only)."""
    cat = vm_types()
    rented = (cat["NC6"], cat["NV12"], cat["NC12"])
    booting = tuple(dataclasses.replace(v, boot_time=7.0) for v in (cat["NV6"], cat["NC24"]))
    servers = (cat["NC12"], cat["NV12"])
    fixed = tuple(NodeSlot(frozenset({v.name}), fixed=True) for v in servers for _ in range(2))
    return [
        _world(1, rented, (NodeSlot(), NodeSlot(), NodeSlot(frozenset({"NV12"}))),
               ClusterRules(billing_quantum=60.0, restart_overhead=5.0), 10, False, single_gpu, False),
        _world(2, booting, (NodeSlot(), NodeSlot()), ClusterRules(decision_interval=45.0), 8, False, single_gpu, True),
        _world(3, servers, fixed, ClusterRules(gang=True), 10, True, single_gpu, False),
        _world(4, servers, fixed, ClusterRules(round_length=60.0), 8, True, single_gpu, True),
    ]


def run(world: World, policy: Policy) -> RunResult:
    """``policy`` run through the engine on ``world``."""
    return Simulation(world.cluster, world.jobs, policy, world.estimator, world.truth, seed=world.seed,
                      interference=world.interference).run()


class _Recorder(Policy):
    """Passes every decision to ``policy`` and keeps each snapshot with the plan it got (``recorded_run`` makes a
    subclass per policy class, carrying that class's capabilities)."""

    name = "recorder"
    policy: ClassVar[Policy]
    seen: ClassVar[list[tuple[Snapshot, Plan]]]

    def describe(self) -> str:
        return self.policy.describe()

    def decide(self, snapshot: Snapshot) -> Plan:
        plan = self.policy.decide(snapshot)
        self.seen.append((snapshot, plan))
        return plan


def recorded_run(world: World, policy: Policy) -> tuple[RunResult, list[tuple[Snapshot, Plan]]]:
    """``run`` with every snapshot ``policy`` saw and the plan it answered, in order."""
    cls = type(policy)
    seen: list[tuple[Snapshot, Plan]] = []
    rec = type("Recorded", (_Recorder,), {"may_preempt": cls.may_preempt, "may_share": cls.may_share,
                                          "may_gang": cls.may_gang, "may_colocate": cls.may_colocate,
                                          "prices_unplaceable": cls.prices_unplaceable,
                                          "policy": policy, "seen": seen})
    return run(world, rec()), seen


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


def check_run(world: World, r: RunResult) -> None:
    """The engine's invariants on one run: every job finishes exactly once, after it arrived; a node hosts one VM at a
    time, of a type its slot accepts; jobs run only while their VM is ready; no GPU is over-subscribed at any instant;
    a gang's parts start and stop together on one VM type and the runs of one job never overlap otherwise; a job that
    asks for a GPU count runs with it; fixed servers run from the first arrival to the end; no two regular decisions
    share an instant; the money adds up; and a GPU holds two jobs at most, only where the rules let it
    (``_check_sharing``)."""
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
    for n, slot in enumerate(cluster.slots):
        iv = r.nodes[r.nodes.node == n].sort_values("start_time")
        assert (iv.start_time.to_numpy()[1:] >= iv.stop_time.to_numpy()[:-1]).all(), "two VMs on one node"
        assert all(slot.accepts(v) for v in iv.vm_type)
    for node, sg in seg.groupby("node"):
        iv = r.nodes[r.nodes.node == node]
        for row in sg.itertuples():
            host = iv[(iv.ready_time <= row.start_time) & (row.end_time <= iv.stop_time) & (iv.vm_type == row.vm_type)]
            assert len(host) >= 1, f"segment {row} outside any ready VM interval on node {node}"
        held = sg.gpus * sg.partner.isna().map({True: 1.0, False: 0.5})  # a pair holds its GPUs once
        if "slice" in sg.columns:  # a MIG slice holds its compute share of one GPU
            held = held.where(sg.slice.isna(), sg.slice.map(lambda x: x and int(x.split("/")[1][0]) / 7))
        events = sorted([(float(t), 1, float(g)) for t, g in zip(sg.end_time, held)]
                        + [(float(t), 2, float(g)) for t, g in zip(sg.start_time, held)])
        used = 0.0
        for t, kind, g in events:
            used += g if kind == 2 else -g
            cap = iv[(iv.start_time <= t) & (t <= iv.stop_time)].vm_type.map(gpus).max()
            assert used <= cap + 1e-9, f"node {node} uses {used} GPUs at t={t}"
    markets = cluster.markets
    if markets is not None:  # its series start with the run, at the first arrival
        spot, t0 = r.nodes[r.nodes.spot], min(j.submit_time for j in jobs)
        for vm, start in zip(spot.vm_type, spot.start_time):
            assert markets.available(str(vm), float(start) - t0), f"a {vm} VM started with no zone free"
    _check_sharing(world, r)
    _check_slices(world, r)
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
    types = {v.name: v for v in world.cluster.vm_types}
    model = world.interference
    for job_id, partner, vm_type, gpus in zip(shared.job_id, shared.partner, shared.vm_type, shared.gpus):
        vm = types[str(vm_type)]
        total = sum(model.memory_gb(specs[int(j)], vm, int(gpus)) for j in (job_id, partner))
        assert not total > vm.gpu.memory_gb, f"jobs {job_id} and {partner} need {total} GiB on one GPU"


def _check_slices(world: World, r: RunResult) -> None:
    """MIG: slices only where the rules allow them, on A100 or H100 GPUs, one GPU each; and at every instant the slices
    running on one GPU are part of one of NVIDIA's maximal layouts (the shipped enumeration)."""
    seg = r.segments
    if "slice" not in seg.columns or seg.slice.isna().all():
        return
    assert world.cluster.rules.mig
    maximal = [set(lay) for lay in maximal_layouts()]
    types = {v.name: v for v in world.cluster.vm_types}
    cut = seg[seg.slice.notna()]
    assert (cut.gpus == 1).all() and cut.partner.isna().all()
    rows = []
    for node, vm_type, label, begin, end in zip(cut.node, cut.vm_type, cut.slice, cut.start_time, cut.end_time):
        gpu = types[str(vm_type)].gpu
        assert mig_capable(gpu), f"a slice on {gpu.name}"
        sl = parse_label(str(label), gpu)
        rows.append((int(node), sl.device, float(begin), float(end), (sl.profile, sl.start)))
    for key in {(n, d) for n, d, *_ in rows}:
        mine = [(s, e, p) for n, d, s, e, p in rows if (n, d) == key and e > s]
        for s, _, _ in mine:
            live = [p for a, b, p in mine if a <= s < b]
            assert len(live) == len(set(live)), f"two jobs on one slice of GPU {key} at t={s}"
            assert any(set(live) <= m for m in maximal), f"slices {live} of GPU {key} at t={s} are no valid layout"


def _check_money(cluster: Cluster, r: RunResult) -> None:
    """VM cost = Σ billed seconds × price, billed per the cluster's rule (an owned server: its time on at its rate);
    job shares + idle cost = VM cost; a job's tardiness cost is its weight × lateness (NaN for a job whose workload gave
    no deadline), and the total is VM cost + tardiness cost of the jobs with a deadline."""
    nodes = r.nodes
    on = nodes.stop_time - nodes.start_time
    q = cluster.rules.billing_quantum
    owned = cluster.rules.owned_price_per_hour
    for name, secs, length, price in zip(nodes.vm_type, nodes.billed_seconds, on, nodes.price_per_hour):
        assert secs >= length - 1e-6, f"billed {secs} s for {length} s on"
        if name in owned:  # an owned server: its time on, exactly, at its amortised rate
            assert secs == length and price == owned[name], (name, secs, length, price)
        elif q > 0:
            assert secs < length + q + 1e-6 and math.isclose(secs / q, round(secs / q), abs_tol=1e-9), (secs, q)
        else:
            assert math.isclose(secs, length, rel_tol=1e-12, abs_tol=1e-9)
    for secs, price, cost in zip(nodes.billed_seconds, nodes.price_per_hour, nodes.cost):
        assert math.isclose(cost, secs * price / 3600.0, rel_tol=1e-12, abs_tol=1e-15)
    s = r.summary
    given = r.jobs.deadline.notna()  # a job whose workload gave no deadline has none: NaN lateness and tardiness
    free = r.jobs[~given]
    assert free.lateness.isna().all() and free.tardiness_cost.isna().all(), "a job without a deadline was charged"
    jt = r.jobs[given]
    late = (jt.end_time - jt.deadline).clip(lower=0.0)
    assert ((jt.tardiness_cost - jt.weight * late).abs() <= 1e-9 * (1.0 + jt.tardiness_cost)).all()
    tardiness = 0.0
    if len(jt) or not len(r.jobs):
        assert math.isclose(jt.tardiness_cost.sum(), s["tardiness_cost"], rel_tol=1e-9, abs_tol=1e-12)
        tardiness = s["tardiness_cost"]
    else:  # no job has a deadline: the deadline metrics do not apply, and the objective is the VM cost
        assert math.isnan(s["tardiness_cost"]), s["tardiness_cost"]
    vm_cost = s["vm_cost"]
    assert math.isclose(float((nodes.billed_seconds * nodes.price_per_hour / 3600.0).sum()), vm_cost,
                        rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(r.jobs.cost_share.sum() + s["idle_cost"], vm_cost, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(s["total_cost"], vm_cost + tardiness, rel_tol=1e-12)
