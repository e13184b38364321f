"""The allocation of Gavel's ``allox`` (min-sum completion time by a bipartite matching), with the state it keeps
between calls (POLICIES.md §6 of the Gavel notes; ``docs/gavel.md``); Gandiva's pairing is in
``optim.gavel.packed_alloc``. Arrays as in ``optim.gavel.allocation``; ``ids`` are the jobs' ids, in job order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AlloX"]


class AlloX:
    """AlloX as Gavel implements it (alpha 1): non-preemptive, single-GPU jobs, a min-cost matching per call."""

    def __init__(self) -> None:
        self.previous: dict[int, np.ndarray] = {}

    def allocate(self, ids: list[int], rate: np.ndarray, gpus: np.ndarray, age: np.ndarray,
                 remaining: np.ndarray, by_name: np.ndarray) -> np.ndarray:
        """A job whose previous row was a whole GPU (sums to 1) keeps it and that GPU. The other jobs, oldest first,
        are matched to the free GPUs (listed type by type, types by name) by ``scipy``'s linear sum assignment on
        Gavel's cost: job i as the k-th from last on GPU q costs k·R_i/rate[i, type(q)] + age_i (rate 0 → 1e-10),
        k = 1..m. Each free GPU's first job (largest k) gets X = 1 there; the others get nothing until the next
        call."""
        from scipy.optimize import linear_sum_assignment

        n, m_types = rate.shape
        x = np.zeros((n, m_types))
        kept = np.zeros(n, dtype=bool)
        free = gpus.astype(int).copy()
        for k, j in enumerate(ids):
            row = self.previous.get(j)
            if row is not None and float(row.sum()) == 1.0:
                x[k], kept[k] = row, True
                free -= (row == 1.0).astype(int)
        workers = np.concatenate([np.full(max(int(free[w]), 0), w, dtype=int) for w in by_name] or
                                 [np.zeros(0, dtype=int)])
        queue = [k for k in sorted(np.flatnonzero(~kept).tolist(), key=lambda k: -age[k])]
        m, q = len(queue), len(workers)
        if m and q:
            t = np.where(rate[queue][:, workers] > 0, rate[queue][:, workers], 1e-10)
            base = remaining[queue][:, None] / t
            cost = np.concatenate([base * k for k in range(1, m + 1)], axis=1) + age[queue][:, None]
            rows, cols = linear_sum_assignment(cost)
            first: dict[int, tuple[int, int]] = {}
            for r, c in zip(rows.tolist(), cols.tolist()):
                worker, order = c % q, c // q
                if worker not in first or order > first[worker][1]:
                    first[worker] = (queue[r], order)
            for worker, (k, _) in first.items():
                x[k, workers[worker]] = 1.0
        self.previous = {j: x[k].copy() for k, j in enumerate(ids)}
        return x
