"""The allocations of Gavel's heterogeneity-aware policies: ``X[job, type]``, the share of time a job should spend on
each server type between two recomputes (GAVEL.md §5; ``docs/gavel.md``).

Every function takes the same arrays for the jobs in the allocation (rows, in job-id order) and the server types
(columns): ``rate[j, w]`` the job's throughput on type ``w`` (any unit common to a row; 0 where it cannot run),
``sf[j, w]`` the GPUs it takes there, ``gpus[w]`` the type's GPUs; and returns ``X`` of shape ``rate.shape``.
"""

from __future__ import annotations

import numpy as np

from optim.gavel.ipm import solve as ecos_answer
from optim.gavel.lp import max_min

__all__ = ["fifo_perf", "fifo_sticky", "max_min_fairness", "solve_max_min"]


def fifo_perf(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, by_name: np.ndarray,
              skip_zero: bool = False) -> np.ndarray:
    """Gavel's ``fifo_perf`` (``FIFOPolicy`` in perf mode): in job order, each job takes the type with the highest
    throughput among those with room for it (ties to the first in ``by_name`` order, the types' names sorted, as
    Gavel's strict ``>`` over its sorted worker types gives); the first job that fits nowhere ends the pass
    (head-of-line blocking). Where the fastest type with room is one the job cannot run on (throughput 0: ResNet-50
    at batch 128 on 2+ K80s when only K80s have room), Gavel still allocates it there: the job holds those GPUs in
    the allocation, never runs until the next recompute, and the jobs behind it go on being served. With
    ``skip_zero`` such types are not candidates (the corrected model). A job that no type can run is passed over
    without holding GPUs (Gavel would hold them for it forever)."""
    x = np.zeros(rate.shape)
    free = gpus.astype(float).copy()
    for j in np.flatnonzero((rate > 0).any(axis=1)):  # a job no server type can run never blocks the queue
        best = -1
        for w in by_name:
            if free[w] >= sf[j, w] and free[w] > 0 and (not skip_zero or rate[j, w] > 0) and (
                    best < 0 or rate[j, w] > rate[j, best]):
                best = w
        if best < 0:
            break
        x[j, best] = 1.0
        free[best] -= sf[j, best]
    return x


def fifo_sticky(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, kept: np.ndarray, order: np.ndarray,
                handed: list[int]) -> np.ndarray:
    """Gavel's ``fifo`` without its over-subscription bug: a job keeps the type it was given (``kept[j]``, -1 for
    none) until it completes. The types freed by completed jobs (``handed``, in their job order) go first to the
    head of the queue if it fits there; then, in job order, each queued job takes the first type in ``order`` with
    room for it (Gavel's code takes the alphabetically last type with a free GPU, i.e. V100, then P100, then K80);
    the first job that fits nowhere ends the pass."""
    x = np.zeros(rate.shape)
    free = gpus.astype(float).copy()
    for k in np.flatnonzero(kept >= 0):
        x[k, kept[k]] = 1.0
        free[kept[k]] -= sf[k, kept[k]]
    queue = [j for j in range(rate.shape[0]) if kept[j] < 0 and (rate[j] > 0).any()]
    for w in handed:
        if queue and rate[queue[0], w] > 0 and sf[queue[0], w] <= free[w]:
            j = queue.pop(0)
            x[j, w] = 1.0
            free[w] -= sf[j, w]
    for j in queue:
        fits = [w for w in order if rate[j, w] > 0 and sf[j, w] <= free[w]]
        if not fits:
            break
        x[j, fits[0]] = 1.0
        free[fits[0]] -= sf[j, fits[0]]
    return x


def max_min_fairness(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, weight: np.ndarray,
                     runnable: np.ndarray | None = None) -> np.ndarray:
    """Gavel's ``max_min_fairness_perf``: maximise the smallest weighted, normalised throughput

        max_X min_j  Σ_w rate[j,w]·sf[j,w]·X[j,w] / (weight_j · prop_j),   prop_j = Σ_w rate[j,w]·gpus[w] / Σ gpus

    subject to X ≥ 0, Σ_w X[j,w] ≤ 1 and Σ_j sf[j,w]·X[j,w] ≤ gpus[w]; ``prop_j`` is the job's throughput under an
    equal split of every type (Gavel's proportional policy). As Gavel solves it: ECOS's answer
    (``optim.gavel.ipm``), X free even where the rate is 0. With ``runnable`` (the corrected model) X is 0 where
    it is False, and the LP is solved by HiGHS's interior-point method (``solve_max_min``)."""
    if rate.shape[0] == 0:
        return np.zeros(rate.shape)
    prop = rate @ gpus.astype(float) / float(gpus.sum())
    if runnable is None:
        coef = rate * (1.0 / (weight * prop))[:, None] * sf
        return ecos_answer(coef, sf, gpus, np.zeros(len(rate)), with_t=True)[0]
    coef = np.where(runnable, rate * sf, 0.0) / (weight * prop)[:, None]
    return solve_max_min(coef, sf, gpus, runnable)


def solve_max_min(coef: np.ndarray, sf: np.ndarray, gpus: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """max t s.t. t ≤ Σ_w coef[j,w]·X[j,w] ∀j, Σ_w X[j,w] ≤ 1, Σ_j sf[j,w]·X[j,w] ≤ gpus[w], 0 ≤ X ≤ allowed.

    Solved by HiGHS's interior-point method without crossover and without presolve (``optim.gavel.lp.max_min``):
    where the optimum is not unique (every job off the bottleneck), this returns a point inside the optimal face, as
    Gavel's ECOS (an interior-point solver) does, rather than one of its vertices, which a simplex would pick and
    which concentrates each job's share on one type. The result is clipped to [0, 1] as Gavel clips ECOS's."""
    return max_min(coef, sf, gpus, allowed)[0]
