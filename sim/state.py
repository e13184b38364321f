"""The mutable state of a run: jobs, nodes and VM intervals as the engine tracks them, and the policy's view of them.

``World`` holds what the plan rules read (nodes, jobs by id, who waits, who runs, VM types, configuration index)
and keeps the policy's view up to date incrementally: the engine reports each change (a job waits or runs, a node's
VM starts, stops, fills or empties) and ``snapshot`` rebuilds only what changed since the last one, so a decision
costs O(nodes + jobs in the system), never O(all jobs x configurations). None of this is ever shown to a policy
except through ``Snapshot``.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast
from weakref import ref

import numpy as np

from sim.model import (
    Job,
    JobSpec,
    JobView,
    Layout,
    NodeChanges,
    NodeMig,
    NodeView,
    Slice,
    SliceSpeeds,
    Snapshot,
    VMType,
    positional,
)

if TYPE_CHECKING:
    from sim.clock import Call
    from sim.cluster import Cluster, NodeSlot
    from sim.sharing.view import PairView

__all__ = ["JobState", "Interval", "NodeState", "World", "EngineSnapshot", "job_states", "job_view"]

_NONE: frozenset[str] = frozenset()
job_view = positional(JobView)
"""``JobView(job, estimates, done, node, config, since, parts, partner, pace, slice)``, every field in order."""
_node_view = positional(NodeView)
_LATER: tuple = cast("tuple", object())
"""What a lazy field's slot of an engine snapshot holds until its value is made (compared by identity: not ``()``,
which is one object in CPython)."""


def _lazy(name: str, make: str) -> property:
    """The field ``name`` of an engine snapshot, made by ``World.<make>()`` when first read."""
    slot = Snapshot.__dict__[name]
    get_slot, set_slot = slot.__get__, slot.__set__

    def get(self: EngineSnapshot) -> Any:
        got = get_slot(self, Snapshot)
        if got is _LATER:
            got = getattr(self._world, make)()
            set_slot(self, got)
        return got

    return property(get, set_slot, doc=f"``Snapshot.{name}``, made when first read.")


class EngineSnapshot(Snapshot):
    """The engine's ``Snapshot``: the same fields and values, but its tuples of nodes (with ``node_changes``), running
    jobs, empty and idle nodes are made when first read.

    A list scheduler reads none of them when no job waits (half its decisions), and never reads the running jobs:
    copying ~100-200 references into new tuples at every decision was a third of a snapshot's cost; the views of the
    nodes that changed are made then too, so a node that changes twice between two reads gets one new view. What is
    read is what the snapshot was taken with, whenever it is read: when the decision is over (``World.let_go``,
    before the engine changes anything), a snapshot that something still holds (``World.held``, a weak reference)
    gets every tuple it has not made yet, of the state it was taken in. ``replace``, equality and pickling read the
    fields as any other.
    """

    __slots__ = ("_world",)
    _world: World

    nodes = _lazy("nodes", "nodes_view")
    node_changes = _lazy("node_changes", "changes_view")
    running = _lazy("running", "running_view")
    empty_nodes = _lazy("empty_nodes", "empty_view")
    idle_nodes = _lazy("idle_nodes", "idle_view")


_LAZY = tuple((Snapshot.__dict__[name].__get__, Snapshot.__dict__[name].__set__, make) for name, make in (
    ("nodes", "nodes_view"), ("node_changes", "changes_view"), ("running", "running_view"),
    ("empty_nodes", "empty_view"), ("idle_nodes", "idle_view")))
_snapshot = cast("Callable[..., EngineSnapshot]", positional(Snapshot, EngineSnapshot))


class JobState:
    """One job as the engine tracks it: progress, where and how it runs now, and what it has cost so far.

    ``est`` and ``true`` are the estimated and true runtimes of the whole job on each configuration (read-only rows
    shared by the jobs of one spec; the engine reads ``true`` as ``float(true[k])`` so that times stay plain floats).
    ``done`` is the fraction of work completed when the current run began; ``since`` is when that run began (after
    any boot), ``overhead`` the restart overhead it pays first; ``event`` its pending completion. ``parts`` lists the
    ``(node, GPUs)`` of the current run (one entry, or several for a gang; ``node`` is the first, ``gpus`` the total).

    Round mode (``sim.timing.rounds``) counts work in whole iterations: ``steps`` done so far, ``pending`` those of the
    current round's micro-task (credited at the round's end) and ``final`` those of the job's last micro-task.
    ``revoked`` counts the runs ended by a spot revocation and ``lost`` the GPU-seconds of work they threw away.
    ``base`` is the estimator's row before any observation (``est`` becomes the refined row of an estimator that
    observes, ``sim.run.observe``) and ``run_start`` the iterations done when the current run began (kept only for
    such an estimator).

    Co-location (``ClusterRules.jobs_per_gpu`` 2): ``partner`` is the job sharing its GPUs, ``slow`` its true
    slowdown now (its run goes ``slow`` times slower than ``true`` says; 1 alone), ``devices`` the indices of its GPUs
    on each of its nodes (one tuple per part; kept only where GPUs may be shared). ``slice`` is the MIG slice it runs
    on (``ClusterRules.mig``), if any: ``slow`` is then 1 over the slice's speed.
    """

    __slots__ = ("job", "est", "true", "done", "node", "cfg", "gpus", "since", "overhead", "event", "runs", "ran",
                 "first_start", "end", "cost_share", "parts", "steps", "pending", "final", "revoked", "lost", "base",
                 "run_start", "partner", "slow", "devices", "slice")

    def __init__(self, job: Job, est: np.ndarray, true: np.ndarray):
        self.job = job
        self.est = est
        self.base = est
        self.run_start = 0
        self.true = true
        self.done = 0.0
        self.node = -1
        self.cfg = -1
        self.gpus = 0
        self.since = math.nan
        self.overhead = 0.0
        self.event: Call | None = None
        self.runs = 0
        self.ran = False
        self.first_start = math.nan
        self.end = math.nan
        self.cost_share = 0.0
        self.parts: tuple[tuple[int, int], ...] = ()
        self.steps = 0
        self.pending = 0
        self.final: int | None = None
        self.revoked = 0
        self.lost = 0.0
        self.partner: JobState | None = None
        self.slow = 1.0
        self.devices: tuple[tuple[int, ...], ...] = ()
        self.slice: Slice | None = None

    def gpus_on(self, node: int) -> int:
        """GPUs the current run uses on ``node``."""
        if len(self.parts) == 1:
            return self.gpus
        for n, g in self.parts:
            if n == node:
                return g
        return 0


def job_states(jobs: Sequence[Job], est: dict[JobSpec, np.ndarray], true: dict[JobSpec, np.ndarray]
               ) -> list[JobState]:
    """A ``JobState`` per job, its rows looked up once per spec object (hashing a ``JobSpec`` costs more than the
    state itself: a million jobs share a few dozen specs)."""
    rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    out = []
    for j in jobs:
        spec = j.spec
        pair = rows.get(id(spec))  # ``jobs`` holds every spec, so no id is reused while this runs
        if pair is None:
            pair = rows[id(spec)] = (est[spec], true[spec])
        out.append(JobState(j, *pair))
    return out


class Interval:
    """One VM on one node from start to stop, with the GPU-seconds each job ran on it (its billing shares) and, for a
    spot VM, its pending revocation."""

    __slots__ = ("vm", "start", "ready", "gpu_secs", "booting", "revocation")

    def __init__(self, vm: VMType, start: float):
        self.vm = vm
        self.start = start
        self.ready = start + vm.boot_time
        self.gpu_secs: dict[int, float] = {}
        self.booting = vm.boot_time > 0
        self.revocation: Call | None = None


class NodeState:
    """One node slot: the VM it hosts (if any) and since when, GPUs in use, and the jobs running there.

    Where GPUs may be shared, ``devices`` holds the number of jobs on each GPU of the VM (GPU ``i`` of the VM is
    device ``i``) and ``used`` counts the GPUs holding at least one job; otherwise ``devices`` is None. Where GPUs may
    be cut into MIG slices, ``layouts`` holds each GPU's layout (``()``: whole) and ``devices_ready`` when each is done
    being repartitioned (``used`` counts the GPUs whole-GPU jobs hold); otherwise both are None."""

    __slots__ = ("index", "slot", "vm", "ready_at", "used", "jobs", "interval", "devices", "layouts", "devices_ready")

    def __init__(self, index: int, slot: NodeSlot):
        self.index = index
        self.slot = slot
        self.vm: VMType | None = None
        self.ready_at = 0.0
        self.used = 0
        self.jobs: dict[int, JobState] = {}
        self.interval: Interval | None = None
        self.devices: list[int] | None = None
        self.layouts: list[Layout] | None = None
        self.devices_ready: list[float] | None = None


class World:
    """Nodes, jobs, the waiting and running sets, and the cached policy view built from them."""

    def __init__(self, cluster: Cluster, states: list[JobState]):
        self.cluster = cluster
        self.configs = cluster.configs
        self.config_index = {(c.vm.name, c.gpus): k for k, c in enumerate(self.configs)}
        self.vm_types = {v.name: v for v in cluster.vm_types}
        self.nodes = [NodeState(i, s) for i, s in enumerate(cluster.slots)]
        self.jobs = {s.job.id: s for s in states}
        self.waiting: dict[int, JobView] = {}
        self.running: dict[int, JobView] = {}
        self.empty = list(range(len(self.nodes)))
        """Nodes without a VM, in index order."""
        self.idle: set[int] = set()
        """Nodes whose VM hosts no job."""
        self._node_views = [NodeView(i, allowed=s.allowed, fixed=s.fixed) for i, s in enumerate(cluster.slots)]
        self._bare = tuple(self._node_views)
        """Each node's view without a VM, shown again whenever its VM stops (the same state, the same object)."""
        self._dirty: set[int] = set()
        self._nodes_t: tuple[NodeView, ...] | None = tuple(self._node_views)
        self._changes = NodeChanges((), self._nodes_t, ())
        self._changed: set[int] = set()
        """Nodes whose views were made anew since the last nodes tuple was made."""
        self._waiting_t: tuple[JobView, ...] | None = None
        self._running_t: tuple[JobView, ...] | None = None
        self.held: ref[EngineSnapshot] | None = None
        """The last snapshot with tuples yet to be made (``EngineSnapshot``), while it lives."""
        self._empty_t: tuple[int, ...] | None = tuple(self.empty)
        self._idle_t: tuple[int, ...] | None = ()
        self._vm_types_t = cluster.vm_types
        self._rules = cluster.rules
        self.unavailable: frozenset[str] = _NONE
        """Spot VM types that cannot be started now (set by the run before each decision)."""
        self.colocation: PairView | None = None
        """What the policy knows of co-location (``Snapshot.colocation``), where GPUs may be shared."""
        self.mig: SliceSpeeds | None = None
        """The slice speeds (``Snapshot.mig``), where GPUs may be cut into MIG slices."""

    # The engine reports every change through these, so the snapshot knows what to rebuild.

    def add_waiting(self, view: JobView) -> None:
        self.waiting[view.job.id] = view
        self._waiting_t = None

    def drop_waiting(self, job_id: int) -> None:
        del self.waiting[job_id]
        self._waiting_t = None

    def add_running(self, view: JobView) -> None:
        self.running[view.job.id] = view
        self._running_t = None

    def drop_running(self, job_id: int) -> None:
        del self.running[job_id]
        self._running_t = None

    def vm_started(self, n: int) -> None:
        del self.empty[bisect_left(self.empty, n)]
        self._empty_t = None
        self.idle.add(n)
        self._idle_t = None
        self._dirty.add(n)
        self._nodes_t = None

    def vm_stopped(self, n: int) -> None:
        insort(self.empty, n)
        self._empty_t = None
        if n in self.idle:
            self.idle.discard(n)
            self._idle_t = None
        self._dirty.add(n)
        self._nodes_t = None

    def job_placed(self, n: int) -> None:
        """A job was placed on node ``n``."""
        if n in self.idle:
            self.idle.discard(n)
            self._idle_t = None
        self._dirty.add(n)
        self._nodes_t = None

    def job_left(self, n: int, idle: bool) -> None:
        """A job left node ``n``; ``idle`` if it was the last one."""
        if idle:
            self.idle.add(n)
            self._idle_t = None
        self._dirty.add(n)
        self._nodes_t = None

    def layout_changed(self, n: int) -> None:
        """A GPU of node ``n`` was repartitioned (MIG)."""
        self._dirty.add(n)
        self._nodes_t = None

    def let_go(self) -> None:
        """The decision is over and the state may change: the last snapshot, if something still holds it, makes every
        tuple it has not made yet (``EngineSnapshot``)."""
        if self.held is None:
            return
        snap = self.held()
        self.held = None
        if snap is not None:
            for get, set_, make in _LAZY:
                if get(snap, Snapshot) is _LATER:
                    set_(snap, getattr(self, make)())

    # What a snapshot's lazy fields are made of (each made once while what it shows does not change).

    def nodes_view(self) -> tuple[NodeView, ...]:
        if self._nodes_t is None:
            if self._dirty:
                self._renew_views()
            self._nodes_t = tuple(self._node_views)
            self._changes = self._changes.then(self._nodes_t, tuple(self._changed))
            self._changed.clear()
        return self._nodes_t

    def changes_view(self) -> NodeChanges:
        self.nodes_view()
        return self._changes

    def running_view(self) -> tuple[JobView, ...]:
        if self._running_t is None:
            self._running_t = tuple(self.running.values())
        return self._running_t

    def empty_view(self) -> tuple[int, ...]:
        if self._empty_t is None:
            self._empty_t = tuple(self.empty)
        return self._empty_t

    def idle_view(self) -> tuple[int, ...]:
        if self._idle_t is None:
            self._idle_t = tuple(sorted(self.idle))
        return self._idle_t

    def _renew_views(self) -> None:
        """Make anew the views of the nodes that changed since the last nodes tuple."""
        views, bare = self._node_views, self._bare
        for n in self._dirty:
            node = self.nodes[n]
            slot = node.slot
            views[n] = ((bare[n] if node.vm is None else
                         _node_view(n, slot.allowed, node.vm, node.ready_at, node.used, slot.fixed, None))
                        if node.layouts is None else
                        NodeView(n, allowed=slot.allowed, vm=node.vm, ready_at=node.ready_at,
                                 used_gpus=node.used + sum(1 for lay in node.layouts if lay),
                                 fixed=slot.fixed, mig=NodeMig(
                                     tuple(node.layouts), tuple(node.devices_ready or ()),
                                     tuple(d for d, k in enumerate(node.devices or ()) if not k))))
        self._changed.update(self._dirty)
        self._dirty.clear()

    def snapshot(self, now: float, trigger: str) -> EngineSnapshot:
        """What the policy may know now: every tuple not made yet (and the views of the nodes that changed) is left
        for the snapshot to make if it is read during the decision (``EngineSnapshot``); ``let_go`` ends that."""
        if self._waiting_t is None:
            self._waiting_t = tuple(self.waiting.values())
        nodes, running, empty, idle = self._nodes_t, self._running_t, self._empty_t, self._idle_t
        snap = _snapshot(now, trigger, self.configs, self._vm_types_t, _LATER if nodes is None else nodes,
                         self._waiting_t, _LATER if running is None else running, _LATER if empty is None else empty,
                         _LATER if idle is None else idle, self._rules, False, _NONE, self.colocation, self.mig,
                         _LATER if nodes is None else self._changes, _world=self)
        if nodes is None or running is None or empty is None or idle is None:
            self.held = ref(snap)
        return snap
