"""The two faces of an interference model in a run: ``PairView`` for the policy (the estimator's slowdowns, on the
pairs the truth lets share) and ``TruePairs`` for the engine (the truth's slowdowns).

Which pairs may share a GPU is taken from the truth and shown to the policy as it is: whether two jobs fit in a GPU's
memory together, or run together at all, can be checked before they run (a footprint is computed or tried in
seconds), unlike how fast they go, which the policy knows only through its estimator. A pair may share the GPUs of a
configuration when the truth gives both slowdowns finite and, where it knows both jobs' memory, their sum fits in
one GPU's memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from sim.contracts import Interference
from sim.model import Config, JobSpec, VMType

__all__ = ["PairView", "TruePairs"]


class _Interned:
    """Small integers for job specs, by object: a trace's specs differ job by job, and hashing a spec (all its
    fields) for every pair a policy weighs costs more than the answer. Each spec is kept, so its id is never reused."""

    def __init__(self) -> None:
        self._ids: dict[int, int] = {}
        self._kept: list[JobSpec] = []

    def __call__(self, spec: JobSpec) -> int:
        key = self._ids.get(id(spec))
        if key is None:
            key = self._ids[id(spec)] = len(self._kept)
            self._kept.append(spec)
        return key


class TruePairs:
    """The truth's slowdowns of pairs sharing a configuration's GPUs, cached per (spec, spec, configuration)."""

    def __init__(self, model: Interference, configs: Sequence[Config]):
        self.model = model
        self.configs = tuple(configs)
        self._pairs: dict[tuple[int, int, int], tuple[float, float]] = {}
        self._memory: dict[tuple[int, int], float] = {}
        self._shares: dict[tuple[int, int], float] = {}
        self._key = _Interned()

    def slowdowns(self, a: JobSpec, b: JobSpec, k: int) -> tuple[float, float]:
        """(a's, b's) true slowdown sharing configuration ``k``'s GPUs; ``(inf, inf)`` where they may not share."""
        return _per_pair(self._pairs, self._key, self.model, self.configs, a, b, k, lambda: self._fits(a, b, k))

    def memory_gb(self, spec: JobSpec, k: int) -> float:
        return _per_job(self._memory, self._key, self.model.memory_gb, self.configs, spec, k)

    def shares(self, spec: JobSpec, k: int) -> bool:
        """False where the truth lets the job share configuration ``k``'s GPUs with no job."""
        return _per_job(self._shares, self._key, self.model.shares, self.configs, spec, k) > 0

    def _fits(self, a: JobSpec, b: JobSpec, k: int) -> bool:
        total = self.memory_gb(a, k) + self.memory_gb(b, k)
        return not total > self.configs[k].vm.gpu.memory_gb  # NaN (unknown) passes

    def feasible(self, a: JobSpec, b: JobSpec, k: int) -> bool:
        return math.isfinite(self.slowdowns(a, b, k)[0])


class PairView:
    """``sim.model.Colocation`` for the policy: the estimator's slowdowns, utilisation and memory, and ``inf`` on
    the pairs the truth does not let share (module docstring)."""

    def __init__(self, estimator: Interference, truth: TruePairs):
        self._estimator = estimator
        self._truth = truth
        self._feasible = truth.feasible
        self._configs = truth.configs
        self._pairs: dict[tuple[int, int, int], tuple[float, float]] = {}
        self._key = _Interned()
        self._util: dict[tuple[int, int], float] = {}
        self._memory: dict[tuple[int, int], float] = {}
        self._shares: dict[tuple[int, int], float] = {}

    def slowdowns(self, a: JobSpec, b: JobSpec, k: int) -> tuple[float, float]:
        return _per_pair(self._pairs, self._key, self._estimator, self._configs, a, b, k,
                         lambda: self._feasible(a, b, k))

    def utilisation(self, spec: JobSpec, k: int) -> float:
        return _per_job(self._util, self._key, self._estimator.utilisation, self._configs, spec, k)

    def memory_gb(self, spec: JobSpec, k: int) -> float:
        return _per_job(self._memory, self._key, self._estimator.memory_gb, self._configs, spec, k)

    def shares(self, spec: JobSpec, k: int) -> bool:
        return _per_job(self._shares, self._key, self._both_share, self._configs, spec, k) > 0

    def _both_share(self, spec: JobSpec, vm: VMType, gpus: int) -> bool:
        return self._estimator.shares(spec, vm, gpus) and self._truth.model.shares(spec, vm, gpus)

    def fit_gb(self, spec: JobSpec, k: int) -> float:
        return self._truth.memory_gb(spec, k)


def _per_pair(cache: dict[tuple[int, int, int], tuple[float, float]], key: Callable[[JobSpec], int],
              model: Interference, configs: tuple[Config, ...], a: JobSpec, b: JobSpec, k: int,
              allowed: Callable[[], bool]) -> tuple[float, float]:
    """``model``'s slowdowns of a and b on configuration ``k`` where ``allowed()`` (else, or where not finite and
    positive, ``(inf, inf)``), cached per pair of specs (``key``) in both orders."""
    ka, kb = key(a), key(b)
    hit = cache.get((ka, kb, k))
    if hit is None:
        sa = sb = math.inf
        if allowed():
            c = configs[k]
            sa, sb = (float(x) for x in model.slowdowns(a, b, c.vm, c.gpus))
            if not (math.isfinite(sa) and math.isfinite(sb) and sa > 0 and sb > 0):
                sa = sb = math.inf
        hit = cache[(ka, kb, k)] = (sa, sb)
        if kb != ka:  # one spec twice: the order stays the model's, whichever member is asked about first
            cache[(kb, ka, k)] = (sb, sa)
    return hit


def _per_job(cache: dict[tuple[int, int], float], key: Callable[[JobSpec], int], ask: Callable[..., float],
             configs: tuple[Config, ...], spec: JobSpec, k: int) -> float:
    """``ask(spec, vm, gpus)`` on configuration ``k``, cached per (spec, configuration)."""
    ks = (key(spec), k)
    hit = cache.get(ks)
    if hit is None:
        c = configs[k]
        hit = cache[ks] = float(ask(spec, c.vm, c.gpus))
    return hit
