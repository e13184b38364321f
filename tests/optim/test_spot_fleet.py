"""Uniform Progress for many jobs: the market each waiting job may use, by hand, and the policies that apply it."""

from __future__ import annotations

import math

import pytest

import optim
from optim.common import config_table
from optim.spot.fleet import markets, uniform_progress_snapshot
from predictors.table import TablePredictor
from sim.catalogue import configurations, gpu, spot_variant
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import CapsimError, ClusterRules, Job, JobSpec, VMType
from tests.optim.helpers import job, snapshot

OD = VMType("od", gpu("K80"), 1, 3.6, boot_time=60, spot_price_per_hour=1.2)
SPOT = spot_variant(OD, 0.1)
TYPES = (OD, SPOT)
TABLE = config_table(configurations(TYPES))
RULES = ClusterRules(restart_overhead=120, checkpoint_interval=600)


def which(deadline: float, now: float = 0.0, done: float = 0.0, submit: float = 0.0, runtime: float = 3600.0) -> str:
    return markets(job(0, (runtime, runtime), deadline=deadline, submit=submit, done=done), now, TABLE, RULES)


def test_the_safety_net_keeps_a_job_on_demand_when_a_revocation_would_make_it_late():
    # on demand now: 60 s boot + 3600 s = 3660 s; a revocation could cost 600 s of work + 2 x (120 + 60) s = 960 s
    assert which(deadline=3660 + 959) == "on_demand"
    assert which(deadline=3660 + 960) == "spot"
    # a job that ran before also pays the restart to resume: 120 s more
    assert which(deadline=1000 + 1800 + 60 + 120 + 959, now=1000, done=0.5, submit=0) == "on_demand"


def test_ahead_of_the_uniform_pace_spot_only_behind_it_either_market():
    # due at 10,000 s, submitted at 0: at t = 5,000 the pace asks for half the work done
    assert which(deadline=10_000, now=5000, done=0.5) == "spot"
    assert which(deadline=10_000, now=5000, done=0.4) == "both"
    assert which(deadline=math.inf, now=5000) == "spot"


def test_a_job_that_cannot_run_on_one_market_keeps_the_other():
    assert markets(job(0, (math.inf, 3600.0), deadline=4000), 0.0, TABLE, RULES) == "both"
    assert markets(job(0, (3600.0, math.inf), deadline=1e6), 0.0, TABLE, RULES) == "both"


def test_the_snapshot_forbids_the_other_market_by_infinite_estimates_and_leaves_running_jobs():
    ahead, late = job(0, (3600.0, 3600.0), deadline=1e6), job(1, (3600.0, 3600.0), deadline=4000)
    running = job(2, (3600.0, 3600.0), deadline=4000, node=0, config=1, since=0.0)
    s = snapshot(waiting=[ahead, late], running=[running], nodes=2, vm_types=TYPES)
    out = uniform_progress_snapshot(s)
    assert out.waiting[0].estimates.tolist() == [math.inf, 3600.0]
    assert out.waiting[1].estimates.tolist() == [3600.0, math.inf]
    assert out.running[0] is running and not out.waiting[0].estimates.flags.writeable
    plain = snapshot(waiting=[ahead], nodes=1)
    assert uniform_progress_snapshot(plain) is plain


@pytest.mark.parametrize("policy, params", [("edf", {}), ("greedy", {}), ("insertion", {}), ("milp", {})])
def test_policies_put_a_relaxed_job_on_spot_and_an_urgent_one_on_demand(policy, params):
    s = snapshot(waiting=[job(0, (3600.0, 3600.0), deadline=1e6), job(1, (3600.0, 3600.0), deadline=4000)],
                 nodes=2, vm_types=TYPES)
    plan = optim.build(policy, spot_rule="uniform_progress", **params).decide(s)
    where = {a.job_id: plan.vms[a.node] for a in plan.start}
    assert where == {0: "od-spot", 1: "od"}


def test_an_unknown_rule_is_named():
    for policy in ("edf", "greedy", "insertion", "milp"):
        with pytest.raises(CapsimError, match="spot_rule must be one of uniform_progress"):
            optim.build(policy, spot_rule="greedy")


def test_with_frequent_revocations_the_rule_meets_the_deadlines_spot_alone_misses_and_still_saves():
    """Eight one-hour jobs due two hours after arrival, on a market revoked once an hour on average, checkpoints
    every 30 min: EDF weighing spot by its expected cost alone misses some deadlines; with the rule, a job falls back
    to on demand once its slack no longer covers a revocation, so every deadline is met, and spot still pays."""
    spec = JobSpec("alexnet", "pytorch", 10, 32, name="j")
    od = VMType("od", gpu("K80"), 1, 3.6, spot_price_per_hour=0.4)
    truth = TablePredictor({"j/od/1": 3600.0, "j/od-spot/1": 3600.0})
    cluster = Cluster((od, spot_variant(od, 1.0)), tuple(NodeSlot() for _ in range(8)),
                      rules=ClusterRules(restart_overhead=60, checkpoint_interval=1800))
    jobs = [Job(i, spec, 600.0 * i, 600.0 * i + 7200.0, 0.01) for i in range(8)]
    on_demand_cost = 8 * 3.6
    missed = 0
    for seed in range(6):
        alone = Simulation(cluster, jobs, optim.build("edf", spot=True), truth, seed=seed).run()
        missed += int((alone.jobs.end_time > alone.jobs.deadline).sum())
        ruled = Simulation(cluster, jobs, optim.build("edf", spot_rule="uniform_progress"), truth, seed=seed).run()
        assert (ruled.jobs.end_time <= ruled.jobs.deadline).all(), seed
        assert 0 < ruled.summary["spot_cost_share"] and ruled.summary["vm_cost"] < on_demand_cost
    assert missed > 0
