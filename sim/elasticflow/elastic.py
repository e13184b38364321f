"""The ``elastic`` clock: ElasticFlow's simulator as it runs EDF and ElasticFlow (and the other elastic policies).

At each decision point (an event: arrivals, planned completions, the policy's wake-up time):

1. every job with GPUs progresses by ``(dt - overhead) x T[g]`` iterations since the last decision, ``dt`` clipped at
   its planned exact end; one whose iterations run out inside the interval before its planned end completes now, at
   ``t_prev + ceil(left / T[g])`` (to the second);
2. the jobs planned to end at this event complete (their GPUs are free again); the verdict is the completion time
   against the deadline, or the planned end for a policy that judges by its plan (ElasticFlow);
3. the policy decides (``ElasticView`` -> ``ElasticPlan``): rejected arrivals never run; every runnable job gets its
   GPUs and planned end; waiting jobs given GPUs start;
4. jobs are placed on the servers (largest first, ``sim.elasticflow.placement``); a policy that charges overheads
   (ElasticFlow) then charges each running job the restart overhead of its GPU set for the coming interval, which
   also delays its planned end;
5. the next event is at least 60 s away: events closer than that merge into one at +60 s (``sim.elasticflow.events``).
"""

from __future__ import annotations

import math
from time import perf_counter

from sim.elasticflow.events import Events
from sim.elasticflow.placement import Placement
from sim.elasticflow.state import Log, Run, overhead
from sim.elasticflow.vocabulary import SLOT, ElasticPlan, ElasticView, ReplayCluster, ReplayPolicy
from sim.model import CapsimError

__all__ = ["run_elastic"]


def _progress(runs: list[Run], dt: float, now: float, events: Events) -> None:
    """Credit every job with GPUs for the interval ``(now - dt, now]`` (ElasticFlow's ``run_all_jobs``)."""
    for r in runs:
        g = r.gpus
        if g == 0:
            continue
        rate = r.true_rate(g)
        run_time = dt
        limit = r.real_end if r.real_end is not None else r.end
        if now > limit:
            run_time -= now - limit
        if run_time <= 0:
            raise CapsimError(f"elastic clock: job {r.id} ran {run_time:g} s in an interval; this is a bug of the time "
                              f"model, please report it")
        run_time = 0.0 if run_time < r.overhead else run_time - r.overhead
        done = run_time * rate
        if r.left <= done and r.end > now:
            finish = now - dt + math.ceil(r.left / rate)
            done = (r.end - now + dt) * rate
            old, r.end = r.end, now
            events.change_end(r, old, now)
            r.end = finish
        r.left -= done
        r.overhead = 0.0


def run_elastic(jobs: list[Run], cluster: ReplayCluster, policy: ReplayPolicy, log: Log) -> None:
    """Replay ``jobs`` (submission order) under ``policy`` until every job completed or was rejected."""
    admission = bool(getattr(policy, "admission", False))
    judged_by_plan = admission and getattr(policy, "verdict", "plan") == "plan"
    n_gpus = cluster.gpus
    slot = getattr(policy, "slot", SLOT)
    events = Events()
    for r in jobs:
        events.get(r.job.submit).starts.append(r)
        r.status = "event"
    place = Placement(cluster.servers, cluster.gpus_per_server)
    runnable: list[Run] = []
    now = events.first().time
    dt = 0.0
    count = 0
    while len(events) or any(r.status != "done" for r in runnable):
        if not len(events):
            raise CapsimError(f"policy {policy.describe()!r} left {len(runnable)} jobs waiting with nothing planned")
        _progress(runnable, dt, now, events)
        ev = events.at(now)
        if ev is None:
            ev = events.first()
            now = ev.time
        events.remove(ev)
        busy = [r for r in runnable if r.status in ("pending", "running")]
        if not busy and not ev.ends and not ev.starts:
            dt = 0.0
            if len(events):
                nxt = events.first().time
                dt, now = nxt - now, nxt
            continue
        for r in ev.ends:
            if r.status != "running" or r.nodeset is None:
                continue
            place.release(r)
            r.status = "done"
            runnable.remove(r)
            r.finish = r.end
            r.on_time = (r.real_end if judged_by_plan and r.real_end is not None else r.end) <= r.job.deadline
            r.close(r.end)
        for r in runnable:
            if r.nodeset is not None:
                place.release(r)
        view = ElasticView(now, tuple(r.status_view() for r in ev.starts),
                           tuple(r.status_view() for r in runnable), cluster, count)
        t0 = perf_counter()
        plan = policy.decide(view)
        wall = perf_counter() - t0
        if not isinstance(plan, ElasticPlan):
            raise CapsimError(f"policy {policy.describe()!r}: decide() returned {type(plan).__name__}, not an "
                              f"ElasticPlan")
        started = _apply(plan, ev.starts, runnable, now, events, admission, log)
        order = sorted((r for r in runnable if r.gpus > 0), key=lambda r: -r.gpus)
        for r in order:
            place.place(r)
            r.node = place.first_node(r)
        if admission:
            place.mark_cached()
        log.decision(now, "arrival" if ev.starts else "completion" if ev.ends else "plan", len(runnable),
                     sum(1 for r in runnable if r.status == "running"), started, wall)
        if admission and math.isfinite(plan.wake) and (not len(events) or plan.wake < events.first().time):
            events.get(plan.wake)
        restart = count > 0 and count % slot == 0
        count += 1
        if admission:
            if restart:
                place.reset_cache()
            for r in runnable:
                if r.gpus > 0:
                    r.overhead = overhead(r.gpus, n_gpus, restart, r.cached)
                    old = r.end
                    r.end += r.overhead
                    events.change_end(r, old, r.end)
                else:
                    r.overhead = 0.0
        if len(events):
            nxt = events.merge(now, slot)
            dt, now = nxt - ev.time, nxt


def _apply(plan: ElasticPlan, arrivals: list[Run], runnable: list[Run], now: float, events: Events,
           admission: bool, log: Log) -> int:
    """Apply ``plan``: reject arrivals, adopt the policy's order and GPU counts, start jobs, move end events."""
    by_id = {r.id: r for r in runnable}
    rejected = set(plan.rejected)
    for r in arrivals:
        if r.id in rejected:
            r.status = "rejected"
            log.rejected(r)
        else:
            r.status = "pending"
            by_id[r.id] = r
    if set(by_id) != {i for i, _ in plan.gpus}:
        raise CapsimError(f"elastic plan at t={now:g}: expected GPUs for exactly the runnable jobs "
                          f"{sorted(by_id)}, got {sorted(i for i, _ in plan.gpus)}")
    runnable[:] = [by_id[i] for i, _ in plan.gpus]
    used = 0
    started = 0
    for i, g in plan.gpus:
        r = by_id[i]
        used += g
        old = r.end
        r.end = plan.ends[i]
        if i in plan.real_ends:
            r.real_end = plan.real_ends[i]
        if r.status == "pending" and g > 0:
            r.status = "running"
            r.start = now if r.start != r.start else r.start
            started += 1
            events.change_end(r, old, r.end) if admission else events.add_end(r, r.end)
        elif r.status == "running" or admission:
            events.change_end(r, old, r.end)
        r.set_gpus(g, now, -1)
    if used > 0 and used > log.cluster_gpus:
        raise CapsimError(f"elastic plan at t={now:g} gives {used} GPUs on a cluster of {log.cluster_gpus}")
    return started
