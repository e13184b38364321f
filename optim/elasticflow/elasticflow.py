"""ElasticFlow (Gu et al., ASPLOS'23) as its simulator runs it (``ef-accessctrl``): admission control on the
deadlines, the minimum satisfactory share of every job, spare GPUs handed out greedily.

At each decision (``scheduler.py``'s ``ef_sim_jobs_access_control``):

1. *admission*: when jobs arrive, every runnable job and the arrivals are planned afresh in deadline order on a
   full cluster (``optim.elasticflow.plan``); if any plan misses its deadline (an old job's included), all the
   arrivals of this decision are rejected and never run;
2. every runnable job is planned again in deadline order; its GPUs now are its plan's;
3. spare GPUs go, one level at a time, to the job whose next level costs the fewest added GPU-seconds per added
   GPU as coded: the list is sorted by that value *descending* (a job without GPUs first), and the first job that
   can grow takes its next level; repeated until no job can grow. A job that grows takes the grown plan whole:
   its GPUs, its end and its exact end (``real_end``), which caps its progress until the next decision (the clock
   never runs a job past its planned exact end) and is its verdict;
4. the next decision is due at the first change of any job's plan.

A job is judged on time by its planned exact end (``verdict: plan``, ElasticFlow's verdict: a job slowed by the
restart overheads after its last plan still counts on time); ``verdict: end`` judges it by its actual end instead.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import ClassVar

from optim.base import register
from optim.elasticflow.plan import free_at, plan
from optim.elasticflow.timeline import PlanJob, PlanJobs, Timeline, elasticflow_cap, gpu_seconds, merged, ordered
from optim.elasticflow.trial import marginal, own_free
from sim.elasticflow.vocabulary import (
    SLOT,
    ElasticPlan,
    ElasticView,
    ReplayCluster,
    ReplayPolicy,
    align,
    next_level,
)
from sim.model import CapsimError

__all__ = ["ElasticFlow"]


@register("elasticflow")
class ElasticFlow(ReplayPolicy):
    """ElasticFlow's admission control and elastic scaling (see the module docstring).

    ``verdict``: ``plan`` judges a job by its last planned exact end, as ElasticFlow does; ``end`` by when it really
    ended (a job whose overheads pushed it past its deadline is late). ``slot``: the scheduling slot
    (``ReplayPolicy``)."""

    clock: ClassVar[str] = "elastic"
    admission: ClassVar[bool] = True

    def __init__(self, verdict: str = "plan", slot: int = SLOT):
        if verdict not in ("plan", "end"):
            raise CapsimError(f"policy 'elasticflow': verdict must be 'plan' or 'end', got {verdict!r}")
        self.verdict = verdict
        super().__init__(slot)

    def reset(self, cluster: ReplayCluster) -> None:
        self._jobs = PlanJobs(lambda job: elasticflow_cap(job, cluster.gpu), cluster.gpus, "elasticflow", self.slot)

    def decide(self, view: ElasticView) -> ElasticPlan:  # type: ignore[override]
        now, n = view.time, view.cluster.gpus
        runnable = [self._jobs(s) for s in view.runnable]
        arrivals = [self._jobs(s) for s in view.arrivals]
        self._jobs.forget({j.id for j in runnable} | {j.id for j in arrivals})
        rejected: tuple[int, ...] = ()
        admitted = False
        if arrivals:
            if _estimate(sorted(runnable + arrivals, key=_ddl), now, n):
                admitted = True
                runnable += arrivals
            else:
                rejected = tuple(a.id for a in arrivals)
        if not admitted:
            runnable.sort(key=_ddl)
            _estimate(runnable, now, n)
        runnable.sort(key=_ddl)
        timeline: Timeline = {now: n}
        for j in runnable:
            j.gpus = j.allocations[now]
            _, timeline = plan(j, now, timeline, n)
        timeline = _hand_out(runnable, now, timeline, n)
        wake = math.inf
        for j in runnable:
            for t in sorted(j.allocations):
                if t > now:
                    wake = min(wake, t)
                    break
        runnable.sort(key=lambda j: -j.gpus)
        return ElasticPlan(tuple((j.id, j.gpus) for j in runnable), {j.id: j.end for j in runnable},
                           {j.id: j.real_end for j in runnable}, rejected, wake)


def _ddl(j: PlanJob) -> float:
    return j.ddl


def _estimate(jobs: list[PlanJob], now: float, n: int) -> bool:
    """Plan ``jobs`` in their order on a full cluster; whether every plan meets its deadline."""
    timeline: Timeline = {now: n}
    ok = True
    for j in jobs:
        met, timeline = plan(j, now, timeline, n)
        ok = ok and met
    return ok


def _own_free(job: PlanJob, timeline: Timeline) -> Timeline:
    """The free GPUs with ``job``'s own GPUs (its allocations in time order) given back until its end, merged:
    ``get_marginal``'s timeline in one pass (from the job's end on it is ``timeline`` itself)."""
    times, free = own_free(sorted(job.allocations.items()), job.end, list(timeline), list(timeline.values()))
    return dict(zip(times, free))


def _marginal(job: PlanJob, spare: int, now: float, timeline: Timeline, n: int, tk: list[float],
              tv: list[int]) -> None:
    """The job's added GPU-seconds per added GPU if it grew to its next level now (ElasticFlow's ``get_marginal``):
    -inf where it cannot grow, +inf for a job without GPUs. Only the value is worked out (``optim.elasticflow.trial``,
    or ``plan`` where the trial leaves the usual path); ``job.trial`` says whether its ``next_*`` plan was laid too
    (if not, ``_hand_out`` lays it when the job grows). ``tk``, ``tv``: the timeline's times and free GPUs."""
    job.trial = False
    if job.next_gpus - job.gpus > spare or job.next_gpus == job.gpus:
        job.marginal = -math.inf
        return
    if job.gpus == 0:
        job.marginal = math.inf
        return
    q = job.next_gpus
    real_end = math.ceil(now + job.left / job.rate[q])
    end = align(now, real_end, job.slot)
    if job.held is not job.allocations or job.held_end != job.end:  # a new plan: its GPUs in time order (None
        items = list(job.allocations.items())                         # if they are not) and its GPU-seconds
        in_order = all(items[k][0] < items[k + 1][0] for k in range(len(items) - 1))
        job.held, job.held_end = job.allocations, job.end
        job.held_list, job.held_gs = items if in_order else None, gpu_seconds(job.allocations, job.end)
    allocs = job.held_list
    if allocs is None:
        _lay(job, now, timeline, n)  # allocations out of time order: given back one after another, as coded
        return
    gs_now = job.held_gs
    a_ddl = align(now, job.ddl, job.slot)
    region = _region(allocs, job.end, now, a_ddl, tk, tv)
    if region == job.region and allocs is job.region_allocs and (q, job.left, gs_now) == job.region_job:
        job.marginal = job.region_value  # it reads what its last trial on the lists' path read: the same value
        return
    times, free = own_free(allocs, job.end, tk, tv, a_ddl)  # all a trial on the usual path reads
    k = bisect_right(times, now)
    if k == len(times) or times[k] >= a_ddl:  # no change before the aligned deadline: the whole timeline
        times, free = own_free(allocs, job.end, tk, tv)
        k = bisect_right(times, now)
    fet = times[k] if k < len(times) else None
    if (a_ddl if fet is None else fet) >= end and job.ddl >= real_end:
        job.marginal = (q * (end - now) - gs_now) / (q - job.gpus)
        return
    value = marginal(job, now, times, free, n, q, gs_now)
    if value is None:
        times, free = own_free(allocs, job.end, tk, tv)
        _lay(job, now, timeline, n, dict(zip(times, free)))
    else:
        job.marginal = job.region_value = value
        job.region, job.region_allocs, job.region_job = region, allocs, (q, job.left, gs_now)


