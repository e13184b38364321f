"""The predictor contract (``sim.contracts.Predictor``, re-exported here for predictor authors) and its registry."""

from __future__ import annotations

from typing import Any, Callable

from sim.contracts import PREDICTORS, Predictor

__all__ = ["Predictor", "register", "registry", "build", "from_dict"]

register = PREDICTORS.register
"""Class decorator adding a predictor to the registry under ``name`` (the YAML ``predictor.kind``)."""


def registry() -> dict[str, Callable[..., Predictor]]:
    """Every registered predictor kind."""
    return PREDICTORS.kinds()


def build(kind: str, **params: Any) -> Predictor:
    """Build the registered predictor ``kind`` with ``params``; a clear error names the known kinds otherwise.

    A parameter given as a dict with a ``kind`` key (e.g. ``base: {kind: measured}``) is built recursively first.
    """
    params = {k: build(**v) if isinstance(v, dict) and "kind" in v else v for k, v in params.items()}
    return PREDICTORS.build(kind, **params)


def from_dict(config: dict[str, Any]) -> Predictor:
    """Build a predictor from a YAML-style dict ``{kind: ..., <params>}``, nested ``base`` dicts included."""
    from sim.model import CapsimError

    if not isinstance(config, dict) or "kind" not in config:
        raise CapsimError(f"predictor settings {config!r}: need a mapping with a 'kind' key, e.g. {{kind: measured}}")
    return build(**config)
