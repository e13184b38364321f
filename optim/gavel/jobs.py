"""The per-job state of Gavel's round mechanism, kept as arrays (one row per job, columns per server type) so that a
round costs a few vectorised operations however many jobs wait."""

from __future__ import annotations

import numpy as np

__all__ = ["JobTable", "Rows"]


class Rows:
    """Rows in arrays (``_COLUMNS``, the first one's length the capacity) that are dropped lazily: ``alive`` marks the
    rows still known, ``row`` maps a key to its row, ``size`` counts the rows used."""

    _COLUMNS: tuple[str, ...] = ()
    size: int
    row: dict
    alive: np.ndarray

    def _alloc_arrays(self, cap: int) -> None:
        raise NotImplementedError

    def _rekey(self) -> None:
        raise NotImplementedError

    def live(self) -> np.ndarray:
        """Rows still known, in the order they were added."""
        if self.size > 64 and 2 * len(self.row) < self.size:
            self._compact(grow=False)
        return np.flatnonzero(self.alive[: self.size])

    def _compact(self, grow: bool) -> None:
        keep = np.flatnonzero(self.alive[: self.size])
        old = {c: getattr(self, c) for c in self._COLUMNS}
        cap = len(old[self._COLUMNS[0]])
        self._alloc_arrays(max(64, 2 * len(keep)) if grow or 2 * len(keep) > cap else cap)
        for c, a in old.items():
            getattr(self, c)[: len(keep)] = a[keep]
        self.size = len(keep)
        self._rekey()


class JobTable(Rows):
    """Rows of the jobs the mechanism knows, in admission order (the order of Gavel's priority lists).

    Per row: ``ids``; per server type ``rate`` (throughput, 0 where the job cannot run), ``sf`` (its GPUs there),
    ``received`` (time run on the type since the last recompute, plus the credit), ``deficit``, ``alloc`` (X, valid
    where ``allocated``); ``weight`` (priority weight), ``done`` (progress when last placed), ``type`` (the type
    it was placed on at the last decision, -1 for none), ``arrival`` (submission time), ``iters`` (its iterations,
    Gavel's total steps), ``left`` (the fraction of its work still to do at the last decision) and, per type,
    ``speed`` (iterations per second, Gavel's throughput). Rows of jobs that left are dropped lazily.
    """

    def __init__(self, types: int):
        self.m = types
        self.size = 0
        self.row: dict[int, int] = {}
        self._alloc_arrays(64)

    def _alloc_arrays(self, cap: int) -> None:
        m = self.m
        self.ids = np.zeros(cap, dtype=np.int64)
        self.rate = np.zeros((cap, m))
        self.sf = np.ones((cap, m), dtype=np.int64)
        self.received = np.zeros((cap, m))
        self.deficit = np.zeros((cap, m))
        self.alloc = np.zeros((cap, m))
        self.allocated = np.zeros(cap, dtype=bool)
        self.weight = np.ones(cap)
        self.done = np.zeros(cap)
        self.type = np.full(cap, -1, dtype=np.int64)
        self.alive = np.zeros(cap, dtype=bool)
        self.arrival = np.zeros(cap)
        self.iters = np.ones(cap)
        self.left = np.ones(cap)
        self.speed = np.zeros((cap, self.m))

    _COLUMNS = ("ids", "rate", "sf", "received", "deficit", "alloc", "allocated", "weight", "done", "type", "alive",
                "arrival", "iters", "left", "speed")

    def add(self, jid: int, rate: np.ndarray, sf: np.ndarray, weight: float, credit: float, arrival: float = 0.0,
            iters: float = 1.0, speed: np.ndarray | None = None) -> None:
        if self.size == len(self.ids):
            self._compact(grow=True)
        r = self.size
        self.size += 1
        self.row[jid] = r
        self.ids[r], self.rate[r], self.sf[r], self.weight[r] = jid, rate, sf, weight
        self.received[r] = credit
        self.deficit[r] = 0.0
        self.alloc[r] = 0.0
        self.allocated[r] = False
        self.done[r], self.type[r], self.alive[r] = 0.0, -1, True
        self.arrival[r], self.iters[r], self.left[r] = arrival, iters, 1.0
        self.speed[r] = rate * iters if speed is None else speed

    def drop(self, jid: int) -> None:
        self.alive[self.row.pop(jid)] = False

    def _rekey(self) -> None:
        self.row = {int(j): r for r, j in enumerate(self.ids[: self.size])}
