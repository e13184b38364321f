"""Ordering the waiting jobs without sorting them all again at every decision.

A backlogged production trace keeps hundreds or thousands of jobs waiting through a hundred thousand decisions;
sorting them with a Python key at every decision would cost more than everything else. A job's sort key (its
submission time, deadline, weight, fastest remaining time) does not change while it waits.

- ``WaitingQueue`` keeps the queue of a policy that starts jobs from its head (the list schedulers) sorted across
  decisions: it checks, at C speed, that the snapshot's waiting jobs are the last ones less those the last plan
  started, with the new ones after them (as the engine keeps them), inserts the new ones, and sorts afresh when the
  check fails (any other snapshot).
- ``JobColumns`` computes per-job sort columns once per job view and gathers them for a snapshot's waiting jobs as
  one array; ``order`` sorts by columns the way Python sorts tuples (first column first, every comparison exact), so
  the order is the one ``sorted`` gives, for a policy whose order depends on the decision's time (greedy's pressure).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from operator import attrgetter, is_not

import numpy as np

from sim.model import JobView

__all__ = ["WaitingQueue", "JobColumns", "order"]

_JOB_ID = attrgetter("job.id")
_SMALL = 8
"""A queue this short is sorted afresh, which costs less than following the last one (the same order either way)."""


class WaitingQueue:
    """The waiting jobs sorted by ``key`` (smallest first), kept across decisions (module docstring). A policy asks
    for ``jobs(waiting)`` and, having started the first k of them, says so with ``started(k)``."""

    def __init__(self, key: Callable[[JobView], tuple]):
        self.key = key
        self.seen: tuple[JobView, ...] = ()
        self.queue: list[JobView] = []
        self.keys: list[tuple] = []
        self.positions: list[int] = []
        """Where each job of ``queue`` sits in ``seen``."""
        self.left: list[int] = []
        """Positions in ``seen`` of the jobs the last plan started."""

    def jobs(self, waiting: tuple[JobView, ...]) -> list[JobView]:
        """``waiting`` in order (a list the caller must not change)."""
        if len(waiting) <= _SMALL:  # sorted afresh; a longer queue later is followed from an empty one
            if self.seen:
                self.seen, self.queue, self.keys, self.positions = (), [], [], []
            if self.left:
                self.left = []
            return sorted(waiting, key=self.key) if len(waiting) > 1 else list(waiting)
        if waiting is not self.seen or self.left:
            if not self._follow(waiting):
                self.queue = sorted(waiting, key=self.key)
                self.keys = [self.key(jv) for jv in self.queue]
                where = {id(jv): i for i, jv in enumerate(waiting)}
                self.positions = [where[id(jv)] for jv in self.queue]
            self.seen, self.left = waiting, []
        return self.queue

    def started(self, k: int) -> None:
        """The first ``k`` jobs of the queue were started: they leave it."""
        if not self.positions:  # a short queue, sorted afresh at each decision: nothing is kept
            return
        self.left = sorted(self.positions[:k])
        del self.queue[:k], self.keys[:k], self.positions[:k]

    def _follow(self, waiting: tuple[JobView, ...]) -> bool:
        """Bring the queue up to ``waiting`` if it is the last snapshot's less the jobs started plus new ones after
        them; False (nothing changed) otherwise."""
        seen, left = self.seen, self.left
        kept = seen
        if left:
            parts, at = [], 0
            for i in left:
                parts.append(seen[at:i])
                at = i + 1
            parts.append(seen[at:])
            kept = sum(parts, ())
        m = len(kept)
        try:
            if len(waiting) < m or waiting[:m] != kept:
                return False
        except ValueError:  # two views of one job compared by value: not the same snapshot lineage
            return False
        if left:  # positions in the new tuple: those after each started job move up
            shift = np.searchsorted(np.array(left), np.array(self.positions), side="right")
            self.positions = (np.array(self.positions, dtype=int) - shift).tolist()
        for i in range(m, len(waiting)):
            jv = waiting[i]
            k = self.key(jv)
            at = bisect_right(self.keys, k)
            self.keys.insert(at, k)
            self.queue.insert(at, jv)
            self.positions.insert(at, i)
        return True


class JobColumns:
    """``columns(jv)`` (a tuple of numbers, the same length for every job) of each waiting job, computed once per
    job view."""

    def __init__(self, columns: Callable[[JobView], Sequence[float]]):
        self.columns = columns
        self.rows: dict[int, int] = {}
        self.views: list[JobView] = []
        self.data = np.empty((0, 0))

    def of(self, waiting: Sequence[JobView]) -> np.ndarray:
        """The columns of ``waiting``, one row per job in its order (shape ``(len(waiting), width)``)."""
        if len(self.rows) > 4 * len(waiting) + 1024:
            self.rows, self.views = {}, []
        rows = list(map(self.rows.get, map(_JOB_ID, waiting)))
        if None in rows or any(map(is_not, map(self._view, rows), waiting)):
            for i, jv in enumerate(waiting):
                r = rows[i]
                if r is None or self.views[r] is not jv:
                    rows[i] = self._add(jv)
        return self.data[np.fromiter(rows, dtype=np.intp, count=len(rows))]

    def _view(self, row: int | None) -> JobView | None:
        return None if row is None else self.views[row]

    def _add(self, jv: JobView) -> int:
        r = len(self.views)
        values = self.columns(jv)
        if r >= len(self.data):
            grown = np.empty((max(64, 2 * len(self.data)), len(values)))
            if r:
                grown[:r] = self.data[:r]
            self.data = grown
        self.data[r] = values
        self.views.append(jv)
        self.rows[jv.job.id] = r
        return r


def order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """Indices that sort rows by ``keys[0]``, then ``keys[1]``, ... (as ``sorted`` orders tuples of them)."""
    return np.lexsort(tuple(reversed(keys)))