def _region(allocs: list[tuple[float, int]], end: float, now: float, a_ddl: float, tk: list[float],
            tv: list[int]) -> tuple[object, ...]:
    """What a trial's own free-GPU timeline up to its aligned deadline is made of, without building it: the
    timeline's keys up to there and their free GPUs after ``now``, and what the free GPUs at ``now`` (changed by
    every hand-out step) decide: if the timeline changes before the job's own GPUs do, only whether the job's own
    timeline keeps that first key (``own_free`` drops a key whose value repeats the one before); else the free GPUs
    at ``now`` themselves (the job's own changes before then are laid on them). The same region gives the same
    trial."""
    cut = bisect_right(tk, a_ddl)
    g0 = allocs[0][1]
    t_own, g_own = (allocs[1][0], allocs[1][1]) if len(allocs) > 1 and allocs[1][0] < end else (end, 0)
    if len(tk) > 1 and tk[1] <= t_own:
        head: object = tv[0] + g0 != tv[1] + (g0 if tk[1] < t_own else g_own)
    else:
        head = tv[0]
    return (now, a_ddl, end, head, tk[:cut], tv[1:cut])


def _lay_literal(job: PlanJob, timeline: Timeline, n: int) -> Timeline:
    """``get_marginal``'s timeline built as coded: ``job``'s allocations given back one after another in their
    dict order (the same as ``_own_free`` when they are in time order, as they are in every plan seen so far)."""
    tmp = dict(timeline)
    if job.end not in tmp:
        last = None
        for t, v in tmp.items():
            if t < job.end:
                last = v
            else:
                break
        tmp[job.end] = last  # type: ignore[assignment]
        tmp = ordered(tmp)
    given = 0
    for at, g in job.allocations.items():
        if at not in tmp:
            tmp[at] = free_at(at, tmp, n)
            tmp = ordered(tmp)
        for t in tmp:
            if t < at:
                continue
            if t >= job.end:
                break
            tmp[t] += g - given
        given = g
    return merged(tmp)


