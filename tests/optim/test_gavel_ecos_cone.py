"""ECOS's iterations on second-order cone programs (``optim.gavel.ecos_cone``) and Gavel's finish-time fairness
with packing as that cone program (``finish_time_cone``, ``point: ecos``): against ECOS's own answers to Gavel's
problems, on hand-computed cases, and on ECOS's failure exits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from optim.gavel.ecos_cone import CLOSE_TO_OPTIMAL, OPTIMAL, PINF, ecos_cone
from optim.gavel.packed_lp import Combos, ecos_finish_time, finish_time_cone

CASES = json.loads((Path(__file__).parent / "data" / "ecos_gavel_ftf_packed.json").read_text())["cases"]
TOLERANCE = 1e-4
"""How close the replay's x comes to ECOS's, relative to max(1, |x|): the iterations agree to ECOS's printed digits
until the last few, where ECOS's sparse LDL factorisation and this module's dense Schur complement round apart (up to
5e-5 on these cases; the same arithmetic summed in another order moves the replay's x by as much)."""


def cvxpy_columns(n: int, m: int, size: int, order: list[int]) -> np.ndarray:
    """Where each column of ``finish_time_cone`` is among cvxpy's: t (or, with one job, v), X column-major over Gavel's
    combinations (``order``: each capsim combination's place there), then v."""
    with_t = n > 1
    col = np.empty(size * m + n + int(with_t), dtype=np.int64)
    ci, wi = np.divmod(np.arange(size * m), m)
    col[int(with_t): int(with_t) + size * m] = 1 + wi * size + np.array(order)[ci]
    if with_t:
        col[0] = 0
        col[1 + size * m:] = 1 + size * m + np.arange(n)
    else:
        col[size * m] = 0
    return col


def rows(mat: sp.spmatrix, rhs: np.ndarray, cols: np.ndarray | None) -> list:
    """Each row as its entries (on the columns ``cols`` maps them to) and right-hand side, rounded to 12 digits."""
    mat = sp.csr_matrix(mat)
    out = []
    for r in range(mat.shape[0]):
        lo, hi = mat.indptr[r], mat.indptr[r + 1]
        idx = mat.indices[lo:hi] if cols is None else cols[mat.indices[lo:hi]]
        out.append((tuple(sorted(zip(idx.tolist(), np.round(mat.data[lo:hi], 12).tolist()))), round(rhs[r], 12)))
    return out


def captured(case: dict) -> tuple:
    """The captured program as ``ecos_cone`` takes it: c, G, h, linear rows, cone sizes."""
    g = case["G"]
    return (np.array(case["c"]), sp.coo_matrix((g["data"], (g["row"], g["col"])), shape=g["shape"]),
            np.array(case["h"]), case["l"], case["q"])


def _inputs(case: dict) -> tuple[Combos, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """capsim's Combos from Gavel's flattened throughputs (rates[i][combination][type] of single job i), and where
    each capsim combination (jobs, then pairs) is in Gavel's order."""
    singles, combos, rates = case["singles"], [tuple(c) for c in case["combos"]], np.array(case["rates"])
    pos = {j: i for i, j in enumerate(singles)}
    n, m = len(singles), rates.shape[2]
    rate = np.array([rates[pos[j], combos.index((j, None))] for j in singles])
    pairs = [(k, a, b) for k, (a, b) in enumerate(combos) if b is not None]
    pa = np.array([pos[a] for _, a, _ in pairs], dtype=np.int64)
    pb = np.array([pos[b] for _, _, b in pairs], dtype=np.int64)
    tpa = np.array([rates[pos[a], k] for k, a, _ in pairs]).reshape(-1, m)
    tpb = np.array([rates[pos[b], k] for k, _, b in pairs]).reshape(-1, m)
    order = [combos.index((j, None)) for j in singles] + [k for k, _, _ in pairs]
    return (Combos(rate, np.ones((n, m)), pa, pb, tpa, tpb), np.array(case["gpus"], dtype=float),
            np.array(case["remaining"]), np.array(case["age"]), np.array(case["isolated_time"]), order)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_replay_gives_ecos_answer_and_exit_on_gavels_cone_programs(case):
    """Gavel's finish-time fairness with packing on d.trace (1, 2, 7 and 18 jobs), as cvxpy hands it to ECOS: the
    same x, an answer cvxpy hands back, and where ECOS converged the same exit in the same number of iterations
    (give or take one: the last iterations follow the last bits). At 18 jobs ECOS's own arithmetic gave NaN at its
    last iteration (its log: "Reached NAN dead end, recovering best iterate (27)"), so it returned the iterate before
    as "close to optimal"; the replay's last iterate there may be finite and optimal."""
    c = CASES[case]
    answer = ecos_cone(*captured(c))
    x = np.array(c["ecos"]["x"])
    assert answer.usable
    if c["ecos"]["exit"] == OPTIMAL:
        assert answer.exit == OPTIMAL and abs(answer.iterations - c["ecos"]["iterations"]) <= 1
    else:
        assert answer.exit in (OPTIMAL, CLOSE_TO_OPTIMAL) and abs(answer.iterations - c["ecos"]["iterations"]) <= 3
    assert np.abs(answer.x - x).max() <= TOLERANCE * max(1.0, np.abs(x).max())
    assert answer.usable == (c["status"] in ("optimal", "optimal_inaccurate"))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_capsims_cone_program_is_cvxpys_with_its_rows_and_columns_reordered(case):
    """``finish_time_cone`` from the policy's inputs: cvxpy's rows (each as its entries on the columns mapped to
    cvxpy's, and its right-hand side), cone sizes and objective, and ECOS's answer on it is ECOS's X."""
    c = CASES[case]
    combos, gpus, remaining, age, denom, order = _inputs(c)
    cost, g, h, nl, q = finish_time_cone(combos, gpus, remaining, age, denom)
    n, m, size = combos.n, combos.m, combos.size
    col = cvxpy_columns(n, m, size, order)
    theirs_c, theirs_g, theirs_h, theirs_l, theirs_q = captured(c)
    assert (nl, q) == (theirs_l, theirs_q)
    lin = slice(0, nl)
    assert sorted(rows(g[lin], h[lin], col)) == sorted(rows(theirs_g.tocsr()[lin], theirs_h[lin], None))
    assert rows(g[nl:], h[nl:], col) == rows(theirs_g.tocsr()[nl:], theirs_h[nl:], None)  # the cones in job order
    mine = np.zeros(len(cost))
    mine[col] = cost
    assert mine == pytest.approx(theirs_c, rel=1e-12)
    x, code = ecos_finish_time(combos, gpus, remaining, age, denom)
    theirs = np.array(c["ecos"]["x"])[1: 1 + size * m].reshape(m, size).T[order]
    assert code in (OPTIMAL, CLOSE_TO_OPTIMAL)
    assert np.abs(x - np.clip(theirs, 0.0, 1.0)).max() <= TOLERANCE


def test_one_job_takes_every_type_it_can_and_its_ratio_is_the_objective():
    """One job, rates 2 and 1 on two types of one GPU each: its rate is greatest with X = 1 on the faster type
    (its share is at most 1), so its finish time (age + R/2)/E is the least ratio."""
    c = Combos(np.array([[2.0, 1.0]]), np.ones((1, 2)), np.zeros(0, np.int64), np.zeros(0, np.int64),
               np.zeros((0, 2)), np.zeros((0, 2)))
    cost, g, h, nl, q = finish_time_cone(c, np.array([1.0, 1.0]), np.array([100.0]), np.array([10.0]),
                                        np.array([80.0]))
    answer = ecos_cone(cost, g, h, nl, q)
    assert answer.exit == OPTIMAL
    assert answer.x[:2] == pytest.approx([1.0, 0.0], abs=1e-7)
    assert answer.x[2] == pytest.approx(0.5, rel=1e-7), "v = 1/u"
    assert (10.0 + 100.0 * answer.x[2]) / 80.0 == pytest.approx((10.0 + 100.0 / 2.0) / 80.0, rel=1e-7)


def test_a_pair_that_runs_faster_together_takes_the_one_gpu():
    """Two equal jobs (rate 1 alone, 0.75 each in their pair) and one GPU: alone they share it (rate 0.5 each), paired
    they run at 0.75 each; the least largest ratio has the pair all the time, X = (0, 0, 1), t = R/(0.75 E)."""
    c = Combos(np.ones((2, 1)), np.ones((2, 1)), np.array([0]), np.array([1]), np.full((1, 1), 0.75),
               np.full((1, 1), 0.75))
    remaining, age, denom = np.array([30.0, 30.0]), np.zeros(2), np.array([60.0, 60.0])
    x, code = ecos_finish_time(c, np.array([1.0]), remaining, age, denom)
    assert code == OPTIMAL and x.ravel() == pytest.approx([0.0, 0.0, 1.0], abs=1e-7)
    cost, g, h, nl, q = finish_time_cone(c, np.array([1.0]), remaining, age, denom)
    assert ecos_cone(cost, g, h, nl, q).x[0] == pytest.approx(30.0 / (0.75 * 60.0), rel=1e-7)


def test_equality_rows_and_a_larger_cone():
    """min x0 s.t. x1 = 3, x2 = 4 (equality rows), ‖(x1, x2)‖ ≤ x0 (a 3-row cone): x = (5, 3, 4)."""
    g = sp.csc_matrix(-np.eye(3))
    a = sp.csc_matrix(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    answer = ecos_cone(np.array([1.0, 0.0, 0.0]), g, np.zeros(3), 0, [3], a, np.array([3.0, 4.0]))
    assert answer.exit == OPTIMAL and answer.x == pytest.approx([5.0, 3.0, 4.0], rel=1e-7)


def test_an_infeasible_program_is_reported_as_ecos_reports_it_and_is_not_usable():
    """x ≥ 1 and x ≤ 0: ECOS's certificate of primal infeasibility (exit 1), which cvxpy does not hand back."""
    answer = ecos_cone(np.array([1.0]), sp.csc_matrix(np.array([[-1.0], [1.0]])), np.array([-1.0, 0.0]), 2, [])
    assert answer.exit == PINF and not answer.usable


def test_point_ecos_falls_back_to_the_interior_point_and_records_it_when_ecos_would_fail(monkeypatch):
    """Where ECOS would stop without an answer (Gavel's simulator crashes there), the round takes the ``interior``
    answer and its plan records the fallback and why; every job still finishes once."""
    import optim.gavel.packed_policies as pp
    from studies.gavel_replay import replay

    def failing(c, *args):
        return np.full((c.size, c.m), np.nan), -2

    monkeypatch.setattr(pp, "ecos_finish_time", failing)
    r = replay("d.trace", "finish_time_fairness_packed")
    assert len(r.jobs) == 40 and r.jobs.end_time.notna().all() and r.jobs.job_id.is_unique
    fell = r.decisions[r.decisions.fallback.notna()]
    assert len(fell) > 0 and (fell.fallback == "interior").all()
    assert fell.reason.str.contains("numerical problems, exit code -2", regex=False).all()
    assert r.summary["colocated_share"] > 0


def test_point_ecos_takes_the_best_iterate_where_the_iterations_stop_short_and_records_it(monkeypatch):
    """Where the iterations stop short (numerical problems, leaving the cone: cvxpy raises) with a finite best
    iterate, that iterate is the allocation, recorded as a fallback: here every exit is reported as "left the cone"
    and the run is the default's, job by job."""
    import optim.gavel.packed_policies as pp
    from studies.gavel_replay import replay

    real = pp.ecos_finish_time
    monkeypatch.setattr(pp, "ecos_finish_time", lambda *args: (real(*args)[0], -3))
    r = replay("d.trace", "finish_time_fairness_packed")
    fell = r.decisions[r.decisions.fallback.notna()]
    assert len(fell) > 0 and (fell.fallback == "ecos_best_iterate").all()
    assert fell.reason.str.contains("left the cone").all()
    monkeypatch.setattr(pp, "ecos_finish_time", real)
    default = replay("d.trace", "finish_time_fairness_packed")
    assert r.jobs.set_index("job_id").jct.equals(default.jobs.set_index("job_id").jct)


def test_point_ecos_keeps_the_policy_contract_and_idle_pairs_is_checked():
    from optim.gavel.packed_policies import FinishTimeFairnessPacked, MaxMinFairnessPacked
    from sim.model import CapsimError
    from sim.testing import check_policy

    check_policy(FinishTimeFairnessPacked())
    check_policy(FinishTimeFairnessPacked(idle_pairs=False))
    with pytest.raises(CapsimError, match="idle_pairs"):
        MaxMinFairnessPacked(idle_pairs="yes")


@pytest.mark.parametrize("idle_pairs", [True, False])
def test_the_lp_packing_policies_keep_pairs_that_may_share_no_type_as_gavel_does(monkeypatch, idle_pairs):
    """Gavel's LPs carry every pair of active jobs of the same GPU count, also pairs with rate 0 on every type
    (d.trace has some): with ``idle_pairs`` (the default) the LP sees them, without it none."""
    import optim.gavel.packed_policies as pp
    from studies.gavel_replay import replay

    seen = []
    real = pp.MinTotalDurationPacked.solve

    def solve(self, table, rows, c, gpus):
        seen.append(int(((c.tpa <= 0) & (c.tpb <= 0)).all(axis=1).sum()))
        return real(self, table, rows, c, gpus)

    monkeypatch.setattr(pp.MinTotalDurationPacked, "solve", solve)
    r = replay("d.trace", "min_total_duration_packed", 0, {"idle_pairs": idle_pairs})
    assert r.jobs.end_time.notna().all()
    assert (max(seen) > 0) == idle_pairs
