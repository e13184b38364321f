"""Gavel's heterogeneity-aware time-sliced policies: ``fifo_perf``, ``max_min_fairness_perf`` and Gavel's ``fifo``
(``gavel_fifo``), each an allocation on top of the shared round mechanism (``optim.gavel.mechanism``)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import register
from optim.gavel.allocation import fifo_perf, fifo_sticky, max_min_fairness
from optim.gavel.mechanism import JobTable, TimeSliced

__all__ = ["FifoPerf", "MaxMinFairnessPerf", "GavelFifo"]


@register("fifo_perf")
class FifoPerf(TimeSliced):
    """Gavel's ``fifo_perf``: at each recompute, in arrival order, each job gets the type where it runs fastest
    among those with room for it, until one fits nowhere; a job runs only on its type (X = 1)."""

    fifo: ClassVar[bool] = True

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return fifo_perf(table.rate[rows], table.sf[rows], gpus, self._by_name)


@register("max_min_fairness_perf")
class MaxMinFairnessPerf(TimeSliced):
    """Gavel's ``max_min_fairness_perf``: the allocation maximises the smallest throughput of a job relative to its
    throughput on an equal share of the cluster, divided by its priority weight (``Job.priority``); an LP solved by
    HiGHS's interior-point method (``optim.gavel.allocation.solve_max_min``)."""

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        return max_min_fairness(table.rate[rows], table.sf[rows], gpus, table.weight[rows])


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
