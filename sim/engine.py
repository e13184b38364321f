"""The discrete-event engine: jobs arrive, a policy decides, VMs bill, jobs run on their true runtimes.

Decision points are arrivals, completions, VM boots finishing (when jobs are queued or were assigned to the booting
VM) and, optionally, every H seconds. Triggers falling at one instant are folded into one decision taken after every
other event of that instant. The engine checks each plan against the rules of ``sim.rules`` before applying it, and
keeps the policy's view up to date incrementally (``sim.state.World``). In round mode
(``ClusterRules.round_length``) the decision points are round boundaries instead (``sim.rounds``).

Fixed servers (``NodeSlot.fixed``) run from the start of the run to its end. A gang (a job on several nodes) starts
and stops on all of them at once; each of its parts is a run segment on its node.

Money: a VM bills from its start to its stop (by its type's billing rule, or the cluster's billing quantum); each
interval's cost is split among the jobs that ran on it by GPU-seconds, and an interval that ran no job is idle cost.

Spot VMs (``VMType.spot``): each one started draws its lifetime from an exponential distribution of mean 1 /
``revocation_rate`` hours, from its node's own stream of the run's seed (``sim.workload.spot_streams``). When it ends
the VM is revoked: billing stops, every job on it (a gang on all its nodes) is lifted keeping only the work up to its
last checkpoint (``ClusterRules.checkpoint_interval`` seconds of work apart within a run), returns to the queue and pays
the restart overhead when it runs again; the policy decides at once (trigger ``revocation``).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import index
from time import perf_counter
from typing import Any

import numpy as np
import pandas as pd

from sim.clock import LAST, Call, Clock
from sim.cluster import Cluster, NodeSlot
from sim.contracts import Policy, Predictor
from sim.metrics import RunTables, summarise
from sim.model import CapsimError, Job, JobView, Plan, VMType
from sim.observe import observe
from sim.records import DECISION_COLUMNS, JOB_COLUMNS, NODE_COLUMNS, SEGMENT_COLUMNS, Decisions, Jobs, Nodes, Segments
from sim.rounds import Rounds
from sim.rules import PlanRejected, check_plan
from sim.state import Interval, JobState, NodeState, World
from sim.workload import spot_streams

__all__ = ["Simulation", "RunResult", "Cluster", "NodeSlot", "JOB_COLUMNS", "NODE_COLUMNS", "DECISION_COLUMNS",
           "SEGMENT_COLUMNS"]

_YOUNG_LIMIT = 50_000  # container objects allocated since the last young collection (cyclic garbage of policies)
_TRIGGERS = ("arrival", "completion", "ready", "periodic", "stall", "round", "revocation")
_ARRIVAL, _COMPLETION, _READY, _PERIODIC, _STALL, _ROUND, _REVOCATION = (1 << i for i in range(len(_TRIGGERS)))
_TRIGGER_NAMES = tuple(
    "+".join(t for i, t in enumerate(_TRIGGERS) if m & (1 << i)) for m in range(1 << len(_TRIGGERS))
)
"""The trigger of a decision from the bit mask of what fell at its instant, e.g. ``arrival+completion``."""


@dataclass
class RunResult:
    """The records of one run: one row per job, per node interval and per decision, plus the summary metrics."""

    jobs: pd.DataFrame
    nodes: pd.DataFrame
    decisions: pd.DataFrame
    summary: dict[str, float]
    segments: pd.DataFrame = field(default_factory=lambda: Segments().frame())
    """One row per run segment of a job on a node (a job preempted or moved has several)."""


class Simulation(Rounds):
    """One run of ``policy`` on ``cluster`` over ``jobs``; the estimator informs the policy, the truth runs the jobs.

    ``truth=None`` uses the estimator as the truth. The policy sees a configuration as infeasible (``inf``) where the
    job asks for another GPU count (``JobSpec.gpus``) and, for a policy without ``may_gang``, where only a gang fits.
    ``seed`` is the run's seed: the revocations of spot VMs are drawn from it (nothing else in the engine is random).
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policy: Policy, estimator: Predictor,
                 truth: Predictor | None = None, seed: int = 0):
        self.cluster = cluster
        self.seed = seed
        self.policy = policy
        self.estimator = estimator
        self.truth = truth if truth is not None else estimator
        self.jobs = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        self._label = policy.describe()
        self._clock = Clock()
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
        self._fixed = frozenset(i for i, s in enumerate(cluster.slots) if s.fixed)
        configs = cluster.configs
        self._gang_only = np.array([c.gpus > c.vm.gpus for c in configs], dtype=bool)
        self._gpu_counts = np.array([c.gpus for c in configs], dtype=int)
        true = self._cache(self.truth, masked=False) if self.truth is not self.estimator else None
        self._est = self._cache(self.estimator, masked=True, raw=true is None)
        if true is None:
            true, self._est = self._est, self._masked(self._est)
        self._true = true  # read as float(row[k]): times stay plain floats
        for spec, row in self._est.items():
            if not np.isfinite(row).any():
                asks = f", asks for {spec.gpus} GPUs" if spec.gpus is not None else ""
                raise CapsimError(
                    f"job spec {spec.name or spec.app_key!r} ({spec.application}, {spec.framework}, "
                    f"{spec.iterations} iterations, batch {spec.batch_size}{asks}) has no feasible configuration "
                    f"under the estimator {type(self.estimator).__name__}"
                    f"{'' if policy.may_gang or not self._gang_only.any() else ' for a policy without may_gang'}; "
                    f"remove it or add VM types it can run on"
                )

    def _cache(self, predictor: Predictor, masked: bool, raw: bool = False) -> dict[Any, np.ndarray]:
        """One read-only runtime row per distinct job spec, shared by every job of that spec; ``masked`` applies the
        policy's view (``_masked``) unless ``raw``, which returns the predictor's rows (to mask afterwards)."""
        specs = list(dict.fromkeys(j.spec for j in self.jobs))
        if not specs:
            return {}
        configs = self.cluster.configs
        table = np.array(predictor.runtimes(specs, configs), dtype=float)
        if table.shape != (len(specs), len(configs)):
            raise CapsimError(
                f"predictor {type(predictor).__name__}: runtimes() returned shape {table.shape}, expected "
                f"{(len(specs), len(configs))}"
            )
        table.setflags(write=False)
        out = dict(zip(specs, table))  # read-only row views of one table: no copy per spec
        return out if raw or not masked else self._masked(out)

    def _masked(self, rows: dict[Any, np.ndarray]) -> dict[Any, np.ndarray]:
        """The estimates a policy sees: ``inf`` where a job asks for another GPU count, and where only a gang fits
        for a policy without ``may_gang``. Rows that need no mask are returned as they are (the same arrays)."""
        hide_gangs = self._gang_only.any() and not self.policy.may_gang
        out = {}
        for spec, row in rows.items():
            hide = self._gang_only if hide_gangs else None
            if spec.gpus is not None:
                other = self._gpu_counts != spec.gpus
                hide = other if hide is None else hide | other
            if hide is not None and hide.any():
                row = np.where(hide, np.inf, row)
                row.setflags(write=False)
            out[spec] = row
        return out

    @property
    def events(self) -> int:
        """SimPy events processed by the last ``run`` (arrivals, completions, boots, ticks and decisions)."""
        return self._clock.calls

    # ------------------------------------------------------------------ run

    def run(self) -> RunResult:
        """Simulate until every job has completed and return the records."""
        gc_was_on = gc.isenabled()
        gc.disable()  # full collections would walk every record kept so far; _on_decide collects young ones
        try:
            self._reset()
            t0 = self._clock.now
            for n in sorted(self._fixed):
                (name,) = self.cluster.slots[n].allowed or frozenset()
                self._start_vm(self._world.nodes[n], self._world.vm_types[name], t0)
            if self._states:
                self._clock.at(t0, self._on_arrival, self._states[0])
                if math.isfinite(self.cluster.rules.decision_interval):
                    self._clock.at(t0 + self.cluster.rules.decision_interval, self._on_periodic)
            self._clock.run()
            if self._completed != len(self._states):
                raise CapsimError(
                    f"policy {self._label!r} left {len(self._states) - self._completed} jobs unfinished when the "
                    f"simulation ran out of events"
                )
            end = self._clock.now
            last = max((st.end for st in self._states), default=end)  # fixed servers stop with the last job
            for node in self._world.nodes:
                if node.vm is not None:
                    self._stop_vm(node, last if node.index in self._fixed else end)
            return self._result()
        finally:
            if gc_was_on:
                gc.enable()

    def _reset(self) -> None:
        """A fresh clock, world and tables: ``run`` may be called again and gives the same records."""
        self._clock = Clock(self.jobs[0].submit_time if self.jobs else 0.0)
        self._states = [JobState(j, self._est[j.spec], self._true[j.spec]) for j in self.jobs]
        self._world = World(self.cluster, self._states)
        self._next_arrival = 0
        self._completed = 0
        self._booting = 0
        self._pending = 0
        self._idle_ticks = 0
        self._nodes = Nodes()
        self._segments = Segments()
        self._decisions = Decisions()
        self._spot = (spot_streams(self.seed, len(self.cluster.slots))
                      if any(v.spot and v.revocation_rate > 0 for v in self.cluster.vm_types) else [])
        self._reset_rounds()

    # ------------------------------------------------------------------ events

    def _trigger(self, bit: int, now: float) -> None:
        """Fold ``bit`` into the decision at ``now``, scheduling it after every other event of this instant."""
        if not self._pending:
            self._clock.at(now, self._on_decide, priority=LAST)
        self._pending |= bit

    def _on_arrival(self, call: Call) -> None:
        st: JobState = call.value
        self._next_arrival += 1
        if self._next_arrival < len(self._states):
            nxt = self._states[self._next_arrival]
            self._clock.at(nxt.job.submit_time, self._on_arrival, nxt)
        if self._round_mode:
            self._round_arrival(st, call.time)
            return
        self._world.add_waiting(JobView(st.job, st.est))
        self._trigger(_ARRIVAL, call.time)

    def _on_complete(self, call: Call) -> None:
        st: JobState = call.value
        st.done = 1.0
        self._end_segment(st, call.time)
        st.end = call.time
        st.event = None
        self._world.drop_running(st.job.id)
        self._completed += 1
        if self._spot and self._completed == len(self._states):
            for node in self._world.nodes:  # the run ends here: no VM left idle is revoked after it
                if node.interval is not None and node.interval.revocation is not None:
                    self._clock.cancel(node.interval.revocation)
                    node.interval.revocation = None
        if not self._round_mode:
            self._trigger(_COMPLETION, call.time)

    def _on_ready(self, call: Call) -> None:
        node, interval = call.value
        if interval.booting:
            interval.booting = False
            self._booting -= 1
            if (self._world.waiting or node.jobs) and not self._round_mode:
                self._trigger(_READY, call.time)

    def _on_revoke(self, call: Call) -> None:
        """The provider takes a spot VM back: its jobs lose the work since their last checkpoint and wait again."""
        node, iv = call.value
        now = call.time
        iv.revocation = None
        world = self._world
        for st in list(node.jobs.values()):
            self._detach(st, now, revoked=True)
            world.add_waiting(JobView(st.job, st.est, done=st.done))
        self._stop_vm(node, now, revoked=True)
        self._trigger(_REVOCATION, now)

    def _on_periodic(self, call: Call) -> None:
        if self._completed == len(self._states):
            if self._pending:
                self._pending |= _PERIODIC
            return
        self._trigger(_PERIODIC, call.time)
        self._clock.at(call.time + self.cluster.rules.decision_interval, self._on_periodic)

    def _on_decide(self, call: Call) -> None:
        mask, self._pending = self._pending, 0
        if gc.get_count()[0] > _YOUNG_LIMIT:
            gc.collect(1)
        self._decide(_TRIGGER_NAMES[mask], call.time)
        world = self._world
        if (world.waiting and not world.running and not self._pending and not self._booting
                and self._next_arrival >= len(self._states)):
            if math.isfinite(self.cluster.rules.decision_interval):
                # Periodic ticks are always pending: a policy may wait one tick, not two with nothing changing.
                self._idle_ticks += bool(mask & _PERIODIC)
                if self._idle_ticks < 2:
                    return
            self._decide("stall", call.time)
            if not world.running:
                raise CapsimError(
                    f"policy {self._label!r} left {len(world.waiting)} jobs waiting forever: nothing runs, no event "
                    f"is pending, and its plan on a 'stall' decision at t={call.time:g} started none"
                )

    # ------------------------------------------------------------------ decisions

    def _decide(self, trigger: str, now: float) -> None:
        """Ask the policy, check its plan against the rules, apply it, and record the decision."""
        if self.estimator.observes:
            observe(self._world, now, self.estimator, self._round_mode)
        snap = self._world.snapshot(now, trigger)
        t0 = perf_counter()
        plan = self.policy.decide(snap)
        wall = perf_counter() - t0
        if not isinstance(plan, Plan):
            raise self._rejected(f"decide() returned {type(plan).__name__}, not a sim.model.Plan", now)
        if plan.start or plan.vms or plan.move or plan.preempt or plan.keep_idle:
            try:
                check_plan(plan, self._world, self.policy)
            except PlanRejected as e:
                raise self._rejected(str(e), now) from None
            self._apply(plan, now)
        elif self._world.idle:
            self._stop_idle((), now)
        self._decisions.add(self._label, snap, plan, wall)

    def _rejected(self, rule: str, now: float) -> CapsimError:
        return CapsimError(f"policy {self._label!r}: plan rejected at t={now:g}: {rule}")

    def _apply(self, plan: Plan, now: float) -> None:
        """Apply a checked plan: preempt and lift moved jobs, set VMs, place moved and started jobs, stop idle VMs."""
        world = self._world
        jobs = world.jobs
        for jid in plan.preempt:
            st = jobs[jid]
            self._detach(st, now)
            world.add_waiting(JobView(st.job, st.est, done=st.done))
        for a in plan.move:
            self._detach(jobs[a.job_id], now)
        for key, name in plan.vms.items():
            node = world.nodes[index(key)]
            if node.slot.fixed:
                continue
            if node.vm is not None and (name is None or node.vm.name != name):
                self._stop_vm(node, now)
            if name is not None and node.vm is None:
                self._start_vm(node, world.vm_types[name], now)
        for a in plan.move:
            self._place(jobs[a.job_id], ((index(a.node), index(a.gpus)),) if not a.gang else _parts(a), now)
        for a in plan.start:
            world.drop_waiting(a.job_id)
            self._place(jobs[a.job_id], ((index(a.node), index(a.gpus)),) if not a.gang else _parts(a), now)
        if world.idle:
            self._stop_idle(plan.keep_idle, now)

    def _stop_idle(self, keep: frozenset[int] | tuple[()], now: float) -> None:
        """Stop every VM that hosts no job, except on the nodes in ``keep`` and the fixed servers."""
        nodes = self._world.nodes
        fixed = self._fixed
        for n in sorted(self._world.idle):
            if n not in keep and n not in fixed:
                self._stop_vm(nodes[n], now)

    # ------------------------------------------------------------------ mutations

    def _place(self, st: JobState, parts: tuple[tuple[int, int], ...], now: float) -> None:
        """Run job ``st`` on ``parts`` ((node, GPUs) each, one VM type) from ``now`` (or once every VM is ready)."""
        world = self._world
        nodes = world.nodes
        n, g = parts[0]
        single = len(parts) == 1
        vm = nodes[n].vm
        assert vm is not None, "the plan rules put jobs only on nodes with a VM"
        if not single:
            g = sum(gn for _, gn in parts)
        k = world.config_index[(vm.name, g)]
        true = float(st.true[k])
        if not math.isfinite(true):
            raise CapsimError(
                f"job {st.job.id} ({st.job.spec.name or st.job.spec.app_key}) was put on {vm.name}x{g}: the "
                f"estimator supports it but the truth predictor {type(self.truth).__name__} has no runtime; "
                f"use a truth predictor that covers every configuration the estimator does"
            )
        since = now
        for m, _ in parts:
            ready = nodes[m].ready_at
            if ready > since:
                since = ready
        overhead = self.cluster.rules.restart_overhead if st.ran else 0.0
        st.node, st.cfg, st.gpus, st.since, st.overhead, st.parts = n, k, g, since, overhead, parts
        st.run_start = st.steps if self._round_mode else int(st.done * st.job.spec.iterations + 1e-9)
        st.runs += 1
        self._idle_ticks = 0
        if st.runs == 1 or st.first_start != st.first_start:  # first run, or every earlier one lifted before it began
            st.first_start = since
        if not self._round_mode:  # in round mode the round's dispatch schedules the work
            st.event = self._clock.at(since + ((1.0 - st.done) * true + overhead), self._on_complete, st)
        jid = st.job.id
        for m, gm in parts:
            node = nodes[m]
            node.jobs[jid] = st
            node.used += gm
            world.job_placed(m)
        world.add_running(JobView(st.job, st.est, done=st.done, node=n, config=k, since=since) if single else
                          JobView(st.job, st.est, done=st.done, node=n, config=k, since=since, parts=parts))

    def _end_segment(self, st: JobState, now: float) -> None:
        """Record the job's current run segment (one per node) up to ``now``, credit its GPU-seconds, and take it
        off its nodes."""
        elapsed = now - st.since
        if elapsed < 0:  # lifted before its VMs were ready: the run never began
            st.runs -= 1
            if st.runs == 0:
                st.first_start = math.nan
        else:
            st.ran = True
        world = self._world
        nodes = world.nodes
        jid = st.job.id
        for n, g in st.parts:
            node = nodes[n]
            iv = node.interval
            assert iv is not None, "a job runs only on a node with a VM"
            if elapsed >= 0:
                self._segments.add(st, iv.vm, now, n, g)
                if elapsed > 0:
                    secs = iv.gpu_secs
                    secs[jid] = secs.get(jid, 0.0) + g * elapsed
            del node.jobs[jid]
            node.used -= g
            world.job_left(n, not node.jobs)

    def _detach(self, st: JobState, now: float, revoked: bool = False) -> None:
        """Lift a running job off its nodes (preempted or moved), keeping the work it has done; when its spot VM is
        ``revoked``, only the work up to its run's last checkpoint."""
        if st.event is not None:
            elapsed = now - st.since
            if elapsed > 0:
                worked = max(0.0, elapsed - st.overhead)
                if revoked:
                    c = self.cluster.rules.checkpoint_interval
                    kept = math.floor(worked / c) * c if math.isfinite(c) else 0.0
                    st.lost += (worked - kept) * st.gpus
                    worked = kept
                st.done = min(1.0, st.done + worked / float(st.true[st.cfg]))
            self._clock.cancel(st.event)
            st.event = None
        if revoked:
            st.revoked += 1
        self._end_segment(st, now)
        self._world.drop_running(st.job.id)

    def _start_vm(self, node: NodeState, vm: VMType, now: float) -> None:
        node.vm = vm
        node.interval = iv = Interval(vm, now)
        node.ready_at = iv.ready
        self._world.vm_started(node.index)
        if iv.booting:
            self._booting += 1
            self._clock.at(iv.ready, self._on_ready, (node, iv))
        if vm.spot and vm.revocation_rate > 0:
            life = float(self._spot[node.index].exponential(3600.0 / vm.revocation_rate))
            iv.revocation = self._clock.at(now + life, self._on_revoke, (node, iv))

    def _stop_vm(self, node: NodeState, now: float, revoked: bool = False) -> None:
        """Stop the node's VM (``revoked``: the provider took it back), bill its interval and split the cost among its
        jobs by GPU-seconds."""
        iv = node.interval
        assert iv is not None, "only a node with a VM is stopped"
        if iv.booting:
            iv.booting = False
            self._booting -= 1
        if iv.revocation is not None:
            self._clock.cancel(iv.revocation)
            iv.revocation = None
        vm = iv.vm
        billed = self.cluster.rules.billed_seconds(now - iv.start, vm)
        cost = billed * vm.price_per_hour / 3600.0
        busy = sum(iv.gpu_secs.values())
        if busy > 0:
            jobs = self._world.jobs
            for jid, gs in iv.gpu_secs.items():
                jobs[jid].cost_share += cost * (gs / busy)
        self._nodes.add(node.index, iv, now, billed, cost, busy, revoked)
        node.vm = None
        node.interval = None
        node.ready_at = 0.0
        self._world.vm_stopped(node.index)

    # ------------------------------------------------------------------ records

    def _result(self) -> RunResult:
        jobs = Jobs.of(self._states, self.cluster.configs, self.estimator)
        segments = self._segments.frame()
        tables = RunTables(jobs.frame(), self._nodes.frame(), self._decisions.frame(), segments)
        return RunResult(tables.jobs, tables.nodes, tables.decisions, summarise(tables), segments)


def _parts(a: Any) -> tuple[tuple[int, int], ...]:
    """An assignment's (node, GPUs) parts as plain ints."""
    if not a.gang:
        return ((index(a.node), index(a.gpus)),)
    return tuple((index(n), index(g)) for n, g in a.parts)
