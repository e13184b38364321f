"""The policy contract (``sim.contracts.Policy``, re-exported here for policy authors) and the policy registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.contracts import POLICIES, Policy

__all__ = ["Policy", "register", "alias", "registry", "build"]

register = POLICIES.register
"""Class decorator adding a policy to the registry under ``name`` (the YAML ``policies[].kind``)."""
alias = POLICIES.alias
"""``alias(name, target)``: another YAML name for a registered policy (e.g. ``ps`` for ``priority``)."""


def registry(*, aliases: bool = True) -> dict[str, Callable[..., Policy]]:
    """Every registered policy kind in registration order; ``aliases=False`` lists each policy once."""
    return POLICIES.kinds(aliases=aliases)


def build(kind: str, **params: Any) -> Policy:
    """Build the registered policy ``kind`` with ``params``; a clear error names the known kinds otherwise."""
    return POLICIES.build(kind, **params)
