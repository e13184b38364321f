"""The pairs of Gavel's packing mechanism, kept as arrays as ``optim.gavel.jobs.JobTable`` keeps the jobs: one row
per pair of active jobs that could share a GPU on some server type (Gavel's ``JobIdPair`` combinations; PACKING.md
§2 of the Gavel notes, ``docs/gavel.md``)."""

from __future__ import annotations

import numpy as np

from optim.gavel.jobs import Rows

__all__ = ["PairTable"]


class PairTable(Rows):
    """Rows of pairs, in creation order (Gavel's order of its priority lists, interleaved with the jobs by ``seq``).

    Per row: ``a``, ``b`` (the members' job ids, ``a < b``); per server type ``speed_a``, ``speed_b`` (each member's
    iterations per second next to the other, 0 where the pair cannot share that type), ``received`` (time run as a
    pair on the type since the last recompute; 0 for a pair created since, Gavel's quirk), ``deficit``, ``alloc`` (X,
    valid where ``allocated``); ``seq`` (creation order among jobs and pairs). Rows of dissolved pairs are dropped
    lazily."""

    _COLUMNS = ("a", "b", "speed_a", "speed_b", "received", "deficit", "alloc", "allocated", "seq", "alive")

    def __init__(self, types: int):
        self.m = types
        self.size = 0
        self.row: dict[tuple[int, int], int] = {}
        self.of: dict[int, set[tuple[int, int]]] = {}
        self._alloc_arrays(64)

    def _alloc_arrays(self, cap: int) -> None:
        m = self.m
        self.a = np.zeros(cap, dtype=np.int64)
        self.b = np.zeros(cap, dtype=np.int64)
        self.speed_a = np.zeros((cap, m))
        self.speed_b = np.zeros((cap, m))
        self.received = np.zeros((cap, m))
        self.deficit = np.zeros((cap, m))
        self.alloc = np.zeros((cap, m))
        self.allocated = np.zeros(cap, dtype=bool)
        self.seq = np.zeros(cap, dtype=np.int64)
        self.alive = np.zeros(cap, dtype=bool)

    def add(self, a: int, b: int, speed_a: np.ndarray, speed_b: np.ndarray, seq: int) -> None:
        """A new pair of jobs ``a < b``."""
        if self.size == len(self.a):
            self._compact(grow=True)
        r = self.size
        self.size += 1
        self.row[(a, b)] = r
        self.of.setdefault(a, set()).add((a, b))
        self.of.setdefault(b, set()).add((a, b))
        self.a[r], self.b[r], self.speed_a[r], self.speed_b[r], self.seq[r] = a, b, speed_a, speed_b, seq
        self.received[r] = self.deficit[r] = self.alloc[r] = 0.0
        self.allocated[r], self.alive[r] = False, True

    def drop_job(self, j: int) -> None:
        """Dissolve every pair of job ``j`` (Gavel deletes them when ``j`` leaves)."""
        for key in self.of.pop(j, ()):
            r = self.row.pop(key, None)
            if r is not None:
                self.alive[r] = False
            other = key[1] if key[0] == j else key[0]
            mates = self.of.get(other)
            if mates is not None:
                mates.discard(key)

    def _rekey(self) -> None:
        self.row = {(int(a), int(b)): r for r, (a, b) in enumerate(zip(self.a[: self.size], self.b[: self.size]))}
