"""The interference model contract (``sim.contracts.Interference``, re-exported for authors) and its registry face."""

from __future__ import annotations

from sim.contracts import INTERFERENCE, Interference

__all__ = ["Interference", "register", "alias", "registry", "build"]

register = INTERFERENCE.register
"""Class decorator adding an interference model to the registry under ``name`` (the YAML ``interference.kind``)."""
alias = INTERFERENCE.alias
registry = INTERFERENCE.kinds
"""Every registered interference model kind."""
build = INTERFERENCE.build
"""Build the registered interference model ``kind`` with ``params``."""
