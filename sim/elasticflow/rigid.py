"""The ``las`` and ``lease`` clocks: ElasticFlow's simulator as it runs Tiresias and Themis, rigid jobs on the GPUs
they asked for, their work the trace's ``duration`` seconds of service.

``las`` (Tiresias, ``dlas_sim_jobs``): decisions at arrivals (merged 60 s apart), at the earliest planned completion
(never sooner than 60 s after the last decision) and when the policy asks (a queue demotion). At each one, every
running job is credited ``int(now - last) - overhead`` seconds of service; the policy picks the jobs that run; a
job that (re)starts pays the restart overhead (2 + 2(log2 g + 1) s, 7 + ... on >= 256 GPUs, plus 27 s / 47 s on
every 60th decision, when every running job pays it). A job completes at ``int(decision + duration - served)``.

``lease`` (Themis, ``themis_sim_jobs``): a decision every 60 s (arrivals wait for the next one); a running job
advances 60 s of its duration and ``60 x T[g]`` iterations per round and completes at the end of the round in which
either runs out. Themis's restart overheads are 0 (as coded: the job record always carries an overhead of 0).

The 60 s above is the policy's ``slot`` (ElasticFlow's ``--scheduling_slot``; 60 by default) wherever it appears,
the 60th decision included, as in ElasticFlow's code.
"""

from __future__ import annotations

import math
import sys
from time import perf_counter

from sim.elasticflow.events import Events
from sim.elasticflow.placement import Placement
from sim.elasticflow.state import Log, Run, overhead
from sim.elasticflow.vocabulary import SLOT, LasView, ReplayCluster, ReplayPolicy, RigidPlan
from sim.model import CapsimError

__all__ = ["run_las", "run_lease"]

_NEVER = float(sys.maxsize)


def _decide(policy: ReplayPolicy, view: LasView) -> tuple[RigidPlan, float]:
    t0 = perf_counter()
    plan = policy.decide(view)
    wall = perf_counter() - t0
    if not isinstance(plan, RigidPlan):
        raise CapsimError(f"policy {policy.describe()!r}: decide() returned {type(plan).__name__}, not a RigidPlan")
    return plan, wall


def _finish(r: Run, end: float) -> None:
    r.status = "done"
    r.finish = end
    r.on_time = end <= r.job.deadline
    r.close(end)


def run_las(jobs: list[Run], cluster: ReplayCluster, policy: ReplayPolicy, log: Log) -> None:
    """Tiresias's clock (see the module docstring)."""
    n = cluster.gpus
    slot = getattr(policy, "slot", SLOT)
    starts = Events()
    for r in jobs:
        starts.get(r.job.submit).starts.append(r)
    runnable: list[Run] = []
    end_time = _NEVER
    ending: list[Run] = []
    wake = _NEVER
    count = 0
    place = Placement(cluster.servers, cluster.gpus_per_server)
    while len(starts) or runnable:
        start_time = starts.first().time if len(starts) else _NEVER
        if not len(starts) and not ending:
            raise CapsimError(f"policy {policy.describe()!r} left {len(runnable)} jobs waiting: nothing can run them")
        arriving: list[Run] = []
        ends: list[Run] = []
        if end_time < start_time:
            now, ends = end_time, ending
        else:
            now = start_time
            if end_time == start_time:
                ends = ending
            arriving = starts.first().starts
        if now > wake:
            now, ends, arriving = wake, [], []
        elif arriving:
            starts.remove(starts.first())
        for r in ends:
            _finish(r, r.end)
            if r.nodeset is not None:
                place.release(r)
            runnable.remove(r)
        for r in arriving:
            r.status = "pending"
            r.last_check = r.job.submit
            runnable.append(r)
        for r in runnable:
            if r.status == "running":
                served = max(int(now - r.last_check) - r.overhead, 0)
                r.total += served
                r.executed += served
                r.last_check = now
                r.overhead = 0.0
            else:
                r.last_check = now
        restart = count > 0 and count % slot == 0
        count += 1
        view = LasView(now, tuple(r.status_view() for r in runnable), cluster, count - 1)
        plan, wall = _decide(policy, view)
        chosen = set(plan.run)
        if sum(r.job.gpus for r in runnable if r.id in chosen) > n:
            raise CapsimError(f"policy {policy.describe()!r} runs more than {n} GPUs at t={now:g}")
        started = 0
        for r in runnable:
            if r.nodeset is not None:
                place.release(r)
        for r in runnable:
            if r.id in chosen:
                if r.status == "pending":
                    r.overhead = overhead(r.job.gpus, n, restart)
                    r.status = "running"
                    started += 1
                    if r.start != r.start:
                        r.start = now
                r.set_gpus(r.job.gpus, now, -1)
            else:
                r.status = "pending"
                r.set_gpus(0, now, -1)
        runnable.sort(key=lambda r: -r.job.gpus)
        for r in runnable:
            if r.status == "running":
                place.place(r)
                r.node = place.first_node(r)
        end_time, ending = _NEVER, []
        for r in runnable:
            if r.status != "running":
                continue
            remaining = r.job.duration - r.total
            if restart:
                r.overhead = overhead(r.job.gpus, n, restart)
                remaining += r.overhead
            end = int(now + remaining)
            fire = max(now + slot, end)
            if fire < end_time:
                end_time, ending = fire, [r]
                r.end = end
            elif fire == end_time:
                r.end = end
                ending.append(r)
        wake = plan.wake if math.isfinite(plan.wake) else _NEVER
        if wake - now < slot:
            wake = now + slot
        log.decision(now, "arrival" if arriving else "completion" if ends else "demotion", len(runnable),
                     sum(1 for r in runnable if r.status == "running"), started, wall)
        if len(starts):
            starts.merge(now, slot)  # arrivals within a slot of this decision join the first of them, at + slot
        if end_time < now + slot:
            end_time = now + slot


