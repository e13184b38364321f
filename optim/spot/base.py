"""The spot strategy contract (``sim.spotjob.SpotStrategy``) and its registry, with the face every registry has
(``sim.registry``)."""

from __future__ import annotations

from sim.spotjob import SPOT_STRATEGIES, SpotStrategy

__all__ = ["SpotStrategy", "register", "alias", "registry", "build"]

register = SPOT_STRATEGIES.register
"""Class decorator adding a spot strategy under ``name`` (the ``strategies[].kind`` of a spot scenario)."""
alias = SPOT_STRATEGIES.alias
registry = SPOT_STRATEGIES.kinds
"""Every registered spot strategy kind in registration order (``aliases=False``: each once)."""
build = SPOT_STRATEGIES.build
"""The registered spot strategy ``kind`` built with ``params``."""
