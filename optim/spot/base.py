"""The spot strategy registry's face for strategy authors (``sim.spotjob`` holds the contract)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.spotjob import SPOT_STRATEGIES, SpotStrategy

__all__ = ["SpotStrategy", "register", "registry", "build"]

register = SPOT_STRATEGIES.register
"""Class decorator adding a spot strategy under ``name`` (the ``strategies[].kind`` of a spot scenario)."""


def registry(*, aliases: bool = True) -> dict[str, Callable[..., SpotStrategy]]:
    """Every registered spot strategy kind in registration order."""
    return SPOT_STRATEGIES.kinds(aliases=aliases)


def build(kind: str, **params: Any) -> SpotStrategy:
    """The registered spot strategy ``kind`` built with ``params``."""
    return SPOT_STRATEGIES.build(kind, **params)
