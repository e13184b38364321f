"""Gavel's packing policies under Gavel's names, on the packing round mechanism (``optim.gavel.packed``):
``fifo_packed``, ``gandiva``, and the LP policies ``max_min_fairness_packed``, ``finish_time_fairness_packed`` and
``min_total_duration_packed`` (``docs/gavel.md``, "Packing")."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import register
from optim.gavel.jobs import JobTable
from optim.gavel.packed import Packed, PairTable
from optim.gavel.packed_alloc import GandivaPairs, fifo_packed, normalized_pair_rate

__all__ = ["FifoPacked", "Gandiva"]


def _members(table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's members as positions in ``rows``."""
    pos = np.full(max(table.size, 1), -1, dtype=np.int64)
    pos[rows] = np.arange(len(rows))
    row = table.row
    return (pos[[row[int(a)] for a in pairs.a[prow]]].astype(np.int64),
            pos[[row[int(b)] for b in pairs.b[prow]]].astype(np.int64))


@register("fifo_packed")
class FifoPacked(Packed):
    """Gavel's ``fifo_packed``: ``fifo_perf``'s pass, then the queue packed onto the placed jobs while a pair's
    normalised throughput exceeds ``threshold`` (``optim.gavel.packed_alloc.fifo_packed``, with Gavel's dropped
    queue head); a job runs only in what it is allocated."""

    fifo: ClassVar[bool] = True

    def __init__(self, recompute_interval: float = 1920.0, type_order: list[str] | None = None, seed: int = 0,
                 threshold: float = 1.5):
        """``threshold``: the least normalised throughput of a pair (Gavel's ``packing_threshold``)."""
        self.threshold = threshold
        super().__init__(recompute_interval, type_order, seed)
        self.check_param("threshold", float, low=0.0)

    def allocate_pairs(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray,
                       gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pa, pb = _members(table, rows, pairs, prow)
        return fifo_packed(table.speed[rows], table.sf[rows], gpus, self._by_name, pa, pb, pairs.speed_a[prow],
                           pairs.speed_b[prow], self.threshold)


@register("gandiva")
class Gandiva(Packed):
    """Gavel's ``gandiva``: jobs alone share the cluster equally while they fit; when they do not, jobs of equal GPU
    counts are paired at random (from the run's seed) and packed, and a pair whose normalised throughput over all
    types is below 1 is split at the next recompute (``optim.gavel.packed_alloc.GandivaPairs``)."""

    _pairing: GandivaPairs

    def allocate_pairs(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray,
                       gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pa, pb = _members(table, rows, pairs, prow)
        score = normalized_pair_rate(table.speed[rows], pa, pb, pairs.speed_a[prow], pairs.speed_b[prow])
        index = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(pairs.a[prow], pairs.b[prow]))}
        return self._pairing.allocate(table.ids[rows].tolist(), table.sf[rows].astype(float), gpus, index,
                                      lambda a, b: float(score[index[(a, b)]]) if (a, b) in index else 0.0,
                                      len(prow))

    def forget(self, jobs: list[int]) -> None:
        self._pairing.forget(jobs)

    def _restart(self) -> None:
        super()._restart()
        self._pairing = GandivaPairs(self.seed)
