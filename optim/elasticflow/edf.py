"""Earliest deadline first with elastic jobs, as ElasticFlow's simulator runs it (``edf``; no admission control).

At every decision all runnable jobs are laid, in deadline order, on a free-GPU timeline that starts full
(``scheduler.py``'s ``edf_sim_allocation``): a job asks for its cap (``min(cap, cluster)``: 64 GPUs for most rows of
the tables), gets it when that many are free, else the largest level that is free, else waits; it keeps walking the
timeline (each later period with what is free then) until its iterations are covered. So the earliest deadlines take
up to 64 GPUs each whatever their scaling efficiency. Late jobs run to completion.
"""

from __future__ import annotations

import math
from typing import ClassVar

from optim.base import register
from optim.elasticflow.timeline import PlanJob, PlanJobs, Timeline, merged, ordered, table_cap
from sim.elasticflow.vocabulary import (
    LEVELS,
    ElasticPlan,
    ElasticView,
    JobStatus,
    ReplayCluster,
    ReplayPolicy,
    align,
)

__all__ = ["ElasticEDF", "edf_plan"]


@register("elasticflow_edf")
class ElasticEDF(ReplayPolicy):
    """EDF over elastic jobs (see the module docstring)."""

    clock: ClassVar[str] = "elastic"

    def reset(self, cluster: ReplayCluster) -> None:
        self._jobs = PlanJobs(table_cap, cluster.gpus, "elasticflow_edf", self.slot)

    def decide(self, view: ElasticView) -> ElasticPlan:  # type: ignore[override]
        now, n = view.time, view.cluster.gpus
        runnable, arrivals = list(view.runnable), list(view.arrivals)
        self._jobs.forget({s.id for s in runnable} | {s.id for s in arrivals})
        if arrivals:
            planning = sorted(runnable + arrivals, key=_deadline)
            order = runnable + arrivals
        else:
            runnable.sort(key=_deadline)
            planning = order = runnable
        timeline: Timeline = {now: n}
        ends: dict[int, float] = {}
        gpus: dict[int, int] = {}
        left = {s.id for s in planning if s.running}
        for s in planning:
            if timeline[now] == 0 and not left:
                gpus[s.id] = 0  # nothing is free now and every running job is planned: the rest wait unchanged
                continue
            timeline, ends[s.id], alloc = edf_plan(self._jobs(s), now, timeline, n)  # a record only where laid
            gpus[s.id] = alloc[now]
            left.discard(s.id)
        return ElasticPlan(tuple((s.id, gpus[s.id]) for s in order),
                           {s.id: ends.get(s.id, math.inf) for s in order})


def _deadline(s: JobStatus) -> float:
    return s.job.deadline


def edf_plan(job: PlanJob, start: float, timeline: Timeline, n: int) -> tuple[Timeline, float, dict[float, int]]:
    """Lay ``job`` on ``timeline`` from ``start``; returns the new timeline, its exact planned end and its GPUs from
    each time (ElasticFlow's ``edf_sim_allocation``, its quirks kept: the timeline gets the job's GPUs back at its end
    on the slot grid, written over any value already there)."""
    rate = job.rate
    left = job.left
    event_time = start
    alloc: dict[float, int] = {event_time: 0}
    new = dict(timeline)
    available = new[start]
    base = min(job.cap, n)
    last_event_gpu = n
    for fet in timeline:
        if fet < event_time:
            available = timeline[fet]
            del new[fet]
            continue
        if fet == event_time:
            available = timeline[fet]
            continue
        duration = fet - event_time
        if available >= base and base > 0:
            alloc[event_time] = base
            end = math.ceil(event_time + left / rate[base])
            last_event_gpu = n
            if fet >= end:
                return _done(job, new, timeline, alloc, start, event_time, end, base, available, n)
            left -= duration * rate[base]
            if event_time in new:
                new[event_time] -= base
            else:
                new[event_time] = last_event_gpu - alloc[event_time]
        elif available > 0 and base > 0:
            g = 0
            for level in LEVELS:
                if level > available:
                    break
                g = level
            alloc[event_time] = g
            end = math.ceil(event_time + left / rate[g])
            last_event_gpu = n
            if fet >= end:
                return _done(job, new, timeline, alloc, start, event_time, end, g, available, n)
            left -= duration * rate[g]
            new[event_time] -= g
        elif available == 0:
            alloc[event_time] = 0
        available = new[fet]
        event_time = fet
    alloc[event_time] = base
    end = math.ceil(event_time + left / rate[base])
    new[event_time] = n - base
    new[align(start, end, job.slot)] = n
    return merged(ordered(new)), end, merged(alloc)


def _done(job: PlanJob, new: Timeline, timeline: Timeline, alloc: dict[float, int], start: float, event_time: float,
          end: float, g: int, available: int, n: int) -> tuple[Timeline, float, dict[float, int]]:
    """The job ends (at ``end``) before the next change of the timeline."""
    last_event_gpu = n
    for t in timeline:
        if event_time <= t < end:
            last_event_gpu = new[t]
            new[t] -= g
    new[event_time] = available - g
    if end not in timeline:
        new[align(start, end, job.slot)] = last_event_gpu
    return merged(ordered(new)), end, merged(alloc)
