"""Gavel's unpacked finish-time fairness (``finish_time_fairness[_perf]``) as the cone program cvxpy hands ECOS
(``optim.gavel.fairness.finish_time_ecos``, ``point: ecos``): the program row by row against cvxpy's, ECOS's answer
against ECOS's own, Gavel's runs job by job, and the failure paths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optim.gavel.ecos_cone import NUMERICS, OPTIMAL, OUTCONE, ecos_cone
from optim.gavel.fairness import finish_time_ecos
from optim.gavel.packed_lp import Combos, finish_time_cone

from .test_gavel_ecos_cone import TOLERANCE, captured, cvxpy_columns, rows

DATA = json.loads((Path(__file__).parent / "data" / "ecos_gavel_ftf.json").read_text())
CASES, FAILING = DATA["cases"], DATA["failing"]


def _inputs(case: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rate = np.array(case["rates"])
    sf = np.repeat(np.array(case["scale"], dtype=float)[:, None], rate.shape[1], axis=1)
    return (rate, sf, np.array(case["gpus"], dtype=float), np.array(case["age"]), np.array(case["remaining"]),
            np.array(case["isolated_time"]))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_replay_gives_ecos_answer_exit_and_iterations_on_gavels_unpacked_programs(case, sparse):
    """Gavel's programs of d.trace (1 to 26 jobs, both policies), as cvxpy hands them to ECOS: ECOS converged on
    each; the replay does too, in as many iterations (give or take one), at ECOS's x, with its Newton systems dense
    or sparse. On the one-job program the Newton system is singular at the last iteration (the job's X at a vertex),
    where the replay may stop one step short, "close to optimal", as ECOS does in such a case."""
    c = CASES[case]
    answer = ecos_cone(*captured(c), sparse=sparse)
    x = np.array(c["ecos"]["x"])
    assert c["ecos"]["exit"] == OPTIMAL and c["status"] == "optimal"
    assert answer.usable and abs(answer.iterations - c["ecos"]["iterations"]) <= 1
    assert answer.exit == OPTIMAL or len(c["q"]) == 1
    assert np.abs(answer.x - x).max() <= TOLERANCE * max(1.0, np.abs(x).max())


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_unpacked_program_is_the_packed_writer_without_pairs_and_is_cvxpys(case):
    """``finish_time_cone`` on the jobs alone (no pair columns) from the policy's inputs has cvxpy's rows, cone sizes
    and objective (columns mapped), and ``finish_time_ecos``'s X is ECOS's."""
    c = CASES[case]
    rate, sf, gpus, age, remaining, denom = _inputs(c)
    n, m = rate.shape
    none = np.zeros(0, dtype=np.int64)
    cost, g, h, nl, q = finish_time_cone(Combos(rate, sf, none, none, np.zeros((0, m)), np.zeros((0, m))), gpus,
                                         remaining, age, denom)
    col = cvxpy_columns(n, m, n, list(range(n)))
    theirs_c, theirs_g, theirs_h, theirs_l, theirs_q = captured(c)
    assert (nl, q) == (theirs_l, theirs_q)
    assert sorted(rows(g[:nl], h[:nl], col)) == sorted(rows(theirs_g.tocsr()[:nl], theirs_h[:nl], None))
    assert rows(g[nl:], h[nl:], col) == rows(theirs_g.tocsr()[nl:], theirs_h[nl:], None)
    mine = np.zeros(len(cost))
    mine[col] = cost
    assert mine == pytest.approx(theirs_c, rel=1e-12)
    x, code = finish_time_ecos(rate, sf, gpus, age, remaining, denom)
    theirs = np.array(c["ecos"]["x"])[1: 1 + n * m].reshape(m, n).T
    assert code == OPTIMAL
    assert np.abs(x - np.clip(theirs, 0.0, 1.0)).max() <= 2 * TOLERANCE  # 1.005e-4 at 26 jobs: the last bits


@pytest.mark.parametrize("sparse", [False, True])
def test_the_replay_breaks_down_where_ecos_broke_down_in_gavels_run(sparse):
    """The program at which Gavel's run of a held-out trace stops (ECOS leaves the cone at its 14th iteration, cvxpy
    raises): the replay's iterations end without an answer too (left the cone or numerical problems, both cvxpy's
    SolverError), so the policy records a fallback where Gavel crashes. ECOS breaks down at the end of its path,
    where the last bits decide; on other programs of that kind the replay may still converge."""
    c = FAILING[0]
    assert c["status"] == "solver_error" and c["ecos"]["exit"] == OUTCONE
    answer = ecos_cone(*captured(c), sparse=sparse)
    assert answer.exit in (OUTCONE, NUMERICS) and not answer.usable


def test_two_jobs_one_gpu_share_it_so_that_their_ratios_are_equal():
    """Two jobs of rate 1 on one GPU, age 0, R 100 and 300, expected isolated times 200 and 400: ratios
    (100/X_1)/200 and (300/X_2)/400; the largest is least where they are equal with the GPU full, X = (0.4, 0.6),
    both ratios 1.25."""
    x, code = finish_time_ecos(np.ones((2, 1)), np.ones((2, 1)), np.array([1.0]), np.zeros(2),
                               np.array([100.0, 300.0]), np.array([200.0, 400.0]))
    assert code == OPTIMAL
    assert x.ravel() == pytest.approx([0.4, 0.6], abs=1e-7)


def test_no_jobs_no_program():
    x, code = finish_time_ecos(np.zeros((0, 3)), np.zeros((0, 3)), np.ones(3), np.zeros(0), np.zeros(0), np.zeros(0))
    assert x.shape == (0, 3) and code == OPTIMAL


@pytest.mark.parametrize("policy", ["finish_time_fairness_perf", "finish_time_fairness"])
def test_point_ecos_reproduces_gavels_run_on_d_trace_job_by_job(policy):
    """With ECOS's point (the default) capsim's run of d.trace on 4:4:4 is Gavel's: every job's JCT within 1e-6 of
    Gavel's (the per-job files print three decimals), where the older ``centre`` point is 1-2 % off."""
    from studies.gavel_replay import agreement, replay

    a = agreement("d.trace", policy)
    err = (a["per_job"].jct / a["per_job"].gavel_jct - 1.0).abs()
    assert err.max() <= 1e-6
    old = agreement("d.trace", policy, replay("d.trace", policy, policy_params={"point": "centre"}))
    assert old["median_error"] > 1e-3


