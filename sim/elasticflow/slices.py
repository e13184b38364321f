"""The ``slices`` clock: ElasticFlow's simulator as it runs Gandiva (Xiao et al., OSDI'18; ``gandiva_sim_jobs``).

Jobs are rigid. Servers are grouped into node sets per job size g: a set of ceil(g / G) servers holds
``int(servers x G / g)`` jobs at once and more by time-slicing. An arriving job joins the least-loaded set of its
size while it has room (strictly), else opens a set on free servers, else is time-sliced onto the least-loaded set,
else waits; waiting jobs are retried only when a set is freed. Decisions happen at arrivals only (merged 60 s apart),
then every 60 s after the last arrival. At each one, first the sets are rebalanced in proportion to each size's
demand (``gandiva_node_set_adjust``), then every set credits the interval since the last decision to the first jobs
of its list that fit at once (service seconds against the trace's ``duration``, less the overhead charged at the last
decision, 2 + 2(log2 g + 1) s, 7 + ... on >= 256 GPUs, +27/47 s every 60th decision), completes those whose service
is done (back-dated to the exact second) and, when the time is a whole minute, rotates its list. So the GPUs of a
finished job stay busy until the next decision, and the rebalancing decides which jobs the past interval is
credited to (the order of the original).

The 60 s of the decisions' spacing, of the polling after the last arrival and of the restart cadence is the policy's
``slot`` (ElasticFlow's ``--scheduling_slot``); the whole minute of the rotation stays 60 s, as coded.
"""

from __future__ import annotations

import math
from typing import Any

from sim.elasticflow.events import Events
from sim.elasticflow.state import Log, Run, overhead
from sim.elasticflow.vocabulary import SLOT, ReplayCluster, ReplayPolicy
from sim.model import CapsimError

__all__ = ["run_slices"]

ROTATION = 60
"""Seconds: a set rotates its list when the time is a multiple of this (``cluster.py``'s ``cur_time % 60``)."""
_CLASSES = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 88, 128, 256)


class _Set:
    __slots__ = ("nodes", "capacity", "util", "jobs")

    def __init__(self, nodes: list[int], capacity: int):
        self.nodes = nodes
        self.capacity = capacity
        self.util = 0
        self.jobs: list[Run] = []


def _util(s: _Set) -> int:
    return s.util


