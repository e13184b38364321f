"""Owned servers on the floor: fixed slots of a type priced 0 for the policies, billed their amortised rate by the
cluster's rules for their whole time on (exactly, whatever the billing quantum), never hosted by a rented slot."""

from __future__ import annotations

import math

import pytest

from optim.baselines import FIFO
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import CapsimError, ClusterRules, Job, JobSpec, VMType
from tests.optim.worlds import World, check

OWN = VMType("own", gpu("V100"), 1, 0.0)          # an owned server: using it costs nothing more
RENT = VMType("rent", gpu("V100"), 1, 3.6)         # a rented VM: $0.001 per second
SPEC = JobSpec("resnet", "pytorch", 1000, 64, name="R")
RUNTIMES = TablePredictor({"R/own/1": 100.0, "R/rent/1": 100.0})


def cluster(rate: float = 7.2, quantum: float = 60.0, rented: frozenset[str] | None = frozenset({"rent"})) -> Cluster:
    return Cluster((OWN, RENT), (NodeSlot(frozenset({"own"}), fixed=True), NodeSlot(rented)),
                   rules=ClusterRules(billing_quantum=quantum, owned_price_per_hour={"own": rate}))


def test_an_owned_server_bills_its_rate_for_its_time_on_and_a_rented_vm_its_quantum() -> None:
    c = cluster()
    jobs = [Job(0, SPEC, 10.0, 1e9, 0.0), Job(1, SPEC, 10.0, 1e9, 0.0), Job(2, SPEC, 150.0, 1e9, 0.0)]
    r = Simulation(c, jobs, FIFO(), RUNTIMES).run()
    check(World(c, jobs, RUNTIMES, None, 0), r)
    nodes = r.nodes.set_index("vm_type")
    own = nodes.loc["own"]
    # free for the policy, so FIFO puts job 0 there at 10 and job 2 at 150 (ends 250); job 1 rents a VM at 10
    assert (own.start_time, own.stop_time, own.billed_seconds, own.price_per_hour) == (10.0, 250.0, 240.0, 7.2)
    assert math.isclose(own.cost, 240.0 * 7.2 / 3600.0, rel_tol=1e-12), "the owned server: 240 s exactly at $7.2/h"
    rent = nodes.loc["rent"]
    assert (rent.start_time, rent.stop_time, rent.billed_seconds) == (10.0, 110.0, 120.0), "whole minutes"
    assert math.isclose(rent.cost, 120.0 * 3.6 / 3600.0, rel_tol=1e-12)
    assert math.isclose(r.summary["vm_cost"], own.cost + rent.cost, rel_tol=1e-12)


def test_the_rules_bill_an_owned_type_and_a_rented_one() -> None:
    rules = ClusterRules(billing_quantum=3600.0, owned_price_per_hour={"own": 1.8})
    assert rules.bill(90.0, OWN) == (90.0, 1.8, 90.0 * 1.8 / 3600.0)
    assert rules.bill(90.0, RENT) == (3600.0, 3.6, 3.6)


@pytest.mark.parametrize("make, message", [
    (lambda: cluster(rented=None), r"slots \[1\] are rented slots that accept the owned server type 'own'"),
    (lambda: Cluster((VMType("own", gpu("V100"), 1, 2.0), RENT), (NodeSlot(frozenset({"own"}), fixed=True),),
                     rules=ClusterRules(owned_price_per_hour={"own": 2.0})), "must be an on-demand type priced 0"),
    (lambda: Cluster((OWN, RENT), (NodeSlot(frozenset({"rent"})),),
                     rules=ClusterRules(owned_price_per_hour={"own": 1.0})),
     "owned server type 'own' has no fixed slot"),
    (lambda: Cluster((RENT,), (NodeSlot(),), rules=ClusterRules(owned_price_per_hour={"own": 1.0})),
     "owned_price_per_hour names 'own', which is not among the cluster's VM types"),
    (lambda: ClusterRules(owned_price_per_hour={"own": -1.0}), r"owned_price_per_hour\[.own.\] must be finite"),
    (lambda: ClusterRules(owned_price_per_hour={"own": math.inf}), r"owned_price_per_hour\[.own.\] must be finite"),
])
def test_owned_servers_are_checked(make, message: str) -> None:
    with pytest.raises(CapsimError, match=message):
        make()
