"""Which jobs hold which GPUs of a node, who shares with whom, and the pace changes that follow: the run's
co-location and MIG bookkeeping (``sim.run.Run`` owns one where ``ClusterRules.jobs_per_gpu`` is 2 or
``ClusterRules.mig`` is set).

MIG: each GPU of a node has a layout (``NodeState.layouts``, ``()`` whole); a plan repartitions an idle GPU, which
is ready ``ClusterRules.mig_reconfigure_time`` later (``NodeState.devices_ready``); a job on a slice holds that slice
of its device and runs ``1 / speed`` times slower than on the whole GPU (``sim.model.SliceSpeeds``); its GPU-seconds
are credited as the slice's compute share (of 7). A whole-GPU job takes only unpartitioned devices; ``NodeState.used``
counts the GPUs whole jobs hold, and the policy's view adds the partitioned ones (``NodeView.used_gpus``).

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

import pandas as pd

from sim.model import CapsimError, JobView, Layout, Plan, Slice, SliceSpeeds, VMType

if TYPE_CHECKING:
    from sim.records import Segments
    from sim.sharing.view import TruePairs
    from sim.state import JobState, NodeState, World
    from sim.timing import TimeModel

__all__ = ["SharedGPUs"]


class SharedGPUs:
    """Co-location bookkeeping for one run: ``world`` and ``time`` are the run's, ``segments`` its segment records,
    ``pairs`` the truth's slowdowns."""

    def __init__(self, world: World, time: TimeModel, segments: Segments, pairs: TruePairs | None,
                 reconfigure: float | None = None):
        assert pairs is None or world.colocation is not None, "the policy's view of co-location is set first"
        self.world = world
        self.view = world.colocation
        self.time = time
        self.segments = segments
        self.pairs = pairs
        self._merge: dict[int, tuple[float, list[int]]] = {}
        """Job id -> (time, segment rows) of its last split segment, which a run ending at that instant completes."""
        self.reconfigure = reconfigure
        """Seconds a repartitioned GPU is unavailable, where GPUs may be cut into MIG slices (else None)."""
        self.slices: list[str | None] = []
        """Each segment row's MIG slice (``Slice.label`` on its GPU), where GPUs may be cut into slices."""

    def place(self, plan: Plan, now: float, place: Callable[..., None]) -> None:
        """Repartition the plan's GPUs (``Plan.layouts``), then place its moved and started jobs by ``place(state,
        parts, now, partner[, slice])``: those alone first, then those joining a partner (who may be one of the
        first)."""
        world = self.world
        for (n, d), layout in (plan.layouts or {}).items():
            self.repartition(index(n), index(d), layout, now)
        jobs = world.jobs
        started = {a.job_id for a in plan.start}
        for joining in (False, True):
            for a in plan.move + plan.start:
                if (a.partner is not None) is joining:
                    if a.job_id in started:
                        world.drop_waiting(a.job_id)
                    parts = ((index(a.node), index(a.gpus)),) if not a.gang else tuple(
                        (index(n), index(g)) for n, g in a.parts)
                    if a.slice is not None:
                        place(jobs[a.job_id], parts, now, None, a.slice)
                    else:
                        place(jobs[a.job_id], parts, now, None if a.partner is None else index(a.partner))

    @classmethod
    def of(cls, world: World, time: TimeModel, segments: Segments, pairs: TruePairs | None,
           mig: SliceSpeeds | None) -> SharedGPUs | None:
        """The bookkeeping a run needs: one where GPUs may be shared (``pairs``) or cut into slices (``mig``), else
        None."""
        if pairs is None and mig is None:
            return None
        return cls(world, time, segments, pairs, None if mig is None else world.cluster.rules.mig_reconfigure_time)

    def started(self, node: NodeState, vm: VMType) -> None:
        """A VM started on ``node``: its GPUs hold no job and are whole."""
        node.devices = [0] * vm.gpus
        if self.reconfigure is not None:
            node.layouts = [()] * vm.gpus
            node.devices_ready = [0.0] * vm.gpus

    def framed(self, segments: pd.DataFrame) -> pd.DataFrame:
        """The run's segment table with each row's MIG slice (a ``slice`` column after ``partner``) where GPUs may be
        cut into slices; as it is otherwise."""
        if self.reconfigure is not None:
            at = list(segments.columns).index("partner") + 1
            segments.insert(at, "slice", pd.Series(self.slices, dtype="object"))
        return segments

    def devices_for(self, st: JobState, parts: tuple[tuple[int, int], ...], vm: VMType, since: float,
                    partner: int | None, cut: Slice | None) -> tuple[float, tuple[tuple[int, ...], ...] | None, float]:
        """(When the run can begin, once its GPUs are repartitioned (MIG); the devices a job alone on whole GPUs takes,
        None on a slice or with a partner; the speed on its slice, 1 on whole GPUs) for the run's ``_place``."""
        nodes = self.world.nodes
        if cut is not None:
            mig = self.world.mig
            assert mig is not None
            speed = mig.speed(st.job.spec, vm.gpu, cut.profile)
            if not speed > 0:
                raise CapsimError(f"job {st.job.id} was put on MIG slice {cut.label(vm.gpu)} of node {parts[0][0]}, "
                                  f"where it does not fit (the plan rules refuse this: a defect of the engine)")
            return max(since, self.ready(nodes[parts[0][0]], (cut.device,))), None, speed
        if partner is not None:
            return since, None, 1.0
        devices = tuple(self.take(nodes[m], g) for m, g in parts)
        return max(since, max(self.ready(nodes[m], d) for (m, _), d in zip(parts, devices))), devices, 1.0

    def take(self, node: NodeState, g: int) -> tuple[int, ...]:
        """The ``g`` lowest-numbered devices of ``node`` that hold no job (and are whole), now held by one."""
        devices = node.devices
        assert devices is not None
        layouts = node.layouts
        free = [d for d, jobs in enumerate(devices) if not jobs and (layouts is None or not layouts[d])][:g]
        assert len(free) == g, "the plan rules keep GPUs within the VM"
        for d in free:
            devices[d] += 1
        return tuple(free)

    def ready(self, node: NodeState, devices: tuple[int, ...]) -> float:
        """When the last of ``devices`` of ``node`` is done being repartitioned (0 without MIG)."""
        ready = node.devices_ready
        return max((ready[d] for d in devices), default=0.0) if ready is not None else 0.0

    def repartition(self, n: int, device: int, layout: Layout, now: float) -> None:
        """Cut GPU ``device`` of node ``n`` (which holds no job) into ``layout``, ready after the reconfiguration
        time; the same layout again changes nothing."""
        node = self.world.nodes[n]
        layouts, ready = node.layouts, node.devices_ready
        assert layouts is not None and ready is not None and self.reconfigure is not None
        old = layouts[device]
        if tuple(layout) == old:
            return
        assert node.devices is not None and not node.devices[device], "the plan rules repartition idle GPUs only"
        layouts[device] = tuple(layout)
        ready[device] = max(now, node.ready_at) + self.reconfigure
        self.world.layout_changed(n)

    def cut_in(self, st: JobState, cut: Slice, k: int, now: float, speed: float) -> None:
        """Run ``st`` (its run set up by the run's ``_place``, from when the slice's GPU is ready) on slice ``cut`` of
        its node, at ``speed`` of the whole GPU's pace (configuration ``k``: its VM type with one GPU)."""
        world = self.world
        node = world.nodes[st.node]
        st.slow = 1.0 / speed
        st.slice = cut
        self.time.placed(st, float(st.true[k]) * st.slow)
        node.jobs[st.job.id] = st
        world.job_placed(st.node)
        assert node.devices is not None
        node.devices[cut.device] += 1
        st.devices = ((cut.device,),)
        world.add_running(JobView(st.job, st.est, done=st.done, node=st.node, config=k, since=st.since,
                                  pace=self._pace(st, k), slice=cut))

    def _pace(self, st: JobState, k: int) -> float:
        """What the policy is told of a slice job's pace: 1 over the slice's speed (``Snapshot.mig``)."""
        mig, cut = self.world.mig, st.slice
        assert mig is not None and cut is not None
        vm = self.world.configs[k].vm
        return 1.0 / mig.speed(st.job.spec, vm.gpu, cut.profile)

    def join(self, st: JobState, mate: JobState, k: int, now: float) -> None:
        """Run ``st`` (its run set up by the run's ``_place``) on the GPUs of ``mate``, which runs alone there: both go
        at their co-located pace from ``now``."""
        assert self.pairs is not None and self.view is not None
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
        pace = 1.0 if partner is None or self.view is None else self.view.slowdowns(st.job.spec, partner.job.spec,
                                                                                     st.cfg)[0]
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
            for r in merge[1]:
                self.segments.put("done", r, st.done)
        elif elapsed >= 0:
            self._split(st, now)
        mate = st.partner
        for (n, g), devs in zip(st.parts, st.devices):
            node = world.nodes[n]
            del node.jobs[jid]
            if node.devices is not None:
                for d in devs:
                    node.devices[d] -= 1
            if mate is None and st.slice is None:
                node.used -= g
            world.job_left(n, not node.jobs)
        st.devices = ()
        st.slow = 1.0
        st.slice = None
        if mate is not None:
            st.partner = None
            self.repace(mate, now, 1.0, None)

    def _split(self, st: JobState, now: float) -> list[int]:
        """Record the job's run segment on each of its nodes up to ``now`` and credit its GPU-seconds (half of them
        while it shared its GPUs); return the rows recorded."""
        elapsed = now - st.since
        cut = st.slice
        share = 0.5 if st.partner is not None else 1.0 if cut is None else cut.compute / 7
        rows = []
        jid = st.job.id
        segments = self.segments
        for n, g in st.parts:
            iv = self.world.nodes[n].interval
            assert iv is not None, "a job runs only on a node with a VM"
            segments.add(st, iv.vm, now, n, g)
            rows.append(segments.spilled + len(segments.job_id) - 1)  # from the first row: the lists spill
            if self.reconfigure is not None:
                self.slices.append(None if cut is None else cut.label(iv.vm.gpu))
            secs = iv.gpu_secs
            secs[jid] = secs.get(jid, 0.0) + g * elapsed * share
        return rows