class _Sets:
    """Gandiva's node sets per job size over ``servers`` servers of ``per`` GPUs."""

    def __init__(self, servers: int, per: int):
        self.per = per
        self.n_gpus = servers * per
        self.free = list(range(servers))
        self.lists: dict[int, list[_Set]] = {c: [] for c in _CLASSES}

    def _new(self, g: int) -> _Set:
        n = math.ceil(g / self.per)
        return _Set([self.free.pop(0) for _ in range(n)], int(n * self.per / g))

    def place(self, job: Run) -> bool:
        g = job.job.gpus
        if g not in self.lists:
            raise CapsimError(f"gandiva: job {job.id} asks for {g} GPUs, which is not a size class {_CLASSES}")
        own = self.lists[g]
        if own:
            s = own.pop(0)
            if s.util + 1 < s.capacity:
                s.util += 1
                s.jobs.append(job)
                own.append(s)
                own.sort(key=_util)
                return True
            own.append(s)
        if math.ceil(g / self.per) <= len(self.free):
            s = self._new(g)
            s.util = 1
            s.jobs.append(job)
            own.append(s)
            own.sort(key=_util)
            return True
        if own:
            s = own.pop(0)
            s.util += 1
            s.jobs.append(job)
            own.append(s)
            own.sort(key=_util)
            return True
        return False

    def adjust(self) -> None:
        """Rebalance the servers among sizes in proportion to their demand (``gandiva_node_set_adjust``)."""
        demand = {c: sum(len(s.jobs) for s in lst) * c for c, lst in self.lists.items()}
        held = {c: sum(len(s.nodes) for s in lst) * self.per for c, lst in self.lists.items()}
        total = sum(demand.values())
        if total == 0:
            return
        for c, lst in self.lists.items():
            if demand[c] == 0:
                continue
            target = min(int(math.floor(demand[c] / total * self.n_gpus)), demand[c])
            diff = target - held[c]
            if diff > 0:
                self._expand(c, lst, math.ceil(diff / c))
            elif diff < 0:
                self._shrink(lst, math.ceil(-diff / c))

    def _expand(self, c: int, lst: list[_Set], k: int) -> None:
        n = math.ceil(c / self.per)
        last = 0
        for i in range(1, k + 1):
            last = i
            if n <= len(self.free):
                lst.append(self._new(c))
                last = n - 1  # the original reuses the loop variable for the servers it takes
        if last > 0:
            jobs = [j for s in lst for j in s.jobs]
            for s in lst:
                s.jobs = []
                s.util = 0
            self._spread(jobs, lst)

    def _shrink(self, lst: list[_Set], k: int) -> None:
        if len(lst) <= k:
            k = len(lst) - 1
        jobs: list[Run] = []
        for _ in range(k):
            s = lst.pop(0)
            jobs.extend(s.jobs)
            self.free.extend(s.nodes)
        if k > 0:
            self._spread(jobs, lst)

    @staticmethod
    def _spread(jobs: list[Run], lst: list[_Set]) -> None:
        for j in jobs:
            s = lst[0]
            s.util += 1
            s.jobs.append(j)
            lst.sort(key=_util)

    def execute(self, now: float, dt: float, done: list[Run]) -> bool:
        """Credit ``dt`` seconds to the jobs each set runs at once, complete those done; whether a set was freed."""
        rotate = int(now % ROTATION) == 0
        freed = False
        for lst in self.lists.values():
            emptied = []
            for s in lst:
                at_once = min(len(s.jobs), s.capacity)
                ended = []
                for i, r in enumerate(s.jobs):
                    r.ran(s.nodes[0], r.job.gpus, now - dt, now)
                    r.executed += max(dt - r.overhead, 0.0)
                    r.overhead = 0.0
                    if r.executed >= r.job.duration:
                        r.end = now - (r.executed - r.job.duration)
                        ended.append(r)
                    if i + 1 >= at_once:
                        break
                if rotate and len(s.jobs) > at_once:
                    s.jobs = s.jobs[at_once:] + s.jobs[:at_once]
                for r in ended:
                    s.jobs.remove(r)
                    done.append(r)
                if not s.jobs:
                    self.free.extend(s.nodes)
                    emptied.append(s)
                    freed = True
            for s in emptied:
                lst.remove(s)
        return freed


def run_slices(jobs: list[Run], cluster: ReplayCluster, policy: ReplayPolicy, log: Log) -> None:
    """Gandiva's clock (see the module docstring); the policy only names it."""
    n = cluster.gpus
    slot = getattr(policy, "slot", SLOT)
    events = Events()
    for r in jobs:
        events.get(r.job.submit).starts.append(r)
    sets = _Sets(cluster.servers, cluster.gpus_per_server)
    pending: list[Run] = []
    running: list[Any] = []
    now = events.first().time
    dt = 0.0
    count = 0
    while len(events) or pending or running:
        sets.adjust()
        done: list[Run] = []
        freed = sets.execute(now, dt, done)
        for r in done:
            r.status = "done"
            r.finish = r.end
            r.on_time = r.end <= r.job.deadline
            running.remove(r)
        for r in pending:
            r.overhead = 0.0
        ev = events.at(now)
        started = 0
        arrivals = 0
        if ev is not None:
            for r in ev.starts:
                arrivals += 1
                if sets.place(r):
                    _start(r, now)
                    running.append(r)
                    started += 1
                else:
                    r.status = "pending"
                    pending.append(r)
            events.remove(ev)
        if freed:
            i = 0
            while i < len(pending):
                r = pending[i]
                if sets.place(r):
                    pending.pop(i)
                    _start(r, now)
                    running.append(r)
                    started += 1
                i += 1  # the original removes from the list it walks, skipping the next job
        log.decision(now, "arrival" if arrivals else "poll", len(pending) + len(running), len(running), started, 0.0)
        if not len(events):
            if not running and pending:
                raise CapsimError(f"policy {policy.describe()!r}: {len(pending)} jobs can never be placed")
            now += slot
            dt = slot
            continue
        restart = count > 0 and count % slot == 0
        count += 1
        for r in running:
            r.overhead = overhead(r.job.gpus, n, restart)
        nxt = events.merge(now, slot)
        dt = float(int(nxt - now))
        now = nxt


def _start(r: Run, now: float) -> None:
    r.status = "running"
    r.start = now
    r.node = -1
