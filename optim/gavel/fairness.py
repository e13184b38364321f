"""The allocations of Gavel's isolated, max-min fairness (agnostic), finish-time fairness and total-duration
policies (POLICIES.md §1–§4 of the Gavel notes; ``docs/gavel.md``).

Arrays as in ``optim.gavel.allocation``: rows are the jobs in the allocation, columns the server types; ``rate``
in iterations per second (0 where a job cannot run), ``sf`` GPUs, ``gpus`` per type. Remaining work is in
iterations, ages in seconds since submission. A heterogeneity-agnostic policy passes one rate per job on every
type (1, or its rate on the reference type), as Gavel substitutes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from optim.gavel.ipm import solve as ecos_answer
from optim.gavel.lp import LeastHorizon, LeastShare, centre, max_min
from optim.gavel.packed_lp import Combos, ecos_finish_time

SLACK = 1e-6
"""Relative room above the least finish-time ratio, so that the allocations meeting it have an interior whose
centre approximates the centre of the optimal face (where only the bottleneck jobs are pinned)."""

__all__ = ["least_root", "newton_root", "isolated", "max_min_fairness_agnostic", "finish_time_fairness",
           "finish_time_ecos", "FinishTimeState", "min_total_duration", "horizon"]


def isolated(sf: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Gavel's ``isolated``: each of the m jobs gets 1/m of every type's GPUs, X[j,w] = (gpus[w]/m)/sf[j,w], a row
    scaled down to sum to 1 where it exceeds it."""
    n = sf.shape[0]
    if n == 0:
        return np.zeros(sf.shape)
    x = (gpus[None, :].astype(float) / n) / sf
    return x / np.maximum(1.0, x.sum(axis=1))[:, None]


