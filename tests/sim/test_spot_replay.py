"""Spot VMs on a recorded market: revoked when their zone's series ends, failover between zones, no VM while no
zone has one, a decision when one is back; the same run whatever the seed."""

from __future__ import annotations

import math

import pytest

from sim.availability import AvailabilitySeries
from sim.catalogue import spot_variant
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Plan
from sim.spot_market import RecordedMarkets
from tests.sim.helpers import SMALL, A, Scripted, job, table

SPOT = spot_variant(SMALL.__class__(SMALL.name, SMALL.gpu, 1, 3.6, spot_price_per_hour=1.2), 0.5)
TRUTH = table(A_small_1=1000.0, **{"A_small-spot_1": 1000.0})


def zone(name: str, *bits: int) -> AvailabilitySeries:
    return AvailabilitySeries.ticks(name, [bool(b) for b in bits], 100.0)


def cluster(*zones: AvailabilitySeries, nodes: int = 1, checkpoint: float = math.inf, **rules) -> Cluster:
    markets = RecordedMarkets.build([SPOT], {z.name: z for z in zones})
    return Cluster((SMALL, SPOT), tuple(NodeSlot() for _ in range(nodes)),
                   rules=ClusterRules(checkpoint_interval=checkpoint, **rules), markets=markets)


def spot_first(s):
    """Waiting jobs on spot when it can be had, else on demand after a revocation; otherwise wait."""
    if not s.waiting or s.nodes[0].used_gpus:
        return Plan()
    if "small-spot" in s.unavailable:
        return Plan(vms={0: "small"}, start=(Assignment(s.waiting[0].id, 0, 1),)) if s.trigger == "revocation" \
            else Plan()
    return Plan(vms={0: "small-spot"}, start=(Assignment(s.waiting[0].id, 0, 1),))


def test_a_spot_vm_is_revoked_when_its_zone_ends_and_keeps_the_work_to_its_last_checkpoint():
    c = cluster(zone("a", 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), checkpoint=200)
    policy = Scripted(spot_first)
    r = Simulation(c, [job(0, A, 0.0)], policy, TRUTH, seed=1).run()
    nodes, j = r.nodes, r.jobs.iloc[0]
    assert bool(nodes["revoked"].iloc[0]) and nodes["stop_time"].iloc[0] == 500.0
    assert nodes["billed_seconds"].iloc[0] == 500.0
    assert j["revocations"] == 1 and j["lost_gpu_seconds"] == 100.0  # checkpoints at 200 and 400 s of work
    assert policy.seen[1].trigger == "revocation" and policy.seen[1].unavailable == frozenset({"small-spot"})
    assert j["end_time"] == 500.0 + 600.0  # the 600 s left, on demand
    again = Simulation(c, [job(0, A, 0.0)], Scripted(spot_first), TRUTH, seed=9).run()
    assert again.jobs.equals(r.jobs) and again.nodes.equals(r.nodes), "a replayed market draws nothing"


def test_a_vm_goes_to_the_first_zone_that_has_one_and_lives_as_long_as_that_zone():
    c = cluster(zone("a", 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
                zone("b", 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), nodes=2)

    def two(s):
        if s.time == 0.0:
            return Plan(vms={0: "small-spot"}, start=(Assignment(s.waiting[0].id, 0, 1),))
        if s.time == 200.0 and s.waiting:
            return Plan(vms={1: "small-spot"}, start=(Assignment(s.waiting[0].id, 1, 1),))
        if s.trigger == "revocation":
            return Plan(vms={0: "small"}, start=(Assignment(s.waiting[0].id, 0, 1),))
        return Plan()

    r = Simulation(c, [job(0, A, 0.0), job(1, A, 200.0)], Scripted(two), TRUTH, seed=0).run()
    spot = r.nodes[r.nodes["spot"]].set_index("node")
    assert spot["stop_time"][0] == 300.0 and spot["revoked"][0]  # in zone b (a had none at 0): ends with b at 300
    assert not spot["revoked"][1]  # in zone a (the first with one at 200): never revoked
    assert r.jobs.set_index("job_id")["end_time"][1] == 1200.0


def test_no_vm_can_be_started_while_no_zone_has_one_and_a_decision_comes_when_one_does():
    c = cluster(zone("a", 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1))
    policy = Scripted(spot_first)
    r = Simulation(c, [job(0, A, 0.0)], policy, TRUTH, seed=0).run()
    first = policy.seen[0]
    assert first.unavailable == frozenset({"small-spot"})
    k = [i for i, cf in enumerate(first.configs) if cf.vm.name == "small-spot"][0]
    assert math.isinf(first.waiting[0].estimates[k]), "the policy sees no way to run on it now"
    assert [s.trigger for s in policy.seen] == ["arrival", "market", "completion"]
    assert r.jobs["start_time"].iloc[0] == 300.0 and r.jobs["end_time"].iloc[0] == 1300.0

    def insist(s):
        return Plan(vms={0: "small-spot"}, start=(Assignment(s.waiting[0].id, 0, 1),)) if s.waiting else Plan()

    with pytest.raises(CapsimError, match="its spot market has none to give now"):
        Simulation(c, [job(0, A, 0.0)], Scripted(insist), TRUTH, seed=0).run()


def test_a_run_that_outlasts_the_series_is_an_error_naming_it():
    c = cluster(zone("a", 1, 1, 1, 0, 0, 0))
    with pytest.raises(CapsimError, match="series 'a'.*reached day"):
        Simulation(c, [job(0, A, 0.0)], Scripted(spot_first), TRUTH, seed=0).run()


def test_markets_must_name_spot_types_of_the_cluster():
    markets = RecordedMarkets.build([SPOT], {"a": zone("a", 1)})
    with pytest.raises(CapsimError, match="not spot VM types of the cluster"):
        Cluster((SMALL,), (NodeSlot(),), markets=markets)


def test_the_series_starts_with_the_run_at_its_first_arrival():
    c = cluster(zone("a", 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1))
    r = Simulation(c, [job(0, A, 5000.0)], Scripted(spot_first), TRUTH, seed=0).run()
    assert r.jobs["start_time"].iloc[0] == 5300.0
