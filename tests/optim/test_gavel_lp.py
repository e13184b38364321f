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
