"""The component contracts every room builds on: ``Policy`` (the deciders) and ``Predictor`` (the oracles).

This module is part of the floor: it imports only the vocabulary (``sim.model``) and the registry, never the engine,
``optim``, ``predictors`` or ``experiments``. The engine receives a policy and predictors as objects that follow these
contracts; ``optim.base`` and ``predictors.base`` re-export them for their authors.

Both (and trace readers, ``sim.traces.base.TraceReader``) follow scikit-learn's estimator contract: every constructor
argument is stored as given under its own name (and validated there: ``check_param``), so ``get_params()`` can be
read off the signature, ``set_params()`` and ``clone()`` rebuild a component from its parameters, no heavy work runs in
``__init__``, and state learnt from data is kept in attributes whose names end in ``_``. ``sim.testing`` checks all of
it on any component.
"""

from __future__ import annotations

import copy
import inspect
import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from sim.model import CapsimError, Config, Job, JobSpec, Plan, Snapshot, VMType
from sim.registry import Registry, did_you_mean

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Component", "Policy", "Predictor", "Interference", "Source", "Progress", "POLICIES", "PREDICTORS",
           "INTERFERENCE", "TIME_MODELS", "NotFittedError"]


class NotFittedError(CapsimError):
    """A trainable component was asked for an answer before it was fitted."""


class Component:
    """What every component shares: a registry name, parameters read from the signature, a label, and rebuilding.

    Subclasses store every ``__init__`` argument as given, as an attribute of the same name (never ``*args`` or
    ``**kwargs``), and validate it (``check_param``): no conversion, so that ``clone()`` and ``set_params()``, which
    run the constructor again on ``get_params()``, give the same component. ``test_params`` names the parameters the
    conformance checks build a component with when its defaults cannot run on this machine or need an argument (a
    runtime table, say); a component must never be skipped by them. ``family`` names the kind of component in messages.
    """

    name: ClassVar[str] = "component"
    family: ClassVar[str] = "component"
    test_params: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The constructor's parameters, in signature order (``self`` excluded)."""
        return tuple(_signature(cls))

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        """Each parameter's default (``inspect.Parameter.empty`` for a required one)."""
        return {n: p.default for n, p in _signature(cls).items()}

    def get_params(self) -> dict[str, Any]:
        """The parameters this instance was built with, by name, read back from its attributes."""
        missing = [n for n in self.param_names() if not hasattr(self, n)]
        if missing:
            raise TypeError(f"{type(self).__name__} does not store its parameters {missing} under their own names")
        return {n: getattr(self, n) for n in self.param_names()}

    def set_params(self, **params: Any) -> Self:
        """Change parameters by name and return ``self``: the constructor runs again on the merged parameters, so they
        are validated as at construction and what derives from them follows; learnt state (``*_``) is dropped."""
        names = self.param_names()
        for n in params:
            if n not in names:
                raise CapsimError(f"{self.family} {self.name!r}: unknown parameter {n!r}{did_you_mean(n, names)}; its "
                                  f"parameters are {', '.join(names) or 'none'}")
        merged = {**self.get_params(), **params}
        for k in [k for k in vars(self) if k.endswith("_") and not k.endswith("__")]:
            delattr(self, k)
        type(self).__init__(self, **merged)
        return self

    def clone(self) -> Self:
        """A new, unfitted component with the same parameters: component parameters cloned, others deep-copied."""
        return type(self)(**{k: v.clone() if isinstance(v, Component) else copy.deepcopy(v)
                             for k, v in self.get_params().items()})

    def check_param(self, name: str, kind: type, *, low: float | None = None, high: float | None = None,
                    above: float | None = None, optional: bool = False, choices: Sequence[Any] | None = None) -> None:
        """A ``CapsimError`` naming this component unless its parameter ``name`` is a ``kind`` (``bool``; ``int``: a
        whole number; ``float``: any finite number; ``str``) within ``[low, high]`` and ``> above``, one of
        ``choices`` if given, or None when ``optional``."""
        value = getattr(self, name)
        if value is None and optional:
            return
        ok = {bool: lambda v: isinstance(v, bool),
              int: lambda v: isinstance(v, Integral) and not isinstance(v, bool),
              float: lambda v: isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v),
              str: lambda v: isinstance(v, str)}[kind](value)
        if ok and choices is not None:
            ok = value in choices
        if ok and kind in (int, float):
            ok = (low is None or value >= low) and (high is None or value <= high) and (above is None or value > above)
        if not ok:
            what = {bool: "true or false", int: "a whole number", float: "a finite number", str: "a text"}[kind]
            if choices is not None:
                what = f"one of {', '.join(map(repr, choices))}"
            bounds = [f"{op} {b:g}" for op, b in ((">=", low), (">", above), ("<=", high)) if b is not None]
            if bounds:
                what += " " + " and ".join(bounds)
            raise CapsimError(f"{self.family} {self.name!r}: {name} must be {what}{' (or null)' if optional else ''}, "
                              f"got {value!r}")

    def describe(self) -> str:
        """A short label: the registry name plus the parameters that differ from their defaults, e.g.
        ``milp(time_limit=5)``. A component parameter shows its own label; callables are left out."""
        try:
            params = self.get_params()
        except TypeError:  # a policy written outside the contract still gets a label
            return self.name
        defaults = self.param_defaults()
        parts = []
        for k, v in params.items():
            d = defaults.get(k, inspect.Parameter.empty)
            if d is not inspect.Parameter.empty and _same(v, d) or (callable(v) and not isinstance(v, Component)):
                continue
            parts.append(f"{k}={_short(v)}")
        return f"{self.name}({', '.join(parts)})" if parts else self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


