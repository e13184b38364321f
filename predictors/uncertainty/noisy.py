"""A predictor that wraps another and multiplies its answers by a seeded log-normal error.

The factor for a (job spec, configuration) is ``exp(mu + sigma · z)`` with ``z`` a standard normal drawn from a hash
of (seed, spec, VM type name, GPU count): a predictor is a function of its inputs, so two jobs with the same spec get
the same estimate on the same configuration, and asking twice gives the same answer. ``sigma`` and ``mu`` are solved
so that the factor's mean absolute percentage error ``E|f − 1|`` equals ``mape`` and its mean ``E[f] − 1`` equals
``bias``. With ``mape: expected`` each answer's error is drawn from the expected error of the kind of answer the base
predictor gives there (``Predictor.source``, measured by ``capsim predict evaluate``): an extrapolation to a GPU never
measured errs more than a measured configuration. Where the base states no expected error (a measured throughput
table, an explicit table) the answer is left exact. Keys come from ``numpy.random.SeedSequence``; a SplitMix64
finaliser mixes spec and configuration keys so the vectorised path stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, ClassVar

import numpy as np
from scipy.special import ndtr, ndtri

from predictors.base import Predictor, Source, register
from sim.model import CapsimError, Config, JobSpec, VMType

__all__ = ["NoisyPredictor", "lognormal_params", "expected_mape"]

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def expected_mape(mu: float, sigma: float) -> float:
    """``E|X − 1|`` for ``X = exp(mu + sigma Z)``."""
    if sigma == 0:
        return abs(math.exp(mu) - 1)
    mean = math.exp(mu + sigma * sigma / 2)
    below = ndtr(-mu / sigma) - mean * ndtr(-mu / sigma - sigma)
    return float(mean - 1 + 2 * below)


@cache
def lognormal_params(mape: float, bias: float) -> tuple[float, float]:
    """(mu, sigma) of the log-normal factor with ``E|f − 1| = mape`` and ``E[f] = 1 + bias``."""
    if mape < abs(bias):
        raise CapsimError(f"predictor 'noisy': mape={mape} must be at least |bias|={abs(bias)} (E|f-1| >= |E[f]-1|)")
    m = math.log1p(bias)
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if expected_mape(m - mid * mid / 2, mid) < mape:
            lo = mid
        else:
            hi = mid
    sigma = (lo + hi) / 2
    return m - sigma * sigma / 2, sigma


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on uint64 arrays."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _M64
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M64
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M64
        return x ^ (x >> np.uint64(31))


def _words(text: str) -> list[int]:
    data = text.encode("utf-8")
    return [int.from_bytes(data[i:i + 4].ljust(4, b"\0"), "little") for i in range(0, len(data), 4)] or [0]


@register("noisy")
class NoisyPredictor(Predictor):
    """``base``'s answer × a log-normal error with the requested ``mape`` (a number, or ``expected``: each answer's
    own expected error) and ``bias``, deterministic per (``seed``, spec, configuration)."""

    test_params: ClassVar[Mapping[str, Any]] = {"base": {"kind": "measured"}, "mape": 0.2}

    def __init__(self, base: Predictor, mape: float | str = 0.2, bias: float = 0.0, seed: int = 0):
        if not isinstance(base, Predictor):
            raise CapsimError(f"predictor 'noisy': base must be a predictor or a mapping with 'kind', got {base!r}")
        self.base, self.mape, self.bias, self.seed = base, mape, bias, seed
        if mape != "expected":
            try:
                self.check_param("mape", float, low=0.0)
            except CapsimError as err:
                raise CapsimError(f"{err} (or 'expected': each answer's own expected error)") from None
        self.check_param("bias", float, above=-1.0)
        self.check_param("seed", int, low=0)
        self.mu, self.sigma = lognormal_params(mape, bias) if mape != "expected" else (0.0, 0.0)
        self._keys: dict[object, int] = {}
        self._errors: dict[tuple, tuple[float, float]] = {}

    def _key(self, label: str) -> int:
        k = self._keys.get(label)
        if k is None:
            ss = np.random.SeedSequence([self.seed, *_words(label)])
            k = self._keys[label] = int(ss.generate_state(1, np.uint64)[0])
        return k

    @staticmethod
    def _spec_label(s: JobSpec) -> str:
        return f"spec|{s.application}|{s.framework}|{s.iterations}|{s.batch_size}|{s.depth}"

    def factors(self, specs: Sequence[JobSpec], configs: Sequence[Config], answered: np.ndarray | None = None
                ) -> np.ndarray:
        """The error factors, shape ``(len(specs), len(configs))`` (``answered``: where the base answers, to spare
        asking it again under ``mape: expected``)."""
        sk = np.array([self._key(self._spec_label(s)) for s in specs], dtype=np.uint64)
        ck = np.array([self._key(f"cfg|{c.vm.name}|{c.gpus}") for c in configs], dtype=np.uint64)
        h = _mix(_mix(sk)[:, None] ^ ck[None, :])
        u = ((h >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
        z = ndtri(u)
        if self.mape != "expected":
            return np.exp(self.mu + self.sigma * z)
        if answered is None:
            answered = np.isfinite(self.base.runtimes(specs, configs))
        mu, sigma = self.errors(specs, configs, answered)
        return np.exp(mu + sigma * z)

    def errors(self, specs: Sequence[JobSpec], configs: Sequence[Config], answered: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """(mu, sigma) of each answer's log-normal factor under ``mape: expected``: from the expected error of the
        kind of answer the base gives where it ``answered`` (0 elsewhere, and where it states no error). The kind
        depends on a job's shape (application, framework, depth, batch), not its iterations: asked once per shape
        and configuration."""
        mu = np.zeros((len(specs), len(configs)))
        sigma = np.zeros_like(mu)
        memo = self._errors
        for i, s in enumerate(specs):
            for k, c in enumerate(configs):
                if not answered[i, k]:
                    continue
                key = (s.application, s.framework, s.depth, s.batch_size, c.vm.name, c.gpus)
                hit = memo.get(key)
                if hit is None:
                    e = self.base.source(s, c.vm, c.gpus).error
                    ok = math.isfinite(e) and e > 0
                    hit = memo[key] = lognormal_params(max(float(e), abs(self.bias)), self.bias) if ok else (0.0, 0.0)
                mu[i, k], sigma[i, k] = hit
        return mu, sigma

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """The base's kind of answer; its expected error is this predictor's ``mape`` (or the base's, ``expected``)
        — the error of this estimate against the base's answer."""
        base = self.base.source(spec, vm, gpus)
        return base if self.mape == "expected" else Source(base.kind, float(self.mape))

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.runtimes([spec], [Config(vm, gpus)])[0, 0])

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        return self.base.support(spec, vm, gpus)

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        base = self.base.runtimes(specs, configs)
        return base * self.factors(specs, configs, np.isfinite(base))
