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

from sim.elastic import REPLAY_POLICIES, JobStatus, LasView, ReplayCluster, ReplayPolicy, RigidPlan

__all__ = ["Themis", "fair_shares"]


@REPLAY_POLICIES.register("themis")
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


def _rho(a: float, b: float, c: float, x: float) -> float:
    return (a + c / x) / b


def fair_shares(a: list[float], b: list[float], c: list[float], g: list[int], n: int) -> list[float]:
    """Shares minimising ``max_i (a_i + c_i / x_i) / b_i`` subject to ``0 <= x <= 1`` and ``sum g x <= n`` (see the
    module docstring for the choice among equally good answers)."""
    m = len(a)
    lo_r = max(_rho(a[i], b[i], c[i], 1.0) for i in range(m))

    def need(r: float) -> list[float]:
        out = []
        for i in range(m):
            d = r * b[i] - a[i]
            out.append(1.0 if d <= 0 else min(1.0, c[i] / d))
        return out

    def used(r: float) -> float:
        return sum(gi * xi for gi, xi in zip(g, need(r)))

    if used(lo_r) > n:
        lo, hi = lo_r, max(lo_r * 2, 1.0)
        while used(hi) > n:
            hi *= 2
        for _ in range(200):
            mid = (lo + hi) / 2
            if used(mid) > n:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
        return need(hi)
    floor = need(lo_r)
    return _centre(floor, g, n)


def _centre(floor: list[float], g: list[int], n: int) -> list[float]:
    """The analytic centre of ``floor_i <= x_i <= 1``, ``sum g x <= n`` (a share already at 1 stays at 1)."""
    free = [i for i, f in enumerate(floor) if f < 1.0]
    fixed = sum(g[i] for i, f in enumerate(floor) if f >= 1.0)

    def shares(mu: float) -> list[float]:
        out = list(floor)
        for i in free:
            w = 1.0 - floor[i]
            k = mu * g[i]
            if k <= 1e-15:
                u = w / 2
            else:
                p = 2.0 + k * w
                u = (p - math.sqrt(max(p * p - 4.0 * k * w * w, 0.0))) / (2.0 * k)
            out[i] = floor[i] + u
        return out

    def slack(mu: float) -> float:
        return n - fixed - sum(g[i] * x for i, x in enumerate(shares(mu)) if i in set(free))

    if not free:
        return list(floor)
    lo, hi = 0.0, 1.0
    while hi * slack(hi) < 1.0:
        hi *= 2
        if hi > 1e12:
            break
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid * slack(mid) < 1.0:
            lo = mid
        else:
            hi = mid
    return shares(hi)
