"""The SimPy discrete-event engine: jobs arrive, a policy decides, VMs bill, jobs run on their true runtimes.

Decision points are arrivals, completions, VM boots finishing (when jobs are queued or were assigned to the booting
VM) and, optionally, every H seconds. Triggers falling at one instant are folded into one decision taken after every
other event of that instant. The engine keeps the policy's view (node and job views, empty and idle nodes) up to
date incrementally, so a snapshot costs O(nodes + jobs in the system), never O(all jobs x configurations).

Money: a VM bills from its start to its stop (per second, or rounded up per interval to the billing quantum); each
interval's cost is split among the jobs that ran on it by GPU-seconds, and an interval that ran no job is idle cost.
"""

from __future__ import annotations

import gc
import math
from bisect import bisect_left, insort
from dataclasses import dataclass, field
from heapq import heappush
from itertools import chain
from time import perf_counter
from typing import Any, Sequence

import numpy as np
import pandas as pd
import simpy
from simpy.events import Event

from sim.contracts import Policy
from sim.contracts import Predictor
from sim.cluster import Cluster, NodeSlot
from sim.metrics import RunTables, summarise
from sim.model import CapsimError, Job, JobView, NodeView, Plan, Snapshot, VMType

__all__ = ["Simulation", "RunResult", "Cluster", "NodeSlot", "JOB_COLUMNS", "NODE_COLUMNS", "DECISION_COLUMNS",
           "SEGMENT_COLUMNS"]

_DECIDE_PRIORITY = 2  # after every URGENT (0) and NORMAL (1) event of the same instant
_NORMAL = 1
_YOUNG_LIMIT = 50_000  # container objects allocated since the last young collection (cyclic garbage of policies)
_TRIGGERS = ("arrival", "completion", "ready", "periodic", "stall")
_ARRIVAL, _COMPLETION, _READY, _PERIODIC, _STALL = (1 << i for i in range(len(_TRIGGERS)))
_TRIGGER_NAMES = tuple(
    "+".join(t for i, t in enumerate(_TRIGGERS) if m & (1 << i)) for m in range(1 << len(_TRIGGERS))
)

JOB_COLUMNS: dict[str, str] = {
    "job_id": "int64", "name": "object", "application": "object", "framework": "object", "iterations": "int64",
    "batch_size": "int64", "submit_time": "float64", "start_time": "float64", "end_time": "float64",
    "deadline": "float64", "weight": "float64", "vm_type": "object", "gpus": "int64", "node": "int64",
    "runs": "int64", "wait_time": "float64", "jct": "float64", "lateness": "float64", "tardiness_cost": "float64",
    "cost_share": "float64", "est_runtime": "float64", "true_runtime": "float64",
}
NODE_COLUMNS: dict[str, str] = {
    "node": "int64", "vm_type": "object", "gpus": "int64", "price_per_hour": "float64", "start_time": "float64",
    "ready_time": "float64", "stop_time": "float64", "billed_seconds": "float64", "cost": "float64",
    "busy_gpu_seconds": "float64", "jobs": "int64",
}
SEGMENT_COLUMNS: dict[str, str] = {
    "job_id": "int64", "node": "int64", "vm_type": "object", "gpus": "int64", "start_time": "float64",
    "end_time": "float64", "done": "float64",
}
DECISION_COLUMNS: dict[str, str] = {
    "decision": "int64", "time": "float64", "trigger": "object", "policy": "object", "status": "object",
    "solver": "object", "objective": "float64", "gap": "float64", "variables": "Int64", "constraints": "Int64",
    "fallback": "object", "reason": "object", "waiting": "int64", "running": "int64", "started": "int64",
    "preempted": "int64", "moved": "int64", "wall_time": "float64",
}


@dataclass
class RunResult:
    """The records of one run: one row per job, per node interval and per decision, plus the summary metrics."""

    jobs: pd.DataFrame
    nodes: pd.DataFrame
    decisions: pd.DataFrame
    summary: dict[str, float]
    segments: pd.DataFrame = field(default_factory=lambda: _frame([], SEGMENT_COLUMNS))
    """One row per run segment of a job on a node (a job preempted or moved has several)."""


