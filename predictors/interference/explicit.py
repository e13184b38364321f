"""Slowdowns of co-located pairs given by name: for hand-built scenarios and tests, as ``table`` is for runtimes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from predictors.interference.base import Interference, register
from sim.model import CapsimError, JobSpec, VMType

__all__ = ["GivenPairs"]


@register("pairs")
class GivenPairs(Interference):
    """Each pair's two slowdowns given by its jobs' names: ``{"A+B": [a's, b's]}`` on every configuration, or
    ``{"A+B/VMTYPE/GPUS": [...]}`` on one (which wins); a pair not given cannot share. ``memory`` gives a job's
    memory per GPU in GiB by name and ``busy`` its GPU utilisation alone (0 to 1); unknown where not given.

    YAML: ``{kind: pairs, pairs: {J1+J2: [1.4, 1.6]}, memory: {J1: 6}}``.
    """

    test_params: ClassVar[Mapping[str, Any]] = {
        "pairs": {f"J{a}+J{b}": [1.0 + 0.1 * a + 0.05 * b, 1.0 + 0.1 * b + 0.05 * a]
                  for a in range(1, 7) for b in range(a, 7)},
    }

    def __init__(self, pairs: Mapping[str, Sequence[float]], memory: Mapping[str, float] | None = None,
                 busy: Mapping[str, float] | None = None):
        self.pairs = pairs
        self.memory = memory
        self.busy = busy
        self._given: dict[str, tuple[float, float]] = {}
        for key, pair in dict(pairs).items():
            names = str(key).split("/")[0].split("+")
            values = list(pair) if isinstance(pair, (list, tuple)) else []
            if len(names) != 2 or not all(names) or len(values) != 2 or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
                raise CapsimError(f"interference model 'pairs': pairs entry {key!r}: expected a key 'A+B' or "
                                  f"'A+B/VMTYPE/GPUS' and two slowdowns > 0, got {pair!r}")
            self._given[str(key)] = (float(values[0]), float(values[1]))
        self._named = frozenset(n for key in self._given for n in key.split("/")[0].split("+"))
        for what, given in (("memory", memory), ("busy", busy)):
            for name, v in dict(given or {}).items():
                if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0):
                    raise CapsimError(f"interference model 'pairs': {what} of {name!r} must be a number >= 0, "
                                      f"got {v!r}")

    def _lookup(self, a: str, b: str, where: str) -> tuple[float, float] | None:
        for key in (f"{a}+{b}/{where}", f"{a}+{b}"):
            if key in self._given:
                return self._given[key]
        for key in (f"{b}+{a}/{where}", f"{b}+{a}"):
            if key in self._given:
                sb, sa = self._given[key]
                return sa, sb
        return None

    def slowdowns(self, a: JobSpec, b: JobSpec, vm: VMType, gpus: int) -> tuple[float, float]:
        hit = self._lookup(a.name, b.name, f"{vm.name}/{gpus}")
        return hit if hit is not None else (math.inf, math.inf)

    def shares(self, spec: JobSpec, vm: VMType, gpus: int) -> bool:
        return spec.name in self._named

    def utilisation(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float((self.busy or {}).get(spec.name, math.nan))

    def memory_gb(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float((self.memory or {}).get(spec.name, math.nan))