_SIGNATURES: dict[type, Mapping[str, inspect.Parameter]] = {}


def _signature(cls: type[Component]) -> Mapping[str, inspect.Parameter]:
    """The constructor's named parameters, read once per class: ``describe`` runs per job record, and
    ``inspect.signature`` costs ~0.1 ms a call."""
    hit = _SIGNATURES.get(cls)
    if hit is None:
        hit = _SIGNATURES[cls] = types.MappingProxyType(_read_signature(cls))
    return hit


def _read_signature(cls: type[Component]) -> dict[str, inspect.Parameter]:
    if cls.__init__ is object.__init__:
        return {}
    params = inspect.signature(cls.__init__).parameters
    out: dict[str, inspect.Parameter] = {}
    for n, p in params.items():
        if n == "self":
            continue
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"{cls.__name__}.__init__ takes *{n}: components declare every parameter by name")
        out[n] = p
    return out


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b) or (a is None and b is None)
    except Exception:  # noqa: BLE001  (arrays and exotic values compare ambiguously: treat as changed)
        return False


def _short(v: Any) -> str:
    if isinstance(v, Component):
        return v.describe()
    if isinstance(v, float):
        return f"{v:g}"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


class Policy(Component):
    """Decides, at each decision point, which VMs run, how their GPUs are split and which jobs start.

    A subclass provides one hook:

    - ``decide(snapshot) -> Plan`` (required). Called by the engine at every decision point with everything the
      policy may know (``sim.model.Snapshot``): waiting and running jobs with *estimated* runtimes, the node slots and
      their VMs, the time and what triggered the decision. It returns a ``Plan``; an empty ``Plan()`` means "change
      nothing" (idle VMs not kept with ``keep_idle`` are then stopped). It **may** keep private state between calls
      (a warm start, a rotation), read any field of the snapshot and take as long as it needs (the wall time is
      recorded). It **may not** mutate the snapshot or its arrays, see true runtimes or future arrivals (it is never
      given them), advance time or spend money: only the engine does, by applying the plan. The engine keeps a
      view object (``NodeView``, ``JobView``) across snapshots while its node or job does not change and makes a new
      one when it does (a node whose VM stops shows again its one view without a VM), so a policy may follow the
      cluster across decisions by identity: the same object, the same state; ``Snapshot.node_changes`` names the
      nodes whose views were made again since its preceding snapshots (``sim.model.NodeChanges``; what
      ``optim.room.NodeIndex`` reads instead of comparing every view).

    and declares on its class what its plans may contain, checked by the engine's plan rules (``sim.rules``); a
    parameter may make an instance do less than its class declares (``fifo`` shares VMs only with ``pack``), never
    more, and no instance sets these flags:

    - ``may_share``: several jobs on one VM, splitting its GPUs.
    - ``may_preempt``: ``Plan.preempt`` (a running job back to the queue, its work kept) and ``Plan.move`` (restart
      elsewhere or with another GPU count, paying the cluster's restart overhead).
    - ``may_gang``: a job spread over several nodes of one VM type (``Assignment.gang``), on a cluster that allows
      gangs (``ClusterRules.gang``). A policy without it never sees the configurations only a gang can run: their
      estimates are ``inf``.
    - ``may_colocate``: a job started on the GPUs of another (``Assignment.partner``), on a cluster whose
      ``ClusterRules.jobs_per_gpu`` is 2; both then run at their co-located speed (``Snapshot.colocation``).
    - ``prices_unplaceable``: the policy sees estimates for a gang on a VM type with fewer GPUs than the gang
      (``ClusterRules.unplaceable_gangs``), which it may price but never place (Gavel's LPs do); without it those
      estimates are ``inf``.

    A plan that breaks a rule is rejected with a ``CapsimError`` naming the policy and the rule; the run stops.
    """

    name: ClassVar[str] = "policy"
    family: ClassVar[str] = "policy"
    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False
    may_gang: ClassVar[bool] = False
    may_colocate: ClassVar[bool] = False
    prices_unplaceable: ClassVar[bool] = False
    plans_capacity: ClassVar[bool] = True
    """Whether the policy decides which VMs to run. Gavel's policies schedule the servers they are given (on an
    empty slot they start one VM and keep it): a scenario that lists no policies runs them only on fixed clusters."""
    time_model: ClassVar[str] = "engine"  # one of TIME_MODELS
    """Which time model asks the policy: ``engine`` (``sim.timing``: ``decide(Snapshot) -> Plan``, as above) or
    ``elasticflow`` (ElasticFlow's simulator's, ``sim.elasticflow``: ``decide`` gets that model's views of one
    homogeneous GPU pool, ``sim.elasticflow.vocabulary.ReplayPolicy``). A scenario names such a policy explicitly: one
    that lists no policies runs only the engine's."""

    def decide(self, snapshot: Snapshot) -> Plan:
        raise NotImplementedError(self)


