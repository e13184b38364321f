"""Billing per provider rule: hand-computed billed seconds and costs for each rule the cloud catalogue uses, each VM
billed by its own rule in one run, and the cluster's billing quantum overriding every rule."""

from __future__ import annotations

import math

import pytest

from sim.catalogue import cloud_providers, gpu
from sim.engine import Simulation
from sim.model import Assignment, Billing, CapsimError, Plan, VMType
from tests.sim.helpers import SMALL, A, FirstFit, cluster, job, table

K80 = gpu("K80")
PER_SECOND_MIN_MINUTE = Billing(increment=1.0, minimum=60.0)  # AWS, GCP
PER_SECOND_MIN_5 = Billing(increment=1.0, minimum=300.0)      # Azure since 2025-06
PER_MINUTE = Billing(increment=60.0, minimum=60.0)
PER_HOUR = Billing(increment=3600.0, minimum=3600.0)


@pytest.mark.parametrize("rule, on, billed", [
    (Billing(), 12.3, 12.3),                      # the default: exact, as the paper's catalogue is billed
    (Billing(), 0.0, 0.0),
    (PER_SECOND_MIN_MINUTE, 30.0, 60.0),          # under the minimum: the minimum
    (PER_SECOND_MIN_MINUTE, 0.0, 60.0),           # a VM started and stopped at once still pays the minimum
    (PER_SECOND_MIN_MINUTE, 60.2, 61.0),          # above it: whole seconds, rounded up
    (PER_SECOND_MIN_MINUTE, 61.0, 61.0),          # a whole second stays as it is
    (PER_SECOND_MIN_MINUTE, 3599.5, 3600.0),
    (PER_SECOND_MIN_5, 90.0, 300.0),
    (PER_SECOND_MIN_5, 301.2, 302.0),
    (PER_MINUTE, 61.0, 120.0),
    (PER_MINUTE, 120.0, 120.0),
    (PER_HOUR, 1.0, 3600.0),
    (PER_HOUR, 3601.0, 7200.0),
    (Billing(increment=60.0), 30.0, 60.0),        # no minimum: still a whole increment
])
def test_a_rule_bills_whole_increments_and_at_least_its_minimum(rule: Billing, on: float, billed: float) -> None:
    assert rule.billed_seconds(on) == billed


def test_the_providers_rules_are_per_second_with_their_minimum() -> None:
    rules = {name: p.billing for name, p in cloud_providers().items()}
    assert rules == {"aws": PER_SECOND_MIN_MINUTE, "gcp": PER_SECOND_MIN_MINUTE, "azure": PER_SECOND_MIN_5}


@pytest.mark.parametrize("bad", [{"increment": -1.0}, {"minimum": math.inf}, {"minimum": math.nan},
                                 {"increment": "60"}, {"minimum": True}])
def test_a_bad_rule_is_a_clear_error(bad: dict) -> None:
    with pytest.raises(CapsimError, match="billing: (increment|minimum) must be a finite number of seconds >= 0"):
        Billing(**bad)


# ----- in the engine: $0.001 per second VMs (3.6 $/h), one job A of the table's runtime ------------------------------

def _vm(name: str, rule: Billing) -> VMType:
    return VMType(name, K80, 1, 3.6, billing=rule)


def _run(vm: VMType, runtime: float, **kw):
    pred = table(**{f"A_{vm.name}_1": runtime})
    return Simulation(cluster(1, (SMALL, vm), **kw), [job(0, A, 0.0)], FirstFit(vm.name), pred).run()


@pytest.mark.parametrize("rule, runtime, billed", [
    (PER_SECOND_MIN_MINUTE, 30.0, 60.0),
    (PER_SECOND_MIN_MINUTE, 100.4, 101.0),
    (PER_SECOND_MIN_5, 100.0, 300.0),
    (PER_MINUTE, 100.0, 120.0),
    (PER_HOUR, 100.0, 3600.0),
    (Billing(), 100.4, 100.4),
])
def test_the_engine_bills_a_vm_by_its_own_rule(rule: Billing, runtime: float, billed: float) -> None:
    r = _run(_vm("rented", rule), runtime)
    node = r.nodes.iloc[0]
    assert (node.stop_time - node.start_time, node.billed_seconds) == (runtime, billed)
    assert r.summary["vm_cost"] == pytest.approx(0.001 * billed)
    assert r.jobs.cost_share[0] == pytest.approx(0.001 * billed), "the job that ran pays the whole interval"
    assert r.summary["gpu_utilisation"] == pytest.approx(runtime / billed)


def test_two_vm_types_in_one_run_each_bill_by_their_rule() -> None:
    aws, hourly = _vm("aws", PER_SECOND_MIN_MINUTE), _vm("hourly", PER_HOUR)
    pred = table(A_aws_1=30.0, A_hourly_1=30.0)

    class Both(FirstFit):
        """The first waiting job on an aws VM, the second on an hourly one."""

        def decide(self, s):
            free = [n.index for n in s.nodes if n.vm is None]
            plan_vms, start = {}, []
            for jv, n, vm in zip(s.waiting, free, ("aws", "hourly")):
                plan_vms[n] = vm
                start.append(Assignment(jv.id, n, 1))
            return Plan(vms=plan_vms, start=tuple(start))

    r = Simulation(cluster(2, (aws, hourly)), [job(0, A, 0.0), job(1, A, 0.0)], Both(), pred).run()
    billed = dict(zip(r.nodes.vm_type, r.nodes.billed_seconds))
    assert billed == {"aws": 60.0, "hourly": 3600.0}
    assert r.summary["vm_cost"] == pytest.approx(0.001 * (60.0 + 3600.0))


@pytest.mark.parametrize("runtime, by_rule, by_quantum", [(30.0, 60.0, 60.0), (90.0, 90.0, 120.0),
                                                          (100.0, 100.0, 120.0)])
def test_the_cluster_billing_quantum_overrides_every_rule(runtime: float, by_rule: float, by_quantum: float) -> None:
    vm = _vm("rented", PER_SECOND_MIN_MINUTE)
    assert _run(vm, runtime).nodes.billed_seconds[0] == by_rule
    assert _run(vm, runtime, billing_quantum=60.0).nodes.billed_seconds[0] == by_quantum
    rules = cluster(1, (SMALL, vm), billing_quantum=60.0).rules
    assert rules.billed_seconds(runtime, vm) == rules.billed_seconds(runtime) == by_quantum
    assert cluster(1, (SMALL, vm)).rules.billed_seconds(runtime) == runtime, "no VM type given: exact"
