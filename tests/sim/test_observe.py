"""Estimates that sharpen as a job runs: what the engine shows an estimator that observes (``sim.run.observe``) and
what the ``online`` estimator makes of it (``predictors.uncertainty.online``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from predictors import build
from predictors.uncertainty.online import OnlinePredictor, run_to_run_variation
from sim.contracts import Progress
from sim.engine import Simulation
from sim.model import Assignment, Job, Plan
from tests.sim.helpers import A, B, Scripted, cluster, job, preempt_job0_at_10, table

# The truth says A takes 100 s (100 iterations) on a small VM; the estimator's base says 200 s.
TRUTH = table()
WRONG = table(A_small_1=200.0, A_big_1=200.0, B_small_1=100.0, B_big_1=100.0)


class Recording(OnlinePredictor):
    """Online with no observation error (what it shows is the engine's exact pace), keeping what it was shown."""

    def refine(self, job, estimates, progress):
        self.seen.append((job.id, progress))
        return super().refine(job, estimates, progress)


def exact(base=WRONG, **kw) -> Recording:
    p = Recording(base, drift=0.0, iteration_cv=0.0, **kw)
    p.seen = []
    return p


def _first_fit(s):
    free = [n.index for n in s.nodes if n.used_gpus == 0]
    return Plan(vms={n: "small" for n in free[:len(s.waiting)]},
                start=tuple(Assignment(j.id, n, 1) for j, n in zip(s.waiting, free)))


def test_a_running_job_is_seen_at_its_true_pace_by_hand() -> None:
    policy = Scripted(_first_fit)
    est = exact()
    Simulation(cluster(2), [job(0, A, 0.0), job(1, B, 30.0)], policy, est, TRUTH).run()
    at30 = next(s for s in policy.seen if s.time == 30.0)
    (a,) = at30.running
    k = a.config
    assert est.seen[0] == (0, Progress(k, 30, 30, 30.0, 30.0))  # 30 of 100 iterations in 30 s of the true 100 s
    assert a.done == pytest.approx(0.30) and a.since == 30.0
    assert a.estimates[k] == pytest.approx(100.0)        # the whole job at the pace seen, not the base's 200 s
    assert a.remaining_at(30.0) == pytest.approx(70.0) and a.remaining_at(50.0) == pytest.approx(50.0)
    other = [c for c in range(len(at30.configs)) if c != k]
    assert all(a.estimates[c] == WRONG.runtime(A, at30.configs[c].vm, at30.configs[c].gpus) for c in other)
    # the first decision came before any iteration: nothing observed, the base's answer
    first = policy.seen[0]
    assert not first.running and np.array_equal(first.waiting[0].estimates, WRONG.runtimes([A], first.configs)[0])
    assert all(p.time > 0 for _, p in est.seen)


def test_transfer_scales_every_configuration_by_the_ratio_seen() -> None:
    policy = Scripted(_first_fit)
    Simulation(cluster(2), [job(0, A, 0.0), job(1, B, 30.0)], policy, exact(transfer=True), TRUTH).run()
    (a,) = next(s for s in policy.seen if s.time == 30.0).running
    assert np.allclose(a.estimates, np.array(WRONG.runtimes([A], a_configs(policy)))[0] * 0.5)


def a_configs(policy):
    return policy.seen[0].configs


def test_window_zero_is_the_base_alone_byte_for_byte() -> None:
    jobs = [job(0, A, 0.0), job(1, B, 10.0), job(2, A, 20.0)]
    plain = Simulation(cluster(1), jobs, Scripted(preempt_job0_at_10, preempt=True), WRONG, TRUTH).run()
    off = Simulation(cluster(1), jobs, Scripted(preempt_job0_at_10, preempt=True), OnlinePredictor(WRONG, window=0),
                     TRUTH).run()
    for a, b in ((plain.jobs, off.jobs), (plain.nodes, off.nodes), (plain.segments, off.segments)):
        pd.testing.assert_frame_equal(a, b)


def test_a_preempted_job_waits_with_what_was_seen_and_records_keep_the_base_estimate() -> None:
    policy = Scripted(preempt_job0_at_10, preempt=True)
    r = Simulation(cluster(1), [job(0, A, 0.0), job(1, B, 10.0), job(2, B, 12.0)], policy, exact(), TRUTH).run()
    at12 = next(s for s in policy.seen if s.time == 12.0)
    waiting = {j.id: j for j in at12.waiting}
    k = policy.seen[0].configs.index(next(c for c in policy.seen[0].configs if c.vm.name == "small"))
    assert waiting[0].estimates[k] == pytest.approx(100.0)  # seen at t=10 (10 iterations in 10 s), kept
    assert waiting[0].done == pytest.approx(0.10)
    assert r.jobs.set_index("job_id").loc[0, "est_runtime"] == 200.0  # the base's answer, as known before it ran


def test_the_observed_pace_errs_as_stated() -> None:
    """Many jobs observed over a window of 25 iterations: the mean |error| of the remaining time is the stated
    expected error, and the draws are a function of what was seen."""
    on = OnlinePredictor(WRONG, window=25, iteration_cv=0.1, drift=0.02, seed=7)
    errs = []
    for i in range(4000):
        p = Progress(0, 40, 40, 40.0, 40.0)  # the pace seen: 1 s per iteration, so the truth is 100 s
        row = on.refine(Job(i, A, 0.0, 1e9, 0.01), np.array([200.0, 200.0, 100.0]), p)
        errs.append(row[0] / 100.0 - 1.0)
    assert np.mean(np.abs(errs)) == pytest.approx(on.expected_error(A, 25), rel=0.05)
    assert on.expected_error(A, 25) == pytest.approx(math.sqrt(2 / math.pi) * math.hypot(0.02 / math.sqrt(2 / math.pi),
                                                                                           0.1 / 5), rel=0.02)
    again = on.refine(Job(3, A, 0.0, 1e9, 0.01), np.array([200.0, 200.0, 100.0]), Progress(0, 40, 40, 40.0, 40.0))
    assert again[0] == pytest.approx(100.0 * (1 + errs[3]))


def test_round_mode_observes_the_credited_iterations() -> None:
    policy = Scripted(_first_fit)
    est = exact()
    Simulation(cluster(1, round_length=30.0), [job(0, A, 0.0)], policy, est, TRUTH).run()
    first = [s for s in policy.seen if s.running][0].running[0]
    assert est.seen[0][1].iterations == 30 and est.seen[0][1].run_iterations == 30
    assert first.estimates[first.config] == pytest.approx(100.0) and first.done == pytest.approx(0.30)


def test_run_to_run_variation_is_the_evaluations_noise_floor() -> None:
    from predictors.evaluation import noise_floor
    from predictors.measurements import runs

    df = runs()
    floor = noise_floor(df)
    mine = (df["application"] == "alexnet") & (df["framework"] == "pytorch")
    table_ = run_to_run_variation()
    assert table_["alexnet_pt"] == pytest.approx(float(np.nanmean(floor[mine.to_numpy()])))
    assert table_["deepspeech_tf"] > 5 * table_["vgg19_tf"]  # DeepSpeech's short runs vary most
    on = build("online", base={"kind": "measured"})
    assert on.job_drift(A) == table_["alexnet_pt"]
    assert on.job_drift(A.__class__("bert", "pytorch", 10, 8)) == table_["*"]


def test_online_refuses_bad_settings() -> None:
    for bad in ({"window": -1}, {"window": 2.5}, {"iteration_cv": -0.1}, {"drift": "typical"}, {"transfer": 1}):
        with pytest.raises(Exception, match="predictor 'online'"):
            build("online", base={"kind": "measured"}, **bad)
    with pytest.raises(Exception, match="already observes"):
        build("online", base={"kind": "online", "base": {"kind": "measured"}})


def test_a_co_located_job_is_seen_at_its_pace_alone_as_its_pair_is_estimated() -> None:
    """A (100 s alone by the truth, 200 s by the base) runs alone from 0; B joins it at 10 (true slowdowns 2 and 1.5);
    C's arrival at 50 asks for a decision. By then A has done 0.1 + 40 / 200 = 0.3 of its work: 30 iterations that
    took 60 s at the shared pace. Told the true slowdown 2, the observer sees 30 s of A alone (estimate 100 s); told
    1.5, it sees 40 s (133.3 s): the correction is only as good as the interference estimate. Never the 200 s of the
    slowed pace taken for A's own."""
    from predictors.interference.explicit import GivenPairs
    from tests.sim.test_colocation import PAIRS, Pairing

    def script(s):
        if not s.running and s.waiting:
            return Plan(vms={0: "small"}, start=(Assignment(s.waiting[0].id, 0, 1),))
        if any(j.id == 1 for j in s.waiting):
            return Plan(start=(Assignment(1, 0, 1, partner=0),))
        return Plan()

    jobs = [job(0, A, 0.0), job(1, B, 10.0), job(2, A, 50.0)]
    for told, alone in ((PAIRS, 100.0), (GivenPairs({"A+B": [1.5, 1.5]}), 400.0 / 3.0)):
        policy, est = Pairing(script, share=True), exact()
        Simulation(cluster(1, jobs_per_gpu=2), jobs, policy, est, TRUTH, interference=told,
                   true_interference=PAIRS).run()
        at50 = next(s for s in policy.seen if s.time == 50.0)
        a = next(jv for jv in at50.running if jv.id == 0)
        assert a.partner == 1 and a.done == pytest.approx(0.3)
        assert (0, Progress(a.config, 30, 30, pytest.approx(30.0 * alone / 100.0), 50.0)) in est.seen
        assert a.estimates[a.config] == pytest.approx(alone)
