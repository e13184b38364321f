"""Power-of-two placement on servers of G GPUs, as ElasticFlow's simulator places elastic jobs, and the GPU sets it
remembers (a job whose exact GPU set was used since the last reset restarts from a cached state, more cheaply).

Servers are grouped into *node sets*: a job of g >= G GPUs takes ceil(g / G) whole free servers; a smaller job goes
into a set listed under its size class (sets are listed by the class of their free GPUs), else fills a set of a
larger class, else opens a new server. Lists are kept sorted by used GPUs (stable), sets taken from their head. Placing
never fails where the GPU count fits (every policy checks counts first); it decides which GPUs a job holds, which
only the restart-overhead cache reads.
"""

from __future__ import annotations

import math
from typing import Any

from sim.model import CapsimError

__all__ = ["Placement", "CLASSES"]

CLASSES = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 88, 128, 256)
"""The size classes of node sets, in ElasticFlow's order."""
_DESC = tuple(sorted(CLASSES, reverse=True))


class NodeSet:
    __slots__ = ("nodes", "capacity", "util", "size", "jobs")

    def __init__(self, nodes: list[int], capacity: int, util: int, size: int):
        self.nodes = nodes
        self.capacity = capacity
        self.util = util
        self.size = size
        self.jobs: list[Any] = []


def _util(s: NodeSet) -> int:
    return s.util


class Placement:
    """Node sets over ``servers`` servers of ``per`` GPUs; jobs are objects with ``gpus`` and a ``nodeset`` slot."""

    def __init__(self, servers: int, per: int):
        self.per = per
        self.free_nodes = list(range(servers))
        self.lists: dict[int, list[NodeSet]] = {c: [] for c in CLASSES}
        self.cache: set[tuple[int, int]] = set()

    def _relist(self, s: NodeSet, own: list[NodeSet], job: Any) -> None:
        """After adding ``job`` to ``s``: list ``s`` under the class of its free GPUs (or back on ``own``)."""
        free = len(s.nodes) * self.per - s.util
        job.nodeset = s
        if free > 0:
            for c in _DESC:
                if c <= free and free % c == 0:
                    s.size = c
                    self.lists[c].append(s)
                    own.sort(key=_util)
                    self.lists[c].sort(key=_util)
                    return
        own.append(s)
        own.sort(key=_util)

    def place(self, job: Any) -> None:
        """Put ``job`` (``job.gpus`` GPUs, a class) on the servers."""
        g = job.gpus
        if g not in self.lists:
            raise CapsimError(f"placement: job {job.id} asks for {g} GPUs, which is not a size class {CLASSES}")
        own = self.lists[g]
        if own:
            s = own.pop(0)
            if s.util + g <= s.capacity:
                s.util += g
                s.jobs.append(job)
                self._relist(s, own, job)
                return
            own.append(s)
        for c in reversed(CLASSES):
            if c <= g:
                break
            other = self.lists[c]
            if other:
                s = other.pop(0)
                if s.util + g <= s.capacity:
                    s.util += g
                    s.jobs.append(job)
                    self._relist(s, own, job)
                    return
                other.append(s)
        n = math.ceil(g / self.per)
        if n > len(self.free_nodes):
            raise CapsimError(f"placement: no room for job {job.id} on {g} GPUs although the policy counted it in; "
                              f"this is a bug of the time model, please report it")
        s = NodeSet([self.free_nodes.pop(0) for _ in range(n)], n * self.per, g, g)
        s.jobs.append(job)
        free = n * self.per - g
        job.nodeset = s
        if free > 0:
            for c in _DESC:
                if c <= free and free % c == 0:
                    self.lists[c].append(s)
                    own.sort(key=_util)
                    self.lists[c].sort(key=_util)
                    break
        else:
            own.append(s)
            own.sort(key=_util)

    def release(self, job: Any) -> None:
        """Take ``job`` off its node set (the set is freed, or relisted under the class of its free GPUs)."""
        s = job.nodeset
        job.nodeset = None
        s.util -= job.gpus
        s.jobs.remove(job)
        free = s.capacity - s.util
        if s.util == 0:
            self.free_nodes += s.nodes
            for lst in self.lists.values():
                if s in lst:
                    lst.remove(s)
            self.free_nodes.sort()
        elif free > 0:
            for c in _DESC:
                if c <= free and free % c == 0:
                    if free == s.size:
                        break
                    self.lists[s.size].remove(s)
                    s.size = c
                    self.lists[c].append(s)
                    self.lists[c].sort(key=_util)
                    break

    def first_node(self, job: Any) -> int:
        s = job.nodeset
        return s.nodes[0] if s is not None else -1

    def mark_cached(self) -> None:
        """Walk the servers in order, give each placed job its GPU set (first GPU, count) and set ``job.cached`` to
        whether that set was seen since the last ``reset_cache`` (ElasticFlow's scheduling log)."""
        where: dict[int, tuple[int, NodeSet]] = {}
        for c in CLASSES:
            for s in self.lists[c]:
                for n in s.nodes:
                    where.setdefault(n, (c, s))
        seen: set[int] = set()
        cache = self.cache
        for n in sorted(where):
            c, s = where[n]
            pos = n * self.per
            if c >= self.per:
                head = s.jobs[0]
                if id(head) not in seen:
                    key = (pos, head.gpus)
                    head.cached = key in cache
                    cache.add(key)
                    seen.add(id(head))
            else:
                for j in s.jobs:
                    key = (pos, j.gpus)
                    j.cached = key in cache
                    cache.add(key)
                    pos += j.gpus

    def reset_cache(self) -> None:
        self.cache = set()
