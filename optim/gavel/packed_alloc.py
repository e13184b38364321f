"""The allocations of Gavel's packing policies without an LP: ``fifo_packed`` and ``gandiva``'s pairing (PACKING.md
§3 of the Gavel notes; ``docs/gavel.md``, "Packing").

Arrays as in ``optim.gavel.allocation`` for the jobs (rows in job order); the pairs are given by their members' row
indices ``pa``, ``pb`` and each member's rate in the pair, ``tpa``, ``tpb`` (pairs × types, 0 where the pair may not
share a type). Each function returns ``(X of the jobs alone, X of the pairs)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from optim.gavel.fairness import isolated

__all__ = ["fifo_packed", "normalized_pair_rate", "GandivaPairs"]


def fifo_packed(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, by_name: np.ndarray, pa: np.ndarray,
                pb: np.ndarray, tpa: np.ndarray, tpb: np.ndarray,
                threshold: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Gavel's ``fifo_packed`` (``FIFOPolicy`` in packing mode), from scratch at every call:

    1. in job order, each job takes the type with the highest rate among those with room for its GPUs (ties to the
       first in ``by_name`` order); the first job that fits nowhere ends the pass and is dropped from the queue for
       this call (Gavel's defect: it is popped before the check), so the jobs behind it may still be packed;
    2. then the queue, in order: each job looks, among the jobs placed alone with as many GPUs (in placement order),
       for the one whose pair has the largest normalised rate on that job's type, Σ rate in pair / rate alone over the
       members with a positive rate in the pair; above ``threshold`` the pair takes that job's place and type. The
       first queued job with no such partner ends packing (FIFO: no job jumps the queue)."""
    n, m = rate.shape
    xs = np.zeros((n, m))
    xp = np.zeros((len(pa), m))
    free = gpus.astype(float).copy()
    count = sf.max(axis=1) if n else np.zeros(0)
    placed: dict[int, int] = {}  # row -> type, in placement order
    queue_from = n
    for j in range(n):
        if not (free > 0).any():
            queue_from = j
            break
        best = -1
        for w in by_name:
            if free[w] > 0 and free[w] >= sf[j, w] and (best < 0 or rate[j, w] > rate[j, best]):
                best = w
        if best < 0:
            queue_from = j + 1  # popped, then the pass ends: Gavel never queues it for packing
            break
        placed[j] = best
        free[best] -= sf[j, best]
    pair_of = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(pa.tolist(), pb.tolist()))}
    pairs: dict[int, int] = {}
    for q in range(queue_from, n):
        best_g, mate = threshold, -1
        for s, w in placed.items():
            if count[s] != count[q]:
                continue
            k = pair_of.get((s, q) if s < q else (q, s))
            if k is None:
                continue
            g = 0.0
            for r, tp in ((pa[k], tpa[k, w]), (pb[k], tpb[k, w])):
                if tp > 0:
                    g += tp / rate[r, w]
            if g > best_g:
                best_g, mate = g, s
        if mate < 0:
            break
        w = placed.pop(mate)
        pairs[pair_of[(mate, q) if mate < q else (q, mate)]] = w
    for j, w in placed.items():
        xs[j, w] = 1.0
    for k, w in pairs.items():
        xp[k, w] = 1.0
    return xs, xp


def normalized_pair_rate(rate: np.ndarray, pa: np.ndarray, pb: np.ndarray, tpa: np.ndarray,
                         tpb: np.ndarray) -> np.ndarray:
    """Gandiva's introspection score of each pair: Σ over the types and members of rate in the pair / rate alone,
    0 if the pair may not share some type (Gavel's ``_get_normalized_throughput``)."""
    if not len(pa):
        return np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = (tpa / rate[pa]).sum(axis=1) + (tpb / rate[pb]).sum(axis=1)
    ok = (tpa > 0).all(axis=1) & (tpb > 0).all(axis=1)
    return np.where(ok, g, 0.0)


class GandivaPairs:
    """Gandiva's pairing map as Gavel keeps it: job → its partner (None: alone), and the random stream its pairs are
    drawn from (CPython's ``random.Random(seed)``, as Gavel's, so the same seed draws the same pairs)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.partner: dict[int, int | None] = {}

    def allocate(self, ids: list[int], sf: np.ndarray, gpus: np.ndarray, pair_index: dict[tuple[int, int], int],
                 score: Callable[[int, int], float], pairs: int) -> tuple[np.ndarray, np.ndarray]:
        """One call of Gavel's ``GandivaPolicy`` (ids in job order; ``pair_index`` maps a pair of ids, lower first,
        to its pair row; ``score(a, b)`` is the pair's introspection score).

        1. Entries whose job or partner left are dropped, and so is every entry scoring below 1 (a job alone scores
           0, and so does a pair that may not share some type).
        2. If the jobs' GPUs fit in the cluster, the jobs alone get ``isolated`` over the jobs; the pairs nothing.
        3. Otherwise the jobs not in a pair are drawn into pairs: as many draws as such jobs, each
           ``rng.sample(jobs, 2)``, kept only if both take as many GPUs; the rest stay alone. Every combination (a
           pair or a job alone) gets ``isolated``'s share over the combinations; a job in a pair gets none of its
           own. A drawn pair that can never share a GPU is counted but has no row: it does not run (Gavel skips it
           on every type) and goes at the next call."""
        n = len(ids)
        xs = np.zeros((n, len(gpus)))
        xp = np.zeros((pairs, len(gpus)))
        if n == 0:
            self.partner.clear()
            return xs, xp
        present = set(ids)
        pos = {j: k for k, j in enumerate(ids)}
        drop: list[int | None] = []
        for j, other in self.partner.items():
            if j not in present or other is None or other not in present or score(min(j, other), max(j, other)) < 1:
                drop += [j, other]
        for gone in drop:
            if gone is not None:
                self.partner.pop(gone, None)
        s = sf.max(axis=1)
        if float(s.sum()) <= float(gpus.sum()):
            return isolated(sf, gpus), xp
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
                xs[pos[j]] = row
            else:
                k = pair_index.get((j, o))
                if k is not None:
                    xp[k] = row
        return xs, xp

    def forget(self, gone: list[int]) -> None:
        """Dissolve the pairs of jobs that left (their partners are drawn again at the next call)."""
        for j in gone:
            other = self.partner.pop(j, None)
            if other is not None and self.partner.get(other) == j:
                del self.partner[other]
