"""Gavel's packing policies: the allocations by hand (``fifo_packed``'s pass, threshold and dropped queue head;
Gandiva's pairing and introspection) and the pair table."""

from __future__ import annotations

import random

import numpy as np
import pytest

from optim.gavel.fill import fill
from optim.gavel.packed_alloc import GandivaPairs, fifo_packed, normalized_pair_rate
from optim.gavel.pairs import PairTable


def test_fifo_packed_places_in_order_then_packs_above_the_threshold():
    """One type, two GPUs, four 1-GPU jobs at rate 1: jobs 0 and 1 take the GPUs. Job 2 packs with the partner of the
    largest normalised pair rate (job 1: 0.9 + 0.9 = 1.8 > 0.8 + 0.8); job 3's only pair left is with job 0, at 1.4,
    under 1.5: packing stops there, job 3 waits."""
    rate = np.ones((4, 1))
    sf = np.ones((4, 1), dtype=int)
    pa, pb = np.array([0, 1, 0]), np.array([2, 2, 3])
    tpa, tpb = np.array([[0.8], [0.9], [0.7]]), np.array([[0.8], [0.9], [0.7]])
    xs, xp = fifo_packed(rate, sf, np.array([2]), np.array([0]), pa, pb, tpa, tpb)
    assert xs[:, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert xp[:, 0].tolist() == [0.0, 1.0, 0.0]
    xs, xp = fifo_packed(rate, sf, np.array([2]), np.array([0]), pa, pb, tpa, tpb, threshold=1.3)
    assert xs[:, 0].tolist() == [0.0, 0.0, 0.0, 0.0] and xp[:, 0].tolist() == [0.0, 1.0, 1.0]


def test_fifo_packed_takes_the_fastest_type_with_room_and_drops_the_job_that_stops_the_pass():
    """Types (a, b) with 2 and 1 GPUs (b listed first by name): job 0 (faster on b) takes b, job 1 a; job 2 takes 2
    GPUs and fits nowhere while a has one free: it ends the pass and, as in Gavel, is dropped from the queue, so job
    3 is packed (with job 1, its best partner) instead of taking a's free GPU, which stays idle (Gavel's defect)."""
    rate = np.array([[1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    sf = np.array([[1, 1], [1, 1], [2, 2], [1, 1]])
    pa, pb = np.array([0, 1]), np.array([3, 3])
    tpa = np.array([[0.7, 1.0], [0.9, 0.9]])
    tpb = np.array([[0.7, 0.7], [0.9, 0.9]])
    xs, xp = fifo_packed(rate, sf, np.array([2, 1]), np.array([1, 0]), pa, pb, tpa, tpb)
    assert xs.tolist() == [[0, 1], [0, 0], [0, 0], [0, 0]]
    assert xp.tolist() == [[0, 0], [1, 0]], "job 3 with job 1 on a (1.8); with job 0 on b only 1.2"


def test_gandiva_pairs_from_the_seed_as_python_does_and_splits_what_cannot_share():
    """Five 1-GPU jobs on two GPUs do not fit, so Gandiva pairs them with random.Random(seed).sample; each
    combination gets an equal share (2 GPUs / 3 combinations); a paired job gets none of its own. A pair scoring
    under 1 (it may not share some type) is split at the next call and its jobs drawn again."""
    ids = [0, 1, 2, 3, 4]
    index = {(a, b): k for k, (a, b) in enumerate((a, b) for a in ids for b in ids if a < b)}
    pairing = GandivaPairs(seed=7)
    xs, xp = pairing.allocate(ids, np.ones((5, 2)), np.array([1, 1]), index, lambda a, b: 2.0, len(index))
    rng, alone, expect = random.Random(7), list(ids), {}
    for _ in range(5):
        if len(alone) <= 1:
            break
        a, b = rng.sample(alone, 2)
        alone.remove(a), alone.remove(b)
        expect[a], expect[b] = b, a
    assert {j: o for j, o in pairing.partner.items() if o is not None} == expect
    single = next(j for j in ids if j not in expect)
    assert xs[single] == pytest.approx([1 / 3, 1 / 3]) and (xs[list(expect)] == 0).all()
    for a, b in ((a, b) for a, b in expect.items() if a < b):
        assert xp[index[(a, b)]] == pytest.approx([1 / 3, 1 / 3])
    assert np.count_nonzero(xp.sum(axis=1)) == 2
    bad = min(expect)
    pairing.allocate(ids, np.ones((5, 2)), np.array([1, 1]), index,
                     lambda a, b: 0.0 if bad in (a, b) else 2.0, len(index))
    assert bad in pairing.partner and expect[bad] in pairing.partner, "the split pair's jobs are drawn again"
    kept = {j: o for j, o in pairing.partner.items() if o is not None}
    for a, b in ((a, b) for a, b in expect.items() if bad not in (a, b)):
        assert kept[a] == b, "a pair that scores 1 or more is kept"


def test_gandiva_while_jobs_fit_gives_equal_shares_and_no_pairs():
    xs, xp = GandivaPairs(seed=0).allocate([3, 5], np.ones((2, 2)), np.array([1, 1]), {(3, 5): 0},
                                           lambda a, b: 2.0, 1)
    assert xs == pytest.approx(np.full((2, 2), 0.5)) and (xp == 0).all()


def test_normalized_pair_rate_sums_over_types_and_is_zero_where_a_type_cannot_share():
    rate = np.array([[2.0, 1.0], [4.0, 2.0]])
    tpa = np.array([[1.0, 0.5], [1.0, 0.0]])
    tpb = np.array([[2.0, 1.0], [2.0, 1.0]])
    g = normalized_pair_rate(rate, np.array([0, 0]), np.array([1, 1]), tpa, tpb)
    assert g.tolist() == [pytest.approx(0.5 + 0.5 + 0.5 + 0.5), 0.0]


def test_pair_table_forgets_every_pair_of_a_job_that_leaves():
    p = PairTable(2)
    for k, (a, b) in enumerate(((1, 2), (1, 3), (2, 3))):
        p.add(a, b, np.ones(2), np.ones(2), k)
    p.drop_job(1)
    assert set(p.row) == {(2, 3)} and p.live().tolist() == [2]
    assert p.of[2] == {(2, 3)} and p.of[3] == {(2, 3)}
    for k in range(100):
        p.add(10 + k, 200, np.ones(2), np.ones(2), 10 + k)
    p.drop_job(200)
    assert p.live().tolist() == [p.row[(2, 3)]] and p.seq[p.row[(2, 3)]] == 2


def _gavel_lp(a: np.ndarray, sf: np.ndarray, gpus: np.ndarray, d: np.ndarray, with_t: bool):
    """The LP of ``optim.gavel.ipm`` as a sparse G x ≤ h (x ≥ 0 rows, capacity, shares, bounds)."""
    import scipy.sparse as sp

    n, m = a.shape
    nx = n * m
    col = np.arange(nx)
    blocks = [sp.coo_matrix((-np.ones(nx), (col, col)), shape=(nx, nx)),
              sp.coo_matrix((sf.ravel(), (np.tile(np.arange(m), n), col)), shape=(m, nx)),
              sp.coo_matrix((np.ones(nx), (np.repeat(np.arange(n), m), col)), shape=(n, nx)),
              sp.coo_matrix((-a.ravel(), (np.repeat(np.arange(n), m), col)), shape=(n, nx))]
    g = sp.vstack(blocks)
    cost = np.zeros(nx)
    if with_t:
        t = sp.coo_matrix((np.ones(n), (nx + m + n + np.arange(n), np.zeros(n, dtype=int))), shape=(g.shape[0], 1))
        g, cost = sp.hstack([g, t]), np.concatenate([cost, [-1.0]])
    return g, np.concatenate([np.zeros(nx), gpus, np.ones(n), -d]), cost


@pytest.mark.parametrize("with_t", [True, False])
def test_the_sparse_ecos_method_takes_the_steps_of_the_block_one(with_t):
    """On an LP both can solve (Gavel's LP without pairs), the sparse ECOS method and the per-job block one
    (``optim.gavel.ipm``, checked against ECOS itself) return the same point, where the optimum is not unique."""
    from optim.gavel.ecos_lp import ecos_lp
    from optim.gavel.ipm import solve

    rng = np.random.default_rng(3)
    a = rng.uniform(0.1, 2.0, (6, 3))
    sf, gpus = np.ones((6, 3)), np.array([2.0, 1.0, 2.0])
    d = np.zeros(6) if with_t else rng.uniform(0.05, 0.2, 6)
    want, ok = solve(a, sf, gpus, d, with_t)
    x, ok2 = ecos_lp(*_gavel_lp(a, sf, gpus, d, with_t))
    assert ok and ok2
    assert np.clip(x[:18].reshape(6, 3), 0, 1) == pytest.approx(want, abs=1e-8)


def test_max_min_with_a_pair_by_hand():
    """Two jobs, one GPU: alone each gets half the GPU (rate 1/2 each); packed at 0.8 of their own rates each gets
    0.8. The max-min value is 0.8 (the pair all the time); in the feasibility form a demand of 0.7 each is met only
    by running the pair most of the time."""
    from optim.gavel.packed_lp import Combos, ecos_packed, max_min_packed

    c = Combos(np.ones((2, 1)), np.ones((2, 1), dtype=int), np.array([0]), np.array([1]), np.array([[0.8]]),
               np.array([[0.8]]))
    x, s = max_min_packed(c, np.array([1]), np.ones(2), ipm=False)
    assert s == pytest.approx(0.8) and x[2, 0] == pytest.approx(1.0)
    x = ecos_packed(c, np.array([1]), np.ones(2), None)
    assert x[2, 0] == pytest.approx(1.0, abs=1e-6)
    x = ecos_packed(c, np.array([1]), np.ones(2), np.array([0.7, 0.7]))
    rate = x[:2, 0] + 0.8 * x[2, 0]
    assert (rate >= 0.7 - 1e-7).all() and x[:, 0].sum() <= 1 + 1e-7 and x[2, 0] > 0.5


def test_the_warm_least_share_follows_each_need_from_its_last_basis():
    """The two jobs of the test above, one GPU, the pair at 0.8. Needs (1, 1): the pair all the time, s = 0.8. Needs
    (1, 2): job 1 alone a share a, the pair the rest; 0.8(1 − a) = (0.8 + 0.2a)/2 at a = 4/9, s = 4/9; (2, 1) the
    same mirrored; back to (1, 1). One model re-solved for each, as a new model solves it."""
    from optim.gavel.packed_lp import Combos, LeastPackedShare, max_min_packed

    c = Combos(np.ones((2, 1)), np.ones((2, 1), dtype=int), np.array([0]), np.array([1]), np.array([[0.8]]),
               np.array([[0.8]]))
    warm = LeastPackedShare(c, np.array([1]))
    for need, want in (((1, 1), 0.8), ((1, 2), 4 / 9), ((2, 1), 4 / 9), ((1, 1), 0.8)):
        need = np.array(need, dtype=float)
        assert warm.value(need) == pytest.approx(want, rel=1e-12)
        assert max_min_packed(c, np.array([1]), np.ones(2), need, ipm=False)[1] == pytest.approx(want, rel=1e-12)
    # near needs (1, 2) job 1's share a = 0.8(n1 − n0)/(0.8 n1 + 0.2 n0) gives s = 0.8 / (0.8 n1 + 0.2 n0): the
    # gradient from the duals is (−0.16, −0.64) / 1.8²
    warm.value(np.array([1.0, 2.0]))
    assert warm.gradient() == pytest.approx([-0.16 / 1.8 ** 2, -0.64 / 1.8 ** 2], rel=1e-9)


def test_the_lp_packing_policies_refuse_a_mix_of_gpu_counts_as_gavel_fails():
    """Gavel's LP packing policies crash (or mis-attach constraints) once jobs of different GPU counts are active;
    capsim refuses with one clear error naming the corrected model. One GPU count alone, or as many jobs of each
    count (every job then in as many combinations, so Gavel's reshape is right), is fine."""
    from optim.gavel.packed_lp import mixed_scale_refusal
    from sim.model import CapsimError

    with pytest.raises(CapsimError, match="7 of 1 GPU, 1 of 4 GPUs.*Invalid reshape.*'mmf_packed_mixed'"):
        mixed_scale_refusal("mmf_packed", "mmf_packed_mixed", np.array([[1, 1]] * 7 + [[4, 4]]))
    mixed_scale_refusal("p", "q", np.array([[2, 2]] * 3))
    mixed_scale_refusal("p", "q", np.array([[1, 1]] * 2 + [[4, 4]] * 2))
    with pytest.raises(CapsimError):
        mixed_scale_refusal("p", "q", np.array([[1, 1]] * 3 + [[2, 2]] * 2))


def test_fill_takes_offers_that_fit_and_whose_jobs_are_free_until_each_type_is_full():
    """Two types visited 1 then 0, with 2 and 3 free GPUs. Type 1: job 5 (1 GPU), the pair 5+6 (job 5 placed:
    skipped), a 2-GPU job 7 (does not fit in the 1 left), job 8 (1 GPU: full; the offer after it is never read).
    Type 0: job 8 again (placed: skipped), the pair 6+9 (1 GPU), job 7 (2 GPUs: full)."""
    def offers(w: int):
        if w == 1:
            yield from [(0, 5, 5, 1), (1, 5, 6, 1), (2, 7, 7, 2), (3, 8, 8, 1)]
            raise AssertionError("read past a full type")
        yield from [(4, 8, 8, 1), (5, 6, 9, 1), (6, 7, 7, 2), (7, 10, 10, 1)]

    left = np.array([3, 2])
    placed: set[int] = set()
    assert fill([1, 0], left, offers, placed) == [(0, 1), (3, 1), (5, 0), (6, 0)]
    assert left.tolist() == [0, 0] and placed == {5, 6, 7, 8, 9}
    asked: list[int] = []
    assert fill([0, 1], np.array([0, 1]), lambda w: asked.append(w) or [], set()) == [] and asked == [1]


def test_finish_time_fairness_packed_warm_keeps_the_policy_contract_and_refuses_a_non_bool():
    """``warm: true`` runs the same checks as every policy (invariants, clone replays its decisions); ``warm`` must
    be a bool."""
    from optim.gavel.packed_policies import FinishTimeFairnessPacked
    from sim.model import CapsimError
    from sim.testing import check_policy

    check_policy(FinishTimeFairnessPacked(warm=True))
    with pytest.raises(CapsimError, match="warm must be true or false, got 'yes'"):
        FinishTimeFairnessPacked(warm="yes")  # type: ignore[arg-type]


def test_the_packed_centre_is_the_analytic_centre_with_ecos_cone_weighting():
    """One job at rate 2 on one GPU, need 0.5: the barrier log x + 2·log(1 − x) (its share and the GPU) + 2·log(2x −
    0.5) − log(2x) has its minimum where 2/(1 − x) = 4/(2x − 0.5), x = 5/8. Two jobs sharing one GPU with a pair at
    0.8 each, needs 0.5: the answer is symmetric, strictly inside every constraint, and the barrier (written out here)
    is stationary there. Needs that take all there is leave no interior: the max-min LP's vertex."""
    from optim.gavel.packed_lp import Combos, centre_packed, max_min_packed

    none = np.zeros(0, dtype=int)
    one = Combos(np.array([[2.0]]), np.ones((1, 1), dtype=int), none, none, np.zeros((0, 1)), np.zeros((0, 1)))
    assert centre_packed(one, np.array([1]), np.array([0.5]))[0, 0] == pytest.approx(0.625, abs=1e-7)

    two = Combos(np.ones((2, 1)), np.ones((2, 1), dtype=int), np.array([0]), np.array([1]), np.array([[0.8]]),
                 np.array([[0.8]]))
    x = centre_packed(two, np.array([1]), np.array([0.5, 0.5]))[:, 0]
    assert x[0] == pytest.approx(x[1], rel=1e-9)

    def barrier(v: np.ndarray) -> float:
        a0, a1, p = v
        rates = np.array([a0 + 0.8 * p, a1 + 0.8 * p])
        return -(np.log(v).sum() + np.log(1 - a0 - p) + np.log(1 - a1 - p) + np.log(1 - a0 - a1 - p)
                 + 2 * np.log(rates - 0.5).sum() - np.log(rates).sum())

    assert (x > 0).all() and x[0] + x[1] + x[2] < 1 and x[0] + 0.8 * x[2] > 0.5
    h = 1e-6
    grad = [(barrier(x + h * e) - barrier(x - h * e)) / (2 * h) for e in np.eye(3)]
    assert np.abs(grad) == pytest.approx(np.zeros(3), abs=1e-4)

    too_much = np.array([1.25, 1.25])  # the pair all the time gives 0.8 each: s = 0.64
    vertex, s = max_min_packed(two, np.array([1]), np.ones(2), too_much, ipm=False)
    assert s == pytest.approx(0.64) and np.array_equal(centre_packed(two, np.array([1]), too_much), vertex)


def test_finish_time_fairness_packed_centre_keeps_the_policy_contract_and_refuses_an_unknown_point():
    """``point: centre`` runs the same checks as every policy, with and without ``warm``; other points are refused by
    name."""
    from optim.gavel.packed_policies import FinishTimeFairnessPacked
    from sim.model import CapsimError
    from sim.testing import check_policy

    check_policy(FinishTimeFairnessPacked(point="centre"))
    check_policy(FinishTimeFairnessPacked(point="centre", warm=True))
    with pytest.raises(CapsimError, match="point must be one of 'interior', 'centre', 'ecos', got 'center'"):
        FinishTimeFairnessPacked(point="center")
