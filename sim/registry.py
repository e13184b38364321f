"""Name → class registries that let YAML files pick components by ``kind``: one face for every kind of component.

Policies (``optim``), predictors (``predictors``), trace formats (``sim.traces``) and spot strategies (``optim.spot``)
each have one ``Registry``, and each room offers the same four names bound to it: ``register`` (a class decorator),
``alias``, ``registry()`` (the kinds) and ``build(kind, **params)``. A registry holds what has been registered; a room's
package registers its built-in kinds when it is imported, which its own ``registry()`` and ``build`` ensure by living
in it. The registry itself imports nothing (the floor never reaches up into a room).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from sim.model import CapsimError

__all__ = ["Registry", "did_you_mean"]

T = TypeVar("T")


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """A ``; did you mean 'x'?`` hint naming the closest of ``known`` to a mistyped name, or empty: every message
    about an unknown name (a key, a policy, a VM type, a flag's value) says it the same way."""
    word, names = str(word), list(known)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if not close:  # a longer or shorter spelling of a name (an old file name such as cdf_jct_lateness for cdf)
        close = sorted((n for n in names if len(n) >= 3 and len(word) >= 3 and (word.startswith(n) or
                                                                              n.startswith(word))), key=len)[-1:]
    return f"; did you mean {close[0]!r}?" if close else ""


class _Named(Protocol):
    """What ``register`` sets on a class: its registry name."""

    name: ClassVar[str]


K = TypeVar("K", bound="type[_Named]")


class Registry(Generic[T]):
    """The registered kinds of one family of components (``what``, e.g. "policy").

    ``register(name)`` decorates a class and sets its ``name``; ``alias(name, target)`` adds another name for a
    registered kind; ``kinds()`` lists them; ``build(kind, **params)`` makes one, a parameter given as a mapping with
    a ``kind`` key (``base: {kind: measured}``) being built by this registry first.
    """

    def __init__(self, what: str):
        self.what = what
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
        return {k: v for k, v in self._kinds.items() if aliases or k not in self._aliases}

    def build(self, kind: str, **params: Any) -> T:
        """An instance of ``kind`` with ``params``; a clear error names the known kinds or the bad parameters."""
        if kind not in self._kinds:
            raise CapsimError(f"unknown {self.what} {kind!r}{did_you_mean(kind, self._kinds)} (known {self.what} "
                              f"kinds: {', '.join(sorted(self._kinds))})")
        params = {k: self.build(**v) if isinstance(v, Mapping) and "kind" in v else v for k, v in params.items()}
        try:
            return self._kinds[kind](**params)
        except TypeError as e:
            raise CapsimError(f"{self.what} {kind!r}: bad parameters {sorted(params)}: {e}") from None
