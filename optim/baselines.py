"""FIFO, EDF and Priority scheduling: one list-scheduling core, three queue orders (REFERENCE §3).

The head of the queue gets its D* configuration on a free node of its own and keeps that VM until it completes:
no sharing, no preemption, strict head-of-line blocking when the head cannot be placed.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import Policy, alias, register
from optim.common import config_table, d_star, hosted
from sim.model import Assignment, JobView, Plan, Snapshot

__all__ = ["ListScheduler", "FIFO", "EDF", "Priority"]


class ListScheduler(Policy):
    """The shared core: walk the queue in ``order`` and give each head its D* setup on a free node of its own.

    A node is free when it hosts no job: it has no VM (``empty_nodes``) or its VM has just been left idle, e.g. by a
    completion at this instant (``idle_nodes``). An idle VM of the wanted type is reused as it is; otherwise the
    lowest-numbered free node that accepts the type gets it (an idle VM of another type is replaced).
    """

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False

    @staticmethod
    def order(jv: JobView) -> tuple:
        """The queue key of a waiting job: smallest first (each subclass gives its own)."""
        raise NotImplementedError

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting or not (snapshot.empty_nodes or snapshot.idle_nodes):
            return Plan()
        table = config_table(snapshot.configs)
        nodes = snapshot.nodes
        free: dict[frozenset[str] | None, list[int]] = {}  # per slot class, lowest index last
        for n in sorted(snapshot.empty_nodes + snapshot.idle_nodes, reverse=True):
            free.setdefault(nodes[n].allowed, []).append(n)
        hosting: dict[str, list[int]] = {}  # idle VMs by type, lowest index last
        for n in reversed(snapshot.idle_nodes):
            hosting.setdefault(hosted(nodes[n]).name, []).append(n)
        taken: set[int] = set()
        queue = sorted(snapshot.waiting, key=type(self).order)
        vms: dict[int, str] = {}
        start: list[Assignment] = []
        for jv in queue:
            for stack in (*free.values(), *hosting.values()):
                while stack and stack[-1] in taken:
                    stack.pop()
            free = {k: v for k, v in free.items() if v}
            if not free:
                break
            mask = None
            if None not in free:
                mask = np.logical_or.reduce([table.accepted_by(cls) for cls in free])
            c = d_star(jv, snapshot.time, table, mask)
            if c is None:
                break
            vm = table.configs[c].vm.name
            if hosting.get(vm):
                node = hosting[vm].pop()
            else:
                node = min(free[k][-1] for k in free if k is None or vm in k)
                vms[node] = vm
            taken.add(node)
            start.append(Assignment(jv.id, node, int(table.gpus[c])))
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
