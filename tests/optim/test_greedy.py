"""The greedy heuristic: pressure order, best-fit sharing on open VMs, new VMs shrunk, idle GPUs handed out."""

from __future__ import annotations

import math

import optim
from sim.catalogue import configurations, gpu
from sim.model import Assignment, NodeView, VMType
from tests.optim.helpers import job, snapshot

K80 = gpu("K80")
ONE = VMType("one", K80, 1, 3.6)
FOUR = VMType("four", K80, 4, 14.4)
VMS = (ONE, FOUR)
# configs: one x1, four x1, four x2, four x3, four x4 (same per-GPU price: sharing a big VM costs the same)
INF = math.inf


def test_pressure_order_and_shrink_to_smallest_vm():
    rt = (100.0, 100.0, 60.0, 50.0, 45.0)
    urgent = job(1, rt, deadline=55.0)  # pressure 45 - 55 = -10
    relaxed = job(2, rt, deadline=1000.0)  # pressure -955
    plan = optim.build("greedy").decide(snapshot([relaxed, urgent], nodes=1, vm_types=VMS))
    # one slot: the urgent job goes first; its D* (fastest, none meets) is four x4 and it fills the VM
    assert plan.start == (Assignment(1, 0, 4),) and dict(plan.vms) == {0: "four"}


def test_cheap_jobs_share_one_vm_then_shrink():
    rt = (100.0, 100.0, 100.0, 100.0, 100.0)  # no speed-up: D* is 1 GPU (cheapest); share-ready on the big VM
    jobs = [job(i, rt, deadline=1000.0, submit=float(i)) for i in range(2)]
    plan = optim.build("greedy").decide(snapshot(jobs, nodes=2, vm_types=VMS))
    # both D* = one x1 (cheapest); first opens the largest K80 VM (four), second best-fits beside it;
    # the VM then shrinks to the smallest K80 type that holds 2 GPUs, which is still "four" here
    assert {a.node for a in plan.start} == {0} and dict(plan.vms) == {0: "four"}
    assert sorted(a.gpus for a in plan.start) == [1, 1]


def test_single_small_job_shrinks_and_idle_gpus_go_to_best_speedup():
    rt = (100.0, 100.0, INF, INF, INF)
    plan = optim.build("greedy").decide(snapshot([job(1, rt, deadline=1000.0)], nodes=1, vm_types=VMS))
    assert plan.start == (Assignment(1, 0, 1),) and dict(plan.vms) == {0: "one"}
    # two 1-GPU jobs share "four" (no 2-GPU K80 type to shrink to): the 2 idle GPUs go one by one to the best
    # speed-up: job 1 (100 -> 60 s), then job 2 (100 -> 90 s beats job 1's 60 -> 59 s)
    a = job(1, (100.0, 100.0, 60.0, 59.0, INF), deadline=1000.0)
    b = job(2, (100.0, 100.0, 90.0, INF, INF), deadline=1000.0)
    plan = optim.build("greedy").decide(snapshot([a, b], nodes=1, vm_types=VMS))
    assert dict(plan.vms) == {0: "four"}
    assert sorted(plan.start, key=lambda x: x.job_id) == [Assignment(1, 0, 2), Assignment(2, 0, 2)]


def test_best_fit_on_open_vm_with_running_jobs():
    rt = (100.0, 100.0, 100.0, 100.0, 100.0)
    busy = NodeView(0, vm=FOUR, used_gpus=3)
    roomy = NodeView(1, vm=FOUR, used_gpus=1)
    plan = optim.build("greedy").decide(snapshot([job(5, rt, deadline=1000.0)], nodes=[busy, roomy], vm_types=VMS))
    assert plan.start == (Assignment(5, 0, 1),) and not plan.vms


def test_greedy_declares_sharing_only():
    p = optim.build("greedy")
    assert p.may_share and not p.may_preempt
    assert len(configurations(VMS)) == 5


def test_greedy_through_the_engine_finishes_every_job_once():
    import pytest

    engine = pytest.importorskip("sim.engine", reason="the SimPy engine is not there yet")
    import predictors
    from sim.catalogue import vm_types
    from sim.cluster import Cluster, NodeSlot
    from sim.workload import WorkloadSpec, poisson_jobs

    pred = predictors.build("measured")
    cl = Cluster(tuple(vm_types().values()), tuple(NodeSlot() for _ in range(3)))
    jobs = poisson_jobs(WorkloadSpec(20, 20.0), pred, cl.configs, 1)
    res = engine.Simulation(cl, jobs, optim.build("greedy"), pred).run()
    assert sorted(res.jobs["job_id"]) == sorted(j.id for j in jobs)
    assert (res.jobs["start_time"] >= res.jobs["submit_time"]).all()
