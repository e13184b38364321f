"""ElasticFlow's plan of one job on the free-GPU timeline: the fewest GPUs that meet its deadline, filled backwards
from the deadline (its "minimum satisfactory share"), or, when no share meets it, what is free before the deadline
and the rest after it.

Step by step as ElasticFlow's ``ef_sim_allocation`` (``scheduler.py`` at pkusys/ElasticFlow@04a0109a): the deadline
is put on the slot grid (its last period counted only up to the exact deadline); for each level q from the smallest,
periods are walked back from the deadline, each giving ``min(q, the largest level that fits its free GPUs)`` until
the iterations are covered; the job then takes the previous level before the period where that happened and q from
it on, forward from now, and ends ``ceil`` to the second (``real_end``) and on the slot grid (``end``, when its GPUs
come back on the timeline). ``assign`` plans it with that many GPUs from now (a trial of one more level, for the
hand-out of spare GPUs) and ``trial`` keeps the result beside the job's plan, with its marginal GPU-seconds per
added GPU. The quirks of the original are kept, each where it acts.
"""

from __future__ import annotations

import math

from optim.elasticflow.timeline import TOP as _TOP
from optim.elasticflow.timeline import PlanJob, Timeline, gpu_seconds, merged, ordered
from sim.elasticflow.vocabulary import align, last_level, next_level
from sim.model import CapsimError

__all__ = ["plan", "free_at"]


def free_at(t: float, timeline: Timeline, n_gpus: int) -> int:
    """Free GPUs at ``t``: the value of the last key at or before it (``n_gpus`` before the first)."""
    if t in timeline:
        return timeline[t]
    out = n_gpus
    for k, v in timeline.items():
        if k <= t:
            out = v
    return out


def _fit(job: PlanJob, q: int, free: int) -> int:
    """``min(q, the largest level that fits in free GPUs)``; the levels are the powers of two up to the job's cap."""
    if free < 1:
        return 0
    top = _TOP[free] if free < 4097 else 1 << (free.bit_length() - 1)
    return min(q, top, job.levels[-1])


class _Found(Exception):
    """Unwinds to ``plan`` with the planned end once the job's iterations are covered."""


def plan(job: PlanJob, start: float, timeline: Timeline, n_gpus: int, assign: int = 0,
         trial: bool = False) -> tuple[bool, Timeline]:
    """Plan ``job`` from ``start`` on ``timeline``; returns whether the exact planned end meets the deadline and the
    timeline with the job's GPUs taken (the job's ``allocations``, ``end``, ``real_end`` are set, or its ``next_*``
    fields and ``marginal`` when ``trial``)."""
    ddl = job.ddl
    rate = job.rate
    left = job.left
    if left <= 0:
        raise CapsimError(f"elasticflow plan: job {job.id} has no iterations left to plan")
    event_time = start
    alloc: dict[float, int] = {event_time: 0}
    new = dict(timeline)
    a_ddl = align(start, ddl, job.slot)
    last_event_gpu: int | None = None
    if a_ddl not in new and a_ddl >= start:
        for t, v in new.items():
            if t < a_ddl:
                last_event_gpu = v
            else:
                break
        new[a_ddl] = last_event_gpu  # type: ignore[assignment]
        new = ordered(new)
    if assign:
        quota = assign
        available = new[start]
        fet = a_ddl
        for t in timeline:
            if t < event_time:
                available = timeline[t]
                del new[t]
                continue
            if t == event_time:
                available = timeline[t]
                continue
            fet = t
            break
        alloc[event_time] = quota
        real_end: float = math.ceil(event_time + left / rate[quota])
        end = align(start, real_end, job.slot)
        if fet >= end and ddl >= real_end:
            for t in timeline:
                if event_time <= t < end:
                    last_event_gpu = new[t]
                    new[t] -= quota
            if event_time != end:
                new[event_time] = available - quota
            if end not in timeline:
                new[end] = last_event_gpu  # type: ignore[assignment]
            return _finish(job, alloc, new, end, real_end, trial, timeline, n_gpus)
        duration = (ddl if fet == a_ddl else fet) - event_time
        left -= duration * rate[quota]
        if event_time in new:
            new[event_time] -= quota
        else:
            new[event_time] = last_event_gpu - alloc[event_time]  # type: ignore[operator]
        event_time = fet
        alloc[event_time] = 0
    levels = job.levels
    quota = next_level(levels, 0)
    last_quota = last_last_quota = 0
    point = start - 1
    starts = [ps for ps in reversed(list(new)) if ps < a_ddl]  # every period before the deadline, latest first
    if quota <= n_gpus and quota <= job.cap:
        for ps in reversed(starts):
            if ps not in alloc:
                alloc[ps] = 0
    top = levels[-1]
    while quota <= n_gpus and quota <= job.cap:
        period_end = a_ddl
        got = 0.0
        for ps in starts:
            if ps < event_time:
                break
            free = new[ps]
            if free >= quota:
                a = quota
            elif free < 1:
                a = 0
            else:  # below quota: the largest power of two in free, at most the top level (``_fit``)
                a = _TOP[free] if free < 4097 else 1 << (free.bit_length() - 1)
                if a > top:
                    a = top
            if a == 0:
                period_end = ps
                continue
            got += ((ddl if period_end == a_ddl else period_end) - ps) * rate[a]
            if got >= left:
                end, real_end = _forward(job, alloc, new, event_time, a_ddl, ps, quota, last_quota, left)
                last_event_gpu = n_gpus
                for t, v in timeline.items():
                    if event_time <= t < end:
                        last_event_gpu = v
                if end not in timeline:
                    new[end] = last_event_gpu
                return _finish(job, ordered(alloc), new, end, real_end, trial, timeline, n_gpus)
            period_end = ps
        last_last_quota, last_quota = last_quota, quota
        quota = next_level(levels, quota)
        if quota == last_quota:
            break
    return _miss(job, alloc, new, timeline, start, event_time, a_ddl, point, last_quota, last_last_quota, left,
                 last_event_gpu, n_gpus, assign, trial)