def run_lease(jobs: list[Run], cluster: ReplayCluster, policy: ReplayPolicy, log: Log) -> None:
    """Themis's clock (see the module docstring); a policy with a ``lease`` attribute (Chronus) gets leases of that
    many seconds, and its jobs complete at the exact second their service runs out."""
    n = cluster.gpus
    lease = float(getattr(policy, "lease", getattr(policy, "slot", SLOT)))
    by_iterations = not hasattr(policy, "lease")
    events = Events()
    for r in jobs:
        events.get(r.job.submit).starts.append(r)
    runnable: list[Run] = []
    now = events.first().time
    event_time = now
    count = 0
    place = Placement(cluster.servers, cluster.gpus_per_server)
    while len(events) or runnable:
        for r in runnable:
            if r.nodeset is not None:
                place.release(r)
        ev = events.at(now)
        arrivals = 0
        if ev is not None:
            ev = events.first()
            event_time = ev.time
            for r in ev.ends:
                _finish(r, r.end)
                runnable.remove(r)
            for r in ev.starts:
                r.status = "pending"
                runnable.append(r)
                arrivals += 1
        wall = 0.0
        running: list[Run] = []
        if runnable:
            view = LasView(event_time, tuple(r.status_view() for r in runnable), cluster, count)
            plan, wall = _decide(policy, view)
            by_id = {r.id: r for r in runnable}
            if set(plan.run) - set(by_id):
                raise CapsimError(f"policy {policy.describe()!r} runs jobs that are not runnable at t={now:g}")
            order = {i: k for k, i in enumerate(plan.order)} if plan.order else None
            if order is not None:
                runnable.sort(key=lambda r: order[r.id])
            running = [by_id[i] for i in plan.run]
            if sum(r.job.gpus for r in running) > n:
                raise CapsimError(f"policy {policy.describe()!r} runs more than {n} GPUs at t={now:g}")
            chosen = set(plan.run)
            for r in runnable:
                if r.id in chosen:
                    if r.status == "pending" and r.start != r.start:
                        r.start = now
                    r.status = "running"
                    r.set_gpus(r.job.gpus, now, -1)
                else:
                    r.status = "pending"
                    r.set_gpus(0, now, -1)
            running.sort(key=lambda r: -r.job.gpus)
            for r in running:
                place.place(r)
                r.node = place.first_node(r)
        if len(events) and now == events.first().time:
            events.remove(events.first())
        nxt = now + lease
        if len(events):
            first = events.first().time
            if int(first - now) <= lease and len(events) > 1:
                events.merge(now, lease)
            elif int(first - now) < lease:
                ev1 = events.first()
                events.remove(ev1)
                ev1.time = nxt
                events.get(nxt).starts.extend(ev1.starts)
                events.get(nxt).ends.extend(ev1.ends)
        count += 1
        ending: list[Run] = []
        for r in runnable:
            if r.status != "running":
                continue
            end = now + r.remaining
            r.remaining = max(0.0, r.remaining - lease)
            r.executed = r.job.duration - r.remaining
            if by_iterations:
                r.left -= lease * r.true_rate(r.job.gpus)
                if r.left <= 0:
                    r.remaining = 0.0
                    end = nxt
            if end <= nxt:
                ending.append(r)
                r.end = end
        if ending:
            events.get(nxt).ends.extend(ending)
        log.decision(now, "round", len(runnable), len(running), arrivals, wall)
        now = nxt
