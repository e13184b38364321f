"""Co-location in the engine: a job started on another's GPUs (``Assignment.partner``) runs at its co-located pace
from then on, its partner's completion moves, and the records say who shared with whom; hand-computed cases.

Runtimes alone (``tests.sim.helpers``): A 100 s, B 50 s on ``small`` (1 K80, $0.001/s). With A+B slowdowns (2, 1.5),
A does 1/200 of its work per second next to B and B 1/75 of its own next to A.
"""

from __future__ import annotations

import math
from typing import ClassVar

import pytest

from predictors.interference.explicit import GivenPairs
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, Plan, Snapshot
from tests.sim.helpers import SMALL, A, B, Scripted, cluster, job, table

PAIRS = GivenPairs({"A+B": [2.0, 1.5], "A+A": [1.8, 1.8], "B+B": [1.2, 1.2]})


class Pairing(Scripted):
    """A scripted policy that may co-locate jobs."""

    may_colocate: ClassVar[bool] = True


def run(script, jobs, *, truth=PAIRS, estimator=None, n=1, preempt=False, **rules):
    policy = Pairing(script, preempt=preempt, share=True)
    sim = Simulation(cluster(n, jobs_per_gpu=2, **rules), jobs, policy, table(),
                     interference=estimator if estimator is not None else truth,
                     true_interference=truth if estimator is not None else None)
    return sim.run(), policy


def _by_job(r):
    return r.jobs.set_index("job_id")


def test_a_partner_slows_both_and_its_departure_speeds_the_other_up():
    """A runs alone 0-10 (done 0.1); B joins at 10: B needs 50 x 1.5 = 75 s and ends at 85, while A does 75/200 =
    0.375 more; alone again, A needs 0.525 x 100 = 52.5 s and ends at 137.5. The VM's $0.1375 splits by GPU-seconds,
    a shared second counting half: A 10 + 37.5 + 52.5 = 100 s ($0.1), B 37.5 s."""
    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "small"}, start=(Assignment(0, 0, 1),))
        if s.waiting:
            return Plan(start=(Assignment(1, 0, 1, partner=0),))
        return Plan()

    r, policy = run(script, [job(0, A, 0.0), job(1, B, 10.0)])
    j = _by_job(r)
    assert (j.loc[1, "start_time"], j.loc[1, "end_time"]) == (10.0, 85.0)
    assert j.loc[0, "end_time"] == pytest.approx(137.5)
    assert j.loc[0, "cost_share"] == pytest.approx(0.1) and j.loc[1, "cost_share"] == pytest.approx(0.0375)
    seg = r.segments.sort_values(["job_id", "start_time"])
    assert list(seg.job_id) == [0, 0, 0, 1]
    assert list(seg.start_time) == [0.0, 10.0, 85.0, 10.0]
    assert list(seg.partner.astype(object).fillna(-1)) == [-1, 1, -1, 0]
    assert list(seg.done) == pytest.approx([0.1, 0.475, 1.0, 1.0])
    assert r.nodes.busy_gpu_seconds.iloc[0] == pytest.approx(137.5)
    assert r.summary["gpu_utilisation"] == pytest.approx(1.0)
    assert r.summary["colocated_share"] == pytest.approx(150 / 212.5)
    at85 = next(snap for snap in policy.seen if snap.time == 85.0)  # A alone again, its view renewed
    shown = {jv.id: jv for jv in at85.running}
    assert shown[0].partner is None and shown[0].since == 85.0 and shown[0].done == pytest.approx(0.475)


def test_a_pair_started_together_in_one_plan_in_any_order():
    """Both start at 0 on one GPU (B named first, its partner A later in the plan): B ends at 75; A does 0.375 by
    then and ends at 75 + 62.5."""
    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "small"}, start=(Assignment(1, 0, 1, partner=0), Assignment(0, 0, 1)))
        return Plan()

    r, _ = run(script, [job(0, A, 0.0), job(1, B, 0.0)])
    j = _by_job(r)
    assert j.loc[1, "end_time"] == 75.0 and j.loc[0, "end_time"] == pytest.approx(137.5)
    assert len(r.nodes) == 1 and r.nodes.gpus.iloc[0] == 1


