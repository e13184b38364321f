"""FIFO, EDF and Priority scheduling: one list-scheduling core, three queue orders (REFERENCE §3).

The head of the queue gets its D* configuration on a free node of its own and keeps that VM until it completes:
no sharing, no preemption, strict head-of-line blocking when the head cannot be placed. Two options extend it to
today's clouds and fixed GPU clusters (both off by default, where the published behaviour is unchanged):

- ``pack``: a job goes first, best fit, onto a VM of its D* type already running other jobs with enough free GPUs
  (sharing a VM: a server of 8 GPUs hosts eight 1-GPU jobs), else onto a free node as before.
- ``spot``: spot VMs (``VMType.spot``) may be chosen, their D* cost and finish time taken at the expected runtime
  with revocations (``sim.risk.expected_view``); without it they are never rented.
- ``spot_rule: uniform_progress`` (implies ``spot``): Uniform Progress for many jobs (``optim.spot.fleet``): a job
  ahead of its uniform pace starts only on spot, one near its deadline only on demand.

A job larger than one VM (a gang, on a cluster that allows gangs) takes whole free nodes of its VM type (and, with
``pack``, the free GPUs of running ones), all parts starting together.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import Policy, alias, register
from optim.common import ConfigTable, config_table, d_star, hosted
from optim.spot.fleet import check_spot_rule, uniform_progress_snapshot
from sim.model import Assignment, JobView, Plan, Snapshot
from sim.risk import expected_view

__all__ = ["ListScheduler", "FIFO", "EDF", "Priority"]


class _Room:
    """Where jobs can still go in this decision: free nodes per slot class (no VM, or an idle one; lowest index
    last), idle VMs by type, and (``pack``) the free GPUs of VMs running jobs, by VM type."""

    def __init__(self, s: Snapshot, table: ConfigTable, pack: bool):
        nodes = s.nodes
        self.table, self.pack, self.nodes = table, pack, nodes
        self.free: dict[frozenset[str] | None, list[int]] = {}
        cand = sorted(s.empty_nodes + s.idle_nodes, reverse=True)
        classes = [nodes[n].allowed for n in cand]
        if classes.count(None) == len(classes):  # every free slot takes any type (the published case): one stack
            if cand:
                self.free[None] = cand
        else:
            for n, allowed in zip(cand, classes):
                self.free.setdefault(allowed, []).append(n)
        self.hosting: dict[str, list[int]] = {}
        for n in reversed(s.idle_nodes):
            self.hosting.setdefault(hosted(nodes[n]).name, []).append(n)
        self.taken: set[int] = set()
        self.spare: dict[int, int] = {}
        if pack:
            idle = set(s.idle_nodes)
            for nv in nodes:
                if nv.vm is not None and nv.used_gpus and nv.free_gpus > 0 and nv.index not in idle:
                    self.spare[nv.index] = nv.free_gpus

    def tidy(self) -> None:
        for stack in (*self.free.values(), *self.hosting.values()):
            while stack and stack[-1] in self.taken:
                stack.pop()
        self.free = {k: v for k, v in self.free.items() if v}

    def empty(self) -> bool:
        return not self.free and not self.spare

    def _free_nodes(self, vm: str, need: int | None = None) -> list[int]:
        """Free nodes that can host ``vm``: its idle VMs first, then the others by index (only the first ``need``
        of them when given)."""
        idle = [n for n in reversed(self.hosting.get(vm, ())) if n not in self.taken]
        if need is not None and len(idle) >= need:
            return idle[:need]
        if len(self.free) == 1 and None in self.free:  # one stack, lowest index last: walk it from the end
            out, seen = idle, set(idle)
            for n in reversed(self.free[None]):
                if need is not None and len(out) >= need:
                    break
                if n not in self.taken and n not in seen:
                    out.append(n)
            return out
        rest = sorted(n for k, stack in self.free.items() if k is None or vm in k for n in stack
                      if n not in self.taken and n not in idle)
        out = idle + rest
        return out if need is None else out[:need]

    def reachable(self) -> np.ndarray | None:
        """Configurations some placement can still take (None: every one, the published case with a free node that
        accepts any type and no gangs or packing)."""
        t = self.table
        if not self.pack and t.all_single and None in self.free:
            return None
        single = t.single
        nfree = np.array([len(self._free_nodes(v)) for v in t.vm_names])
        ok = np.where(single, nfree[t.vm_index] >= 1, nfree[t.vm_index] >= t.vms)
        if self.pack and self.spare:
            most = np.zeros(len(t.vm_names), dtype=int)
            total = nfree * t.vm_gpus
            for n, g in self.spare.items():
                i = t.vm_names.index(hosted(self.nodes[n]).name)
                most[i] = max(most[i], g)
                total[i] += g
            ok |= np.where(single, t.gpus <= most[t.vm_index], t.gpus <= total[t.vm_index])
        return ok

    def place(self, c: int, vms: dict[int, str]) -> tuple[tuple[int, int], ...]:
        """Parts ``(node, GPUs)`` for configuration ``c``, new VMs recorded in ``vms``; the room is taken."""
        conf = self.table.configs[c]
        vm, g = conf.vm.name, conf.gpus
        if self.pack:
            fits = [(free, n) for n, free in self.spare.items() if free >= g and hosted(self.nodes[n]).name == vm]
            if fits and g <= conf.vm.gpus:
                _, n = min(fits)
                self._use(n, g)
                return ((n, g),)
        parts: list[tuple[int, int]] = []
        left = g
        for n in self._free_nodes(vm, -(-g // conf.vm.gpus)):
            if left <= 0:
                break
            take = min(left, conf.vm.gpus)
            if self.nodes[n].vm is None or hosted(self.nodes[n]).name != vm:
                vms[n] = vm
            self.taken.add(n)
            if self.pack and take < conf.vm.gpus:
                self.spare[n] = conf.vm.gpus - take
            parts.append((n, take))
            left -= take
        if left > 0:  # a packed gang: the free GPUs of running VMs of its type, most free first
            for free, n in sorted(((f, n) for n, f in self.spare.items() if hosted(self.nodes[n]).name == vm
                                   and n not in {m for m, _ in parts}), reverse=True):
                take = min(left, free)
                self._use(n, take)
                parts.append((n, take))
                left -= take
                if left <= 0:
                    break
        return tuple(parts)

    def _use(self, n: int, g: int) -> None:
        self.spare[n] -= g
        if self.spare[n] <= 0:
            del self.spare[n]


class ListScheduler(Policy):
    """The shared core: walk the queue in ``order`` and give each head its D* setup on a free node of its own.

    A node is free when it hosts no job: it has no VM (``empty_nodes``) or its VM has just been left idle, e.g. by a
    completion at this instant (``idle_nodes``). An idle VM of the wanted type is reused as it is; otherwise the
    lowest-numbered free node that accepts the type gets it (an idle VM of another type is replaced). ``pack`` and
    ``spot``: see the module docstring.
    """

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False
    may_gang: ClassVar[bool] = True

    def __init__(self, pack: bool = False, spot: bool = False, spot_rule: str | None = None):
        self.pack = bool(pack)
        self.spot = bool(spot)
        self.spot_rule = spot_rule
        check_spot_rule(self.name, spot_rule)
        if self.pack:
            self.may_share = True  # type: ignore[misc]

    @staticmethod
    def order(jv: JobView) -> tuple:
        """The queue key of a waiting job: smallest first (each subclass gives its own)."""
        raise NotImplementedError

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting or not (snapshot.empty_nodes or snapshot.idle_nodes or self.pack):
            return Plan()  # nowhere to start a job (packing may still find free GPUs on running VMs)
        table = config_table(snapshot.configs)
        room = _Room(snapshot, table, self.pack)
        if room.empty():
            return Plan()
        weigh = self.spot or self.spot_rule is not None
        if self.spot_rule is not None:
            snapshot = uniform_progress_snapshot(snapshot)
        usable = ~table.spot if table.any_spot and not weigh else None
        vms: dict[int, str] = {}
        start: list[Assignment] = []
        for jv in sorted(snapshot.waiting, key=type(self).order):
            room.tidy()
            if room.empty():
                break
            mask = room.reachable()
            if usable is not None:
                mask = usable if mask is None else mask & usable
            if weigh:
                jv = expected_view(jv, snapshot)
            c = d_star(jv, snapshot.time, table, mask)
            if c is None:
                break
            parts = room.place(c, vms)
            start.append(Assignment(jv.id, parts[0][0], parts[0][1], gang=parts[1:]))
        return Plan(vms=vms, start=tuple(start))


@register("fifo")
class FIFO(ListScheduler):
    """First in, first out: queue by submission time, then job id."""

    @staticmethod
    def order(jv: JobView) -> tuple:
        return (jv.job.submit_time, jv.job.id)


@register("edf")
class EDF(ListScheduler):
    """Earliest deadline first: queue by deadline, then submission time, then job id."""

    @staticmethod
    def order(jv: JobView) -> tuple:
        return (jv.job.deadline, jv.job.submit_time, jv.job.id)


@register("priority")
class Priority(ListScheduler):
    """Priority scheduling: queue by tardiness weight (highest first), then submission time, then job id."""

    @staticmethod
    def order(jv: JobView) -> tuple:
        return (-jv.job.weight, jv.job.submit_time, jv.job.id)


alias("ps", "priority")
