"""Spot VMs: revocations drawn from the run's seed, work lost back to the last checkpoint, billing stops, records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.catalogue import cloud_vm_types, spot_variant, with_spot
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, Billing, CapsimError, ClusterRules, Plan, VMType
from sim.streams import STREAMS, spot_streams, streams
from tests.sim.helpers import BIG, K80, SMALL, A, Scripted, job, table

RATE = 2.0  # revocations per hour
SPOT = VMType("small-spot", K80, 1, 1.8, spot=True, revocation_rate=RATE)
BIG_SPOT = VMType("big-spot", K80, 2, 3.6, spot=True, revocation_rate=RATE)


def lifetime(seed: int, node: int, nodes: int, k: int = 0) -> float:
    """The k-th spot VM on ``node`` lives this long: the k-th draw of the node's stream (the documented contract)."""
    rng = spot_streams(seed, nodes)[node]
    return [float(rng.exponential(3600.0 / RATE)) for _ in range(k + 1)][k]


def spot_then_on_demand(s):
    """Job 0 first on a spot VM of node 0; after a revocation, on an on-demand VM of node 0."""
    if not s.waiting or s.nodes[0].vm is not None and s.nodes[0].used_gpus:
        return Plan()
    vm = "small" if s.trigger == "revocation" else "small-spot"
    return Plan(vms={0: vm}, start=(Assignment(s.waiting[0].id, 0, 1),))


def run_one(runtime: float, checkpoint: float, overhead: float = 0.0, seed: int = 3):
    cl = Cluster((SMALL, SPOT), (NodeSlot(),),
                 rules=ClusterRules(restart_overhead=overhead, checkpoint_interval=checkpoint))
    truth = table(**{"A_small_1": runtime, "A_small-spot_1": runtime})
    return Simulation(cl, [job(0, A, 0.0)], Scripted(spot_then_on_demand), truth, seed=seed).run()


def test_a_revoked_job_loses_exactly_the_work_since_its_last_checkpoint_and_finishes_once():
    life = lifetime(3, 0, 1)
    runtime, checkpoint, overhead = 10 * life, life / 3.5, 7.0
    r = run_one(runtime, checkpoint, overhead)
    kept = 3 * checkpoint  # checkpoints at C, 2C, 3C of work; the revocation comes at 3.5 C
    j = r.jobs.iloc[0]
    assert j["revocations"] == 1 and j["runs"] == 2
    assert j["lost_gpu_seconds"] == pytest.approx(life - kept, rel=1e-12)
    # it restarts at once on an on-demand VM, pays the restart overhead and the work not kept
    assert j["end_time"] == pytest.approx(life + overhead + (runtime - kept), rel=1e-12)
    seg = r.segments
    assert list(seg["vm_type"]) == ["small-spot", "small"]
    assert seg["end_time"].iloc[0] == life and seg["done"].iloc[0] == pytest.approx(kept / runtime, rel=1e-12)
    assert (seg["done"] == 1.0).sum() == 1, "exactly one segment completes the job"
    assert r.summary["revocations"] == 1 and r.summary["lost_gpu_hours"] == pytest.approx((life - kept) / 3600)


def test_billing_stops_at_the_revocation_and_the_spot_share_of_cost():
    life = lifetime(3, 0, 1)
    r = run_one(10 * life, math.inf)
    nodes = r.nodes
    first, second = nodes.iloc[0], nodes.iloc[1]
    assert bool(first["spot"]) and bool(first["revoked"]) and first["stop_time"] == life
    assert first["billed_seconds"] == life and first["cost"] == pytest.approx(life * 1.8 / 3600, rel=1e-12)
    assert not second["spot"] and not second["revoked"] and second["start_time"] == life
    assert r.summary["spot_cost_share"] == pytest.approx(first["cost"] / nodes["cost"].sum(), rel=1e-12)


def test_without_checkpoints_the_whole_run_is_lost():
    life = lifetime(3, 0, 1)
    r = run_one(10 * life, math.inf)
    assert r.jobs["lost_gpu_seconds"].iloc[0] == life
    assert r.segments["done"].iloc[0] == 0.0
    assert r.jobs["end_time"].iloc[0] == pytest.approx(life + 10 * life, rel=1e-12)


def test_a_revocation_during_the_restart_overhead_loses_no_work():
    life = lifetime(3, 0, 1, k=1)  # the second spot VM of node 0
    first = lifetime(3, 0, 1)

    def twice_spot(s):
        if s.time == 0.0:
            return Plan(vms={0: "small-spot"}, start=(Assignment(0, 0, 1),))
        if s.trigger == "revocation" and s.waiting:
            return Plan(vms={0: "small-spot" if s.time == first else "small"}, start=(Assignment(0, 0, 1),))
        return Plan()

    overhead = 2 * life  # the second spot VM dies before the restart overhead is paid
    cl = Cluster((SMALL, SPOT), (NodeSlot(),),
                 rules=ClusterRules(restart_overhead=overhead, checkpoint_interval=first / 2.5))
    truth = table(A_small_1=10 * first, **{"A_small-spot_1": 10 * first})
    r = Simulation(cl, [job(0, A, 0.0)], Scripted(twice_spot), truth, seed=3).run()
    j = r.jobs.iloc[0]
    assert j["revocations"] == 2
    assert j["lost_gpu_seconds"] == pytest.approx(first - 2 * first / 2.5, rel=1e-12), "the second run lost nothing"
    assert r.segments["done"].iloc[1] == r.segments["done"].iloc[0]


