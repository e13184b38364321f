"""Themis (Mahajan et al., NSDI'20) as ElasticFlow's simulator runs it: finish-time fairness in 60 s leases, rigid
jobs.

Every round, with the n runnable jobs: find shares ``0 <= x_i <= 1`` with ``sum g_i x_i <= N`` minimising the largest
finish-time fairness ``rho_i = (t - submit_i + left_i / (T_i x_i)) / (iso_i + left_i / f_i)``, where ``f_i =
min(1, ceil(N / n) / g_i)`` (the code's "isolated throughput" is this fraction) and ``iso_i`` accumulates the
iterations done divided by that round's ``f_i``; ``t`` is the time of the last round that had an event (as coded).
Jobs are taken in decreasing ``x_i`` and run while their GPUs fit.

ElasticFlow solves the program with ECOS through cvxpy. Here it is solved exactly: the least achievable maximum
``r*`` by bisection (``x_i(r) = left_i / (T_i (r B_i - A_i))`` falls with r). Where the GPU constraint binds at r*,
the shares are unique (``min(1, x_i(r*))``). Where it does not (one job's fairness at x = 1 sets r*), every share
between ``x_i(r*)`` and 1 is optimal and an interior-point solver returns one near the analytic centre of that set;
capsim returns that centre (``log`` barriers on both bounds and on the GPU constraint). Its order of the jobs is what
matters, and ECOS's own answer there depends on its version and tolerances: no reimplementation can match it bit for
bit (see docs/elasticflow.md).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from optim.base import register
from sim.elasticflow.vocabulary import LasView, ReplayCluster, ReplayPolicy, RigidPlan

__all__ = ["Themis", "fair_shares"]


@register("themis")
class Themis(ReplayPolicy):
    """Finish-time fair leases (see the module docstring)."""

    clock: ClassVar[str] = "lease"

    def reset(self, cluster: ReplayCluster) -> None:
        self._iso: dict[int, float] = {}
        self._prev: dict[int, tuple[float, float]] = {}

    def decide(self, view: LasView) -> RigidPlan:  # type: ignore[override]
        jobs = view.runnable
        n_gpus = view.cluster.gpus
        share = math.ceil(n_gpus / len(jobs))
        a, b, c, g = [], [], [], []
        for s in jobs:
            f = min(1.0, share / s.job.gpus)
            iso = self._iso.get(s.id, 0.0)
            if s.id in self._prev:
                left, f_prev = self._prev[s.id]
                iso += (left - s.left) / f_prev
            self._iso[s.id] = iso
            self._prev[s.id] = (s.left, f)
            a.append(view.time - s.job.submit)
            b.append(iso + s.left / f)
            c.append(s.left / s.job.rate(s.job.gpus))
            g.append(s.job.gpus)
        if sum(g) <= n_gpus:  # every job fits: whatever the shares, all run (the order is kept)
            return RigidPlan(tuple(s.id for s in jobs), order=tuple(s.id for s in jobs))
        x = fair_shares(a, b, c, g, n_gpus)
        ranked = sorted(range(len(jobs)), key=lambda i: x[i], reverse=True)
        free = n_gpus
        run = []
        for i in ranked:
            if free <= 0:
                break
            if g[i] <= free:
                run.append(jobs[i].id)
                free -= g[i]
        return RigidPlan(tuple(run), order=tuple(jobs[i].id for i in ranked))


def fair_shares(a: list[float], b: list[float], c: list[float], g: list[int], n: int) -> list[float]:
    """Shares minimising ``max_i (a_i + c_i / x_i) / b_i`` subject to ``0 <= x <= 1`` and ``sum g x <= n`` (see the
    module docstring for the choice among equally good answers)."""
    av, bv, cv, gv = (np.asarray(v, dtype=float) for v in (a, b, c, g))
    lo_r = float(np.max((av + cv) / bv))

    def need(r: float) -> np.ndarray:
        d = r * bv - av
        with np.errstate(divide="ignore"):
            return np.where(d <= 0, 1.0, np.minimum(1.0, cv / np.where(d <= 0, 1.0, d)))

    if float(gv @ need(lo_r)) > n:
        # f(r) = sum g x(r) - n falls and is convex in r: Newton's steps from the left never overshoot the root
        r = lo_r
        for _ in range(100):
            x = need(r)
            over = float(gv @ x) - n
            if over <= 1e-9 * n:
                break
            d = r * bv - av
            slope = float(np.sum(np.where(x < 1.0, gv * cv * bv / (d * d), 0.0)))
            step = over / slope if slope > 0 else r
            r += step
            if step <= 1e-13 * r:
                break
        return need(r).tolist()
    return _centre(need(lo_r), gv, n).tolist()


def _centre(floor: np.ndarray, g: np.ndarray, n: int) -> np.ndarray:
    """The analytic centre of ``floor_i <= x_i <= 1``, ``sum g x <= n`` (a share already at 1 stays at 1)."""
    free = floor < 1.0
    if not free.any():
        return floor
    fixed = float(g[~free].sum())
    w = 1.0 - floor[free]
    gf = g[free]

    def shares(mu: float) -> tuple[np.ndarray, np.ndarray]:
        """The free shares at multiplier ``mu`` (each a root of ``mu g u (w - u) = w - 2u``) and their slopes."""
        k = mu * gf
        p = 2.0 + k * w
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(k <= 1e-15, w / 2, (p - np.sqrt(np.maximum(p * p - 4.0 * k * w * w, 0.0))) / (2.0 * k))
        du = -gf * u * (w - u) / (k * (w - 2.0 * u) + 2.0)
        return floor[free] + u, du

    # mu * slack(mu) = 1 (the barrier's stationarity): safeguarded Newton steps on a bracket
    lo, hi = 0.0, 1.0
    while True:
        x, _ = shares(hi)
        if hi * (n - fixed - float(gf @ x)) >= 1.0 or hi > 1e12:
            break
        lo, hi = hi, 2 * hi
    mu = hi
    for _ in range(60):
        x, du = shares(mu)
        slack = n - fixed - float(gf @ x)
        f = mu * slack - 1.0
        if abs(f) <= 1e-10:
            break
        if f < 0:
            lo = mu
        else:
            hi = mu
        slope = slack - mu * float(gf @ du)
        nxt = mu - f / slope if slope > 0 else (lo + hi) / 2
        mu = nxt if lo < nxt < hi else (lo + hi) / 2
        if hi - lo <= 1e-12 * hi:
            break
    x, _ = shares(mu)
    out = floor.copy()
    out[free] = x
    return out
