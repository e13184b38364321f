"""The shared vocabulary of capsim: GPUs, VM types, jobs, configurations, snapshots and plans.

Every room (sim, optim, predictors, experiments) speaks in these frozen types. This module imports nothing else of
the project but ``sim.vocabulary.resources`` (GPU models, VM types, billing, the cluster's rules and ``CapsimError``,
which it re-exports) and ``sim.frozen`` (``positional``, re-exported), so any room may import it without creating a
cycle. Units inside: seconds and dollars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from types import MappingProxyType
from typing import Protocol, TypeVar, cast

import numpy as np

from sim.frozen import positional
from sim.vocabulary.mig import Layout, Slice, SliceSpeeds
from sim.vocabulary.resources import MAX_BILLING_QUANTUM, Billing, CapsimError, ClusterRules, GPUModel, VMType

__all__ = ["CapsimError", "GPUModel", "Billing", "VMType", "ClusterRules", "MAX_BILLING_QUANTUM", "Measured", "JobSpec",
           "Job", "Config", "per_configs", "JobView", "NodeView", "NodeChanges", "Colocation", "Snapshot", "Assignment",
           "DecisionInfo", "Plan", "INFEASIBLE", "positional", "Slice", "Layout", "SliceSpeeds", "NodeMig"]

T = TypeVar("T")

INFEASIBLE = math.inf
"""Runtime a predictor returns for a configuration it cannot support (see ``Predictor.support`` for why)."""


_ALMOST_DONE = 1.0 - 1e-9


@dataclass(frozen=True, slots=True)
class Measured:
    """A trace's measured run: ``seconds`` on ``gpus`` GPUs of model ``gpu`` (None: the trace's own, unnamed GPUs)."""

    seconds: float
    gpus: int = 1
    gpu: str | None = None


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a training job is: an application (network + framework), its iterations and batch size.

    ``application`` is the network key (``alexnet``, ``vgg19``, ``resnet50``, ``deepspeech``) and ``framework`` is
    ``pytorch`` or ``tensorflow``; ``name`` is a label such as ``J5``. ``depth`` is the network depth for families
    measured at several depths (ResNet inner modules), ``None`` for the standard network. ``gpus`` is the number of
    GPUs the job asks for, all started and stopped together (a gang, as in Gavel's and ElasticFlow's traces); ``None``
    lets the policy choose the count, as in the published setting.

    A trace job may be known only by what its trace ``measured``; ``gpu_share`` < 1 asks a fraction of each GPU (run on
    whole GPUs, and recorded, until GPUs are shared); ``gpu_models`` limits the GPU models it may use (None: any).
    """

    application: str
    framework: str
    iterations: int
    batch_size: int
    _: KW_ONLY
    name: str = ""
    depth: int | None = None
    gpus: int | None = None
    measured: Measured | None = None
    gpu_share: float | None = None
    gpu_models: frozenset[str] | None = None

    @property
    def app_key(self) -> str:
        """Short key of the measured application, e.g. ``resnet50_pt``."""
        return f"{self.application}_{'pt' if self.framework == 'pytorch' else 'tf'}"


@dataclass(frozen=True, slots=True)
class Job:
    """One submitted job: its spec, submission time, deadline (s) and tardiness weight ($ per second late).

    ``priority``: a fairness weight (Gavel's, dimensionless; max-min fairness gives priority p a share p times as
    large), 1 unless a trace gives it. ``duration``: the seconds the job ran in its trace on the GPUs it asked for
    (ElasticFlow's rigid policies count that much service as its work), or None. ``deadline_given``: False when the
    workload gave no deadline (a trace without one): ``deadline`` is a placeholder for the policies, in no metric."""

    id: int
    spec: JobSpec
    submit_time: float
    deadline: float
    weight: float
    _: KW_ONLY
    priority: float = 1.0
    duration: float | None = None
    deadline_given: bool = True

    def __hash__(self) -> int:
        return self.id


@dataclass(frozen=True, slots=True)
class Config:
    """A configuration a job can run in: ``gpus`` GPUs of a VM of type ``vm``."""

    vm: VMType
    gpus: int

    def __hash__(self) -> int:
        return hash((self.vm.name, self.gpus))

    @property
    def label(self) -> str:
        return f"{self.vm.name}x{self.gpus}"


