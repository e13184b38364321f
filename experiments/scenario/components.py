"""The components a scenario names: policies and predictors by registry kind with their parameters, built through
the registries (a predictor once per process and spec, since fits are costly). A policy may also be a class outside
capsim, named ``kind: package.module:Class`` (``experiments.scenario.outside``; README, "Extending capsim")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["PolicySpec", "PredictorSpec", "registered_policies", "param_names", "select_policies", "build_policy",
           "build_predictor", "registered_extras", "register_extras", "resolved_policy", "resolved_predictor"]


class PolicySpec(BaseModel):
    """A policy: its registry ``kind``, an optional display ``name``, and any parameters for ``optim.build``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str
    name: str | None = None

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def label(self) -> str:
        return self.name or self.kind


class PredictorSpec(BaseModel):
    """A predictor: its registry ``kind`` plus parameters for ``predictors.build`` (nested ``base:`` allowed)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def param_names(cls: Any) -> tuple[str, ...] | None:
    """A registered kind's parameters (``Component.param_names()``), or None when they cannot be listed (a kind
    outside the contract, or one taking ``**kwargs``): its constructor then checks them itself."""
    try:
        return tuple(cls.param_names())
    except (AttributeError, TypeError):
        return None


def registered_policies(fixed: bool = True, mig: bool = False) -> list[str]:
    """Registered policy kinds on the engine's time model in registration order, each policy once (aliases such as
    ``ps`` dropped, and ElasticFlow's, ``Policy.time_model``, which a scenario names explicitly); without ``fixed``,
    only those that plan capacity (``Policy.plans_capacity``: not Gavel's, which schedule given servers); without
    ``mig``, not the policies that only act on MIG slices (``needs_mig``: on another cluster they are their base)."""
    import optim

    return [k for k, cls in optim.registry(aliases=False).items()
            if getattr(cls, "time_model", "engine") == "engine" and (fixed or getattr(cls, "plans_capacity", True))
            and (mig or not getattr(cls, "needs_mig", False))]


def select_policies(specs: list[PolicySpec], names: str | Sequence[str] | None, option: str) -> list[PolicySpec]:
    """The policies to run: ``specs`` (a file's), or those ``names`` names (comma-separated text or a list), each a
    policy name of the file or a registered kind, each once (a policy run twice per seed would count twice in
    every mean); a mistake is a CapsimError naming ``option`` with a did-you-mean."""
    import optim
    from experiments.scenario.loading import did_you_mean
    from sim.model import CapsimError

    if names is None:
        return list(specs)
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if str(n).strip()]
    if not wanted:
        raise CapsimError(f"{option}: expected at least one policy name, found none")
    by_label = {s.label: s for s in specs}
    known = optim.registry()
    out: list[PolicySpec] = []
    for n in wanted:
        if any(p.label == n for p in out):
            raise CapsimError(f"{option}: {n!r} is named twice; each policy runs once per seed (a second would count "
                              f"twice in every mean)")
        if n in by_label:
            out.append(by_label[n])
        elif n in known:
            out.append(PolicySpec(kind=n))
        else:
            raise CapsimError(f"{option}: unknown policy {n!r}{did_you_mean(n, [*by_label, *known])} (the file has "
                              f"{', '.join(by_label)}; the registered kinds are {', '.join(sorted(known))})")
    return out


def build_policy(spec: PolicySpec, single_thread: bool = False) -> Any:
    """The policy for ``spec``; with ``single_thread`` a solver's ``threads`` defaults to 1 (parallel sweeps)."""
    import optim
    from experiments.scenario.outside import policy_class

    params = spec.params
    cls = policy_class(spec.kind)
    if single_thread and "threads" not in params and cls is not None and "threads" in (param_names(cls) or ()):
        params["threads"] = 1
    return cls(**params) if ":" in spec.kind else optim.build(spec.kind, **params)


_REGISTRIES = (("sim.contracts", "POLICIES"), ("sim.contracts", "PREDICTORS"), ("sim.traces.base", "TRACE_FORMATS"))
_PACKAGES = ("sim", "optim", "predictors")


def _registries() -> list[tuple[str, str, Any]]:
    import importlib

    return [(m, a, getattr(importlib.import_module(m), a)) for m, a in _REGISTRIES]


def registered_extras() -> list[tuple[str, str, str, Any]]:
    """Components registered from outside capsim's packages (a plug-in module, a script, a test) as (registry
    module, registry name, kind, class): a worker process started afresh registers them too
    (``register_extras``), so a run there knows every kind this process knows."""
    out = []
    for module, attr, registry in _registries():
        for kind, cls in registry.kinds().items():
            if str(getattr(cls, "__module__", "")).split(".")[0] not in _PACKAGES:
                out.append((module, attr, kind, cls))
    return out


def register_extras(extras: list[tuple[str, str, str, Any]]) -> None:
    """Register in this process the components ``registered_extras`` listed in another (their classes travel by
    reference: their modules are imported here)."""
    import importlib

    for module, attr, kind, cls in extras:
        registry = getattr(importlib.import_module(module), attr)
        if kind in registry.kinds():
            continue
        target = getattr(cls, "name", kind)
        if target != kind and target in registry.kinds():
            registry.alias(kind, target)
        else:
            registry.register(kind)(cls)


_PREDICTORS: dict[str, Any] = {}
_KEPT = 16
"""Predictors kept per process (the oldest is dropped first)."""


def build_predictor(spec: PredictorSpec) -> Any:
    """Build a predictor, reusing one built earlier in this process from the same spec (fits are costly)."""
    import predictors

    key = json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    if key not in _PREDICTORS:
        if len(_PREDICTORS) >= _KEPT:
            _PREDICTORS.pop(next(iter(_PREDICTORS)))
        _PREDICTORS[key] = predictors.build(spec.kind, **spec.params)
    return _PREDICTORS[key]


def _plain(value: Any) -> Any:
    """A built component's parameter as plain JSON data: a component as its kind and resolved parameters."""
    from sim.contracts import Component

    if isinstance(value, Component):
        return {"kind": value.name, **{k: _plain(v) for k, v in value.get_params().items()}}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"{type(value).__module__}.{type(value).__qualname__}"  # never an address: run ids stay stable


_RESOLVED: dict[str, dict[str, Any]] = {}


def _resolved(what: str, spec: PolicySpec | PredictorSpec, build: Any) -> dict[str, Any]:
    """``_plain`` of what ``spec`` builds (cached per spec); a component outside the contract (its parameters not
    stored under their own names) as written."""
    key = what + json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    if key not in _RESOLVED:
        if len(_RESOLVED) >= 256:
            _RESOLVED.pop(next(iter(_RESOLVED)))
        try:
            out = _plain(build(spec))
        except TypeError:
            out = None
        _RESOLVED[key] = out if isinstance(out, dict) else _plain(spec.params)
    return _RESOLVED[key]


def resolved_policy(spec: PolicySpec) -> dict[str, Any]:
    """The policy ``spec`` builds, as plain data: its kind, display name and every parameter with its default filled
    (``get_params()`` of the built policy), so a run id changes when a default does. A parallel sweep's
    ``threads: 1`` (``build_policy(single_thread=True)``) is not part of it."""
    out = _resolved("policy:", spec, build_policy)
    return {"kind": spec.kind, "name": spec.name, **{k: v for k, v in out.items() if k != "kind"}}


def resolved_predictor(spec: PredictorSpec) -> dict[str, Any]:
    """The predictor ``spec`` builds, as plain data (kind and every parameter with its default, nested ones too)."""
    out = _resolved("predictor:", spec, build_predictor)
    return {"kind": spec.kind, **{k: v for k, v in out.items() if k != "kind"}}