def _forward(job: PlanJob, alloc: dict[float, int], new: Timeline, event_time: float, a_ddl: float, ps: float,
             quota: int, last_quota: int, left: float) -> tuple[float, float]:
    """Lay the plan forward from now: the previous level before period ``ps``, ``quota`` from it; returns the planned
    end on the slot grid and the exact one."""
    rate = job.rate
    lat: float | None = None
    la = 0
    for t in list(new):
        if t > a_ddl:
            break
        if t < event_time:
            continue
        if lat is None:
            lat = t
            la = _fit(job, quota if t >= ps else last_quota, new[t])
            continue
        alloc[lat] = la
        new[lat] -= la
        if la == 0:
            lat = t
            la = _fit(job, quota if t >= ps else last_quota, new[t])
            continue
        done = ((job.ddl if t == a_ddl else t) - lat) * rate[la]
        if lat < ps or done < left:
            left -= done
        else:
            real_left = math.ceil(left / rate[alloc[lat]])
            return lat + align(0, real_left, job.slot), lat + real_left
        lat = t
        la = _fit(job, quota if t >= ps else last_quota, new[t])
    if lat is None:
        raise CapsimError(f"elasticflow plan: job {job.id} has no period to run in")
    alloc[lat] = la
    new[lat] -= la
    real_left = math.ceil(left / rate[alloc[lat]])
    return lat + align(0, real_left, job.slot), lat + real_left


def _miss(job: PlanJob, alloc: dict[float, int], new: Timeline, timeline: Timeline, start: float, event_time: float,
          a_ddl: float, point: float, last_quota: int, last_last_quota: int, left: float,
          last_event_gpu: int | None, n_gpus: int, assign: int, trial: bool) -> tuple[bool, Timeline]:
    """No level meets the deadline: take what fits before it, then the largest share that fits after it."""
    rate = job.rate
    lat: float | None = None
    la = 0
    for t in list(new):
        if t > a_ddl:
            break
        if t < event_time:
            continue
        if lat is None:
            lat = t
            la = _fit(job, last_quota if t >= point else last_last_quota, new[t])
            continue
        alloc[lat] = la
        new[lat] -= la
        if la == 0:
            lat = t
            la = _fit(job, last_quota if t >= point else last_last_quota, new[t])
            continue
        left -= ((job.ddl if t == a_ddl else t) - lat) * rate[la]
        lat = t
        la = _fit(job, last_quota, new[t])
    lat = max(a_ddl, event_time)
    for t in list(new):
        if t <= a_ddl:
            continue
        q = min(last_level(job.levels, new[lat] + 1), job.cap)
        if q == 0:
            alloc[lat] = 0
            lat = t
            continue
        alloc[lat] = q
        done = (t - lat) * rate[q]
        if done >= left:
            real_end = math.ceil(lat + left / rate[q])
            end = align(start, real_end, job.slot)
            for t1 in list(new):
                if t1 < a_ddl:
                    continue
                if t1 < end and t1 in timeline:
                    last_event_gpu = timeline[t1]
                if lat <= t1 < end:
                    new[t1] -= q
            if last_event_gpu is None:
                raise CapsimError(f"elasticflow plan: job {job.id}: no free-GPU count to restore after its end")
            if lat != end:
                new[lat] = last_event_gpu - q
            if end not in timeline:
                new[end] = last_event_gpu
            return _finish(job, alloc, new, end, real_end, trial, timeline, n_gpus)
        left -= done
        for t1 in timeline:
            if t1 < lat:
                last_event_gpu = new[t1]
        for t1 in new:
            if lat <= t1 < t:
                new[t1] -= q
        lat = t
    q = assign if assign else min(n_gpus, job.cap)
    alloc[lat] = q
    real_end = math.ceil(lat + left / rate[q])
    end = align(start, real_end, job.slot)
    new[lat] = n_gpus - q
    new[end] = n_gpus
    return _finish(job, ordered(alloc), new, end, real_end, trial, timeline, n_gpus, tail=True)


def _finish(job: PlanJob, alloc: dict[float, int], new: Timeline, end: float, real_end: float, trial: bool,
            timeline: Timeline, n_gpus: int, tail: bool = False) -> tuple[bool, Timeline]:
    if trial:  # the timeline and allocations are put in order and merged only if the trial is adopted
        job.next_allocations = alloc
        added = job.next_gpus - job.gpus
        if tail and added == 0:
            job.marginal = -math.inf
        else:
            job.marginal = (gpu_seconds(alloc, end) - gpu_seconds(job.allocations, job.end)) / added
        job.next_timeline = new
        job.next_end = end
        job.next_real_end = real_end
        return real_end <= job.ddl, timeline
    job.end = end
    job.real_end = real_end
    job.allocations = merged(alloc)
    return real_end <= job.ddl, merged(ordered(new))
