"""The policy contract: turn a Snapshot into a Plan, plus a registry mapping YAML names to classes."""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from sim.model import CapsimError, Plan, Snapshot

__all__ = ["Policy", "register", "registry", "build"]


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


_REGISTRY: dict[str, Callable[..., Policy]] = {}


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator adding a policy to the registry under ``name`` (the YAML ``policies[].kind``)."""

    def deco(cls: type[Policy]) -> type[Policy]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def registry() -> dict[str, Callable[..., Policy]]:
    import optim  # noqa: F401  (importing the package registers the built-in policies)

    return dict(_REGISTRY)


def build(kind: str, **params: Any) -> Policy:
    """Build the registered policy ``kind`` with ``params``; a clear error names the known kinds otherwise."""
    reg = registry()
    if kind not in reg:
        raise CapsimError(f"unknown policy {kind!r}: known policies are {', '.join(sorted(reg))}")
    try:
        return reg[kind](**params)
    except TypeError as e:
        raise CapsimError(f"policy {kind!r}: bad parameters {sorted(params)}: {e}") from None
