"""A spare-GPU hand-out trial worked out on plain lists, without the dicts of ``plan``.

The hand-out (``optim.elasticflow.elasticflow``) asks, after every level it hands out, what each growable job's
grown plan would cost: ``plan(job, now, own, n, assign=next level, trial=True)`` on the free GPUs with the job's own
given back (``own``). Only the trial's GPU-seconds are read unless it is adopted (then ``plan`` lays it as coded), so
``marginal`` computes them directly: the next level from now to the first change, the fewest GPUs that meet the
deadline filled backwards from it, laid forwards from the first change, with the same floating-point operations in the
same order as ``plan``. Where the trial leaves that path (no level meets the deadline, the first change at or after
the aligned deadline) it returns None and the caller lays it with ``plan``.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

from optim.elasticflow.timeline import TOP, PlanJob
from sim.elasticflow.vocabulary import align

__all__ = ["own_free", "marginal"]

def own_free(allocs: list[tuple[float, int]], end: float, tk: list[float], tv: list[int],
             upto: float = math.inf) -> tuple[list[float], list[int]]:
    """Times and free GPUs of the timeline (``tk``, ``tv``) with a job's GPUs (its allocations in time order, held
    until ``end``) given back, merged up to ``end``; after it the timeline's own keys follow unchanged. Only the keys
    up to ``upto`` (the same as the whole one's up to there)."""
    lim = end if end < upto else upto
    cut = bisect_right(tk, lim)
    times, free = tk[:cut], tv[:cut]
    edges = [t for t, _ in allocs if t < end and t <= upto]
    if end <= upto:
        edges.append(end)
    for t in edges:  # a key at every change of the job's GPUs
        i = bisect_left(times, t)
        if i == len(times) or times[i] != t:
            times.insert(i, t)
            free.insert(i, free[i - 1] if i else 0)
    n_allocs = len(allocs)
    for a in range(n_allocs):
        t, g = allocs[a]
        if g == 0 or t >= end or t > upto:
            continue
        stop = allocs[a + 1][0] if a + 1 < n_allocs else end
        i, j = bisect_left(times, t), bisect_left(times, stop if stop < end else end)
        free[i:j] = [v + g for v in free[i:j]]
    keep = [k for k in range(1, len(free)) if free[k] != free[k - 1]]
    times = [times[0]] + [times[k] for k in keep] if times else times
    free = [free[0]] + [free[k] for k in keep] if free else free
    if end <= upto:
        stop = bisect_right(tk, upto)
        times.extend(tk[cut:stop])
        free.extend(tv[cut:stop])
    return times, free


_FIT: dict[int, list[int]] = {}
"""Per top level, the largest level that fits in v free GPUs for v up to 4,096 (``plan``'s ``_fit``)."""


def _fitted(values: list[int], top: int) -> list[int]:
    table = _FIT.get(top)
    if table is None:
        table = _FIT[top] = [min(p, top) for p in TOP]
    if values and (min(values) < 0 or max(values) >= len(table)):
        return [0 if v < 1 else min(top, 1 << (v.bit_length() - 1)) for v in values]
    return [table[v] for v in values]


def marginal(job: PlanJob, now: float, times: list[float], free: list[int], n: int, q: int,
             gs_now: float) -> float | None:
    """The added GPU-seconds per added GPU of ``job``'s trial at ``q`` GPUs on its own free-GPU timeline (``times``,
    ``free``; ``gs_now`` is its plan's GPU-seconds), or None where the trial leaves the usual path. The caller has
    ruled out a job without GPUs and one that finishes at ``q`` before the first change."""
    if len(times) < 2 or times[0] != now or job.left <= 0:
        return None
    a_ddl = align(now, job.ddl, job.slot)
    fet = times[1]
    if not fet < a_ddl:
        return None
    left = job.left - (fet - now) * job.rate[q]
    m = bisect_left(times, a_ddl)
    keys = times[1:m]
    keys.append(a_ddl)
    fit = _fitted(free[1:m], job.levels[-1])
    fit.append(_fitted([free[m] if m < len(times) and times[m] == a_ddl else free[m - 1]], job.levels[-1])[0])
    seen = (now, q, job.left, gs_now, keys, fit)  # all the trial reads: the same as last time, the same value
    if job.seen == seen:
        return job.seen_value
    job.seen = seen
    job.seen_value = value = _backward(job, now, q, keys, fit, left, m - 1, n, gs_now)
    return value


def _backward(job: PlanJob, now: float, q: int, keys: list[float], fit: list[int], left: float, periods: int, n: int,
              gs_now: float) -> float | None:
    """``plan``'s backward fill from the aligned deadline, level by level, until one meets the iterations left."""
    ddl, rate = job.ddl, job.rate
    dur = [keys[k + 1] - keys[k] for k in range(periods - 1)]
    dur.append(ddl - keys[periods - 1])
    most = max(fit[:periods])
    span = (keys[periods - 1] - keys[0] + max(dur[-1], 0.0)) * (1 + 1e-9)  # bounds a level's partial sums
    last_quota = 0
    fastest = 0.0
    for quota in job.levels:
        if quota > n:
            return None
        if quota <= most:
            fastest = max(fastest, rate[quota])
        if span * fastest < left:  # no partial sum at this level can reach the iterations left
            if quota >= most:
                return None
            last_quota = quota
            continue
        got = 0.0
        for k in range(periods - 1, -1, -1):
            f = fit[k]
            a = quota if f > quota else f
            if a == 0:
                continue
            got += dur[k] * rate[a]
            if got >= left:
                return _forward(job, now, q, keys, fit, periods, k, quota, last_quota, left, gs_now)
        if quota >= most:  # every larger level reads the same shares: none meets the deadline
            return None
        last_quota = quota
    return None


def _forward(job: PlanJob, now: float, q: int, keys: list[float], fit: list[int], periods: int, s: int, quota: int,
             last_quota: int, left: float, gs_now: float) -> float | None:
    """``plan``'s forward pass from the first change (the previous level before period ``s``, ``quota`` from it) and
    the trial's marginal: its GPU-seconds summed as ``gpu_seconds`` sums them (in time order; a share counts until
    the next key of the plan, the last until its end)."""
    ddl, rate = job.ddl, job.rate
    total = q * (keys[0] - now)
    first = 1
    if s > 0 and last_quota == 0:  # no GPUs before period s: nothing to lay or count there
        first = s + 1
    level = quota if s < first else last_quota
    f = fit[first - 1]
    la = level if f > level else f
    for k in range(first, periods + 1):
        t0 = keys[k - 1]
        if la != 0:
            done = ((ddl if k == periods else keys[k]) - t0) * rate[la]
            if k - 1 >= s and done >= left:
                real_left = math.ceil(left / rate[la])
                end = t0 + align(0, real_left, job.slot)
                total += la * ((keys[k] if k < periods else end) - t0)
                return (total - gs_now) / (q - job.gpus)
            left -= done
            total += la * (keys[k] - t0)
        level = quota if k >= s else last_quota
        f = fit[k]
        la = level if f > level else f
    if la == 0:
        return None
    real_left = math.ceil(left / rate[la])
    end = keys[periods] + align(0, real_left, job.slot)
    total += la * (end - keys[periods])
    return (total - gs_now) / (q - job.gpus)