def test_point_ecos_takes_the_best_iterate_where_the_iterations_stop_short_and_records_it(monkeypatch):
    """Where the iterations stop short with a finite best iterate (here every exit reported as "left the cone"), that
    iterate is the allocation and the plan records the fallback: the run is the default's, job by job."""
    import optim.gavel.policies as gp
    from studies.gavel_replay import replay

    real = gp.finish_time_ecos
    monkeypatch.setattr(gp, "finish_time_ecos", lambda *args: (real(*args)[0], -3))
    r = replay("d.trace", "finish_time_fairness_perf")
    fell = r.decisions[r.decisions.fallback.notna()]
    assert len(fell) > 0 and (fell.fallback == "ecos_best_iterate").all()
    assert fell.reason.str.contains("left the cone, exit code -3", regex=False).all()
    monkeypatch.setattr(gp, "finish_time_ecos", real)
    default = replay("d.trace", "finish_time_fairness_perf")
    assert default.decisions.fallback.isna().all()
    assert r.jobs.set_index("job_id").jct.equals(default.jobs.set_index("job_id").jct)


@pytest.mark.parametrize("module, solver, policy", [
    ("optim.gavel.policies", "finish_time_ecos", "finish_time_fairness"),
    ("optim.gavel.packed_policies", "ecos_finish_time", "finish_time_fairness_packed"),
])
def test_out_of_iterations_the_iterate_is_used_as_gavel_uses_it_and_no_fallback_is_recorded(monkeypatch, module,
                                                                                            solver, policy):
    """ECOS out of iterations (exit −1): cvxpy reports ``user_limit`` and hands back ECOS's iterate, which Gavel
    uses; so does capsim, without recording a fallback (here every exit reported as −1: the default run), for the
    unpacked and the packed finish-time policies alike."""
    import importlib

    from studies.gavel_replay import replay

    where = importlib.import_module(module)
    real = getattr(where, solver)
    monkeypatch.setattr(where, solver, lambda *args: (real(*args)[0], -1))
    r = replay("d.trace", policy)
    assert r.decisions.fallback.isna().all()
    monkeypatch.setattr(where, solver, real)
    default = replay("d.trace", policy)
    assert r.jobs.set_index("job_id").jct.equals(default.jobs.set_index("job_id").jct)


def test_point_ecos_falls_back_to_the_centre_point_without_an_iterate_and_to_isolated_where_infeasible(monkeypatch):
    """No finite iterate (numerical problems): the ``centre`` point, recorded, and the run is ``point: centre``'s.
    ECOS's infeasibility certificate: cvxpy leaves X without a value and Gavel takes ``isolated``'s allocation,
    not a fallback of capsim's (nothing recorded); every job still finishes once."""
    import optim.gavel.policies as gp
    from studies.gavel_replay import replay

    monkeypatch.setattr(gp, "finish_time_ecos", lambda rate, *args: (np.full(rate.shape, np.nan), -2))
    r = replay("d.trace", "finish_time_fairness")
    fell = r.decisions[r.decisions.fallback.notna()]
    assert len(fell) > 0 and (fell.fallback == "centre").all()
    assert fell.reason.str.contains("numerical problems").all()
    centre = replay("d.trace", "finish_time_fairness", policy_params={"point": "centre"})
    assert r.jobs.set_index("job_id").jct.equals(centre.jobs.set_index("job_id").jct)

    monkeypatch.setattr(gp, "finish_time_ecos", lambda rate, *args: (np.full(rate.shape, np.nan), 1))
    iso = replay("d.trace", "finish_time_fairness_perf")
    assert iso.decisions.fallback.isna().all()
    assert len(iso.jobs) == 40 and iso.jobs.end_time.notna().all() and iso.jobs.job_id.is_unique


def test_point_keeps_the_policy_contract_and_an_unknown_point_is_refused_by_name():
    from optim.gavel.policies import FinishTimeFairness, FinishTimeFairnessPerf
    from sim.model import CapsimError
    from sim.testing import check_policy

    assert FinishTimeFairnessPerf().get_params()["point"] == "ecos"
    check_policy(FinishTimeFairnessPerf())
    check_policy(FinishTimeFairness(point="centre"))
    with pytest.raises(CapsimError, match="point must be one of 'ecos', 'centre', got 'interior'"):
        FinishTimeFairnessPerf(point="interior")
