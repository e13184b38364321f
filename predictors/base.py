"""The predictor contract: runtime of a job on a VM configuration, plus a registry mapping YAML names to classes."""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from sim.model import INFEASIBLE, CapsimError, Config, JobSpec, VMType
from sim.registry import Registry

__all__ = ["Predictor", "register", "registry", "build", "from_dict"]


class Predictor:
    """Answers how long a whole job takes on ``gpus`` GPUs of a VM type, in seconds.

    ``runtime`` returns ``INFEASIBLE`` (inf) where the predictor cannot support the configuration, and ``support``
    says why. Parameters go in ``__init__``; no heavy work there (fitting happens lazily or in ``fit``).
    """

    name: ClassVar[str] = "predictor"

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        raise NotImplementedError

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        """``None`` if the configuration is supported, else a one-line reason."""
        return None if math.isfinite(self.runtime(spec, vm, gpus)) else "no prediction for this configuration"

    def require(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        """``runtime``, or a ``CapsimError`` naming the job, the configuration and why it is unsupported."""
        t = self.runtime(spec, vm, gpus)
        if not math.isfinite(t):
            why = self.support(spec, vm, gpus) or "no prediction for this configuration"
            raise CapsimError(
                f"predictor {self.name!r}: job {spec.name or spec.app_key} (batch {spec.batch_size}) on {gpus} GPUs of "
                f"{vm.name} ({vm.gpu.name}) is unsupported: {why}; choose another configuration or predictor"
            )
        return t

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        """Runtimes of every spec on every configuration, shape ``(len(specs), len(configs))``, inf where unsupported.

        Subclasses override this with a vectorised path; this default loops over ``runtime``.
        """
        out = np.empty((len(specs), len(configs)), dtype=float)
        for i, s in enumerate(specs):
            for k, c in enumerate(configs):
                out[i, k] = self.runtime(s, c.vm, c.gpus)
        return out


_REGISTRY: Registry[Predictor] = Registry("predictor", "predictors")
register = _REGISTRY.register
"""Class decorator adding a predictor to the registry under ``name`` (the YAML ``predictor.kind``)."""


def registry() -> dict[str, Callable[..., Predictor]]:
    """Every registered predictor kind."""
    return _REGISTRY.kinds()


def build(kind: str, **params: Any) -> Predictor:
    """Build the registered predictor ``kind`` with ``params``; a clear error names the known kinds otherwise.

    A parameter given as a dict with a ``kind`` key (e.g. ``base: {kind: measured}``) is built recursively first.
    """
    params = {k: build(**v) if isinstance(v, dict) and "kind" in v else v for k, v in params.items()}
    return _REGISTRY.build(kind, **params)


def from_dict(config: dict[str, Any]) -> Predictor:
    """Build a predictor from a YAML-style dict ``{kind: ..., <params>}``, nested ``base`` dicts included."""
    if not isinstance(config, dict) or "kind" not in config:
        raise CapsimError(f"predictor settings {config!r}: need a mapping with a 'kind' key, e.g. {{kind: measured}}")
    return build(**config)