@dataclass(frozen=True, slots=True)
class Progress:
    """What was seen at ``time`` of a job that has run, as an observer of a real job sees it (an iteration counter
    and a clock; ``sim.run.observe``): the configuration it runs on (an index into ``Snapshot.configs``), the
    iterations it has done in all, and of its current run the iterations done and the seconds they took."""

    config: int
    iterations: int
    run_iterations: int
    run_seconds: float
    time: float


@dataclass(frozen=True, slots=True)
class Source:
    """Which kind of answer a predictor gave for one configuration, and how far off such answers are.

    ``kind`` names the source (``measured``, ``interpolated``, ``batch``, ``gpus``, ``compute``, ``scaled``, ...;
    ``predictors.uncertainty.provenance.KINDS`` lists and explains them). ``error`` is the expected relative error of
    that kind of answer: the mean of ``|predicted − actual| / actual`` that ``capsim predict evaluate`` measured for
    it; NaN where nothing measured it.
    """

    kind: str
    error: float = math.nan

    def interval(self, seconds: float) -> tuple[float, float]:
        """The runtimes ``t`` with ``|seconds − t| / t <= error`` (the answer's expected error read back to the
        actual time); ``(nan, nan)`` when the error is unknown."""
        e = self.error
        if not math.isfinite(e) or not math.isfinite(seconds):
            return math.nan, math.nan
        return seconds / (1.0 + e), seconds / (1.0 - e) if e < 1.0 else math.inf


