"""Gavel's heterogeneity-aware time-sliced policies: ``fifo_perf``, ``max_min_fairness_perf`` and Gavel's ``fifo``
(``gavel_fifo``), each an allocation on top of the shared round mechanism (``optim.gavel.mechanism``)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import register
from optim.gavel.allocation import fifo_perf, fifo_sticky, max_min_fairness
from optim.gavel.mechanism import Job, TimeSliced

__all__ = ["FifoPerf", "MaxMinFairnessPerf", "GavelFifo"]


def _arrays(jobs: list[Job]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([r.rate for r in jobs]), np.array([r.sf for r in jobs])


@register("fifo_perf")
class FifoPerf(TimeSliced):
    """Gavel's ``fifo_perf``: at each recompute, in arrival order, each job gets the type where it runs fastest
    among those with room for it, until one fits nowhere; a job runs only on its type (X = 1)."""

    fifo: ClassVar[bool] = True

    def allocate(self, jobs: list[Job], gpus: np.ndarray) -> np.ndarray:
        rate, sf = _arrays(jobs)
        return fifo_perf(rate, sf, gpus, self._by_name)


@register("max_min_fairness_perf")
class MaxMinFairnessPerf(TimeSliced):
    """Gavel's ``max_min_fairness_perf``: the allocation maximises the smallest throughput of a job relative to its
    throughput on an equal share of the cluster, divided by its priority weight (``Job.priority``); an LP solved by
    HiGHS's interior-point method (``optim.gavel.allocation.solve_max_min``)."""

    def allocate(self, jobs: list[Job], gpus: np.ndarray) -> np.ndarray:
        rate, sf = _arrays(jobs)
        return max_min_fairness(rate, sf, gpus, np.array([r.weight for r in jobs], dtype=float))


@register("gavel_fifo")
class GavelFifo(TimeSliced):
    """Gavel's ``fifo``: a job keeps the type it was first given until it completes (no migration); queued jobs take,
    in arrival order, the fastest type with room (V100, then P100, then K80), until one fits nowhere. Gavel's code
    can over-subscribe a type (GAVEL.md §5); this one never does."""

    fifo: ClassVar[bool] = True

    def allocate(self, jobs: list[Job], gpus: np.ndarray) -> np.ndarray:
        rate, sf = _arrays(jobs)
        sticky = getattr(self, "_sticky", {})
        present = {r.id for r in jobs}
        handed = [w for j, w in sorted(sticky.items()) if j not in present]
        kept = np.array([sticky.get(r.id, -1) for r in jobs], dtype=int)
        x = fifo_sticky(rate, sf, gpus, kept, np.arange(len(gpus)), handed)
        self._sticky = {r.id: int(np.argmax(row)) for r, row in zip(jobs, x) if row.any()}
        return x

    def _restart(self) -> None:
        super()._restart()
        self._sticky: dict[int, int] = {}
