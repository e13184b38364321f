"""The policy contract (``sim.contracts.Policy``, re-exported here for policy authors) and the policy registry, with
the face every registry has (``sim.registry``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.contracts import POLICIES, Policy
from sim.elasticflow.vocabulary import REPLAY_POLICIES, ReplayPolicy

__all__ = ["Policy", "register", "alias", "registry", "replay_registry", "kinds", "build", "build_any"]

register = POLICIES.register
"""Class decorator adding a policy to the registry under ``name`` (the YAML ``policies[].kind``)."""
alias = POLICIES.alias
"""``alias(name, target)``: another YAML name for a registered policy (e.g. ``ps`` for ``priority``)."""
registry = POLICIES.kinds
"""Every registered policy kind in registration order; ``aliases=False`` lists each policy once."""
build = POLICIES.build
"""Build the registered policy ``kind`` with ``params``; a clear error names the known kinds otherwise."""


def replay_registry() -> dict[str, Callable[..., ReplayPolicy]]:
    """The deadline-replay policies (ElasticFlow's simulator's, ``optim.elasticflow``), which run on its time model
    (``sim.elasticflow.vocabulary``) rather than deciding plans over VMs: a scenario names them explicitly."""
    return REPLAY_POLICIES.kinds()


def kinds() -> dict[str, Callable[..., Policy | ReplayPolicy]]:
    """Every policy a scenario may name: ``registry()`` and ``replay_registry()``."""
    return {**registry(), **replay_registry()}


def build_any(kind: str, **params: Any) -> Policy | ReplayPolicy:
    """Build any policy a scenario may name (``kinds()``): a plan-deciding one or a deadline-replay one."""
    if kind not in POLICIES.kinds() and kind in REPLAY_POLICIES.kinds():
        return REPLAY_POLICIES.build(kind, **params)
    return POLICIES.build(kind, **params)