def per_configs(make: Callable[[tuple[Config, ...]], T]) -> Callable[[tuple[Config, ...]], T]:
    """``make(configs)`` cached per configs tuple, by identity (the engine passes the same ``Snapshot.configs`` at
    every decision, so what a policy derives from it is built once per run)."""
    cache: dict[int, tuple[tuple[Config, ...], T]] = {}

    def cached(configs: tuple[Config, ...]) -> T:
        hit = cache.get(id(configs))
        if hit is not None and hit[0] is configs:
            return hit[1]
        made = make(configs)
        if len(cache) > 64:
            cache.clear()
        cache[id(configs)] = (configs, made)
        return made

    return cached


@dataclass(frozen=True, slots=True)
class JobView:
    """A job as a policy sees it at a decision.

    ``estimates[c]`` is the estimator's runtime (s) of the *whole* job on ``Snapshot.configs[c]`` (inf where
    unsupported); the array is shared between jobs of the same spec and must not be written. ``done`` is the fraction
    of work already completed (observable progress, 0 for a job that never ran). For a running job ``node`` and
    ``config`` (an index into ``Snapshot.configs``) say where it runs and ``since`` when its current run began;
    its ``done`` is the fraction completed when that run began (use ``remaining_at(now)`` for what is left now).
    In round mode (``ClusterRules.round_length`` finite) a running job's view is renewed at every round boundary:
    ``since`` is the boundary and ``done`` the work completed by then. ``parts`` lists, for a job spread over several
    nodes (a gang), its ``(node, GPUs)`` on each, ``node`` being the first; it is empty for a job on one node.
    ``partner`` is the job sharing its GPUs (co-location, ``ClusterRules.jobs_per_gpu``), if any, and ``pace`` the
    estimated slowdown that sharing costs it (``Snapshot.colocation``; 1 alone): its run takes ``pace`` times its
    estimate. A running job's view is renewed when a partner arrives or leaves (``since`` and ``done`` then).
    ``slice`` is the MIG slice it runs on (``ClusterRules.mig``), if any: ``config`` is then its VM type with one GPU
    and ``pace`` 1 over the slice's speed (``Snapshot.mig``).
    """

    job: Job
    estimates: np.ndarray
    _: KW_ONLY
    done: float = 0.0
    node: int | None = None
    config: int | None = None
    since: float | None = None
    parts: tuple[tuple[int, int], ...] = ()
    partner: int | None = None
    pace: float = 1.0
    slice: Slice | None = None

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def running(self) -> bool:
        return self.node is not None

    def remaining(self, config: int) -> float:
        """Estimated seconds still needed on configuration index ``config`` (no restart overhead included)."""
        return (1.0 - self.done) * float(self.estimates[config])

    def remaining_at(self, now: float) -> float:
        """Estimated seconds a running job still needs at time ``now`` on its current configuration, at its pace.

        The engine does not refresh ``done`` while a job runs (views change only when the job starts, stops or
        moves, or its partner changes), so this subtracts the time run since ``since`` from the estimate left when
        the run began. A restart overhead paid at the start of the run is not included. For a waiting job, ``inf``.
        """
        if self.config is None or self.since is None:
            return math.inf
        return self.at(now).remaining(self.config) * self.pace

    def at(self, now: float) -> JobView:
        """This view as of ``now``: a running job's ``done`` advanced by the time run since ``since`` (at the
        estimated pace) and ``since`` moved to ``now``; a waiting job's view unchanged. A job still running is not
        finished, so its estimated progress stays just below 1 even when it outlives its estimate."""
        if self.config is None or self.since is None or now <= self.since:
            return self
        est = float(self.estimates[self.config]) * self.pace
        done = min(_ALMOST_DONE, self.done + (now - self.since) / est) if est > 0 else _ALMOST_DONE
        return replace(self, done=done, since=now)