def test_a_gang_loses_all_its_parts_when_one_node_is_revoked():
    lives = [lifetime(5, n, 2) for n in range(2)]
    first = int(np.argmin(lives))

    def gang_then_big(s):
        if s.time == 0.0:
            return Plan(vms={0: "big-spot", 1: "big-spot"}, start=(Assignment(0, 0, 2, gang=((1, 2),)),))
        if s.waiting:
            return Plan(vms={0: "big", 1: "big"}, start=(Assignment(0, 0, 2, gang=((1, 2),)),))
        return Plan()

    policy = Scripted(gang_then_big, gang=True)
    cl = Cluster((BIG, BIG_SPOT), (NodeSlot(), NodeSlot()), rules=ClusterRules(gang=True, checkpoint_interval=math.inf))
    runtime = 10 * max(lives)
    truth = table(A_big_4=runtime, **{"A_big-spot_4": runtime})
    r = Simulation(cl, [job(0, A, 0.0)], policy, truth, seed=5).run()
    j = r.jobs.iloc[0]
    assert j["revocations"] == 1 and j["lost_gpu_seconds"] == pytest.approx(4 * lives[first], rel=1e-12)
    spot_rows = r.nodes[r.nodes["spot"]]
    assert list(spot_rows["revoked"]) == [True, False] and spot_rows["node"].iloc[0] == first
    assert (spot_rows["stop_time"] == lives[first]).all(), "the other part's VM is stopped, idle, by the decision"
    assert j["end_time"] == pytest.approx(lives[first] + runtime, rel=1e-12)


def test_revocations_come_from_the_seed_and_only_from_it():
    a, b = run_one(1e9, 600.0, seed=3), run_one(1e9, 600.0, seed=3)
    assert a.nodes.equals(b.nodes) and a.jobs.equals(b.jobs)
    c = run_one(1e9, 600.0, seed=4)
    assert c.nodes["stop_time"].iloc[0] != a.nodes["stop_time"].iloc[0]


def test_a_spot_type_with_rate_zero_is_never_revoked():
    zero = VMType("small-spot", K80, 1, 1.8, spot=True, revocation_rate=0.0)
    cl = Cluster((SMALL, zero), (NodeSlot(),))
    r = Simulation(cl, [job(0, A, 0.0)], Scripted(spot_then_on_demand), table(**{"A_small-spot_1": 5e5})).run()
    assert r.summary["revocations"] == 0 and r.jobs["end_time"].iloc[0] == 5e5 and r.summary["spot_cost_share"] == 1


def test_appending_the_spot_stream_leaves_the_other_streams_draws_unchanged():
    before = np.random.SeedSequence(11).spawn(5)  # the streams before "spot" was appended
    now = streams(11)
    assert STREAMS[:5] == ("arrivals", "mix", "deadlines", "weights", "noise") and STREAMS[-1] == "spot"
    for name, child in zip(STREAMS[:5], before):
        assert now[name].random(4).tolist() == np.random.default_rng(child).random(4).tolist()


def test_spot_variants_of_the_catalogue():
    p4d = cloud_vm_types()["p4d.24xlarge"]
    v = spot_variant(p4d, 0.25)
    assert (v.name, v.price_per_hour, v.spot, v.revocation_rate, v.gpus) == ("p4d.24xlarge-spot", 6.289, True, 0.25, 8)
    types = with_spot([p4d, SMALL], {"A100-40GB": 0.1, "default": 0.3})
    assert [t.name for t in types] == ["p4d.24xlarge", "p4d.24xlarge-spot", "small"]
    assert types[1].revocation_rate == 0.1
    assert [t.name for t in with_spot([p4d], 0.2, only=True)] == ["p4d.24xlarge-spot"]
    with pytest.raises(CapsimError, match="no spot price"):
        spot_variant(SMALL, 0.1)
    with pytest.raises(CapsimError, match="no revocation rate for VM type 'p4d.24xlarge'"):
        with_spot([p4d], {"H100": 0.1})


def test_spot_types_are_refused_where_they_cannot_be_modelled():
    with pytest.raises(CapsimError, match="not modelled in round mode"):
        Cluster((SPOT,), (NodeSlot(),), rules=ClusterRules(round_length=360.0))
    with pytest.raises(CapsimError, match="fixed servers cannot be spot"):
        Cluster((SPOT,), (NodeSlot(frozenset({"small-spot"}), fixed=True),))
    with pytest.raises(CapsimError, match="checkpoint_interval must be"):
        Cluster((SMALL,), (NodeSlot(),), rules=ClusterRules(checkpoint_interval=0.0))
    bad = VMType("x", K80, 1, 1.0, spot=True, revocation_rate=-1.0, billing=Billing())
    with pytest.raises(CapsimError, match="revocation_rate >= 0"):
        Cluster((bad,), (NodeSlot(),))