def test_preempting_one_of_a_pair_lets_the_other_run_alone():
    """A and B share from 0. At 20 job 2 (B) arrives; the plan preempts B (done 20/75) and starts job 2 alone on a
    second node. A, at 0.1 by then, runs alone: ends at 20 + 90 = 110; B restarts there and needs (1 - 4/15) x 50."""
    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
        if s.time == 20.0:
            return Plan(vms={1: "small"}, preempt=(1,), start=(Assignment(2, 1, 1),))
        if s.waiting and s.nodes[0].used_gpus == 0:
            return Plan(start=(Assignment(1, 0, 1),), keep_idle=frozenset({0}))
        return Plan(keep_idle=frozenset({0}) if s.waiting else frozenset())

    r, _ = run(script, [job(0, A, 0.0), job(1, B, 0.0), job(2, B, 20.0)], n=2, preempt=True)
    j = _by_job(r)
    assert j.loc[0, "end_time"] == pytest.approx(110.0)
    assert j.loc[1, "end_time"] == pytest.approx(110.0 + (1 - 20 / 75) * 50)
    assert j.loc[1, "runs"] == 2


def test_partners_ending_at_one_instant_leave_one_segment_each():
    """With slowdowns (1, 2) A (100 s) and B (2 x 50 s) both end at 100: the one that ends second was re-paced at
    that very instant, and its segment is completed rather than followed by an empty one."""
    r, _ = run(lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
               if s.time == 0 else Plan(), [job(0, A, 0.0), job(1, B, 0.0)], truth=GivenPairs({"A+B": [1.0, 2.0]}))
    assert list(r.jobs.end_time) == [100.0, 100.0]
    assert len(r.segments) == 2 and list(r.segments.done) == [1.0, 1.0]
    assert list(r.segments.start_time) == [0.0, 0.0] and list(r.segments.end_time) == [100.0, 100.0]


def test_a_pair_in_round_mode_is_one_micro_task_ending_with_its_later_member():
    """Rounds of 60 s, A (100 iterations, 2 s each next to B) and B (50, 1.5 s each) paired from 0. Round 1: 30 and
    40 iterations, both end at 60. Round 2: A 30 (ends 120), B its last 10 (ends 75), but the pair's micro-task
    ends at 120, and so does B. Round 3: A alone, its last 40 iterations at 1 s: 160."""
    r, _ = run(lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
               if s.time == 0 else Plan(), [job(0, A, 0.0), job(1, B, 0.0)], round_length=60.0)
    j = _by_job(r)
    assert j.loc[1, "end_time"] == 120.0 and j.loc[0, "end_time"] == 160.0
    assert list(r.decisions.time) == [0.0, 60.0, 120.0]


def test_the_policy_sees_the_estimators_pace_and_the_engine_runs_the_truths():
    """Told (1.25, 1.1), A's view shows pace 1.25; B really takes 75 s (truth 1.5), not 55."""
    told = GivenPairs({"A+B": [1.25, 1.1]})
    seen: list[Snapshot] = []

    def script(s: Snapshot) -> Plan:
        seen.append(s)
        if s.time == 0:
            return Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
        return Plan()

    r, _ = run(script, [job(0, A, 0.0), job(1, B, 0.0)], estimator=told)
    assert _by_job(r).loc[1, "end_time"] == 75.0
    s = seen[0]
    assert s.colocation is not None and s.colocation.slowdowns(A, B, 0) == (1.25, 1.1)
    later = {jv.id: jv for jv in seen[1].running} if len(seen) > 1 else {}
    assert not later or later[0].pace == 1.0