def _lay(job: PlanJob, now: float, timeline: Timeline, n: int, own: Timeline | None = None) -> None:
    """The trial plan of ``job`` at its next level (``get_marginal``'s re-plan), its ``next_*`` fields set."""
    job.trial = True
    keys = list(job.allocations)
    if any(keys[k] >= keys[k + 1] for k in range(len(keys) - 1)):
        own = _lay_literal(job, timeline, n)
    elif own is None:
        own = _own_free(job, timeline)
    plan(job, now, own, n, assign=job.next_gpus, trial=True)
    if job.gpus == 0:
        job.marginal = math.inf


def _hand_out(runnable: list[PlanJob], now: float, timeline: Timeline, n: int) -> Timeline:
    """Give the spare GPUs away one level at a time (ElasticFlow's ``allocate_free_gpus``); sorts ``runnable``."""
    used = 0
    for j in runnable:
        j.next_gpus = next_level(j.levels, j.gpus)
        used += j.gpus
    spare = n - used
    if spare == 0:
        return timeline
    if timeline.get(now) != spare:
        raise CapsimError(f"elasticflow: the plans hold {used} of {n} GPUs at t={now:g} but the timeline says "
                          f"{timeline.get(now)} are free")
    tk, tv = list(timeline), list(timeline.values())
    for j in runnable:
        _marginal(j, spare, now, timeline, n, tk, tv)
    runnable.sort(key=lambda j: j.marginal, reverse=True)
    grew = True
    while spare > 0 and grew:
        grew = False
        for j in runnable:
            if j.next_gpus - j.gpus > spare or j.next_gpus == j.gpus:
                continue
            if not j.trial:
                _lay(j, now, timeline, n)
            timeline = merged(ordered(j.next_timeline))
            j.allocations = merged(j.next_allocations)
            spare -= j.next_gpus - j.gpus
            j.gpus = j.next_gpus
            j.end = j.next_end
            j.real_end = j.next_real_end
            j.next_gpus = next_level(j.levels, j.gpus)
            grew = True
            break
        tk, tv = list(timeline), list(timeline.values())
        for j in runnable:
            if j.next_gpus - j.gpus > 0:
                _marginal(j, spare, now, timeline, n, tk, tv)
        runnable.sort(key=lambda j: j.marginal, reverse=True)
    return timeline
