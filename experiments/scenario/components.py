"""The components a scenario names: policies and predictors by registry kind with their parameters, built through
the registries (a predictor once per process and spec, since fits are costly)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["PolicySpec", "PredictorSpec", "registered_policies", "param_names", "build_policy", "build_predictor"]


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


def registered_policies(fixed: bool = True) -> list[str]:
    """Registered policy kinds in registration order, each policy once (aliases such as ``ps`` dropped); without
    ``fixed``, only those that plan capacity (``Policy.plans_capacity``: not Gavel's, which schedule given servers)."""
    import optim

    return [k for k, cls in optim.registry(aliases=False).items() if fixed or getattr(cls, "plans_capacity", True)]


def build_policy(spec: PolicySpec, single_thread: bool = False) -> Any:
    """The policy for ``spec``; with ``single_thread`` a solver's ``threads`` defaults to 1 (parallel sweeps)."""
    import optim

    params = spec.params
    if single_thread and "threads" not in params:
        cls = optim.registry().get(spec.kind)
        if cls is not None and "threads" in (param_names(cls) or ()):
            params["threads"] = 1
    return optim.build(spec.kind, **params)


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
