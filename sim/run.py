"""One run of a simulation: its clock, its world, its records, and every change events and plans make to them.

A ``Run`` owns what changes while a simulation runs: the clock (``sim.clock``), the jobs, nodes and VM intervals and
the policy's view of them (``sim.state.World``), and the records. It applies what happens: arrivals, completions,
boots ending, spot revocations, and the plans of the policy, checked against the rules of ``sim.rules``. When the
policy is asked, and how a placed job's work is scheduled, is the business of its time model (``sim.timing``), which
it calls at each of those events through the hooks of ``sim.timing.TimeModel``; the time model drives the run through
the public members listed by ``sim.timing.Engine``.

Money: a VM bills from its start to its stop (by ``ClusterRules.bill``: a rented VM its billed seconds at its price, an
owned server its time on at its amortised rate); each interval's cost is split among the jobs that ran on it by
GPU-seconds, and an interval that ran no job is idle cost.

Spot VMs (``VMType.spot``): each one started draws its lifetime from an exponential distribution of mean 1 /
``revocation_rate`` hours, from its node's own stream of the run's seed (``sim.streams.spot_streams``). When it ends
the VM is revoked: billing stops, every job on it (a gang on all its nodes) is lifted keeping only the work up to its
last checkpoint (``ClusterRules.checkpoint_interval`` seconds of work apart within a run), returns to the queue and
pays the restart overhead when it runs again; the time model hears of it (``TimeModel.revoked``).

Spot VMs of a recorded market (``Cluster.markets``, ``sim.spot_market``, whose series start with the run, at its first
arrival) instead go to the first zone of their type available at their start and are revoked when that zone's series
turns unavailable. While no zone of a type is available, the policy sees the type in ``Snapshot.unavailable`` (its
waiting jobs' estimates there are inf) and a plan may not start it; when one becomes available again while jobs wait,
the time model hears of it (``TimeModel.available``).

Co-location (``ClusterRules.jobs_per_gpu`` 2, ``docs/sharing.md``): a job started with ``Assignment.partner`` runs on
its partner's GPUs (the run keeps each GPU's jobs: ``NodeState.devices``). Both then run at the truth's co-located pace
(``sim.sharing.TruePairs``) from that moment, and the partner alone again once one of them leaves; at each change the
partner's run segment is closed (its ``partner`` recorded) and the time model reschedules its work
(``TimeModel.paced``). A shared GPU's time is split evenly between the two jobs, in their cost shares and in the node's
busy GPU-seconds. MIG slices (``ClusterRules.mig``, GPUs cut by a plan's layouts) are kept there too (``sim.sharing``).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from operator import attrgetter, index
from time import perf_counter

import numpy as np

from sim.clock import Call, Clock
from sim.cluster import Cluster
from sim.contracts import Policy, Predictor, Progress
from sim.metrics import RunTables
from sim.model import CapsimError, Job, JobSpec, JobView, Plan, Slice, SliceSpeeds, Snapshot, VMType
from sim.records import Decisions, Jobs, Nodes, Segments
from sim.rules import Placed, PlanRejected, check_plan
from sim.sharing import PairView, SharedGPUs, TruePairs
from sim.state import Interval, JobState, NodeState, World, job_states, job_view
from sim.streams import spot_streams
from sim.timing import TimeModel

__all__ = ["Run", "observe"]

_YOUNG_LIMIT = 50_000
"""Container objects allocated since the last young collection (cyclic garbage of policies) before a decision
collects them (looked at every 64th decision); the simulation turns the collector off while it runs (full collections
would walk every record)."""


class Run:
    """One run of ``policy`` on ``cluster`` over ``jobs`` (sorted by submission), driven by ``time``.

    ``est`` and ``true`` map each job spec to its read-only runtime row (the policy's view and the truth);
    ``truth`` names the truth predictor in messages; ``seed`` draws the spot VMs' lifetimes. The ``estimator`` says
    the source of each job's estimate in the records and, if it observes running jobs, refines their estimates at
    every decision (``sim.run.observe``). Where GPUs may be shared, ``pairs`` are the truth's co-located slowdowns and
    ``view`` what the policy is told of them.
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], est: dict[JobSpec, np.ndarray],
                 true: dict[JobSpec, np.ndarray], policy: Policy, time: TimeModel, *, label: str, truth: str,
                 seed: int, estimator: Predictor, pairs: TruePairs | None = None, view: PairView | None = None,
                 mig: SliceSpeeds | None = None):
        self.cluster = cluster
        self.estimator = estimator
        self.rules = cluster.rules
        self.policy = policy
        self.time = time
        self.label = label
        self._truth = truth
        self.clock = Clock(jobs[0].submit_time if jobs else 0.0)
        self.states = job_states(jobs, est, true)
        self.world = World(cluster, self.states)
        self.world.colocation = view
        self._nodes = Nodes()
        self._segments = Segments()
        self.world.mig = mig
        self.sharing = SharedGPUs.of(self.world, time, self._segments, pairs, mig)
        """Who shares which GPUs and slices, where GPUs may be shared or cut (``sim.sharing.SharedGPUs``)."""
        self._fixed = frozenset(i for i, s in enumerate(cluster.slots) if s.fixed)
        self._next_arrival = 0
        self._completed = 0
        self.booting = 0
        """VMs still booting."""
        self._decisions = Decisions()
        self._spot = (spot_streams(seed, len(cluster.slots))
                      if any(v.spot and v.revocation_rate > 0 for v in cluster.vm_types) else [])
        self.markets = cluster.markets
        self._t0 = self.clock.now
        """A recorded market's series starts with the run (its first arrival), ``Cluster.markets.offset`` into it."""
        self._wake: dict[str, Call] = {}
        self._masks: dict[frozenset[str], np.ndarray] = {}
        self._observes, self._rounds = estimator.observes, self.rules.rounds

    @property
    def waking(self) -> int:
        """Spot markets due to have VMs again while jobs wait (each will trigger a decision)."""
        return len(self._wake)

    @property
    def all_arrived(self) -> bool:
        """Whether every job has arrived."""
        return self._next_arrival >= len(self.states)

    @property
    def all_done(self) -> bool:
        """Whether every job has completed."""
        return self._completed == len(self.states)

    def execute(self) -> RunTables:
        """Run every event until every job has completed; return the records as tables."""
        clock, world = self.clock, self.world
        t0 = clock.now
        for n in sorted(self._fixed):
            (name,) = self.cluster.slots[n].allowed or frozenset()
            self._start_vm(world.nodes[n], world.vm_types[name], t0)
        if self.states:
            clock.at(t0, self._on_arrival, self.states[0])
        self.time.start(self)
        clock.run()
        if not self.all_done:
            raise CapsimError(f"policy {self.label!r} left {len(self.states) - self._completed} jobs unfinished when "
                              f"the simulation ran out of events")
        end = clock.now
        last = max(map(attrgetter("end"), self.states), default=end)  # fixed servers stop with the last job
        for node in world.nodes:
            if node.vm is not None:
                self._stop_vm(node, last if node.index in self._fixed else end)
        # each record is let go of once framed (its frame holds its columns), so no two copies of a table coexist
        decisions, self._decisions = self._decisions.frame(), Decisions()
        nodes, self._nodes = self._nodes.frame(), Nodes()
        segments, self._segments = self._segments.frame(), Segments()
        segments = segments if self.sharing is None else self.sharing.framed(segments)
        return RunTables(Jobs.of(self.states, self.cluster.configs, self.estimator).frame(), nodes, decisions, segments)

    def stuck(self, now: float, why: str) -> CapsimError:
        """The error of a run whose policy leaves jobs waiting forever: ``why`` says what else could have helped."""
        return CapsimError(f"policy {self.label!r} left {len(self.world.waiting)} jobs waiting forever: nothing runs, "
                           f"{why}, and its plan on a 'stall' decision at t={now:g} started none")

    # ------------------------------------------------------------------ events

    def _on_arrival(self, call: Call) -> None:
        st: JobState = call.arg
        self._next_arrival += 1
        if self._next_arrival < len(self.states):
            nxt = self.states[self._next_arrival]
            self.clock.at(nxt.job.submit_time, self._on_arrival, nxt)
        self.time.arrived(st, call.time)

    def complete(self, call: Call) -> None:
        """A job's work is done (``call.arg`` is its ``JobState``): it leaves its nodes and the run."""
        st: JobState = call.arg
        st.done = 1.0
        self._end_segment(st, call.time)
        st.end, st.event = call.time, None
        st.parts = ()  # a million finished jobs need not keep where they ran last (``node``, ``cfg`` say it)
        self.world.drop_running(st.job.id)
        self._completed += 1
        if (self._spot or self.markets is not None) and self.all_done:
            for node in self.world.nodes:  # the run ends here: no VM left idle is revoked after it
                if node.interval is not None and node.interval.revocation is not None:
                    self.clock.cancel(node.interval.revocation)
                    node.interval.revocation = None
            for wake in self._wake.values():
                self.clock.cancel(wake)
            self._wake.clear()
        self.time.completed(st, call.time)

    def _on_ready(self, call: Call) -> None:
        node, interval = call.value
        if interval.booting:
            interval.booting = False
            self.booting -= 1
            self.time.ready(node, call.time)

    def _on_revoke(self, call: Call) -> None:
        """The provider takes a spot VM back: its jobs lose the work since their last checkpoint and wait again."""
        node, iv = call.value
        now = call.time
        iv.revocation = None
        world = self.world
        for st in list(node.jobs.values()):
            self._detach(st, now, revoked=True)
            world.add_waiting(job_view(st.job, st.est, st.done))
        self._stop_vm(node, now, revoked=True)
        self.time.revoked(now)

    # ------------------------------------------------------------------ decisions

    def _on_market(self, call: Call) -> None:
        del self._wake[call.value]
        if self.world.waiting:
            self.time.available(call.time)

    def _market_view(self, snap: Snapshot, now: float) -> Snapshot:
        """The snapshot with the spot types that cannot be started now (``Snapshot.unavailable``), their
        configurations ruled out for every job (a new VM of such a type cannot be had)."""
        markets = self.markets
        assert markets is not None
        out = frozenset(name for name in markets.names() if not markets.available(name, now - self._t0))
        self.world.unavailable = out
        if not out:
            return snap
        mask = self._masks.get(out)
        if mask is None:
            mask = self._masks[out] = np.array([c.vm.name in out for c in self.world.configs], dtype=bool)
        masked: dict[int, np.ndarray] = {}

        def view(jv: JobView) -> JobView:
            est = masked.get(id(jv.estimates))
            if est is None:
                est = masked[id(jv.estimates)] = np.where(mask, np.inf, jv.estimates)
                est.setflags(write=False)
            return replace(jv, estimates=est)

        # a running VM's zone has VMs (else it was revoked), so no running job is on a type ruled out here
        return replace(snap, unavailable=out, waiting=tuple(map(view, snap.waiting)),
                       running=tuple(map(view, snap.running)))

    def _await_markets(self, now: float) -> None:
        """While jobs wait, have each spot type that cannot be started now trigger a decision when it can."""
        markets = self.markets
        assert markets is not None
        for name in self.world.unavailable:
            if name not in self._wake:
                at = markets.next_available(name, now - self._t0) + self._t0
                if math.isfinite(at):
                    self._wake[name] = self.clock.at(at, self._on_market, name)

    def decide(self, trigger: str, now: float) -> None:
        """Ask the policy, check its plan against the rules, apply it, and record the decision."""
        if not len(self._decisions.time) & 63 and gc.get_count()[0] > _YOUNG_LIMIT:
            gc.collect(1)
        if self._observes:
            observe(self.world, now, self.estimator, self._rounds)
        world = self.world
        waiting, running = len(world.waiting), len(world.running)
        snap: Snapshot = world.snapshot(now, trigger)
        if self.markets is not None:
            snap = self._market_view(snap, now)
        t0 = perf_counter()
        plan = self.policy.decide(snap)
        wall = perf_counter() - t0
        del snap  # its tuples, if never read, need not be made (``sim.state.EngineSnapshot``)
        world.let_go()
        if not isinstance(plan, Plan):
            raise self._rejected(f"decide() returned {type(plan).__name__}, not a sim.model.Plan", now)
        if plan.start or plan.vms or plan.move or plan.preempt or plan.keep_idle or plan.layouts:
            try:
                checked = check_plan(plan, self.world, self.policy)
            except PlanRejected as e:
                raise self._rejected(str(e), now) from None
            self._apply(plan, checked, now)
        elif self.world.idle:
            self._stop_idle((), now)
        if self.markets is not None and self.world.waiting:
            self._await_markets(now)
        self._decisions.add(self.label, now, trigger, waiting, running, plan, wall)

    def _rejected(self, rule: str, now: float) -> CapsimError:
        return CapsimError(f"policy {self.label!r}: plan rejected at t={now:g}: {rule}")

    def _apply(self, plan: Plan, checked: list[Placed | None], now: float) -> None:
        """Apply a plan as checked (``check_plan``'s placements): lift preempted and moved jobs, set VMs, place."""
        world = self.world
        jobs = world.jobs
        for jid in plan.preempt:
            st = jobs[jid]
            self._detach(st, now)
            world.add_waiting(job_view(st.job, st.est, st.done))
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
        if self.sharing is not None:
            self.sharing.place(plan, now, self._place)
        else:
            where: Iterator[Placed] = iter(checked)  # type: ignore[arg-type]  # (no partner or slice: rules 10, 11)
            for a in plan.move:
                parts, k = next(where)
                self._place(jobs[a.job_id], parts, now, None, None, k)
            for a in plan.start:
                world.drop_waiting(a.job_id)
                parts, k = next(where)
                self._place(jobs[a.job_id], parts, now, None, None, k)
        if world.idle:
            self._stop_idle(plan.keep_idle, now)

    def _stop_idle(self, keep: frozenset[int] | tuple[()], now: float) -> None:
        """Stop every VM that hosts no job, except on the nodes in ``keep`` and the fixed servers."""
        nodes = self.world.nodes
        fixed = self._fixed
        for n in sorted(self.world.idle):
            if n not in keep and n not in fixed:
                self._stop_vm(nodes[n], now)

    # ------------------------------------------------------------------ mutations

    def _place(self, st: JobState, parts: tuple[tuple[int, int], ...], now: float, partner: int | None = None,
               cut: Slice | None = None, k: int = -1) -> None:
        """Run job ``st`` on ``parts`` ((node, GPUs) each, one VM type; configuration ``k``, -1: find it) from ``now``
        (or once its VMs and GPUs are ready); with ``partner``, on that job's GPUs; with ``cut``, on that MIG slice."""
        world = self.world
        nodes = world.nodes
        n, g = parts[0]
        single = len(parts) == 1
        vm = nodes[n].vm
        assert vm is not None, "the plan rules put jobs only on nodes with a VM"
        if not single:
            g = sum(gn for _, gn in parts)
        if k < 0:
            k = world.config_index[(vm.name, g)]
        true = float(st.true[k])
        if not math.isfinite(true):
            raise CapsimError(
                f"job {st.job.id} ({st.job.spec.name or st.job.spec.app_key}) was put on {vm.name}x{g}: the "
                f"estimator supports it but the truth predictor {self._truth} has no runtime; use a truth predictor "
                f"that covers every configuration the estimator does"
            )
        since = now
        for m, _ in parts:
            ready = nodes[m].ready_at
            if ready > since:
                since = ready
        sharing, devices, speed = self.sharing, None, 1.0
        if sharing is not None:  # its GPUs or slice (MIG: from when its GPUs are repartitioned)
            since, devices, speed = sharing.devices_for(st, parts, vm, since, partner, cut)
        overhead = self.rules.restart_overhead if st.ran else 0.0
        st.node, st.cfg, st.gpus, st.since, st.overhead, st.parts = n, k, g, since, overhead, parts
        if self._observes:  # (what ``observe`` counts a run's iterations from)
            st.run_start = st.steps if self._rounds else int(st.done * st.job.spec.iterations + 1e-9)
        st.runs += 1
        if st.runs == 1 or st.first_start != st.first_start:  # first run, or every earlier one lifted before it began
            st.first_start = since
        jid = st.job.id
        if partner is not None or cut is not None:
            assert sharing is not None
            sharing.cut_in(st, cut, k, now, speed) if cut else sharing.join(st, world.jobs[partner or 0], k, now)
            return
        self.time.placed(st, true)
        for m, gm in parts:
            node = nodes[m]
            node.jobs[jid] = st
            node.used += gm
            world.job_placed(m)
        st.devices = devices if devices is not None else st.devices
        world.add_running(job_view(st.job, st.est, st.done, n, k, since, () if single else parts, None, 1.0, None))

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
        world = self.world
        nodes = world.nodes
        jid = st.job.id
        if self.sharing is not None:
            self.sharing.leave(st, now, elapsed)
            return
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
                    c = self.rules.checkpoint_interval
                    kept = math.floor(worked / c) * c if math.isfinite(c) else 0.0
                    st.lost += (worked - kept) * st.gpus
                    worked = kept
                st.done = min(1.0, st.done + worked / (float(st.true[st.cfg]) * st.slow))
            self.clock.cancel(st.event)
            st.event = None
        if revoked:
            st.revoked += 1
        self._end_segment(st, now)
        self.world.drop_running(st.job.id)

    def _start_vm(self, node: NodeState, vm: VMType, now: float) -> None:
        node.vm = vm
        node.interval = iv = Interval(vm, now)
        if self.sharing is not None:
            self.sharing.started(node, vm)
        node.ready_at = iv.ready
        self.world.vm_started(node.index)
        if iv.booting:
            self.booting += 1
            self.clock.at(iv.ready, self._on_ready, (node, iv))
        markets = self.markets
        if vm.spot and markets is not None and vm.name in markets.zones:
            zone = markets.zone_at(vm.name, now - self._t0)
            if zone is None:
                raise CapsimError(f"a {vm.name!r} spot VM was started at t={now:g} with no zone available (the plan "
                                  f"rules refuse this: a defect of the engine)")
            end = markets.revoked_at(vm.name, zone, now - self._t0) + self._t0
            if math.isfinite(end):
                iv.revocation = self.clock.at(end, self._on_revoke, (node, iv))
        elif vm.spot and vm.revocation_rate > 0:
            life = float(self._spot[node.index].exponential(3600.0 / vm.revocation_rate))
            iv.revocation = self.clock.at(now + life, self._on_revoke, (node, iv))

    def _stop_vm(self, node: NodeState, now: float, revoked: bool = False) -> None:
        """Stop the node's VM (``revoked``: the provider took it back), bill its interval and split the cost among its
        jobs by GPU-seconds."""
        iv = node.interval
        assert iv is not None, "only a node with a VM is stopped"
        if iv.booting:
            iv.booting = False
            self.booting -= 1
        if iv.revocation is not None:
            self.clock.cancel(iv.revocation)
            iv.revocation = None
        billed, rate, cost = self.rules.bill(now - iv.start, iv.vm)
        busy = sum(iv.gpu_secs.values())
        if busy > 0:
            jobs = self.world.jobs
            for jid, gs in iv.gpu_secs.items():
                jobs[jid].cost_share += cost * (gs / busy)
        self._nodes.add(node.index, iv, now, billed, rate, cost, busy, revoked)
        node.vm = node.interval = node.devices = node.layouts = node.devices_ready = None
        node.ready_at = 0.0
        self.world.vm_stopped(node.index)


