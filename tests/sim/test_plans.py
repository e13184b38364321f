"""Every plan-rejection rule raises a CapsimError naming the policy and the broken rule; nothing is half-applied."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Plan
from tests.sim.helpers import BIG, SMALL, A, B, Scripted, job, table

START_A = Plan(vms={0: "small"}, start=(Assignment(0, 0, 1),))


def first_then(second, at: float = 5.0):
    """Start job 0 on node 0 at t=0, then answer ``second`` at t=``at`` (job 1 arrives then)."""
    return lambda s: START_A if s.time == 0.0 else (second if s.time == at else Plan())


CASES = {
    "unknown VM type": (lambda s: Plan(vms={0: "huge"}), "unknown VM type 'huge'"),
    "slot restriction": (lambda s: Plan(vms={1: "small"}, start=(Assignment(0, 1, 1),)), "only allows \\['big'\\]"),
    "node out of range": (lambda s: Plan(vms={9: "small"}), "nodes 0..1"),
    "no VM after plan": (lambda s: Plan(start=(Assignment(0, 0, 1),)), "no VM after the plan"),
    "stopped VM": (lambda s: Plan(vms={0: None}, start=(Assignment(0, 0, 1),)), "no VM after the plan"),
    "too many GPUs for VM": (lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 2),)), "asks for 2 GPUs"),
    "zero GPUs": (lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 0),)), "asks for 0 GPUs"),
    "unknown job": (lambda s: Plan(vms={0: "small"}, start=(Assignment(42, 0, 1),)), "job 42, which is unknown"),
    "not yet arrived": (lambda s: Plan(vms={0: "big"}, start=(Assignment(1, 0, 1),)), "job 1, which is not waiting"),
    "job twice": (lambda s: Plan(vms={0: "big"}, start=(Assignment(0, 0, 1), Assignment(0, 0, 1))),
                  "job 0 appears in two assignments"),
    "infeasible config": (lambda s: Plan(vms={0: "big"}, start=(Assignment(0, 0, 2),)), "estimator marks infeasible"),
    "start a running job": (first_then(Plan(vms={1: "big"}, start=(Assignment(0, 1, 1),))),
                            "job 0, which is not waiting"),
    "over-subscribed GPUs": (first_then(Plan(start=(Assignment(1, 0, 1),))), "would use 2 GPUs"),
    "change a busy VM": (first_then(Plan(vms={0: "big"})), "changes the VM of node 0 to big while job 0 runs"),
    "preempt without may_preempt": (first_then(Plan(preempt=(0,))), "does not declare may_preempt"),
    "stop a busy VM": (first_then(Plan(vms={0: None})), "stops the VM of node 0 while job 0 runs"),
    "keep_idle out of range": (lambda s: Plan(keep_idle=frozenset({2})), "keep_idle names node 2, but the cluster"),
    "assignment node out of range": (lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 5, 1),)),
                                     "job 0 is assigned to node 5, but the cluster has nodes 0..1"),
    "bool is not a node": (lambda s: Plan(vms={True: "small"}), "vms names node True"),
    "float is not a GPU count": (lambda s: Plan(vms={0: "small"}, start=(Assignment(0, 0, 1.0),)), "asks for 1.0 GPUs"),
    "not a plan": (lambda s: {"start": ()}, "decide\\(\\) returned dict, not a sim.model.Plan"),
}

PREEMPTING = {
    "preempt a waiting job": (first_then(Plan(preempt=(1,))), "preempt/move names job 1, which is not running"),
    "move a job never started": (lambda s: Plan(vms={0: "small"}, move=(Assignment(0, 0, 1),)),
                                 "names job 0, which is not running"),
    "preempt and move one job": (first_then(Plan(vms={1: "big"}, preempt=(0,), move=(Assignment(0, 1, 1),))),
                                 "job 0 appears in two assignments"),
    "preempt and restart at once": (first_then(Plan(preempt=(0,), start=(Assignment(0, 0, 1),))),
                                    "start names job 0, which is not waiting"),
    "move onto a full node": (first_then(Plan(vms={1: "big"}, start=(Assignment(1, 1, 2),),
                                              move=(Assignment(0, 1, 1),))), "node 1 would use 3 GPUs"),
}


def world(**kw):
    return Cluster((SMALL, BIG), (NodeSlot(), NodeSlot(frozenset({"big"}))), rules=ClusterRules(**kw))


@pytest.mark.parametrize("case", list(CASES) + list(PREEMPTING))
def test_rejected_plan_names_policy_and_rule(case):
    script, rule = CASES[case] if case in CASES else PREEMPTING[case]
    pred = table(A_big_2=math.inf)
    policy = Scripted(script, preempt=case in PREEMPTING, share=case == "move onto a full node")
    sim = Simulation(world(), [job(0, A, 0.0), job(1, B, 5.0)], policy, pred)
    with pytest.raises(CapsimError, match=rf"policy 'scripted[^']*': plan rejected at t=\d+: .*{rule}"):
        sim.run()


def test_numpy_integers_are_node_indices_and_gpu_counts():
    plan = Plan(vms={np.int64(1): "big"}, start=(Assignment(0, np.int32(1), np.int64(1)),))
    r = Simulation(world(), [job(0, A, 0.0)], Scripted(lambda s: plan if s.waiting else Plan()), table()).run()
    assert (r.jobs.node[0], r.jobs.gpus[0], r.jobs.end_time[0]) == (1, 1, 100.0)


def test_a_configuration_the_truth_cannot_run_is_a_setup_error_not_a_plan_error():
    plan = Plan(vms={0: "big"}, start=(Assignment(0, 0, 2),))
    sim = Simulation(world(), [job(0, A, 0.0)], Scripted(lambda s: plan), table(), truth=table(A_big_2=math.inf))
    with pytest.raises(CapsimError, match="supports it but the truth predictor TablePredictor has no runtime"):
        sim.run()


def test_several_jobs_on_one_vm_need_may_share():
    plan = Plan(vms={0: "big"}, start=(Assignment(0, 0, 1), Assignment(1, 0, 1)))
    jobs = [job(0, A, 0.0), job(1, B, 0.0)]
    with pytest.raises(CapsimError, match="would host 2 jobs, but the policy does not declare may_share"):
        Simulation(world(), jobs, Scripted(lambda s: plan), table()).run()
    r = Simulation(world(), jobs, Scripted(lambda s: plan if s.waiting else Plan(), share=True), table()).run()
    assert list(r.jobs.end_time) == [100.0, 50.0]
    assert r.summary["vm_cost"] == pytest.approx(0.2)
    assert list(r.jobs.cost_share) == [pytest.approx(0.2 * 100 / 150), pytest.approx(0.2 * 50 / 150)]


def test_changing_a_vm_type_needs_its_jobs_moved_first():
    def script(s):
        if s.time == 0.0:
            return START_A
        if s.time == 5.0:
            return Plan(vms={0: "big", 1: "big"}, move=(Assignment(0, 0, 2),), start=(Assignment(1, 1, 2),))
        return Plan()
    pol = Scripted(script, preempt=True)
    r = Simulation(world(restart_overhead=1.0), [job(0, A, 0.0), job(1, B, 5.0)], pol, table()).run()
    a = r.jobs.set_index("job_id").loc[0]
    assert a.end_time == 5.0 + 0.95 * 50 + 1.0
    assert sorted(r.nodes.vm_type) == ["big", "big", "small"]


def test_gpus_freed_by_a_job_moving_away_can_be_taken_in_the_same_plan():
    swap = Plan(vms={1: "big"}, move=(Assignment(0, 1, 2),), start=(Assignment(1, 0, 1),))
    pol = Scripted(first_then(swap), preempt=True)
    r = Simulation(world(), [job(0, A, 0.0), job(1, B, 5.0)], pol, table()).run().jobs.set_index("job_id")
    assert (r.node[0], r.gpus[0], r.end_time[0]) == (1, 2, 5.0 + 0.95 * 50)
    assert (r.node[1], r.start_time[1], r.end_time[1]) == (0, 5.0, 55.0)


def test_plan_constructor_defaults_are_its_fields_and_it_freezes_what_it_is_given():
    import dataclasses
    import inspect
    from types import MappingProxyType

    params = inspect.signature(Plan).parameters
    fields = {f.name: f for f in dataclasses.fields(Plan)}
    assert list(params) == list(fields)
    for name, f in fields.items():
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc,operator]
        assert Plan(**{name: params[name].default}) == Plan(**{name: default}), name
    vms = {0: "small"}
    p = Plan(vms=vms, start=[Assignment(0, 0, 1)], preempt=[3], keep_idle={1}, layouts={(0, 0): [["1g", 0]]})  # type: ignore[dict-item]
    vms[1] = "big"
    assert dict(p.vms) == {0: "small"} and isinstance(p.vms, MappingProxyType)
    assert p.start == (Assignment(0, 0, 1),) and p.preempt == (3,) and p.keep_idle == frozenset({1})
    assert p.layouts == {(0, 0): (("1g", 0),)} and isinstance(p.layouts, MappingProxyType)
    assert dataclasses.replace(p, preempt=()) == Plan(vms={0: "small"}, start=(Assignment(0, 0, 1),), keep_idle={1},
                                                      layouts={(0, 0): (("1g", 0),)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.start = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        Plan({0: "small"})  # type: ignore[call-arg,misc]
