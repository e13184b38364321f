"""The LPs of Gavel's policies solved through HiGHS (``optim.gavel.lp``): the warm-started series of max-min values
that finish-time fairness's root finding evaluates, against hand-computed values and against cold solves."""

from __future__ import annotations

import numpy as np
import pytest

from optim.gavel.lp import LeastShare, max_min


def test_least_share_by_hand_through_a_series_of_needs():
    """Two jobs on one type of one GPU, each at rate 1: X1 + X2 <= 1, so max min X_j / need_j = 1 / (need1 + need2);
    on two GPUs each job can take its whole share, so the value is min_j 1 / need_j."""
    rate, sf = np.ones((2, 1)), np.ones((2, 1), dtype=np.int64)
    one = LeastShare(rate, sf, np.array([1]))
    for need, value in (((1.0, 1.0), 0.5), ((1.0, 3.0), 0.25), ((2.0, 2.0), 0.25), ((0.5, 0.5), 1.0)):
        assert one.value(np.array(need)) == pytest.approx(value, rel=1e-9)
    two = LeastShare(rate, sf, np.array([2]))
    for need, value in (((1.0, 4.0), 0.25), ((2.0, 0.5), 0.5), ((1.0, 1.0), 1.0)):
        assert two.value(np.array(need)) == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_least_share_warm_values_equal_cold_max_min_values(seed):
    """Each warm-started value of a series equals the cold max-min LP's optimum for the same needs (one LP with
    coefficients rate / need), on random jobs of 1, 2 and 4 GPUs over three types."""
    rng = np.random.default_rng(seed)
    n, m = 25, 3
    rate = rng.uniform(0.1, 5.0, (n, m)) * (rng.random((n, m)) > 0.15)
    rate[:, 0] = np.maximum(rate[:, 0], 0.1)
    sf = np.repeat(rng.choice([1, 2, 4], n)[:, None], m, axis=1)
    gpus = np.array([8, 6, 4])
    series = LeastShare(rate, sf, gpus)
    base = rng.uniform(0.5, 2.0, n)
    for scale in (1.0, 0.3, 3.0, 0.9, 1.1):
        need = base * scale * rng.uniform(0.9, 1.1, n)
        cold = max_min(rate / need[:, None], sf, gpus, ipm=False)[1]
        assert series.value(need) == pytest.approx(cold, rel=1e-7)


def test_least_share_gradient_by_hand_and_optimum():
    """Two jobs sharing one GPU at rate 1: s = 1 / (need1 + need2), so ∂s/∂need_j = −s²; the optimum's X gives each
    job exactly s·need_j of the GPU."""
    rate, sf = np.ones((2, 1)), np.ones((2, 1), dtype=np.int64)
    lp = LeastShare(rate, sf, np.array([1]))
    for need in ((1.0, 1.0), (1.0, 3.0), (0.2, 0.6)):
        need_a = np.array(need)
        s = lp.value(need_a)
        assert lp.gradient(need_a) == pytest.approx([-s * s, -s * s], rel=1e-9)
        x, s2 = lp.optimum(need_a)
        assert s2 == pytest.approx(s, rel=1e-12)
        assert x[:, 0] == pytest.approx(s * need_a, rel=1e-9)


@pytest.mark.parametrize("seed", range(2))
def test_least_share_gradient_matches_finite_differences(seed):
    """The dual-based gradient of s(need) equals a central finite difference along a random direction."""
    rng = np.random.default_rng(seed)
    n, m = 12, 3
    rate = rng.uniform(0.1, 5.0, (n, m))
    sf = np.repeat(rng.choice([1, 2], n)[:, None], m, axis=1)
    gpus = np.array([4, 3, 2])
    lp = LeastShare(rate, sf, gpus)
    need = rng.uniform(0.5, 2.0, n)
    direction = rng.uniform(-1.0, 1.0, n)
    eps = 1e-7
    lp.value(need)
    slope = float(lp.gradient(need) @ direction)
    up, down = lp.value(need + eps * direction), lp.value(need - eps * direction)
    assert slope == pytest.approx((up - down) / (2 * eps), rel=1e-4)


