"""Interference models: how much two jobs sharing a GPU slow each other (co-location, ``docs/sharing.md``).
Importing this package registers the built-in models."""

from predictors.interference import explicit, learned, table  # noqa: F401
from predictors.interference.base import Interference, build, register, registry

__all__ = ["Interference", "build", "register", "registry"]
