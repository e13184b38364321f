"""One policy registry (issue 22, "one way through the code"): ElasticFlow's six deadline policies are registered,
built and listed with every other policy, declare their time model, and the engine runs each policy on the time
model it declares."""

from __future__ import annotations

import pytest

import optim
from experiments.scenario import registered_policies
from sim.contracts import TIME_MODELS, Policy
from sim.engine import Simulation
from sim.model import CapsimError, Plan, Snapshot
from sim.testing import replay_world
from sim.timing import EventDriven

ELASTICFLOW = {"elasticflow_edf", "tiresias", "elasticflow_gandiva", "themis", "chronus", "elasticflow"}


def test_elasticflows_policies_are_in_the_one_registry_and_declare_their_time_model() -> None:
    kinds = optim.registry(aliases=False)
    assert ELASTICFLOW <= set(kinds)
    assert {k for k, c in kinds.items() if c.time_model == "elasticflow"} == ELASTICFLOW
    assert all(c.time_model in TIME_MODELS for c in kinds.values())
    assert all(not kinds[k].plans_capacity for k in ELASTICFLOW), "they schedule the servers they are given"
    assert all(isinstance(optim.build(k), Policy) for k in ELASTICFLOW)


def test_a_scenario_that_lists_no_policies_runs_none_of_them() -> None:
    for fixed in (True, False):
        listed = registered_policies(fixed=fixed)
        assert listed and not ELASTICFLOW & set(listed)
    assert {"fifo_perf", "gavel_fifo"} <= set(registered_policies(fixed=True)), "Gavel's still run on fixed clusters"


def test_mig_runs_by_default_only_on_a_mig_cluster() -> None:
    """Elsewhere ``mig`` is its base policy: a default list with it would print greedy's row twice."""
    for fixed in (True, False):
        assert "mig" not in registered_policies(fixed=fixed)
        assert "mig" in registered_policies(fixed=fixed, mig=True)


def test_the_engine_runs_a_policy_on_the_time_model_it_declares() -> None:
    world = replay_world(7, servers=2, n_jobs=4)
    tiresias = optim.build("tiresias")
    result = Simulation(world.cluster, world.jobs, tiresias, world.estimator).run()
    assert sorted(result.jobs["job_id"]) == [j.id for j in world.jobs]
    with pytest.raises(CapsimError, match="runs on ElasticFlow's time model.*EventDriven: give none"):
        Simulation(world.cluster, world.jobs, tiresias, world.estimator, time=EventDriven())

    class Elsewhere(Policy):
        name = "elsewhere"
        time_model = "gavel"

        def decide(self, snapshot: Snapshot) -> Plan:
            return Plan()

    with pytest.raises(CapsimError, match="declares time_model 'gavel'"):
        Simulation(world.cluster, world.jobs, Elsewhere(), world.estimator)
