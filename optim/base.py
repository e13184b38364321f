"""The policy contract: turn a Snapshot into a Plan, plus a registry mapping YAML names to classes."""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from sim.model import Plan, Snapshot
from sim.registry import Registry

__all__ = ["Policy", "register", "alias", "registry", "build"]


class Policy:
    """Decides, at each decision point, which VMs run, how their GPUs are split, and which jobs start.

    A policy sees only the Snapshot (estimated runtimes, never true ones) and never mutates the world. It declares
    what it may do: ``may_preempt`` (send running jobs back or restart them elsewhere / resized) and ``may_share``
    (place several jobs on one VM). The engine rejects plans that exceed these declarations.
    """

    name: ClassVar[str] = "policy"
    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False

    def decide(self, snapshot: Snapshot) -> Plan:
        raise NotImplementedError

    def describe(self) -> str:
        """A short label for tables and plots (the registry name plus key parameters)."""
        return self.name


_REGISTRY: Registry[Policy] = Registry("policy", "optim")
register = _REGISTRY.register
"""Class decorator adding a policy to the registry under ``name`` (the YAML ``policies[].kind``)."""
alias = _REGISTRY.alias
"""``alias(name, target)``: another YAML name for a registered policy (e.g. ``ps`` for ``priority``)."""


def registry(*, aliases: bool = True) -> dict[str, Callable[..., Policy]]:
    """Every registered policy kind in registration order; ``aliases=False`` lists each policy once."""
    return _REGISTRY.kinds(aliases=aliases)


def build(kind: str, **params: Any) -> Policy:
    """Build the registered policy ``kind`` with ``params``; a clear error names the known kinds otherwise."""
    return _REGISTRY.build(kind, **params)