class _Env(simpy.Environment):
    """A SimPy environment that schedules plain callback events at absolute times (no float drift from delays)."""

    def at(self, time: float, priority: int, fn: Any, value: Any = None) -> Event:
        ev = Event.__new__(Event)
        ev.env = self
        ev.callbacks = [fn]
        ev._value = value
        ev._ok = True
        heappush(self._queue, (time, priority, next(self._eid), ev))
        return ev


class _JobState:
    """Mutable engine-side state of one job (never shown to a policy)."""

    __slots__ = ("job", "est", "true", "done", "node", "cfg", "gpus", "since", "overhead", "event", "runs", "ran",
                 "first_start", "end", "cost_share")

    def __init__(self, job: Job, est: np.ndarray, true: np.ndarray):
        self.job = job
        self.est = est
        self.true = true
        self.done = 0.0
        self.node = -1
        self.cfg = -1
        self.gpus = 0
        self.since = math.nan
        self.overhead = 0.0
        self.event: Event | None = None
        self.runs = 0
        self.ran = False
        self.first_start = math.nan
        self.end = math.nan
        self.cost_share = 0.0


class _Interval:
    """One VM on one node from start to stop, with the GPU-seconds each job ran on it."""

    __slots__ = ("vm", "start", "ready", "gpu_secs", "booting")

    def __init__(self, vm: VMType, start: float):
        self.vm = vm
        self.start = start
        self.ready = start + vm.boot_time
        self.gpu_secs: dict[int, float] = {}
        self.booting = vm.boot_time > 0


class _Node:
    __slots__ = ("index", "slot", "vm", "ready_at", "used", "jobs", "interval")

    def __init__(self, index: int, slot: NodeSlot):
        self.index = index
        self.slot = slot
        self.vm: VMType | None = None
        self.ready_at = 0.0
        self.used = 0
        self.jobs: dict[int, _JobState] = {}
        self.interval: _Interval | None = None


def _index(x: Any) -> int | None:
    if x.__class__ is int:
        return x
    if isinstance(x, (bool, float, str)) or x is None:
        return None
    try:
        return int(x.__index__())
    except (AttributeError, TypeError):
        return None