def _kinked(rho: float) -> tuple[float, float]:
    """An increasing value with a pole at rho = 1 and a kink at rho = 1.5: 1 − 0.01 / (rho − 1) below the kink, a
    line above; 1 is reached at rho = 2, past the kink."""
    if rho <= 1.0:
        return 0.0, 0.0
    if rho < 1.5:
        return 1.0 - 0.01 / (rho - 1.0), 0.01 / (rho - 1.0) ** 2
    return 0.98 + 0.04 * (rho - 1.5), 0.04


@pytest.mark.parametrize("value, lo, hi, root", [
    (lambda r: (r * r / 4.0, r / 2.0), 0.0, 1.0, 2.0),  # x² / 4 = 1: hi widened twice
    (lambda r: (1.5 - 0.01 / (r - 1.0), 0.01 / (r - 1.0) ** 2) if r > 1.0 else (0.0, 0.0), 1.0, 3.0, 1.02),
    (_kinked, 1.0, 4.0, 2.0),
])
def test_newton_root_finds_the_least_root_within_tolerance(value, lo, hi, root):
    """Hand-made increasing values (smooth; steep next to a pole at lo; kinked): the root is found to 1e-10 from the
    feasible side, as ``least_root`` finds it from the values alone."""
    from optim.gavel.fairness import least_root, newton_root

    found = newton_root(value, lo, hi)
    assert value(found)[0] >= 1.0 and found == pytest.approx(root, rel=1e-10)
    assert least_root(lambda r: value(r)[0], lo, hi) == pytest.approx(found, rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_centre_is_the_analytic_centre(seed):
    """The centre of {X : base constraints, rate_j·X_j ≥ demand_j} is strictly inside the set, and the barrier's
    gradient there is (nearly) zero."""
    from optim.gavel.lp import centre

    rng = np.random.default_rng(seed)
    n, m = 40, 3
    rate = rng.uniform(0.1, 5.0, (n, m))
    sf = np.repeat(rng.choice([1, 2], n)[:, None], m, axis=1).astype(float)
    gpus = np.array([12.0, 10.0, 8.0])
    demand = 0.9 * max_min(rate, sf, gpus, ipm=False)[1] * np.ones(n)
    x = centre(rate, sf, gpus, demand, curved=True)
    row, col, dem = 1.0 - x.sum(axis=1), gpus - (sf * x).sum(axis=0), (rate * x).sum(axis=1) - demand
    assert (x > 0).all() and (row > 0).all() and (col > 0).all() and (dem > 0).all()
    u = dem + demand
    grad = -1.0 / x + (1.0 / row)[:, None] - rate * (2.0 / dem - 1.0 / u)[:, None] + sf / col[None, :]
    assert np.abs(grad * x).max() < 1e-3  # scaled by X: the Newton decrement's own norm near X = 0


@pytest.mark.parametrize("seed, n", [(0, 80), (2, 80), (3, 30), (1, 30)])
def test_centre_stopping_at_the_rounding_keeps_the_answer(seed, n, monkeypatch):
    """Finish-time fairness on random 4:4:4 queues (its demands pin the bottleneck jobs within 1e-6, a thin set
    where the barrier's rounding stalls the line search): stopping there (``_STALL``) gives the allocation that
    running on in steps of 1e-10 gives, to 1e-9."""
    import optim.gavel.lp as lp
    from optim.gavel.fairness import finish_time_fairness, isolated

    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.1, 5.0, (n, 3))
    sf = np.repeat(rng.choice([1, 2, 4], n)[:, None], 3, axis=1).astype(float)
    gpus = np.array([4.0, 4.0, 4.0])
    remaining, age, used = rng.uniform(1e3, 1e5, n), rng.uniform(0, 2e4, n), rng.uniform(0, 1e3, n)
    iso = (rate * isolated(sf, gpus)).sum(axis=1)
    x = finish_time_fairness(rate, sf, gpus, age, remaining, used, iso)
    assert (x >= 0).all() and (x.sum(axis=1) <= 1 + 1e-9).all() and ((sf * x).sum(axis=0) <= gpus + 1e-9).all()
    monkeypatch.setattr(lp, "_STALL", 0.0)
    assert finish_time_fairness(rate, sf, gpus, age, remaining, used, iso) == pytest.approx(x, abs=1e-9)