@pytest.mark.parametrize(("plan", "rule"), [
    (Plan(vms={0: "big"}, start=(Assignment(0, 0, 2), Assignment(1, 0, 1, partner=0))), "same GPUs"),
    (Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0),
                                   Assignment(2, 0, 1, partner=0))), "partner of two jobs"),
    (Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=1))), "not another job"),
    (Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=7))), "not another job"),
    (Plan(vms={0: "small"}, start=(Assignment(0, 0, 1, partner=1), Assignment(1, 0, 1, partner=0))),
     "itself co-located"),
    (Plan(vms={0: "small", 1: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 1, 1, partner=0))), "same GPUs"),
    (Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1), Assignment(2, 0, 1, partner=0))),
     "more than its small has"),
])
def test_plans_breaking_the_co_location_rule_are_rejected(plan, rule):
    with pytest.raises(CapsimError, match=rule):
        run(lambda s: plan if s.time == 0 else Plan(), [job(0, A, 0.0), job(1, B, 0.0), job(2, B, 0.0)], n=2)


def test_a_pair_whose_memory_does_not_fit_or_that_is_not_known_may_not_share():
    """A K80 die has 12 GiB: A (8) and B (5) do not fit together, so the view shows inf and the plan is refused;
    the pair A+A, not in the model, cannot share either."""
    tight = GivenPairs({"A+B": [2.0, 1.5]}, memory={"A": 8.0, "B": 5.0})
    with pytest.raises(CapsimError, match="may not share"):
        run(lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
            if s.time == 0 else Plan(), [job(0, A, 0.0), job(1, B, 0.0)], truth=tight)
    with pytest.raises(CapsimError, match="may not share"):
        run(lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
            if s.time == 0 else Plan(), [job(0, A, 0.0), job(1, A, 0.0)], truth=GivenPairs({"A+B": [2.0, 1.5]}))


def test_co_location_needs_the_policy_the_cluster_and_the_model_together():
    plan = Plan(vms={0: "small"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1, partner=0)))
    jobs = [job(0, A, 0.0), job(1, B, 0.0)]
    with pytest.raises(CapsimError, match="may_colocate"):
        Simulation(cluster(1, jobs_per_gpu=2), jobs, Scripted(lambda s: plan, share=True), table(),
                   interference=PAIRS).run()
    with pytest.raises(CapsimError, match="jobs_per_gpu 1"):
        Simulation(cluster(1), jobs, Pairing(lambda s: plan, share=True), table()).run()
    with pytest.raises(CapsimError, match="give both or neither"):
        Simulation(cluster(1), jobs, Pairing(lambda s: plan), table(), interference=PAIRS)
    with pytest.raises(CapsimError, match="give both or neither"):
        Simulation(cluster(1, jobs_per_gpu=2), jobs, Pairing(lambda s: plan), table())
    with pytest.raises(CapsimError, match="jobs_per_gpu must be 1"):
        cluster(1, jobs_per_gpu=3)


def test_without_co_location_the_records_have_no_partner():
    r = Simulation(cluster(1), [job(0, A, 0.0)], Scripted(lambda s: Plan(vms={0: "small"}, start=(
        Assignment(0, 0, 1),)) if s.waiting else Plan()), table()).run()
    assert r.segments.partner.isna().all() and r.summary["colocated_share"] == 0.0
    assert math.isclose(r.summary["gpu_utilisation"], 1.0)


def test_two_jobs_of_one_spec_keep_the_models_order_however_often_asked():
    """A pair of one spec with unequal slowdowns ("A+A": 1.3 for the first, 2.5 for the second) answers the same
    every time, to the engine and the policy alike (a cache that stored both orders under one key flipped it on the
    second call, so a policy replayed from recorded snapshots decided differently)."""
    from sim.model import Config
    from sim.sharing.view import PairView, TruePairs

    model = GivenPairs({"A+A": [1.3, 2.5]})
    truth = TruePairs(model, (Config(SMALL, 1),))
    view = PairView(model, truth)
    for _ in range(3):
        assert truth.slowdowns(A, A, 0) == (1.3, 2.5)
        assert view.slowdowns(A, A, 0) == (1.3, 2.5)
