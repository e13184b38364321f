"""Gavel's policies on the shared round mechanism (``optim.gavel.mechanism``), under Gavel's names: the
heterogeneity-aware ``*_perf`` policies, the heterogeneity-agnostic ones, ``isolated`` and ``allox``;
Gavel's ``fifo`` as ``gavel_fifo``; and the corrected models of two Gavel defects (``*_runnable``). Each is an
allocation (``allocation``, ``fairness``, ``packing``) and, where Gavel's policy remembers something between calls,
that state. ``docs/gavel.md`` lists them with what each reproduces and where it departs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from optim.base import register
from optim.gavel.allocation import fifo_perf, fifo_sticky, max_min_fairness
from optim.gavel.ecos_cone import DINF, PINF, ecos_outcome
from optim.gavel.fairness import (
    FinishTimeState,
    finish_time_ecos,
    finish_time_fairness,
    isolated,
    max_min_fairness_agnostic,
    min_total_duration,
)
from optim.gavel.lp import LeastHorizon
from optim.gavel.mechanism import JobTable, TimeSliced
from optim.gavel.packing import AlloX
from sim.model import CapsimError

__all__ = ["FifoPerf", "FifoPerfRunnable", "MaxMinFairnessPerf", "MaxMinFairnessPerfRunnable", "GavelFifo",
           "MaxMinFairness", "FinishTimeFairnessPerf", "FinishTimeFairness", "MinTotalDurationPerf",
           "MinTotalDuration", "Isolated", "AllocX"]


@register("fifo_perf")
class FifoPerf(TimeSliced):
    """Gavel's ``fifo_perf``: at each recompute, in arrival order, each job gets the type where it runs fastest
    among those with room for it, until one fits nowhere; a job runs only on its type (X = 1). As in Gavel, a job
    whose fastest type with room is one it cannot run on holds it without running (``fifo_perf_runnable`` does not)."""

    fifo: ClassVar[bool] = True
    skip_zero: ClassVar[bool] = False

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return fifo_perf(table.rate[rows], table.sf[rows], gpus, self._by_name, self.skip_zero)


@register("fifo_perf_runnable")
class FifoPerfRunnable(FifoPerf):
    """``fifo_perf`` corrected: a job takes the fastest type with room *among those it can run on*."""

    skip_zero: ClassVar[bool] = True


@register("max_min_fairness_perf")
class MaxMinFairnessPerf(TimeSliced):
    """Gavel's ``max_min_fairness_perf``: the allocation maximises the smallest throughput of a job relative to its
    throughput on an equal share of the cluster, divided by its priority weight (``Job.priority``); an LP solved by
    HiGHS's interior-point method (``optim.gavel.allocation.solve_max_min``). As in Gavel, the LP counts a job's
    table throughput on a type with fewer GPUs than its gang (an X it can never run);
    ``max_min_fairness_perf_runnable`` does not."""

    runnable_only: ClassVar[bool] = False

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        sf = table.sf[rows]
        if self.runnable_only:
            rate = table.rate[rows]
            return max_min_fairness(rate, sf, gpus, table.weight[rows], rate > 0)
        return max_min_fairness(self.lp_rate(rows), sf, gpus, table.weight[rows])


@register("max_min_fairness_perf_runnable")
class MaxMinFairnessPerfRunnable(MaxMinFairnessPerf):
    """``max_min_fairness_perf`` corrected: X = 0 (and no share in the normalisation) on a type where the job's gang
    cannot fit."""

    runnable_only: ClassVar[bool] = True


@register("gavel_fifo")
class GavelFifo(TimeSliced):
    """Gavel's ``fifo``: a job keeps the type it was first given until it completes (no migration); queued jobs take,
    in arrival order, the fastest type with room (V100, then P100, then K80), until one fits nowhere. Gavel's code
    can over-subscribe a type (GAVEL.md §5); this one never does."""

    fifo: ClassVar[bool] = True
    _sticky: dict[int, int]

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        ids = table.ids[rows].tolist()
        present = set(ids)
        handed = [w for j, w in sorted(self._sticky.items()) if j not in present]
        kept = np.array([self._sticky.get(j, -1) for j in ids], dtype=int)
        x = fifo_sticky(table.rate[rows], table.sf[rows], gpus, kept, np.arange(len(gpus)), handed)
        self._sticky = {j: int(np.argmax(row)) for j, row in zip(ids, x) if row.any()}
        return x

    def _restart(self) -> None:
        super()._restart()
        self._sticky = {}


@register("max_min_fairness")
class MaxMinFairness(TimeSliced):
    """Gavel's ``max_min_fairness`` (heterogeneity-agnostic): every job an equal share of GPU time weighted by its
    priority, blind to speed (``optim.gavel.fairness.max_min_fairness_agnostic``); types visited in a shuffled
    order."""

    shuffled: ClassVar[bool] = True

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return max_min_fairness_agnostic(table.sf[rows], gpus, table.weight[rows])


@register("isolated")
class Isolated(TimeSliced):
    """Gavel's ``isolated``: the cluster cut into equal slices, one per active job (1/m of every type's GPUs);
    types visited in a shuffled order."""

    shuffled: ClassVar[bool] = True

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return isolated(table.sf[rows].astype(float), gpus)


class _Agnostic(TimeSliced):
    """What the agnostic finish-time and duration policies share: every type is given the job's rate on the
    reference type, the fastest GPU (V100, Gavel's ``'v100'``), or its best rate where it cannot run there."""

    agnostic: ClassVar[bool] = False

    def policy_rate(self, rows: np.ndarray) -> np.ndarray:
        rate = self.steps_rate(rows)
        if not self.agnostic or not len(rows):
            return rate
        ref = rate[:, self._reference()]
        ref = np.where(ref > 0, ref, rate.max(axis=1))
        return np.repeat(ref[:, None], rate.shape[1], axis=1)


@register("finish_time_fairness_perf")
class FinishTimeFairnessPerf(_Agnostic):
    """Gavel's ``finish_time_fairness_perf`` (Themis): minimise the largest ratio of a job's expected finish time
    under X to that under ``isolated`` (counting the isolated time it has used up); by default Gavel's cone program
    solved as ECOS solves it (``point``)."""

    _state: FinishTimeState

    def __init__(self, recompute_interval: float = 1920.0, type_order: Sequence[str] | None = None, seed: int = 0,
                 point: str = "ecos"):
        """``point``: how X is found. ``ecos``: Gavel's cone program itself (cvxpy's ``inv_pos`` and ``maximum`` as
        cvxpy hands them to ECOS, ``optim.gavel.fairness.finish_time_ecos``) solved by following ECOS's iterations,
        the least ratio and the point together as Gavel gets them. Where ECOS finds the program infeasible Gavel
        takes ``isolated``'s allocation, and so does this; out of iterations, cvxpy hands back ECOS's iterate and
        Gavel uses it, as this does; where ECOS stops on numerical problems or leaving the cone (cvxpy raises,
        Gavel's simulator crashes) the best iterate, or, without one, the ``centre`` point, recorded as a fallback
        in the round's plan. ``centre``: the least ratio by root finding on HiGHS LPs, then the analytic centre of
        the allocations just above it with ECOS's cone weighting (``finish_time_fairness``): near ECOS's point, not
        on it (docs/gavel.md, "Solving the LPs as Gavel does")."""
        self.point = point
        super().__init__(recompute_interval, type_order, seed)
        self.check_param("point", str, choices=("ecos", "centre"))

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        rate = self.policy_rate(rows)
        sf = table.sf[rows].astype(float)
        remaining = self.remaining(rows)
        x_iso = isolated(sf, gpus)
        iso = (rate * x_iso).sum(axis=1)
        used = self._state.update(table.ids[rows].tolist(), remaining, iso)
        age = self.ages(rows)
        if self.point == "ecos":
            x, code = finish_time_ecos(rate, sf, gpus, age, remaining, used + remaining / iso)
            if code in (PINF, DINF, PINF + 10, DINF + 10):  # cvxpy leaves X without a value; Gavel takes isolated
                return x_iso
            use, fell = ecos_outcome(code, x, ("centre", "the centre point used"))
            if fell is not None:
                self.fall_back(*fell)
            if use:
                return x
        return finish_time_fairness(rate, sf, gpus, age, remaining, used, iso, self.agnostic)

    def _restart(self) -> None:
        super()._restart()
        self._state = FinishTimeState()


@register("finish_time_fairness")
class FinishTimeFairness(FinishTimeFairnessPerf):
    """Gavel's ``finish_time_fairness`` (heterogeneity-agnostic): the same, with every type at the job's reference
    rate; types visited in a shuffled order."""

    agnostic: ClassVar[bool] = True
    shuffled: ClassVar[bool] = True


@register("min_total_duration_perf")
class MinTotalDurationPerf(_Agnostic):
    """Gavel's ``min_total_duration_perf``: the allocation under which every active job finishes by the least
    horizon Gavel's bisection finds (``optim.gavel.fairness.min_total_duration``)."""

    _least: LeastHorizon

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return min_total_duration(self.policy_rate(rows), table.sf[rows].astype(float), gpus, self.remaining(rows),
                                  self._least, table.ids[rows].tolist())

    def _restart(self) -> None:
        super()._restart()
        self._least = LeastHorizon()


@register("min_total_duration")
class MinTotalDuration(MinTotalDurationPerf):
    """Gavel's ``min_total_duration`` (heterogeneity-agnostic): the same, with every type at the job's reference
    rate; types visited in a shuffled order."""

    agnostic: ClassVar[bool] = True
    shuffled: ClassVar[bool] = True


@register("allox")
class AllocX(TimeSliced):
    """Gavel's ``allox`` (AlloX): non-preemptive; at each recompute the queued jobs are matched to the free GPUs by
    a min-sum-of-completion-times assignment and each free GPU's first job is given it
    (``optim.gavel.packing.AlloX``). Single-GPU jobs only, as in Gavel: a job of several GPUs is refused."""

    single_gpu_only: ClassVar[bool] = True
    """It refuses jobs of several GPUs (the conformance worlds give it single-GPU jobs)."""
    _allox: AlloX

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        sf = table.sf[rows]
        if (sf > 1).any():
            k = int(np.flatnonzero((sf > 1).any(axis=1))[0])
            raise CapsimError(f"policy 'allox': job {int(table.ids[rows][k])} runs on {int(sf[k].max())} GPUs; "
                              f"AlloX (as Gavel implements it) schedules single-GPU jobs only: give it a trace "
                              f"of single-GPU jobs")
        return self._allox.allocate(table.ids[rows].tolist(), self.steps_rate(rows), gpus, self.ages(rows),
                                    self.remaining(rows), self._by_name)

    def _restart(self) -> None:
        super()._restart()
        self._allox = AlloX()