@dataclass(frozen=True, slots=True)
class NodeMig:
    """A node's GPUs where they may be cut into MIG slices: each GPU's ``layouts`` (``()``: whole), when each is
    ``ready`` after a repartition, and the ``idle`` GPUs (holding no job)."""

    layouts: tuple[Layout, ...]
    ready: tuple[float, ...]
    idle: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node slot at a decision: which VM types it may host, the VM on it now, when that VM is ready, GPUs in use.

    A ``fixed`` node is a server that is always present: its VM runs from the start to the end of the run and no plan
    stops or changes it. Where GPUs may be cut into MIG slices (``ClusterRules.mig``), ``mig`` holds its GPUs' state
    (``NodeMig``; read as ``layouts``, ``devices_ready``, ``idle_gpus``); a partitioned GPU counts in ``used_gpus``.
    """

    index: int
    _: KW_ONLY
    allowed: frozenset[str] | None = None
    vm: VMType | None = None
    ready_at: float = 0.0
    used_gpus: int = 0
    fixed: bool = False
    mig: NodeMig | None = None

    @property
    def layouts(self) -> tuple[Layout, ...]:
        """Each GPU's MIG layout (``()``: whole); empty without MIG."""
        return self.mig.layouts if self.mig is not None else ()

    @property
    def devices_ready(self) -> tuple[float, ...]:
        """When each GPU is done being repartitioned; empty without MIG."""
        return self.mig.ready if self.mig is not None else ()

    @property
    def idle_gpus(self) -> tuple[int, ...]:
        """The GPUs that hold no job (which a plan may repartition); empty without MIG."""
        return self.mig.idle if self.mig is not None else ()

    @property
    def free_gpus(self) -> int:
        return 0 if self.vm is None else self.vm.gpus - self.used_gpus

    def accepts(self, vm_name: str) -> bool:
        return self.allowed is None or vm_name in self.allowed


@dataclass(frozen=True, slots=True)
class NodeChanges:
    """Which node views changed over the engine's last few snapshots (``Snapshot.node_changes``), so a policy that
    keeps what it derived from an earlier snapshot's ``nodes`` re-reads only the nodes that changed since.

    ``after`` is the snapshot's ``nodes``; ``before`` the preceding ``nodes`` tuples the engine made (oldest first, at
    most ``NodeChanges.KEEP``; a snapshot whose nodes were never read made none) and ``changed[i]`` the indices whose
    views were made again from ``before[i]`` to the next tuple (``after`` for the last): new objects, or a node's one
    view without a VM shown again. A view not named is the very same object.
    """

    before: tuple[tuple[NodeView, ...], ...]
    after: tuple[NodeView, ...]
    changed: tuple[tuple[int, ...], ...]

    KEEP = 8
    """The earlier tuples kept."""

    def since(self, nodes: tuple[NodeView, ...]) -> set[int] | None:
        """Indices of the views of ``after`` made again since ``nodes`` (every one that is not the same object as in
        ``nodes``), if ``nodes`` is ``after`` or one of ``before`` (compared by identity), else None (unknown: compare
        every view)."""
        if nodes is self.after:
            return set()
        before = self.before
        if before and before[-1] is nodes:  # the usual case: the policy read the preceding tuple the engine made
            return set(self.changed[-1])
        for i in range(len(before) - 2, -1, -1):
            if before[i] is nodes:
                return set().union(*self.changed[i:])
        return None

    def then(self, nodes: tuple[NodeView, ...], changed: tuple[int, ...]) -> NodeChanges:
        """The changes of the next snapshot, whose ``nodes`` are ``after`` with the views at ``changed`` new."""
        keep = self.KEEP - 1
        return _node_changes(self.before[-keep:] + (self.after,), nodes, self.changed[-keep:] + (changed,))


_node_changes = positional(NodeChanges)