def max_min_fairness_agnostic(sf: np.ndarray, gpus: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Gavel's ``max_min_fairness``: every throughput replaced by 1 (so every normalising throughput is 1),
    maximise min_j Σ_w sf[j,w]·X[j,w] / w_j; ECOS's answer (``optim.gavel.ipm``)."""
    if sf.shape[0] == 0:
        return np.zeros(sf.shape)
    sf = sf.astype(float)
    return ecos_answer(sf / weight[:, None], sf, gpus, np.zeros(len(sf)), with_t=True)[0]


class FinishTimeState:
    """What Gavel's finish-time fairness remembers between calls: per job, the isolated time it has used up (C_j),
    and its remaining work and isolated rate at the previous call."""

    def __init__(self) -> None:
        self.used: dict[int, float] = {}
        self.previous: dict[int, tuple[float, float]] = {}

    def update(self, ids: list[int], remaining: np.ndarray, iso: np.ndarray) -> np.ndarray:
        """C_j for this call: += (R at the previous call − R now) / isolated rate at the previous call, for jobs in
        the previous call; 0 for a job's first call. Records this call's R and rates."""
        used = np.zeros(len(ids))
        for k, j in enumerate(ids):
            before = self.previous.get(j)
            c = self.used.get(j, 0.0)
            if before is not None and before[1] > 0:
                c += (before[0] - float(remaining[k])) / before[1]
            used[k] = c
        self.used = dict(zip(ids, used.tolist()))
        self.previous = {j: (float(r), float(i)) for j, r, i in zip(ids, remaining, iso)}
        return used


def finish_time_fairness(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, age: np.ndarray,
                         remaining: np.ndarray, used: np.ndarray, iso: np.ndarray,
                         agnostic: bool = False) -> np.ndarray:
    """Gavel's ``finish_time_fairness[_perf]`` (Themis): minimise max_j ρ_j,

        ρ_j = (age_j + R_j / Σ_w rate[j,w]·X[j,w]) / (C_j + R_j / iso_j),

    ``iso`` the job's rate under ``isolated`` and ``used`` its C_j (``FinishTimeState``). For a given ρ every job
    needs a rate of at least r_j(ρ) = R_j / (ρ·D_j − age_j), D_j the denominator; the least feasible ρ is found by
    bracketing the max-min LP value s(ρ) = max_X min_j rate_j(X)/r_j(ρ) around 1 (``newton_root``: its slope
    comes from the LP's duals), and X is the interior-point answer at that ρ, started from the LP's vertex there.
    ``agnostic`` (one rate per job on every type, so only each job's total share matters) finds the least ρ in
    closed form."""
    n = rate.shape[0]
    if n == 0:
        return np.zeros(rate.shape)
    denom = used + remaining / iso
    lowest = age / denom
    if agnostic:
        r1 = rate[:, 0]
        s = sf.max(axis=1).astype(float)
        n_gpus = float(gpus.sum())

        def need(rho: float) -> np.ndarray:
            with np.errstate(divide="ignore"):
                return np.where(rho * denom > age, remaining / (r1 * (rho * denom - age)), np.inf)

        rho = float(np.max((age + remaining / r1) / denom))  # the least ρ with every job on its whole share
        if float(s @ need(rho)) > n_gpus:  # the GPUs bind: the ρ where the least shares use them all
            lo, hi = rho, 2.0 * rho
            while float(s @ need(hi)) > n_gpus:
                lo, hi = hi, 2.0 * hi
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if float(s @ need(mid)) > n_gpus else (lo, mid)
            rho = hi
        return centre(rate, sf, gpus, remaining / np.maximum(rho * (1.0 + SLACK) * denom - age, 1e-300), curved=True)

    lp = LeastShare(rate, sf, gpus)

    def value(rho: float) -> tuple[float, float]:
        room = rho * denom - age
        if (room <= 0).any():  # a job past its fair finish time at rho: no allocation meets it
            return 0.0, 0.0
        need = remaining / room
        s = lp.value(need)
        return s, -float(lp.gradient(need) @ (need * denom / room))  # d need_j / d rho = -need_j·D_j / room_j

    x_iso = isolated(sf, gpus)
    hi = float(np.max((age + remaining / np.maximum((rate * x_iso).sum(axis=1), 1e-300)) / denom))
    lo = float(np.max(lowest))
    hi = newton_root(value, lo, hi)  # isolated rates can lose to X clipped at 1: it widens hi until feasible
    rho = hi * (1.0 + SLACK)
    demand = remaining / (rho * denom - age)
    return centre(rate, sf, gpus, demand, curved=True, vertex=lp.optimum(demand))


def finish_time_ecos(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, age: np.ndarray, remaining: np.ndarray,
                     denom: np.ndarray) -> tuple[np.ndarray, int]:
    """Gavel's finish-time fairness (without packing) as its cvxpy hands the cone program to ECOS, and ECOS's answer
    (``optim.gavel.packed_lp.finish_time_cone`` with no pairs: the same rows and columns): (X clipped to [0, 1],
    ECOS's exit code; X is its best iterate, NaN where it has none, when the code is not 0 or 10). ``denom`` is each
    job's expected time under ``isolated`` (C_j + R_j / iso_j)."""
    n, m = rate.shape
    if n == 0:
        return np.zeros(rate.shape), 0
    none = np.zeros(0, dtype=np.int64)
    alone = Combos(rate, sf, none, none, np.zeros((0, m)), np.zeros((0, m)))
    return ecos_finish_time(alone, gpus, remaining, age, denom, sparse=True)


def horizon(best: float) -> float:
    """The horizon Gavel's bisection settles on when ``best`` is the least feasible one: it halves [100, 1e6] s
    (then [1e6, 1e7], …) until the ends are within 5 %, keeping the last feasible midpoint."""
    low, high, last_high = 100.0, 1e6, 1e6
    found = None
    while found is None:
        while 1.05 * low < high:
            mid = (low + high) / 2.0
            if mid >= best:
                found, high = mid, mid
            else:
                low = mid
        high, low = last_high * 10.0, last_high
        last_high *= 10.0
    return found


def min_total_duration(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, remaining: np.ndarray,
                       least: LeastHorizon | None = None, ids: list[int] | None = None) -> np.ndarray:
    """Gavel's ``min_total_duration[_perf]``: the least horizon T by which every active job can finish (each needs
    a rate of R_j/T), as Gavel's bisection finds it (``horizon``, up to 5 % above the least, which one HiGHS LP
    gives: ``least``, the run's model kept across recomputes, for the jobs ``ids``; a cold LP without it), and X the
    answer ECOS gives to Gavel's feasibility problem at that horizon (``optim.gavel.ipm``). The
    heterogeneity-agnostic policy passes every job's reference rate on every type."""
    n = rate.shape[0]
    if n == 0:
        return np.zeros(rate.shape)
    if least is not None and ids is not None:
        best = least.value(ids, rate, sf, gpus, remaining)
    else:
        best = max_min(rate / remaining[:, None], sf, gpus, ipm=False)[1]
    t = horizon(1.0 / best)
    return ecos_answer(rate, sf, gpus, remaining / t, with_t=False)[0]


def newton_root(value: Callable[[float], tuple[float, float]], lo: float, hi: float, tol: float = 1e-10) -> float:
    """The least ρ in (lo, ∞) with value(ρ) ≥ 1, value increasing in ρ and returning (value, slope; 0 where none):
    widen ``hi`` until it holds, then Newton steps from the last point evaluated (else from the other end of the
    bracket), Illinois regula falsi where neither lands inside, until the bracket is within ``tol`` of ``hi``.

    Newton steps are clamped half a tolerance inside the bracket, so that once a step lands on the root the next
    closes the bracket. It finds the root of ``least_root`` to the same tolerance (the two may differ in the last
    ten digits) with a third of its LP solves: the value is smooth between the kinks where the LP's basis changes,
    and steep next to ``lo``, where regula falsi creeps."""
    f_lo, d_lo = -1.0, 0.0
    v, d_hi = value(hi)
    f_hi = v - 1.0
    while f_hi < 0:
        lo, f_lo, d_lo, hi = hi, f_hi, d_hi, hi * 2.0
        v, d_hi = value(hi)
        f_hi = v - 1.0
    side = 0
    for _ in range(100):
        if hi - lo <= tol * hi:
            break
        delta = 0.5 * tol * hi
        mid = math.nan
        for x, fx, dx in ((hi, f_hi, d_hi), (lo, f_lo, d_lo)) if side >= 0 else ((lo, f_lo, d_lo), (hi, f_hi, d_hi)):
            step = x - fx / dx if dx > 0 else math.nan
            if lo < step < hi or (x == hi and lo < step and step >= hi - delta) or (
                    x == lo and step < hi and step <= lo + delta):
                mid = step
                break
        if math.isnan(mid):
            mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            if not lo < mid < hi:
                mid = 0.5 * (lo + hi)
        mid = min(max(mid, lo + delta), hi - delta)
        v, d_mid = value(mid)
        if v >= 1.0:
            hi, f_hi, d_hi = mid, v - 1.0, d_mid
            if side == 1:
                f_lo *= 0.5
            side = 1
        else:
            lo, f_lo, d_lo = mid, v - 1.0, d_mid
            if side == -1:
                f_hi *= 0.5
            side = -1
    return hi


def least_root(value: Callable[[float], float], lo: float, hi: float) -> float:
    """The least ρ in (lo, ∞) with value(ρ) ≥ 1, value increasing in ρ: widen ``hi`` until it holds, then Illinois
    regula falsi on value − 1 to a relative 1e-10."""
    f_lo, f_hi = -1.0, value(hi) - 1.0
    while f_hi < 0:
        lo, f_lo, hi = hi, f_hi, hi * 2.0
        f_hi = value(hi) - 1.0
    side = 0
    for _ in range(60):
        if hi - lo <= 1e-10 * hi:
            break
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if not lo < mid < hi:
            mid = 0.5 * (lo + hi)
        f_mid = value(mid) - 1.0
        if f_mid >= 0:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo *= 0.5
            side = 1
        else:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi *= 0.5
            side = -1
    return hi