def observe(world: World, now: float, estimator: Predictor, rounds: bool) -> None:
    """Show ``estimator`` (one that ``observes``: the ``online`` estimator) the progress of every running job whose
    current run has done an iteration, before the policy's snapshot is taken, and renew the job's view with the
    estimates it refines: ``done`` = iterations done / iterations, ``since`` = now, so ``JobView.remaining_at`` reads
    the time left from the refined estimate.

    What is seen (``Progress``) is what an observer of a real job sees, an iteration counter and a clock: the
    configuration it runs on, the iterations done in all, and of this run the iterations done and the seconds they
    took (after its VM was ready and any restart overhead); nothing else. In capsim a job trains at a constant pace
    on one configuration, so what is seen tells that pace; how far a real window of iterations strays from the rest
    of the run is the estimator's to model (``predictors.uncertainty.online``). A job lifted off its VM keeps the
    estimates last refined, and ``done`` is then the work done, as without observation. Round mode observes at the
    round boundaries, where a round's iterations are credited. A co-located job's seconds are shown divided by the
    slowdown the policy's interference model gives its pair (``JobView.pace``), as an observer that knows it shares
    the GPU would correct them: the estimate stays one of the job alone, off by as much as that slowdown is.
    """
    jobs = world.jobs
    for jid, jv in tuple(world.running.items()):
        st = jobs[jid]
        iterations = st.job.spec.iterations
        true = float(st.true[st.cfg]) * st.slow  # a co-located job's run goes at its pair's pace
        if rounds:
            total = st.steps
        else:
            worked = now - st.since - st.overhead
            if worked <= 0.0:
                continue
            total = min(iterations - 1, int((st.done + worked / true) * iterations + 1e-9))
        run = total - st.run_start
        if run < 1:
            continue
        seen = Progress(st.cfg, total, run, run * true / iterations / jv.pace, now)
        st.est = estimator.refine(st.job, st.est, seen)
        world.add_running(replace(jv, estimates=st.est, done=total / iterations, since=now))  # where and how it runs