class Colocation(Protocol):
    """What a policy may know about two jobs sharing GPUs (``Snapshot.colocation``, on a cluster whose
    ``ClusterRules.jobs_per_gpu`` is 2): the estimator's interference model, read per configuration index.

    - ``slowdowns(a, b, k)``: (a's, b's) estimated slowdown when they share the GPUs of configuration ``k`` (each runs
      that many times slower than alone, its ``JobView.pace``); ``(inf, inf)`` where the pair may not share them
      (their memory does not fit, or the pair cannot run together).
    - ``utilisation(spec, k)``: the estimated fraction of its GPUs a job keeps busy alone on ``k`` (0 to 1; NaN when
      the model cannot say).
    - ``memory_gb(spec, k)``: its estimated memory per GPU on ``k`` in GiB (NaN when unknown).
    - ``shares(spec, k)``: False where the job can share ``k``'s GPUs with no job at all (every pair with it is
      ``(inf, inf)``): a policy skips it without weighing pair by pair.
    - ``fit_gb(spec, k)``: the memory per GPU the pair's fit is checked with (the engine's, shown as feasibility is;
      NaN when unknown): a pair with ``fit_gb(a) + fit_gb(b)`` above a GPU's memory may not share.
    """

    def slowdowns(self, a: JobSpec, b: JobSpec, k: int) -> tuple[float, float]: ...

    def shares(self, spec: JobSpec, k: int) -> bool: ...

    def fit_gb(self, spec: JobSpec, k: int) -> float: ...

    def utilisation(self, spec: JobSpec, k: int) -> float: ...

    def memory_gb(self, spec: JobSpec, k: int) -> float: ...


@dataclass(frozen=True, slots=True, kw_only=True, weakref_slot=True)
class Snapshot:
    """Everything a policy may know at a decision point; it never contains true runtimes or future arrivals.

    ``trigger`` names what caused the decision (``arrival``, ``completion``, ``periodic``, or several joined by
    ``+`` when they fell at the same instant). ``configs`` is the fixed, ordered list of configurations that
    ``JobView.estimates`` is indexed by. ``empty_nodes`` lists node indices with no VM, in index order.
    ``idle_nodes`` lists, in index order, the nodes whose VM hosts no job (e.g. just freed by a completion): the
    engine stops those VMs after this decision unless the plan places a job there or keeps them (``keep_idle``);
    a fixed server (``NodeView.fixed``) is never stopped. ``rules`` are the cluster's rules of money and time
    (restart overhead, checkpoints, billing quantum, rounds, gangs: ``ClusterRules``). ``spot_expected`` says whether
    the estimates of spot configurations are already their expected runtimes under revocations
    (``sim.risk.expected_snapshot``, which every policy weighing cost decides on); the engine's snapshot has the
    estimator's own. ``unavailable`` names the spot VM types whose recorded market cannot supply a VM now
    (``sim.spot_market``): a plan may not start one, and the jobs' estimates are ``inf`` on their configurations
    for this decision (no VM of such a type is running: a running one's zone has VMs). ``colocation`` is the
    estimator's interference model where two jobs may share a GPU (``ClusterRules.jobs_per_gpu``), else None.
    ``mig`` is the slice speeds where GPUs may be cut into MIG slices (``ClusterRules.mig``), else None.
    ``node_changes`` says which node views changed since the engine's preceding snapshots (``NodeChanges``), for a
    policy that follows the nodes across decisions; None where unknown (a snapshot not made by the engine).
    The engine's snapshots are ``sim.state.EngineSnapshot``s, whose tuples of nodes, running jobs, empty and idle nodes
    (and ``node_changes``) are made when first read (a list scheduler reads none when no job waits): the same fields
    and values, whenever read. A snapshot may be weakly referenced (the engine keeps such a reference to its last).
    """

    time: float
    trigger: str
    configs: tuple[Config, ...]
    vm_types: tuple[VMType, ...]
    nodes: tuple[NodeView, ...]
    waiting: tuple[JobView, ...]
    running: tuple[JobView, ...]
    empty_nodes: tuple[int, ...] = ()
    idle_nodes: tuple[int, ...] = ()
    rules: ClusterRules = ClusterRules()
    spot_expected: bool = False
    unavailable: frozenset[str] = frozenset()
    colocation: Colocation | None = None
    mig: SliceSpeeds | None = None
    node_changes: NodeChanges | None = None

    def vm_type(self, name: str) -> VMType:
        for v in self.vm_types:
            if v.name == name:
                return v
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class Assignment:
    """Run job ``job_id`` on node ``node`` with ``gpus`` GPUs of the VM that node hosts once the plan is applied.

    ``gang`` spreads the job over further nodes, ``((node, GPUs), ...)``, all hosting the same VM type (policies with
    ``may_gang``): its GPUs on every node start and stop together, and it runs in the configuration of that VM type
    with ``total_gpus`` GPUs.

    ``partner`` co-locates the job (policies with ``may_colocate``, on a cluster whose ``ClusterRules.jobs_per_gpu`` is
    2): it runs on the very GPUs of job ``partner``, which runs alone on ``node`` with the same GPU count after the plan
    (staying there, or started or moved there by the same plan), and both run at their co-located speed.

    ``slice`` runs the job on one MIG slice of one GPU of ``node`` (``gpus`` 1, on a cluster with ``ClusterRules.mig``):
    a slice of that GPU's layout once the plan's ``layouts`` are applied, which no other job holds.
    """

    job_id: int
    node: int
    gpus: int
    _: KW_ONLY
    gang: tuple[tuple[int, int], ...] = ()
    partner: int | None = None
    slice: Slice | None = None

    @property
    def parts(self) -> tuple[tuple[int, int], ...]:
        """Every ``(node, GPUs)`` of the assignment, the first node first."""
        return ((self.node, self.gpus),) + tuple(self.gang)

    @property
    def total_gpus(self) -> int:
        return self.gpus + sum(g for _, g in self.gang)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionInfo:
    """What a policy reports about how it decided: solver, status, objective, gap, model size, any fallback."""

    status: str = "ok"
    solver: str | None = None
    objective: float | None = None
    gap: float | None = None
    variables: int | None = None
    constraints: int | None = None
    fallback: str | None = None
    reason: str | None = None


