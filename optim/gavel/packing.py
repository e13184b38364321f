"""The allocations of Gavel's ``gandiva`` (random pairing with introspection) and ``allox`` (min-sum completion time
by a bipartite matching), each with the state it keeps between calls (POLICIES.md §5–§6 of the Gavel notes;
``docs/gavel.md``). Arrays as in ``optim.gavel.allocation``; ``ids`` are the jobs' ids, in job order.
"""

from __future__ import annotations

import random

import numpy as np

from optim.gavel.fairness import isolated

__all__ = ["Pairing", "AlloX"]


class Pairing:
    """Gandiva's pairing map as Gavel keeps it: job → its partner (None: alone), and the random stream its pairs
    are drawn from (CPython's ``random.Random(seed)``, as Gavel's, so the same seed draws the same pairs)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.partner: dict[int, int | None] = {}

    def allocate(self, ids: list[int], sf: np.ndarray, gpus: np.ndarray, packs: np.ndarray) -> np.ndarray:
        """One call of Gavel's ``GandivaPolicy``.

        1. Entries whose job or partner left are dropped, and so is every entry Gavel's introspection rejects: a job
           alone scores 0, and so does a pair that cannot be co-located (``packs[j]`` False: in Gavel's throughput
           table every pair of multi-GPU jobs has co-located rate 0).
        2. If the jobs' GPUs fit in the cluster, X is ``isolated`` over the jobs.
        3. Otherwise the jobs not in a pair are drawn into pairs: as many draws as such jobs, each
           ``rng.sample(jobs, 2)``, kept only if both take as many GPUs; the rest stay alone. Every combination (a
           pair or a job alone) gets ``isolated``'s share over the combinations; a job in a pair gets no share of
           its own.

        capsim cannot co-locate two jobs on a GPU. A pair that would be packed (``packs``) is time-sliced instead:
        each of its jobs gets the pair's share. A pair that cannot be packed runs, as in Gavel, neither as a pair
        nor alone (its jobs get no share and run only on GPUs left over)."""
        n = len(ids)
        x = np.zeros((n, len(gpus)))
        if n == 0:
            return x
        present = set(ids)
        pos = {j: k for k, j in enumerate(ids)}
        drop: list[int | None] = []
        for j, other in self.partner.items():
            if j not in present or (other is not None and other not in present) or other is None or not (
                    packs[pos[j]] and packs[pos[other]]):
                drop += [j, other]
        for gone in drop:
            if gone is not None:
                self.partner.pop(gone, None)
        s = sf.max(axis=1)
        if float(s.sum()) <= float(gpus.sum()):
            return isolated(sf, gpus)
        alone = [j for j in sorted(ids) if j not in self.partner]
        for _ in range(len(alone)):
            if len(alone) <= 1:
                break
            a, b = self.rng.sample(alone, 2)
            if s[pos[a]] != s[pos[b]]:
                continue
            alone.remove(a)
            alone.remove(b)
            self.partner[a], self.partner[b] = b, a
        for j in alone:
            self.partner[j] = None
        combos = [(j, o) for j, o in self.partner.items() if o is None or j < o]
        share = isolated(np.array([sf[pos[j]] for j, _ in combos]), gpus)
        for (j, o), row in zip(combos, share):
            if o is None:
                x[pos[j]] = row
            elif packs[pos[j]] and packs[pos[o]]:
                x[pos[j]] = x[pos[o]] = row
        return x

    def forget(self, gone: list[int]) -> list[int]:
        """Dissolve the pairs of jobs that left (Gavel deletes a pair's entries when one of its jobs completes);
        returns the partners left behind, which lose their share until the next call."""
        alone = []
        for j in gone:
            other = self.partner.pop(j, None)
            if other is not None and self.partner.get(other) == j:
                del self.partner[other]
                alone.append(other)
        return alone


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
