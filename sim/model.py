"""The shared vocabulary of capsim: GPUs, VM types, jobs, configurations, snapshots and plans.

Every room (sim, optim, predictors, experiments) speaks in these frozen types. This module imports nothing else
of the project, so any room may import it without creating a cycle. Units inside: seconds and dollars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import lru_cache
from numbers import Real
from types import MappingProxyType
from typing import TypeVar

import numpy as np

__all__ = ["CapsimError", "GPUModel", "Billing", "VMType", "ClusterRules", "MAX_BILLING_QUANTUM", "Measured", "JobSpec",
           "Job", "Config", "per_configs", "JobView", "NodeView", "Snapshot", "Assignment", "DecisionInfo", "Plan",
           "INFEASIBLE"]

T = TypeVar("T")

INFEASIBLE = math.inf
"""Runtime a predictor returns for a configuration it cannot support (see ``Predictor.support`` for why)."""


_ALMOST_DONE = 1.0 - 1e-9


class CapsimError(Exception):
    """An error the user can cause and fix: the message names the file or object, the field and the fix."""


@dataclass(frozen=True, slots=True)
class GPUModel:
    """One GPU model with its dense per-board specifications (docs/reference.md §6).

    ``measured_gflops`` is the ``GFlops(7)`` value that identifies this GPU in the shipped measurements, if any.
    """

    name: str
    _: KW_ONLY
    sms: int
    boost_mhz: float
    fp32_tflops: float
    memory_gb: float
    bandwidth_gbs: float
    fp16_tensor_tflops: float | None = None
    dies_per_board: int = 1
    measured_gflops: float | None = None

    def __hash__(self) -> int:
        return hash(self.name)


@dataclass(frozen=True, slots=True)
class Billing:
    """How a provider turns the seconds a VM was on into billed seconds: rounded up to whole ``increment`` seconds
    (0: billed exactly), and at least ``minimum`` seconds for every VM started. The default bills exactly."""

    increment: float = 0.0
    minimum: float = 0.0

    def __post_init__(self) -> None:
        for field_name in ("increment", "minimum"):
            v = getattr(self, field_name)
            if not (isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) and float(v) >= 0):
                raise CapsimError(f"billing: {field_name} must be a finite number of seconds >= 0, got {v!r}")
            object.__setattr__(self, field_name, float(v))

    def billed_seconds(self, on: float) -> float:
        """Seconds billed for a VM that was on for ``on`` seconds."""
        if on < 0:
            return 0.0
        q = self.increment
        billed = math.ceil(on / q - 1e-9) * q if q > 0 else on
        return max(billed, self.minimum)


_EXACT = Billing()


@dataclass(frozen=True, slots=True)
class VMType:
    """A rentable VM: ``gpus`` GPUs of one model for ``price_per_hour`` dollars, ready ``boot_time`` s after start.

    ``billing`` is its provider's rule (exact per-second by default); ``spot_price_per_hour`` the provider's spot
    list price, if it has one; ``region`` where the prices hold (empty for the paper's catalogue).

    ``spot`` marks a VM rented on the spot market (``sim.catalogue.spot_variant``: its ``price_per_hour`` is then the
    spot price): the provider revokes it at random, ``revocation_rate`` times per hour on average (a Poisson process
    from its start), and the jobs on it lose the work since their last checkpoint
    (``ClusterRules.checkpoint_interval``).
    """

    name: str
    gpu: GPUModel
    gpus: int
    price_per_hour: float
    _: KW_ONLY
    boot_time: float = 0.0
    provider: str = "cloud"
    billing: Billing = Billing()
    spot_price_per_hour: float | None = None
    region: str = ""
    spot: bool = False
    revocation_rate: float = 0.0

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def price_per_second(self) -> float:
        return self.price_per_hour / 3600.0


MAX_BILLING_QUANTUM = 86_400.0
"""The longest billing quantum (s): one day. Clouds bill per second, minute or hour; with a quantum longer than a run
every VM costs one quantum whatever it does, so VM cost no longer tells policies apart, and ``billed_seconds``
rounds ``on / q`` with a tolerance of 1e-9, so a quantum above 1e9 times a VM's time on bills it nothing at all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterRules:
    """The rules of money and time a cluster plays by, built once from the scenario and shown to every policy as
    ``Snapshot.rules``. A new cluster-wide knob is a field here, read by the engine and the policies that need it.

    - ``billing_quantum`` q: 0 bills each VM interval by its VM type's own rule (``VMType.billing``; the paper's
      catalogue bills exactly per second); q > 0 overrides every rule and bills ``ceil(on / q) * q`` seconds.
    - ``restart_overhead``: seconds a preempted, moved or revoked job pays when it runs again.
    - ``checkpoint_interval`` C: a running job writes a checkpoint after every C seconds of work of its run (inf:
      never); when its spot VM is revoked it keeps the work up to its last checkpoint. A spot market itself is a
      property of its VM type (``VMType.spot``, ``VMType.revocation_rate``).
    - ``decision_interval`` H: a periodic decision every H seconds (inf: only on arrivals, completions, boots).
    - ``round_length`` R (finite): round mode (``sim.timing.rounds``): decisions only at round boundaries, arrivals
      admitted at the first boundary at or after them, no backfilling inside a round; it excludes
      ``decision_interval``.
    - ``gang``: a job may run on several nodes of one VM type at once (for policies with ``may_gang``);
      ``max_gang_gpus`` caps the GPUs of a gang configuration (None: all the GPUs of the slots that accept its type).
      ``unplaceable_gangs`` also gives every VM type the gang configurations up to the largest any VM type can hold:
      they cannot be placed, and the engine shows their estimates only to policies that price them
      (those declaring ``prices_unplaceable = True``, as Gavel's mechanism does: its LPs price a gang on a type too
      small for it).
    - ``owned_price_per_hour``: owned servers' VM types with their amortised $/server-hour. Each is a fixed slot whose
      type is priced 0 for the policies (using it costs nothing more); ``bill`` bills its whole time on at this rate.
    """

    billing_quantum: float = 0.0
    restart_overhead: float = 0.0
    checkpoint_interval: float = math.inf
    decision_interval: float = math.inf
    round_length: float = math.inf
    gang: bool = False
    max_gang_gpus: int | None = None
    unplaceable_gangs: bool = False
    owned_price_per_hour: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for name, rate in self.owned_price_per_hour.items():
            if not (isinstance(rate, Real) and not isinstance(rate, bool) and math.isfinite(rate) and rate >= 0):
                raise CapsimError(f"cluster: owned_price_per_hour[{name!r}] must be finite $/h >= 0, got {rate!r}")
        object.__setattr__(self, "owned_price_per_hour", {k: float(v) for k, v in self.owned_price_per_hour.items()})
        if not (0 <= self.billing_quantum <= MAX_BILLING_QUANTUM):
            raise CapsimError(f"cluster: billing_quantum must be a number of seconds in [0, {MAX_BILLING_QUANTUM:g}] "
                              f"(at most a day), got {self.billing_quantum}")
        if not (self.restart_overhead >= 0 and math.isfinite(self.restart_overhead)):
            raise CapsimError(f"cluster: restart_overhead must be a finite number >= 0, got {self.restart_overhead}")
        if not self.decision_interval > 0:
            raise CapsimError(f"cluster: decision_interval must be > 0 (inf for none), got {self.decision_interval}")
        if not self.round_length > 0:
            raise CapsimError(f"cluster: round_length must be > 0 (inf for no rounds), got {self.round_length}")
        if math.isfinite(self.round_length) and math.isfinite(self.decision_interval):
            raise CapsimError("cluster: round_length and decision_interval exclude each other: in round mode the "
                              "decisions are the round boundaries; give one of them")
        if not self.checkpoint_interval > 0:
            raise CapsimError(f"cluster: checkpoint_interval must be a number of seconds > 0 (inf for no "
                              f"checkpoints), got {self.checkpoint_interval}")
        if self.max_gang_gpus is not None and not (isinstance(self.max_gang_gpus, int) and self.max_gang_gpus >= 1):
            raise CapsimError(f"cluster: max_gang_gpus must be a whole number >= 1 (or None), got "
                              f"{self.max_gang_gpus!r}")

    @property
    def rounds(self) -> bool:
        """Whether decisions happen in rounds (``round_length`` finite)."""
        return math.isfinite(self.round_length)

    def billed_seconds(self, on: float, vm: VMType | None = None) -> float:
        """Seconds billed for a VM of type ``vm`` that was on for ``on`` seconds: by the quantum if one is set, else
        by the VM type's own rule (exactly, when no type is given)."""
        if self.billing_quantum > 0:
            return _quantum(self.billing_quantum).billed_seconds(on)
        return (vm.billing if vm is not None else _EXACT).billed_seconds(on)

    def bill(self, on: float, vm: VMType) -> tuple[float, float, float]:
        """(seconds billed, $/h, cost) of ``vm`` on ``on`` s: an owned server's time on at its rate, else as rented."""
        rate = self.owned_price_per_hour.get(vm.name)
        billed, rate = (on, rate) if rate is not None else (self.billed_seconds(on, vm), vm.price_per_hour)
        return billed, rate, billed * rate / 3600.0


@lru_cache(maxsize=8)
def _quantum(q: float) -> Billing:
    return Billing(increment=q)


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
    """

    job: Job
    estimates: np.ndarray
    _: KW_ONLY
    done: float = 0.0
    node: int | None = None
    config: int | None = None
    since: float | None = None
    parts: tuple[tuple[int, int], ...] = ()

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
        """Estimated seconds a running job still needs at time ``now`` on its current configuration.

        The engine does not refresh ``done`` while a job runs (views change only when the job starts, stops or
        moves), so this subtracts the time run since ``since`` from the estimate left when the run began. A
        restart overhead paid at the start of the run is not included. For a waiting job, ``inf``.
        """
        if self.config is None or self.since is None:
            return math.inf
        return self.at(now).remaining(self.config)

    def at(self, now: float) -> JobView:
        """This view as of ``now``: a running job's ``done`` advanced by the time run since ``since`` (at the
        estimated pace) and ``since`` moved to ``now``; a waiting job's view unchanged. A job still running is not
        finished, so its estimated progress stays just below 1 even when it outlives its estimate."""
        if self.config is None or self.since is None or now <= self.since:
            return self
        est = float(self.estimates[self.config])
        done = min(_ALMOST_DONE, self.done + (now - self.since) / est) if est > 0 else _ALMOST_DONE
        return replace(self, done=done, since=now)


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node slot at a decision: which VM types it may host, the VM on it now, when that VM is ready, GPUs in use.

    A ``fixed`` node is a server that is always present: its VM runs from the start to the end of the run and no plan
    stops or changes it.
    """

    index: int
    _: KW_ONLY
    allowed: frozenset[str] | None = None
    vm: VMType | None = None
    ready_at: float = 0.0
    used_gpus: int = 0
    fixed: bool = False

    @property
    def free_gpus(self) -> int:
        return 0 if self.vm is None else self.vm.gpus - self.used_gpus

    def accepts(self, vm_name: str) -> bool:
        return self.allowed is None or vm_name in self.allowed


