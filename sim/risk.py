"""Spot risk, priced in one place for every policy: the expected time a job's remaining work takes on a spot VM that
the provider revokes at random, and a snapshot's views with every spot configuration at that expected time.

A spot VM (``VMType.spot``) is revoked at rate λ (``VMType.revocation_rate`` per hour, a Poisson process); each
revocation loses the work since the job's last checkpoint (``ClusterRules.checkpoint_interval``: every C seconds of
work, at most the run) and costs a restart (``ClusterRules.restart_overhead`` plus the VM's boot) before the work
resumes. With the remaining work T cut in segments of c = min(C, T), the classic result for Poisson failures gives the
expected time to finish it, T / c × (1/λ + restart + boot) × (e^(λc) − 1), which tends to T as λ → 0; on demand
configurations (and spot ones with λ = 0) keep T.

A policy that weighs cost as price × time decides on ``expected_snapshot(snapshot)`` (or one job's
``expected_view``): it then sets a spot VM's discount against the expected cost of the work revocations lose, and the
job's expected finish time against its deadline. Every capacity-planning policy of capsim does, and
``sim.testing.check_policy`` checks it of any policy. This module is part of the floor (it imports only
``sim.model``), so every room may use it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sim.model import ClusterRules, Config, JobView, Snapshot, per_configs

__all__ = ["SpotRates", "spot_rates", "expected_runtime", "expected_view", "expected_snapshot"]


class SpotRates:
    """The spot revocations of one ``Snapshot.configs`` tuple, per configuration: ``spot`` (on a spot VM), ``rate``
    (revocations per second, 0 on demand) and ``boot`` (s); ``any`` says whether some configuration is on spot."""

    def __init__(self, configs: tuple[Config, ...]):
        self.spot = np.array([c.vm.spot for c in configs], dtype=bool)
        self.rate = np.where(self.spot, np.array([c.vm.revocation_rate for c in configs], dtype=float) / 3600.0, 0.0)
        self.boot = np.array([c.vm.boot_time for c in configs], dtype=float)
        self.any = bool(self.spot.any())


spot_rates = per_configs(SpotRates)
"""The spot revocation rates of a configs tuple, built once per tuple."""


def expected_runtime(remaining: np.ndarray, rates: SpotRates, rules: ClusterRules) -> np.ndarray:
    """Expected seconds to finish ``remaining`` seconds of work on each configuration (see the module docstring);
    ``remaining`` itself (not a copy) when no configuration is on spot."""
    if not rates.any:
        return remaining
    out = np.array(remaining, dtype=float)
    k = rates.spot & (rates.rate > 0) & np.isfinite(out) & (out > 0)
    t, lam = out[k], rates.rate[k]
    c = np.minimum(rules.checkpoint_interval, t)
    with np.errstate(over="ignore"):
        out[k] = t / c * (1.0 / lam + rules.restart_overhead + rates.boot[k]) * np.expm1(lam * c)
    return out


def expected_view(jv: JobView, snapshot: Snapshot) -> JobView:
    """``jv`` with its estimates on spot configurations raised so that its remaining time there is the expected one;
    ``jv`` itself when ``snapshot`` has no spot configuration or is already ``spot_expected``."""
    rates = spot_rates(snapshot.configs)
    if not rates.any or snapshot.spot_expected:
        return jv
    left = 1.0 - jv.done
    if left <= 0:
        return jv
    return replace(jv, estimates=expected_runtime(left * jv.estimates, rates, snapshot.rules) / left)


def expected_snapshot(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with every job's view as ``expected_view`` makes it (jobs of one spec at one progress share their
    raised estimates, read-only, as they share their estimates) and ``spot_expected`` set; ``snapshot`` itself when
    it has no spot configuration or is already expected. Idempotent: a policy may pass it on to another."""
    if snapshot.spot_expected or not spot_rates(snapshot.configs).any:
        return snapshot
    shared: dict[tuple[int, float], np.ndarray] = {}

    def view(jv: JobView) -> JobView:
        key = (id(jv.estimates), jv.done)
        est = shared.get(key)
        if est is None:
            est = shared[key] = expected_view(jv, snapshot).estimates
            est.setflags(write=False)
        return replace(jv, estimates=est)

    return replace(snapshot, waiting=tuple(map(view, snapshot.waiting)), running=tuple(map(view, snapshot.running)),
                   spot_expected=True)
