"""Name → class registries that let YAML files pick predictors and policies by ``kind``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from sim.model import CapsimError

__all__ = ["Registry"]

T = TypeVar("T")


class _Named(Protocol):
    """What ``register`` sets on a class: its registry name."""

    name: ClassVar[str]


K = TypeVar("K", bound="type[_Named]")


class Registry(Generic[T]):
    """The registered kinds of one family (``what``, e.g. "policy"), filled by importing ``package``.

    ``register(name)`` decorates a class; ``alias(name, target)`` adds another name for a registered kind.
    """

    def __init__(self, what: str, package: str):
        self.what, self.package = what, package
        # a registered class builds a T by convention: ``register`` keeps each class's own type, so this is unchecked
        self._kinds: dict[str, Callable[..., Any]] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str) -> Callable[[K], K]:
        def deco(cls: K) -> K:
            cls.name = name
            self._kinds[name] = cls
            return cls

        return deco

    def alias(self, name: str, target: str) -> None:
        self._kinds[name] = self._kinds[target]
        self._aliases[name] = target

    def kinds(self, *, aliases: bool = True) -> dict[str, Callable[..., T]]:
        """Every registered kind in registration order (``aliases=False``: each class under its own name only)."""
        importlib.import_module(self.package)
        return {k: v for k, v in self._kinds.items() if aliases or k not in self._aliases}

    def build(self, kind: str, **params: Any) -> T:
        """An instance of ``kind`` with ``params``; a clear error names the known kinds or the bad parameters."""
        kinds = self.kinds()
        if kind not in kinds:
            raise CapsimError(f"unknown {self.what} {kind!r}: known {self.what} kinds are {', '.join(sorted(kinds))}")
        try:
            return kinds[kind](**params)
        except TypeError as e:
            raise CapsimError(f"{self.what} {kind!r}: bad parameters {sorted(params)}: {e}") from None
