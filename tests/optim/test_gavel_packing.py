"""Gavel's packing policies: the allocations by hand (``fifo_packed``'s pass, threshold and dropped queue head;
Gandiva's pairing and introspection) and the pair table."""

from __future__ import annotations

import random

import numpy as np
import pytest

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