class Predictor(Component):
    """Answers how long a whole job takes on ``gpus`` GPUs of a VM type, in seconds.

    A subclass provides:

    - ``runtime(spec, vm, gpus) -> float`` (required): seconds, or ``INFEASIBLE`` (inf) where it cannot answer.
      It must be deterministic (same arguments, same answer, across instances built with the same parameters) and
      finite exactly where ``support`` returns ``None``.
    - ``support(spec, vm, gpus) -> str | None`` (optional): ``None`` if supported, else a one-line reason. The
      default derives it from ``runtime``; override it to say *why*.
    - ``runtimes(specs, configs) -> ndarray`` (optional): the vectorised form, shape ``(len(specs), len(configs))``,
      equal to calling ``runtime`` on every pair. The default loops; override it for speed.
    - ``fit(runs) -> self`` (optional, trainable predictors only): learn from a table of measured runs (the layout
      of ``predictors.measurements.runs()``), storing what it learnt in attributes ending in ``_``. A trainable
      predictor that is not fitted explicitly fits itself on the shipped runs on first use.
    - ``source(spec, vm, gpus) -> Source`` (optional): which kind of answer it gives there and that kind's expected
      error. The default says nothing (kind ``model``, error unknown).
    - ``refine(job, estimates, progress) -> estimates`` (optional, with ``observes`` true): a job's estimates on
      every configuration once ``progress`` (``Progress``) was observed of it running. The engine asks at
      every decision while the job runs and shows policies the answer (``JobView``).

    It may cache answers and fits; it may not depend on anything but its parameters and the data it was fitted on.
    """

    name: ClassVar[str] = "predictor"
    family: ClassVar[str] = "predictor"

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        raise NotImplementedError(self)

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        """``None`` if the configuration is supported, else a one-line reason."""
        return None if math.isfinite(self.runtime(spec, vm, gpus)) else "no prediction for this configuration"

    def require(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        """``runtime``, or a ``CapsimError`` naming the job, the configuration and why it is unsupported."""
        t = self.runtime(spec, vm, gpus)
        if not math.isfinite(t):
            why = self.support(spec, vm, gpus) or "no prediction for this configuration"
            raise CapsimError(
                f"predictor {self.name!r}: job {spec.name or spec.app_key} (batch {spec.batch_size}) on {gpus} GPUs of "
                f"{vm.name} ({vm.gpu.name}) is unsupported: {why}; choose another configuration or predictor"
            )
        return t

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        """Runtimes of every spec on every configuration, shape ``(len(specs), len(configs))``, inf where
        unsupported."""
        out = np.empty((len(specs), len(configs)), dtype=float)
        for i, s in enumerate(specs):
            for k, c in enumerate(configs):
                out[i, k] = self.runtime(s, c.vm, c.gpus)
        return out

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """Which kind of answer ``runtime`` gives for this configuration, with its expected relative error."""
        return Source("model")

    @property
    def observes(self) -> bool:
        """Whether the engine shows it the progress of running jobs, to ``refine`` their estimates."""
        return False

    def refine(self, job: Job, estimates: np.ndarray, progress: Progress) -> np.ndarray:
        """``job``'s whole-job runtime on every configuration now that ``progress`` was observed (an estimator that
        ``observes``); the default keeps ``estimates``."""
        return estimates

    def fit(self, runs: pd.DataFrame) -> Predictor:
        """Learn from a table of measured runs and return ``self`` (trainable predictors only)."""
        raise CapsimError(f"predictor {self.name!r} is not trainable: it does not learn from runs")

    @classmethod
    def trainable(cls) -> bool:
        """Whether this predictor learns from a runs table (overrides ``fit``)."""
        return cls.fit is not Predictor.fit

    @property
    def fitted(self) -> bool:
        """Whether learnt state is present: some attribute ending in ``_`` (not ``__``) is set."""
        return any(k.endswith("_") and not k.endswith("__") for k in vars(self))


class Interference(Component):
    """Predicts how two jobs sharing the same GPUs slow each other down: an interference model for co-location
    (``ClusterRules.jobs_per_gpu``; ``docs/sharing.md``).

    A subclass provides:

    - ``slowdowns(a, b, vm, gpus) -> (float, float)`` (required): job ``a``'s runtime when it shares ``gpus`` GPUs of
      ``vm`` with job ``b`` over its runtime alone there, and ``b``'s next to ``a``; ``(inf, inf)`` where the two
      cannot share those GPUs. Symmetric: ``slowdowns(b, a)`` is the same pair reversed. Deterministic, as
      ``Predictor.runtime``.
    - ``utilisation(spec, vm, gpus) -> float`` (optional): the fraction of its GPUs' capacity the job keeps busy when
      it runs alone (0 to 1), NaN when the model cannot say (the default).
    - ``memory_gb(spec, vm, gpus) -> float`` (optional): the job's memory per GPU in GiB, NaN when unknown (the
      default); the engine lets a pair share only when both fit in the GPU's memory together.
    - ``shares(spec, vm, gpus) -> bool`` (optional): False only where the job can share those GPUs with no job at
      all (every pair with it is ``(inf, inf)``), so policies skip it without asking pair by pair; True by default.
    - ``fit(pairs) -> self`` (optional): learn from a table of measured pairs.
    """

    name: ClassVar[str] = "interference"

    def slowdowns(self, a: JobSpec, b: JobSpec, vm: VMType, gpus: int) -> tuple[float, float]:
        raise NotImplementedError(self)

    def utilisation(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        """The fraction of its GPUs the job keeps busy alone, NaN when unknown."""
        return math.nan

    def memory_gb(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        """The job's memory per GPU in GiB, NaN when unknown."""
        return math.nan

    def shares(self, spec: JobSpec, vm: VMType, gpus: int) -> bool:
        """False only where every pair with the job on these GPUs is ``(inf, inf)``."""
        return True


TIME_MODELS = ("engine", "elasticflow")
"""The time models a policy may declare (``Policy.time_model``)."""
POLICIES: Registry[Policy] = Registry("policy")
"""Every registered policy kind; importing ``optim`` registers the built-in ones."""
PREDICTORS: Registry[Predictor] = Registry("predictor")
"""Every registered predictor kind; importing ``predictors`` registers the built-in ones."""
INTERFERENCE: Registry[Interference] = Registry("interference model")
"""Every registered interference model kind; importing ``predictors`` registers the built-in ones."""