class Simulation:
    """One run of ``policy`` on ``cluster`` over ``jobs``; the estimator informs the policy, the truth runs the jobs.

    ``truth=None`` uses the estimator as the truth.
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policy: Policy, estimator: Predictor,
                 truth: Predictor | None = None):
        self.cluster = cluster
        self.policy = policy
        self.estimator = estimator
        self.truth = truth if truth is not None else estimator
        self.jobs = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        self._configs = cluster.configs
        self._cfg_index = {(c.vm.name, c.gpus): k for k, c in enumerate(self._configs)}
        self._vm_by_name = {v.name: v for v in cluster.vm_types}
        self._label = policy.describe()
        ids = set()
        for j in self.jobs:
            if j.id in ids:
                raise CapsimError(f"simulation: job id {j.id} appears twice; give every job a distinct id")
            ids.add(j.id)
            if not (math.isfinite(j.submit_time) and math.isfinite(j.deadline) and j.weight >= 0):
                raise CapsimError(
                    f"simulation: job {j.id} needs a finite submit_time and deadline and a weight >= 0, got "
                    f"submit {j.submit_time}, deadline {j.deadline}, weight {j.weight}"
                )
        self._est = self._cache(self.estimator)
        self._true = self._est if self.truth is self.estimator else self._cache(self.truth)
        for spec, row in self._est.items():
            if not np.isfinite(row).any():
                raise CapsimError(
                    f"job spec {spec.name or spec.app_key!r} ({spec.application}, {spec.framework}, "
                    f"{spec.iterations} iterations, batch {spec.batch_size}) has no feasible configuration under the "
                    f"estimator {type(self.estimator).__name__}; remove it or add VM types it can run on"
                )

    def _cache(self, predictor: Predictor) -> dict[Any, np.ndarray]:
        """One read-only runtime row per distinct job spec, shared by every job of that spec."""
        specs = list(dict.fromkeys(j.spec for j in self.jobs))
        if not specs:
            return {}
        table = np.array(predictor.runtimes(specs, self._configs), dtype=float)
        if table.shape != (len(specs), len(self._configs)):
            raise CapsimError(
                f"predictor {type(predictor).__name__}: runtimes() returned shape {table.shape}, expected "
                f"{(len(specs), len(self._configs))}"
            )
        out = {}
        for spec, row in zip(specs, table):
            row = row.copy()
            row.setflags(write=False)
            out[spec] = row
        return out

    # ------------------------------------------------------------------ run

    def run(self) -> RunResult:
        """Simulate until every job has completed and return the records."""
        gc_was_on = gc.isenabled()
        gc.disable()  # full collections would walk every record kept so far; _on_decide collects young ones
        try:
            self._reset()
            env = self._env
            if self._states:
                first = self._states[0]
                env.at(first.job.submit_time, _NORMAL, self._on_arrival, first)
                h = self.cluster.decision_interval
                if math.isfinite(h):
                    env.at(first.job.submit_time + h, _NORMAL, self._on_periodic, first.job.submit_time + h)
            env.run()
            if self._completed != len(self._states):
                raise CapsimError(
                    f"policy {self._label!r} left {len(self._states) - self._completed} jobs unfinished when the "
                    f"simulation ran out of events"
                )
            for node in self._nodes:
                if node.vm is not None:
                    self._stop_vm(node)
            return self._result()
        finally:
            if gc_was_on:
                gc.enable()

    def _reset(self) -> None:
        self._env = env = _Env(initial_time=self.jobs[0].submit_time if self.jobs else 0.0)
        self._events = 0
        self._nodes = [_Node(i, s) for i, s in enumerate(self.cluster.slots)]
        self._node_views = [NodeView(i, s.allowed) for i, s in enumerate(self.cluster.slots)]
        self._dirty: set[int] = set()
        self._nt = tuple(self._node_views)
        self._wt: tuple[JobView, ...] | None = None
        self._rt: tuple[JobView, ...] | None = None
        self._empty = list(range(len(self._nodes)))
        self._empty_tuple: tuple[int, ...] = tuple(self._empty)
        self._empty_dirty = False
        self._idle: set[int] = set()
        self._idle_tuple: tuple[int, ...] | None = ()
        self._states = [_JobState(j, self._est[j.spec], self._true[j.spec]) for j in self.jobs]
        self._by_id = {s.job.id: s for s in self._states}
        self._next_arrival = 0
        self._waiting: dict[int, JobView] = {}
        self._running: dict[int, JobView] = {}
        self._completed = 0
        self._booting = 0
        self._pending = 0
        self._node_rows: list[tuple] = []
        self._segment_rows: list[tuple] = []
        self._decision_rows: list[tuple] = []
        self._n_decisions = 0
        self._walls: list[float] = []
        self._fallbacks = 0
        self._idle_ticks = 0
        self._idle_cost = 0.0
        self._busy = 0.0

    # ------------------------------------------------------------------ events

    def _trigger(self, bit: int) -> None:
        if not self._pending:
            self._env.at(self._env._now, _DECIDE_PRIORITY, self._on_decide)
        self._pending |= bit

    def _on_arrival(self, ev: Event) -> None:
        self._events += 1
        st: _JobState = ev._value
        self._waiting[st.job.id] = JobView(st.job, st.est)
        self._wt = None
        self._next_arrival += 1
        if self._next_arrival < len(self._states):
            nxt = self._states[self._next_arrival]
            self._env.at(nxt.job.submit_time, _NORMAL, self._on_arrival, nxt)
        self._trigger(_ARRIVAL)

    def _on_complete(self, ev: Event) -> None:
        self._events += 1
        st: _JobState = ev._value
        if st.event is not ev:
            return
        now = self._env._now
        node = self._nodes[st.node]
        st.done = 1.0
        self._end_segment(st, node, now)
        st.end = now
        st.event = None
        del self._running[st.job.id]
        self._rt = None
        self._completed += 1
        self._trigger(_COMPLETION)

    def _on_ready(self, ev: Event) -> None:
        self._events += 1
        node, interval = ev._value
        if interval.booting:
            interval.booting = False
            self._booting -= 1
            if self._waiting or node.jobs:
                self._trigger(_READY)

    def _on_periodic(self, ev: Event) -> None:
        self._events += 1
        if self._completed == len(self._states):
            if self._pending:
                self._pending |= _PERIODIC
            return
        self._trigger(_PERIODIC)
        nxt = ev._value + self.cluster.decision_interval
        self._env.at(nxt, _NORMAL, self._on_periodic, nxt)

    def _on_decide(self, ev: Event) -> None:
        self._events += 1
        mask, self._pending = self._pending, 0
        if gc.get_count()[0] > _YOUNG_LIMIT:
            gc.collect(1)
        self._decide(_TRIGGER_NAMES[mask])
        if (self._waiting and not self._running and not self._pending and not self._booting
                and self._next_arrival >= len(self._states)):
            if math.isfinite(self.cluster.decision_interval):
                # Periodic ticks are always pending: a policy may wait one tick, not two with nothing changing.
                self._idle_ticks += bool(mask & _PERIODIC)
                if self._idle_ticks < 2:
                    return
            self._decide("stall")
            if not self._running:
                raise CapsimError(
                    f"policy {self._label!r} left {len(self._waiting)} jobs waiting forever: nothing runs, no event "
                    f"is pending, and its plan on a 'stall' decision at t={self._env._now:g} started none"
                )

    # ------------------------------------------------------------------ decisions

    def _snapshot(self, trigger: str) -> Snapshot:
        if self._dirty:
            views = self._node_views
            for n in self._dirty:
                node = self._nodes[n]
                views[n] = NodeView(n, node.slot.allowed, node.vm, node.ready_at, node.used)
            self._dirty.clear()
            self._nt = tuple(views)
        if self._wt is None:
            self._wt = tuple(self._waiting.values())
        if self._rt is None:
            self._rt = tuple(self._running.values())
        if self._empty_dirty:
            self._empty_tuple = tuple(self._empty)
            self._empty_dirty = False
        if self._idle_tuple is None:
            self._idle_tuple = tuple(sorted(self._idle))
        c = self.cluster
        return Snapshot(self._env._now, trigger, self._configs, c.vm_types, self._nt, self._wt, self._rt,
                        self._empty_tuple, c.restart_overhead, c.billing_quantum, self._idle_tuple)

    def _decide(self, trigger: str) -> None:
        snap = self._snapshot(trigger)
        t0 = perf_counter()
        plan = self.policy.decide(snap)
        wall = perf_counter() - t0
        if not isinstance(plan, Plan):
            self._reject(f"decide() returned {type(plan).__name__}, not a sim.model.Plan")
        if plan.start or plan.vms or plan.move or plan.preempt or plan.keep_idle:
            self._validate(plan)
            self._apply(plan)
        elif self._idle:
            self._stop_idle(())
        self._n_decisions += 1
        self._walls.append(wall)
        info = plan.info
        if info.fallback:
            self._fallbacks += 1
        if True:
            self._decision_rows.append((
                self._n_decisions - 1, snap.time, trigger, self._label, info.status, info.solver,
                info.objective, info.gap, info.variables, info.constraints, info.fallback, info.reason,
                len(snap.waiting), len(snap.running), len(plan.start), len(plan.preempt), len(plan.move), wall,
            ))

    def _reject(self, rule: str) -> None:
        raise CapsimError(f"policy {self._label!r}: plan rejected at t={self._env._now:g}: {rule}")

    def _validate(self, plan: Plan) -> None:
        """Check every rule before anything changes; a broken rule raises a CapsimError naming the policy."""
        nodes = self._nodes
        n_nodes = len(nodes)
        changes: dict[int, VMType | None] = {}
        for key, name in plan.vms.items():
            n = key if key.__class__ is int else _index(key)
            if n is None or not 0 <= n < n_nodes:
                self._reject(f"vms names node {key!r}, but the cluster has nodes 0..{n_nodes - 1}")
            node = nodes[n]
            if name is None:
                new = None
            else:
                new = self._vm_by_name.get(name)
                if new is None:
                    self._reject(f"vms puts unknown VM type {name!r} on node {n}; the cluster has "
                                 f"{list(self._vm_by_name)}")
                allowed = node.slot.allowed
                if allowed is not None and name not in allowed:
                    self._reject(f"vms puts VM type {name!r} on node {n}, which only allows {sorted(allowed)}")
            cur = node.vm
            if cur is not new and (cur is None or new is None or cur.name != new.name):
                changes[n] = new
        for key in plan.keep_idle:
            n = key if key.__class__ is int else _index(key)
            if n is None or not 0 <= n < n_nodes:
                self._reject(f"keep_idle names node {key!r}, but the cluster has nodes 0..{n_nodes - 1}")
        seen: set[int] = set()
        leaving: dict[int, int] = {}
        if plan.preempt or plan.move:
            if not self.policy.may_preempt:
                self._reject("it preempts or moves running jobs but does not declare may_preempt")
            for jid in chain(plan.preempt, (a.job_id for a in plan.move)):
                if jid not in self._running:
                    self._reject(f"preempt/move names job {jid!r}, which is not running")
                if jid in seen:
                    self._reject(f"job {jid} appears in two assignments")
                seen.add(jid)
                st = self._by_id[jid]
                leaving[st.node] = leaving.get(st.node, 0) + 1
        for n in changes:
            for jid in nodes[n].jobs:
                if jid not in seen:
                    what = f"stops the VM of node {n}" if changes[n] is None else \
                        f"changes the VM of node {n} to {changes[n].name}"
                    self._reject(f"it {what} while job {jid} runs there without being moved or preempted")
        for a in plan.start:
            jid = a.job_id
            if jid not in self._waiting:
                state = "unknown" if jid not in self._by_id else "not waiting"
                self._reject(f"start names job {jid!r}, which is {state}")
            if jid in seen:
                self._reject(f"job {jid} appears in two assignments")
            seen.add(jid)
        if not plan.start and not plan.move:
            return
        load: dict[int, list] = {}
        for a in (plan.move + plan.start if plan.move else plan.start):
            n = a.node if a.node.__class__ is int else _index(a.node)
            if n is None or not 0 <= n < n_nodes:
                self._reject(f"job {a.job_id} is assigned to node {a.node!r}, but the cluster has nodes "
                             f"0..{n_nodes - 1}")
            vm = changes[n] if n in changes else nodes[n].vm
            if vm is None:
                self._reject(f"job {a.job_id} is started on node {n}, which has no VM after the plan")
            g = a.gpus if a.gpus.__class__ is int else _index(a.gpus)
            if g is None or not 1 <= g <= vm.gpus:
                self._reject(f"job {a.job_id} asks for {a.gpus!r} GPUs on node {n}, whose {vm.name} has {vm.gpus}")
            k = self._cfg_index[(vm.name, g)]
            st = self._by_id[a.job_id]
            if not math.isfinite(st.est[k]):
                self._reject(f"job {a.job_id} is put on {vm.name}x{g}, a configuration the estimator marks "
                             f"infeasible")
            if not math.isfinite(st.true[k]):
                raise CapsimError(
                    f"job {a.job_id} ({st.job.spec.name or st.job.spec.app_key}) was put on {vm.name}x{g}: the "
                    f"estimator supports it but the truth predictor {type(self.truth).__name__} has no runtime; "
                    f"use a truth predictor that covers every configuration the estimator does"
                )
            slot = load.get(n)
            if slot is None:
                node = nodes[n]
                if n in changes:
                    base_g, base_c = 0, 0
                else:
                    gone = [s for j, s in node.jobs.items() if j in seen] if n in leaving else ()
                    base_g = node.used - sum(s.gpus for s in gone)
                    base_c = len(node.jobs) - len(gone)
                load[n] = slot = [base_g, base_c, vm]
            slot[0] += g
            slot[1] += 1
        for n, (used, count, vm) in load.items():
            if used > vm.gpus:
                self._reject(f"node {n} would use {used} GPUs, more than its {vm.name} has ({vm.gpus})")
            if count > 1 and not self.policy.may_share:
                self._reject(f"node {n} would host {count} jobs, but the policy does not declare may_share")

    def _apply(self, plan: Plan) -> None:
        nodes = self._nodes
        now = self._env._now
        for jid in plan.preempt:
            st = self._by_id[jid]
            self._detach(st, now)
            self._waiting[jid] = JobView(st.job, st.est, st.done)
            self._wt = None
        for a in plan.move:
            self._detach(self._by_id[a.job_id], now)
        for key, name in plan.vms.items():
            node = nodes[_index(key)]
            cur = node.vm
            if name is None:
                if cur is not None:
                    self._stop_vm(node)
            elif cur is None or cur.name != name:
                if cur is not None:
                    self._stop_vm(node)
                self._start_vm(node, self._vm_by_name[name], now)
        for a in plan.move:
            self._place(self._by_id[a.job_id], _index(a.node), _index(a.gpus), now)
        waiting = self._waiting
        for a in plan.start:
            del waiting[a.job_id]
            self._wt = None
            self._place(self._by_id[a.job_id], _index(a.node), _index(a.gpus), now)
        if self._idle:
            self._stop_idle(plan.keep_idle)

    def _stop_idle(self, keep: frozenset[int] | tuple[()]) -> None:
        """Stop every VM that hosts no job, except on the nodes in ``keep``."""
        nodes = self._nodes
        for n in sorted(self._idle):
            if n not in keep:
                self._stop_vm(nodes[n])

    # ------------------------------------------------------------------ mutations

    def _place(self, st: _JobState, n: int, g: int, now: float) -> None:
        node = self._nodes[n]
        vm = node.vm
        k = self._cfg_index[(vm.name, g)]
        since = node.ready_at if node.ready_at > now else now
        overhead = self.cluster.restart_overhead if st.ran else 0.0
        need = (1.0 - st.done) * st.true[k] + overhead
        st.node, st.cfg, st.gpus, st.since, st.overhead = n, k, g, since, overhead
        st.runs += 1
        self._idle_ticks = 0
        if st.runs == 1 or st.first_start != st.first_start:
            st.first_start = since
        st.event = self._env.at(since + need, _NORMAL, self._on_complete, st)
        node.jobs[st.job.id] = st
        node.used += g
        if n in self._idle:
            self._idle.discard(n)
            self._idle_tuple = None
        self._dirty.add(n)
        self._running[st.job.id] = JobView(st.job, st.est, st.done, n, k, since)
        self._rt = None

    def _end_segment(self, st: _JobState, node: _Node, now: float) -> None:
        """Account the job's current run segment up to ``now`` and take it off its node."""
        elapsed = now - st.since
        if elapsed >= 0:
            st.ran = True
            self._segment_rows.append((st.job.id, node.index, node.vm.name, st.gpus, st.since, now, st.done))
            if elapsed > 0:
                gs = st.gpus * elapsed
                self._busy += gs
                secs = node.interval.gpu_secs
                secs[st.job.id] = secs.get(st.job.id, 0.0) + gs
        else:
            st.runs -= 1
            if st.runs == 0:
                st.first_start = math.nan
        del node.jobs[st.job.id]
        node.used -= st.gpus
        if not node.jobs:
            self._idle_tuple = None
            self._idle.add(node.index)
        self._dirty.add(node.index)

    def _detach(self, st: _JobState, now: float) -> None:
        node = self._nodes[st.node]
        elapsed = now - st.since
        if elapsed > 0:
            work = max(0.0, elapsed - st.overhead) / st.true[st.cfg]
            st.done = min(1.0, st.done + work)
        self._end_segment(st, node, now)
        st.event = None
        del self._running[st.job.id]
        self._rt = None

    def _start_vm(self, node: _Node, vm: VMType, now: float) -> None:
        node.vm = vm
        node.interval = iv = _Interval(vm, now)
        node.ready_at = iv.ready
        i = bisect_left(self._empty, node.index)
        del self._empty[i]
        self._empty_dirty = True
        self._idle_tuple = None
        self._idle.add(node.index)
        self._dirty.add(node.index)
        if vm.boot_time > 0:
            self._booting += 1
            self._env.at(iv.ready, _NORMAL, self._on_ready, (node, iv))

    def _stop_vm(self, node: _Node) -> None:
        now = self._env._now
        iv = node.interval
        if iv.booting:
            iv.booting = False
            self._booting -= 1
        vm = iv.vm
        on = now - iv.start
        billed = self.cluster.billed_seconds(on)
        cost = billed * vm.price_per_hour / 3600.0
        total = sum(iv.gpu_secs.values())
        if total > 0:
            by_id = self._by_id
            for jid, gs in iv.gpu_secs.items():
                by_id[jid].cost_share += cost * (gs / total)
        else:
            self._idle_cost += cost
        self._node_rows.append((node.index, vm.name, vm.gpus, vm.price_per_hour, iv.start, min(iv.ready, now), now,
                                billed, cost, total, len(iv.gpu_secs)))
        node.vm = None
        node.interval = None
        node.ready_at = 0.0
        insort(self._empty, node.index)
        self._empty_dirty = True
        if node.index in self._idle:
            self._idle.discard(node.index)
            self._idle_tuple = None
        self._dirty.add(node.index)

    # ------------------------------------------------------------------ records

    def _result(self) -> RunResult:
        configs = self._configs
        rows = []
        for st in self._states:
            j, s = st.job, st.job.spec
            c = configs[st.cfg]
            jct = st.end - j.submit_time
            late = max(0.0, st.end - j.deadline)
            rows.append((j.id, s.name, s.application, s.framework, s.iterations, s.batch_size, j.submit_time,
                         st.first_start, st.end, j.deadline, j.weight, c.vm.name, c.gpus, st.node, st.runs,
                         st.first_start - j.submit_time, jct, late, j.weight * late, st.cost_share,
                         float(st.est[st.cfg]), float(st.true[st.cfg])))
        jobs = _frame(rows, JOB_COLUMNS)
        nodes = _frame(self._node_rows, NODE_COLUMNS)
        decisions = _frame(self._decision_rows, DECISION_COLUMNS)
        segments = _frame(self._segment_rows, SEGMENT_COLUMNS)
        return RunResult(jobs, nodes, decisions, summarise(RunTables(jobs, nodes, decisions, segments)), segments)

    @property
    def events(self) -> int:
        """SimPy events processed by the last ``run`` (arrivals, completions, boots, ticks and decisions)."""
        return self._events


def _frame(rows: list[tuple], columns: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with a fixed column order and dtypes, so Parquet output is identical across runs."""
    names = list(columns)
    if not rows:
        return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()})
    data = {}
    for k, c in enumerate(names):
        vals = [r[k] for r in rows]
        t = columns[c]
        if t == "object":
            data[c] = pd.Series(vals, dtype=object)
        elif t == "Int64":
            data[c] = pd.Series(vals, dtype="Int64")
        else:
            data[c] = pd.Series(np.array(vals, dtype=t))
    return pd.DataFrame(data, columns=names)
