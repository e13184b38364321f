"""Where the list schedulers can still put jobs, kept up to date across decisions instead of rebuilt at each one.

A cluster of a production trace has a thousand servers and sees a hundred thousand decisions, most of which change
one or two nodes. ``NodeIndex`` keeps, per node slot class, the free nodes (no VM, or an idle one) in index order,
per VM type its idle nodes, and (for packing) the free GPUs of the VMs running jobs; it follows a snapshot by
re-reading only the node views that are new objects (the engine makes a new view exactly when its node changed), so
it is correct for any snapshot. It learns which those are from the snapshot's ``node_changes`` when the nodes it
followed last are among the engine's recent ones (the cost is then that of the nodes that changed), else by comparing
every view.
``Room`` is one decision's use of it: what the decision's placements have taken so far, without touching the index.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterator
from itertools import compress
from operator import is_not

import numpy as np

from optim.common import ConfigTable
from sim.model import NodeChanges, NodeView

__all__ = ["NodeIndex", "Room"]

_Class = frozenset[str] | None


class NodeIndex:
    """The free room of every node slot as of the last snapshot's node views (module docstring); with ``spare``
    False, the free GPUs of VMs that run jobs are not kept (a ``Room`` that does not pack never reads them)."""

    def __init__(self, table: ConfigTable, spare: bool = True):
        self.table = table
        self.track_spare = spare
        self.views: tuple[NodeView, ...] = ()
        self.free: dict[_Class, list[int]] = {}
        """Slot class (the VM types a slot allows; None: any) → its free nodes, ascending."""
        self.hosting: dict[str, list[int]] = {}
        """VM type → its idle nodes (a VM that runs no job), ascending."""
        self.spare: dict[str, dict[int, int]] = {}
        """VM type → node → free GPUs of its VMs that run jobs and have GPUs left."""
        self.buckets: dict[str, list[list[int]]] = {}
        """VM type → free GPUs f → the nodes in ``spare`` with f free GPUs, ascending."""
        self.spare_total: dict[str, int] = {}
        """VM type → the free GPUs in ``spare``, summed."""
        self.classes_of: dict[str, list[_Class]] = {}
        """VM type → the slot classes that accept it, in first-seen order."""
        self._state: list[tuple[_Class, str | None, bool, int]] = []

    def follow(self, nodes: tuple[NodeView, ...], changes: NodeChanges | None = None) -> None:
        """Bring the index up to ``nodes``, re-reading the views that changed (``changes``: the snapshot's
        ``node_changes``, which may name them)."""
        if nodes is self.views:
            return
        changed: Iterator[int] | range | set[int] | None = None
        if len(nodes) != len(self.views):
            self.free, self.hosting, self.spare, self.classes_of = {}, {}, {}, {}
            self.buckets, self.spare_total = {}, {}
            self._state = [(None, None, False, 0)] * len(nodes)
            changed = range(len(nodes))
        elif changes is not None and changes.after is nodes:
            changed = changes.since(self.views)
        if changed is None:
            changed = compress(range(len(nodes)), map(is_not, nodes, self.views))
        for n in changed:
            self._set(n, nodes[n])
        self.views = nodes

    def _set(self, n: int, nv: NodeView) -> None:
        cls, vm, free, spare = self._state[n]
        if free:
            _remove(self.free[cls], n)
            if vm is not None:
                _remove(self.hosting[vm], n)
        elif spare:
            assert vm is not None
            del self.spare[vm][n]
            _remove(self.buckets[vm][spare], n)
            self.spare_total[vm] -= spare
        cls = nv.allowed
        vm = nv.vm.name if nv.vm is not None else None
        free = vm is None or nv.used_gpus == 0
        spare = 0 if free or not self.track_spare else nv.free_gpus
        if cls not in self.free:
            self.free[cls] = []
            for name in self.table.vm_names:
                if cls is None or name in cls:
                    self.classes_of.setdefault(name, []).append(cls)
        if free:
            insort(self.free[cls], n)
            if vm is not None:
                insort(self.hosting.setdefault(vm, []), n)
        elif spare > 0:
            assert vm is not None and nv.vm is not None
            self.spare.setdefault(vm, {})[n] = spare
            if vm not in self.buckets:
                self.buckets[vm] = [[] for _ in range(nv.vm.gpus + 1)]
                self.spare_total[vm] = 0
            insort(self.buckets[vm][spare], n)
            self.spare_total[vm] += spare
        self._state[n] = (cls, vm, free, spare)


def _remove(sorted_list: list[int], n: int) -> None:
    del sorted_list[bisect_left(sorted_list, n)]


class Room:
    """One decision's room: the index, less the nodes and GPUs this decision's placements have taken.

    Free nodes are handed out as the list schedulers always have: idle VMs of the wanted type first, then the other
    free nodes that accept it, each in index order; with ``pack`` a job first goes best fit (fewest free GPUs, then
    lowest index) onto a VM of its type that runs jobs, and a packed gang ends on the VMs with the most free GPUs.
    """

    def __init__(self, index: NodeIndex, pack: bool):
        if pack and not index.track_spare:
            raise ValueError("a Room that packs needs a NodeIndex that keeps the spare GPUs")
        self.index, self.table, self.pack = index, index.table, pack
        self.taken: set[int] = set()
        self.taken_in: dict[_Class, int] = {}
        self.changed: dict[str, dict[int, int]] = {}
        """VM type → node → free GPUs after this decision's placements, for the spare nodes they changed or made."""
        self.count_delta: dict[str, list[int]] = {}
        self.total_delta: dict[str, int] = {}

    # ----- free nodes ----------------------------------------------------------------------------------------------

    def free_count(self, vm: str) -> int:
        index = self.index
        return sum(len(index.free[c]) - self.taken_in.get(c, 0) for c in index.classes_of.get(vm, ()))

    def _any_free(self) -> bool:
        taken_in = self.taken_in
        for c, nodes in self.index.free.items():
            if len(nodes) > taken_in.get(c, 0):
                return True
        return False

    def free_in_order(self, vm: str) -> Iterator[int]:
        """The free nodes not taken that accept ``vm``, in index order."""
        index, taken = self.index, self.taken
        lists = [index.free[c] for c in index.classes_of.get(vm, ())]
        for n in lists[0] if len(lists) == 1 else heapq.merge(*lists):
            if n not in taken:
                yield n

    def classes_with_free(self) -> list[_Class]:
        """The slot classes with free nodes not taken, in first-seen order."""
        return [c for c, nodes in self.index.free.items() if len(nodes) > self.taken_in.get(c, 0)]

    def take(self, n: int) -> None:
        """A free node is taken by this decision (opened, or part of a gang)."""
        self.taken.add(n)
        cls = self.index.views[n].allowed
        self.taken_in[cls] = self.taken_in.get(cls, 0) + 1

    def _free_nodes(self, vm: str, need: int) -> list[int]:
        """The first ``need`` free nodes for ``vm``: its idle VMs, then the other free nodes accepting it."""
        index, taken = self.index, self.taken
        hosting = index.hosting.get(vm)
        out = [n for n in _untaken(hosting, taken, need)] if hosting else []
        if len(out) >= need:
            return out
        views = index.views
        lists = [index.free[c] for c in index.classes_of.get(vm, ())]
        merged = lists[0] if len(lists) == 1 else heapq.merge(*lists)
        for n in merged:
            if n in taken:
                continue
            nv = views[n]
            if nv.vm is not None and nv.vm.name == vm:
                continue  # an idle VM of the type: already listed
            out.append(n)
            if len(out) >= need:
                break
        return out

    # ----- spare GPUs of VMs running jobs --------------------------------------------------------------------------

    def spare_nodes(self, vm: str, g: int) -> list[tuple[int, int]]:
        """(free GPUs, node) of the VMs of type ``vm`` that run jobs with at least ``g`` free GPUs, fewest first."""
        buckets = self.index.buckets.get(vm)
        changed = self.changed.get(vm, {})
        out = [(f, n) for f in range(g, len(buckets)) for n in buckets[f] if n not in changed] if buckets else []
        out += [(f, n) for n, f in changed.items() if f >= g and f > 0]
        out.sort()
        return out

    def spare_of(self, vm: str, n: int) -> int:
        changed = self.changed.get(vm)
        if changed is not None and n in changed:
            return changed[n]
        return self.index.spare.get(vm, {}).get(n, 0)

    def set_spare(self, vm: str, n: int, free: int, per: int) -> None:
        """Node ``n`` (a VM of type ``vm`` with ``per`` GPUs) keeps ``free`` GPUs after this decision's placements."""
        old = self.spare_of(vm, n)
        counts = self.count_delta.setdefault(vm, [0] * (per + 1))
        if old:
            counts[old] -= 1
        if free:
            counts[free] += 1
        self.total_delta[vm] = self.total_delta.get(vm, 0) + free - old
        self.changed.setdefault(vm, {})[n] = free

    def spare(self, vm: str) -> Iterator[tuple[int, int]]:
        """(node, free GPUs) of the VMs of type ``vm`` that run jobs and still have free GPUs."""
        changed = self.changed.get(vm, {})
        for n, f in self.index.spare.get(vm, {}).items():
            if n not in changed:
                yield n, f
        for n, f in changed.items():
            if f > 0:
                yield n, f

    def spare_total(self, vm: str) -> int:
        return self.index.spare_total.get(vm, 0) + self.total_delta.get(vm, 0)

    def most_spare(self, vm: str) -> int:
        buckets = self.index.buckets.get(vm)
        delta = self.count_delta.get(vm)
        for f in range(max(len(buckets or ()), len(delta or ())) - 1, 0, -1):
            if (len(buckets[f]) if buckets else 0) + (delta[f] if delta else 0) > 0:
                return f
        return 0

    def best_fit(self, vm: str, g: int, per: int) -> int | None:
        """The spare node of type ``vm`` with the fewest free GPUs at least ``g`` (then the lowest index)."""
        buckets = self.index.buckets.get(vm)
        changed = self.changed.get(vm, {})
        for f in range(g, per + 1):
            best = next((n for n in buckets[f] if n not in changed), None) if buckets else None
            for n, left in changed.items():
                if left == f and (best is None or n < best):
                    best = n
            if best is not None:
                return best
        return None

    def _any_spare(self) -> bool:
        return any(self.spare_total(vm) > 0 for vm in (*self.index.spare_total, *self.total_delta))

    def empty(self) -> bool:
        return not self._any_free() and not (self.pack and self._any_spare())

    def reachable(self) -> np.ndarray | None:
        """Configurations some placement can still take (None: every one, as when a free node accepts any type and
        there are no gangs or packing)."""
        t = self.table
        if not self.pack and t.all_single and len(self.index.free.get(None, ())) > self.taken_in.get(None, 0):
            return None
        nfree = np.array([self.free_count(v) for v in t.vm_names])
        ok = np.where(t.single, nfree[t.vm_index] >= 1, nfree[t.vm_index] >= t.vms)
        if self.pack and self._any_spare():
            most = np.array([self.most_spare(v) for v in t.vm_names])
            total = nfree * t.vm_gpus + np.array([self.spare_total(v) for v in t.vm_names])
            ok |= np.where(t.single, t.gpus <= most[t.vm_index], t.gpus <= total[t.vm_index])
        return ok

    def place(self, c: int, vms: dict[int, str]) -> tuple[tuple[int, int], ...]:
        """Parts ``(node, GPUs)`` for configuration ``c``, new VMs recorded in ``vms``; the room is taken."""
        conf = self.table.configs[c]
        vm, g, per = conf.vm.name, conf.gpus, conf.vm.gpus
        if self.pack and g <= per:
            best = self.best_fit(vm, g, per)
            if best is not None:
                self.set_spare(vm, best, self.spare_of(vm, best) - g, per)
                return ((best, g),)
        parts: list[tuple[int, int]] = []
        left = g
        views = self.index.views
        for n in self._free_nodes(vm, -(-g // per)):
            take = min(left, per)
            nv = views[n]
            if nv.vm is None or nv.vm.name != vm:
                vms[n] = vm
            self.take(n)
            if self.pack and take < per:
                self.set_spare(vm, n, per - take, per)
            parts.append((n, take))
            left -= take
        if left > 0:  # a packed gang: the free GPUs of running VMs of its type, most free first
            used = {m for m, _ in parts}
            for f, n in sorted(((f, n) for n, f in self.spare(vm) if n not in used), reverse=True):
                take = min(left, f)
                self.set_spare(vm, n, f - take, per)
                parts.append((n, take))
                left -= take
                if left <= 0:
                    break
        return tuple(parts)


def _untaken(nodes: list[int] | tuple[()], taken: set[int], need: int) -> Iterator[int]:
    """The nodes not in ``taken``, in order, at most ``need`` of them."""
    k = 0
    for n in nodes:
        if n not in taken:
            yield n
            k += 1
            if k >= need:
                return