_NO_VMS: Mapping[int, str | None] = MappingProxyType({})


@dataclass(frozen=True, kw_only=True, init=False)
class Plan:
    """A policy's answer to a snapshot.

    - ``vms``: node index → VM type name the node must host after the plan, or ``None`` to stop its VM. Nodes not
      named keep what they have. Changing the type of a node restarts its VM (the old one stops, the new one boots).
    - ``start``: waiting jobs to start now. Jobs not named keep waiting.
    - ``move``: running jobs to restart elsewhere or with another GPU count (policies with ``may_preempt``), keeping
      the work already done, plus the engine's restart overhead.
    - ``preempt``: running jobs sent back to the queue (policies with ``may_preempt``), keeping the work done.
    - ``keep_idle``: nodes whose VM stays on although no job runs there; every other idle VM is stopped.
    - ``layouts``: ``(node, GPU)`` → the MIG layout that GPU is repartitioned into (``()``: whole again), on a cluster
      with ``ClusterRules.mig`` (None: no GPU is repartitioned); the GPU must hold no job after the plan's preempt and
      move, and it is ready ``ClusterRules.mig_reconfigure_time`` seconds later (jobs placed on it start then).
    """

    vms: Mapping[int, str | None] = field(default_factory=dict)
    start: tuple[Assignment, ...] = ()
    move: tuple[Assignment, ...] = ()
    preempt: tuple[int, ...] = ()
    keep_idle: frozenset[int] = frozenset()
    info: DecisionInfo = DecisionInfo()
    layouts: Mapping[tuple[int, int], Layout] | None = None

    def __init__(self, *, vms: Mapping[int, str | None] | None = None, start: Iterable[Assignment] = (),
                 move: Iterable[Assignment] = (), preempt: Iterable[int] = (), keep_idle: Iterable[int] = frozenset(),
                 info: DecisionInfo = DecisionInfo(), layouts: Mapping[tuple[int, int], Layout] | None = None):
        # Written out rather than generated: a frozen dataclass's own __init__ sets each field through
        # object.__setattr__ and then normalises in __post_init__, ~4x this cost, and a policy makes a plan per
        # decision. The defaults are the fields' (a test compares them); containers are frozen or copied.
        d = self.__dict__
        d["vms"] = MappingProxyType(dict(vms)) if vms else _NO_VMS
        d["start"] = start if start.__class__ is tuple else tuple(start)
        d["move"] = move if move.__class__ is tuple else tuple(move)
        d["preempt"] = preempt if preempt.__class__ is tuple else tuple(preempt)
        d["keep_idle"] = keep_idle if keep_idle.__class__ is frozenset else frozenset(keep_idle)
        d["info"] = info
        if layouts is not None and layouts.__class__ is not MappingProxyType:
            layouts = MappingProxyType({key: cast(Layout, tuple(tuple(s) for s in lay))
                                        for key, lay in dict(layouts).items()})
        d["layouts"] = layouts
