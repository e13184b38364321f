"""FIFO, EDF and Priority scheduling: one list-scheduling core, three queue orders (docs/reference.md §3).

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

from optim.base import Policy, alias, register
from optim.common import config_table, d_star
from optim.queue import WaitingQueue
from optim.room import NodeIndex, Room
from optim.spot.fleet import check_spot_rule, uniform_progress_snapshot
from sim.model import Assignment, JobView, Plan, Snapshot, positional
from sim.risk import expected_view

__all__ = ["ListScheduler", "FIFO", "EDF", "Priority"]

_NOTHING = Plan()
"""The plan that starts nothing (plans are immutable: one serves every such decision)."""
_assignment = positional(Assignment)
"""``Assignment(job_id, node, gpus, gang, partner, slice)``, positionally (one per job started)."""


class ListScheduler(Policy):
    """The shared core: walk the queue in ``order`` and give each head its D* setup on a free node of its own.

    A node is free when it hosts no job: it has no VM (``empty_nodes``) or its VM has just been left idle, e.g. by a
    completion at this instant (``idle_nodes``). An idle VM of the wanted type is reused as it is; otherwise the
    lowest-numbered free node that accepts the type gets it (an idle VM of another type is replaced). ``pack`` and
    ``spot``: see the module docstring.
    """

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = True
    """Several jobs on one VM: only with ``pack`` (without it every job takes a free node of its own)."""
    may_gang: ClassVar[bool] = True

    def __init__(self, pack: bool = False, spot: bool = False, spot_rule: str | None = None):
        self.pack = pack
        self.spot = spot
        self.spot_rule = spot_rule
        self.check_param("pack", bool)
        self.check_param("spot", bool)
        check_spot_rule(self.name, spot_rule)
        self._index: NodeIndex | None = None
        self._queue = WaitingQueue(type(self).order)

    @staticmethod
    def order(jv: JobView) -> tuple:
        """The queue key of a waiting job: smallest first (each subclass gives its own)."""
        raise NotImplementedError

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting or not (snapshot.empty_nodes or snapshot.idle_nodes or self.pack):
            return _NOTHING  # nowhere to start a job (packing may still find free GPUs on running VMs)
        table = config_table(snapshot.configs)
        if self._index is None or self._index.table is not table or self._index.track_spare is not self.pack:
            self._index = NodeIndex(table, spare=self.pack)
        self._index.follow(snapshot.nodes, snapshot.node_changes)
        room = Room(self._index, self.pack)
        if room.empty():
            return _NOTHING
        weigh = self.spot or self.spot_rule is not None
        if self.spot_rule is not None:
            snapshot = uniform_progress_snapshot(snapshot)
        usable = ~table.spot if table.any_spot and not weigh else None
        vms: dict[int, str] = {}
        start: list[Assignment] = []
        for jv in self._queue.jobs(snapshot.waiting):  # (the room is not empty: checked above and after each start)
            mask = room.reachable()
            if usable is not None:
                mask = usable if mask is None else mask & usable
            if weigh:
                jv = expected_view(jv, snapshot)
            c = d_star(jv, snapshot.time, table, mask)
            if c is None:
                break
            parts = room.place(c, vms)
            start.append(_assignment(jv.job.id, parts[0][0], parts[0][1], parts[1:], None, None))
            if room.empty():
                break
        self._queue.started(len(start))
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
