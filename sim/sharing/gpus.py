"""Which jobs hold which GPUs of a node, who shares with whom, and the pace changes that follow: the run's
co-location bookkeeping (``sim.run.Run`` owns one where ``ClusterRules.jobs_per_gpu`` is 2).

GPU identity: GPU ``i`` of a VM is device ``i`` of its node; ``NodeState.devices`` counts the jobs on each and a job's
``JobState.devices`` lists its devices on each of its nodes. A job placed alone takes the lowest-numbered free
devices; a job placed with a partner takes the partner's. (Slices of one GPU, as MIG makes, would refine a device
into slices: the devices are where that identity lives.)

A partner arriving or leaving changes a running job's pace: its run segment so far is recorded (with the partner it
had), the time model accounts its work at the old pace and reschedules the rest (``TimeModel.paced``), and its view
is renewed (``JobView.partner``, ``pace``, ``since``, ``done``). A shared GPU's seconds are credited half to each job
(cost shares, busy GPU-seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import index
from typing import TYPE_CHECKING

from sim.model import JobView, Plan

if TYPE_CHECKING:
    from sim.records import Segments
    from sim.sharing.view import TruePairs
    from sim.state import JobState, NodeState, World
    from sim.timing import TimeModel

__all__ = ["SharedGPUs"]


class SharedGPUs:
    """Co-location bookkeeping for one run: ``world`` and ``time`` are the run's, ``segments`` its segment records,
    ``pairs`` the truth's slowdowns."""

    def __init__(self, world: World, time: TimeModel, segments: Segments, pairs: TruePairs):
        assert world.colocation is not None, "the policy's view of co-location is set first"
        self.world = world
        self.view = world.colocation
        self.time = time
        self.segments = segments
        self.pairs = pairs
        self._merge: dict[int, tuple[float, list[int]]] = {}
        """Job id -> (time, segment rows) of its last split segment, which a run ending at that instant completes."""

    def place(self, plan: Plan, now: float, place: Callable[..., None]) -> None:
        """Place the plan's moved and started jobs by ``place(state, parts, now, partner)``: those alone first, then
        those joining a partner (who may be one of the first)."""
        world = self.world
        jobs = world.jobs
        started = {a.job_id for a in plan.start}
        for joining in (False, True):
            for a in plan.move + plan.start:
                if (a.partner is not None) is joining:
                    if a.job_id in started:
                        world.drop_waiting(a.job_id)
                    parts = ((index(a.node), index(a.gpus)),) if not a.gang else tuple(
                        (index(n), index(g)) for n, g in a.parts)
                    place(jobs[a.job_id], parts, now, None if a.partner is None else index(a.partner))

    def take(self, node: NodeState, g: int) -> tuple[int, ...]:
        """The ``g`` lowest-numbered devices of ``node`` that hold no job, now held by one."""
        devices = node.devices
        assert devices is not None
        free = [d for d, jobs in enumerate(devices) if not jobs][:g]
        assert len(free) == g, "the plan rules keep GPUs within the VM"
        for d in free:
            devices[d] += 1
        return tuple(free)

    def join(self, st: JobState, mate: JobState, k: int, now: float) -> None:
        """Run ``st`` (its run set up by the run's ``_place``) on the GPUs of ``mate``, which runs alone there: both go
        at their co-located pace from ``now``."""
        slow, mate_slow = self.pairs.slowdowns(st.job.spec, mate.job.spec, k)
        st.slow = slow
        self.time.placed(st, float(st.true[k]) * slow)
        world = self.world
        node = world.nodes[st.node]
        node.jobs[st.job.id] = st
        world.job_placed(st.node)
        st.devices = mate.devices
        devices = node.devices
        assert devices is not None
        for d in st.devices[0]:
            devices[d] += 1
        self.repace(mate, now, mate_slow, st)
        st.partner = mate
        pace = self.view.slowdowns(st.job.spec, mate.job.spec, k)[0]
        world.add_running(JobView(st.job, st.est, done=st.done, node=st.node, config=k, since=st.since,
                                  partner=mate.job.id, pace=pace))

    def repace(self, st: JobState, now: float, slow: float, partner: JobState | None) -> None:
        """Job ``st`` gets a new partner (None: it runs alone) and pace at ``now``: the run segment so far is recorded
        with the old partner, the time model accounts its work and schedules the rest, its view is renewed."""
        start = st.since
        self.time.paced(st, now, slow)
        if now > start:
            rows = self._split(st, now)
            st.since = now
            st.ran = True
            self._merge[st.job.id] = (now, rows)
        st.partner = partner
        pace = 1.0 if partner is None else self.view.slowdowns(st.job.spec, partner.job.spec, st.cfg)[0]
        self.world.add_running(JobView(st.job, st.est, done=st.done, node=st.node, config=st.cfg, since=st.since,
                                       parts=st.parts if len(st.parts) > 1 else (),
                                       partner=None if partner is None else partner.job.id, pace=pace))

    def leave(self, st: JobState, now: float, elapsed: float) -> None:
        """Job ``st`` leaves its nodes at ``now`` after ``elapsed`` s of its run segment (the run's ``_end_segment``):
        its GPUs are freed unless its partner stays on them, who then runs alone. A segment split at this very
        instant is completed instead of followed by an empty one."""
        world = self.world
        jid = st.job.id
        merge = self._merge.pop(jid, None)
        if elapsed == 0 and merge is not None and merge[0] == now:
            done = self.segments.done
            for r in merge[1]:
                done[r] = st.done
        elif elapsed >= 0:
            self._split(st, now)
        mate = st.partner
        for (n, g), devs in zip(st.parts, st.devices):
            node = world.nodes[n]
            del node.jobs[jid]
            if node.devices is not None:
                for d in devs:
                    node.devices[d] -= 1
            if mate is None:
                node.used -= g
            world.job_left(n, not node.jobs)
        st.devices = ()
        st.slow = 1.0
        if mate is not None:
            st.partner = None
            self.repace(mate, now, 1.0, None)

    def _split(self, st: JobState, now: float) -> list[int]:
        """Record the job's run segment on each of its nodes up to ``now`` and credit its GPU-seconds (half of them
        while it shared its GPUs); return the rows recorded."""
        elapsed = now - st.since
        share = 0.5 if st.partner is not None else 1.0
        rows = []
        jid = st.job.id
        segments = self.segments
        for n, g in st.parts:
            iv = self.world.nodes[n].interval
            assert iv is not None, "a job runs only on a node with a VM"
            rows.append(len(segments.job_id))
            segments.add(st, iv.vm, now, n, g)
            secs = iv.gpu_secs
            secs[jid] = secs.get(jid, 0.0) + g * elapsed * share
        return rows