def test_least_horizon_follows_arrivals_and_departures_as_cold_solves_do():
    """A run's series of least-horizon LPs (jobs leaving from anywhere, arriving at the end, work left shrinking,
    one job whose rates change, which rebuilds the model): each warm value equals the cold max-min LP's on
    rate / work left."""
    from optim.gavel.lp import LeastHorizon

    rng = np.random.default_rng(7)
    m, gpus = 3, np.array([6, 4, 4])
    jobs = {j: (rng.uniform(0.5, 5.0, m), float(rng.choice([1, 2]))) for j in range(40)}
    left = {j: rng.uniform(1e4, 1e6) for j in jobs}
    least = LeastHorizon()
    active = list(range(12))
    nxt = 12
    for step in range(8):
        if step == 5:
            jobs[active[2]] = (jobs[active[2]][0] * 1.5, jobs[active[2]][1])  # a kept job's rates change
        rate = np.array([jobs[j][0] for j in active])
        sf = np.array([[jobs[j][1]] * m for j in active])
        need = np.array([left[j] for j in active])
        cold = max_min(rate / need[:, None], sf, gpus, ipm=False)[1]
        assert least.value(active, rate, sf, gpus, need) == pytest.approx(cold, rel=1e-6)
        for j in active:
            left[j] *= 0.8
        active = [j for k, j in enumerate(active) if k % 4 != step % 4] + list(range(nxt, nxt + 3))
        nxt += 3


def test_both_ecos_replays_stop_on_an_infeasible_lp_with_its_certificate(monkeypatch):
    """Demands no schedule meets (three jobs wanting 1.5 GPUs' worth each from two GPUs): the block method
    (``ipm.solve``) and the sparse one (``ecos_lp``), which share ECOS's loop (``ipm.hsd_solve``), stop on the
    infeasibility certificate within a few steps, without the optimal flag."""
    import scipy.sparse as sp

    import optim.gavel.ipm as ipm
    from optim.gavel.ecos_lp import ecos_lp

    steps = []
    step = ipm.hsd_step
    monkeypatch.setattr(ipm, "hsd_step", lambda *a: steps.append(1) or step(*a))
    n, m = 3, 2
    a, sf, gpus, d = np.ones((n, m)), np.ones((n, m)), np.ones(m), np.full(n, 1.5)
    x, ok = ipm.solve(a, sf, gpus, d, with_t=False)
    assert not ok and 0 < len(steps) < 10
    jobs = np.repeat(np.eye(n), m, axis=1)  # row j: job j's columns
    types = np.tile(np.eye(m), n)  # row w: type w's columns
    g = sp.csr_matrix(np.vstack([-np.eye(n * m), jobs, types * sf.ravel(), -jobs * a.ravel()]))
    h = np.concatenate([np.zeros(n * m), np.ones(n), gpus, -d])
    steps.clear()
    y, ok = ecos_lp(g, h, np.zeros(n * m))
    assert not ok and 0 < len(steps) < 10
    feasible = np.full(n, 0.5)  # the same LP with demands it meets: both stop optimal
    assert ipm.solve(a, sf, gpus, feasible, with_t=False)[1]
    assert ecos_lp(g, np.concatenate([h[:-n], -feasible]), np.zeros(n * m))[1]