@dataclass(frozen=True, slots=True, kw_only=True)
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
    for this decision (no VM of such a type is running: a running one's zone has VMs).
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
    """

    job_id: int
    node: int
    gpus: int
    _: KW_ONLY
    gang: tuple[tuple[int, int], ...] = ()

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


def _frozen(m: Mapping[int, str | None] | None) -> Mapping[int, str | None]:
    return MappingProxyType(dict(m)) if m else _NO_VMS


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A policy's answer to a snapshot.

    - ``vms``: node index → VM type name the node must host after the plan, or ``None`` to stop its VM. Nodes not
      named keep what they have. Changing the type of a node restarts its VM (the old one stops, the new one boots).
    - ``start``: waiting jobs to start now. Jobs not named keep waiting.
    - ``move``: running jobs to restart elsewhere or with another GPU count (policies with ``may_preempt``), keeping
      the work already done, plus the engine's restart overhead.
    - ``preempt``: running jobs sent back to the queue (policies with ``may_preempt``), keeping the work done.
    - ``keep_idle``: nodes whose VM stays on although no job runs there; every other idle VM is stopped.
    """

    vms: Mapping[int, str | None] = field(default_factory=dict)
    start: tuple[Assignment, ...] = ()
    move: tuple[Assignment, ...] = ()
    preempt: tuple[int, ...] = ()
    keep_idle: frozenset[int] = frozenset()
    info: DecisionInfo = DecisionInfo()

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "vms", _frozen(self.vms))
        if self.start.__class__ is not tuple:  # most plans pass tuples (or nothing) already: no copy
            setattr_(self, "start", tuple(self.start))
        if self.move.__class__ is not tuple:
            setattr_(self, "move", tuple(self.move))
        if self.preempt.__class__ is not tuple:
            setattr_(self, "preempt", tuple(self.preempt))
        if self.keep_idle.__class__ is not frozenset:
            setattr_(self, "keep_idle", frozenset(self.keep_idle))
