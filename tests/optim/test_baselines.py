"""FIFO, EDF and Priority: queue orders, the D* configuration, head-of-line blocking, restricted slots."""

from __future__ import annotations

import math

import pytest

import optim
from optim.common import config_table, d_star, d_star_ranking
from sim.catalogue import configurations, gpu
from sim.model import Assignment, NodeView, VMType
from tests.optim.helpers import BIG, CONFIGS, SMALL, job, snapshot

INF = math.inf
# configs: small x1 ($0.001/s), big x1 ($0.002/s), big x2 ($0.002/s); runtimes 100, 100, 60 s
# whole-VM costs: 0.10, 0.20, 0.12
RT = (100.0, 100.0, 60.0)


def dstar_label(jv, now=0.0, configs=CONFIGS, mask=None) -> str | None:
    c = d_star(jv, now, config_table(configs), mask)
    return None if c is None else configs[c].label


@pytest.mark.parametrize(
    "deadline, expected",
    [
        (1000.0, "smallx1"),  # all meet: cheapest
        (100.0, "smallx1"),  # finishing exactly at the deadline meets it
        (80.0, "bigx2"),  # only the 2-GPU config meets it
        (50.0, "bigx2"),  # none meets: fastest
    ],
)
def test_d_star_cheapest_meeting_else_fastest(deadline, expected):
    assert dstar_label(job(1, RT, deadline=deadline)) == expected


def test_d_star_is_the_head_of_the_ranking():
    """d_star answers without ranking the rest (the baselines call it once per placement); it must stay the head of
    d_star_ranking, ties and masks included."""
    import numpy as np

    rng = np.random.default_rng(7)
    table = config_table(CONFIGS)
    for _ in range(500):
        rt = tuple(float(x) for x in rng.choice([50.0, 60.0, 100.0, 120.0, INF], size=3))
        jv = job(1, rt, deadline=float(rng.choice([40.0, 80.0, 100.0, 130.0, 1e9])), done=float(rng.choice([0, 0.5])))
        mask = None if rng.random() < 0.5 else rng.random(3) < 0.7
        now = float(rng.choice([0.0, 20.0]))
        ranking = d_star_ranking(jv, now, table, mask)
        assert d_star(jv, now, table, mask) == (ranking[0] if ranking else None)


def test_d_star_of_a_row_seen_before_is_still_the_head_of_the_ranking():
    """A fresh job's cost order is kept per estimates row from its second sighting (the jobs of one spec share it):
    asked again and again at other times and deadlines, with and without a mask, it still answers the ranking's
    head, ties and boot times included."""
    from dataclasses import replace

    import numpy as np

    rng = np.random.default_rng(11)
    slow_boot = VMType("small", gpu("K80"), 1, 3.6, boot_time=30.0)
    for configs in (CONFIGS, configurations((slow_boot, BIG))):
        table = config_table(configs)
        for _ in range(40):
            rt = tuple(float(x) for x in rng.choice([50.0, 60.0, 100.0, 120.0, 200.0, INF], size=3))
            jv = job(1, rt)
            mask = None if rng.random() < 0.5 else rng.random(3) < 0.7
            for _ in range(6):
                now = float(rng.choice([0.0, 20.0, 1e9 + 0.3]))
                deadline = now + float(rng.choice([40.0, 80.0, 100.0, 130.0, 230.0, INF, -1.0]))
                view = replace(jv, job=replace(jv.job, deadline=deadline))
                ranking = d_star_ranking(view, now, table, mask)
                assert d_star(view, now, table, mask) == (ranking[0] if ranking else None)


def test_d_star_uses_remaining_work_and_now():
    # half done: remaining 50, 50, 30; now=40, deadline 80 -> small finishes at 90 (late), big x2 at 70
    assert dstar_label(job(1, RT, deadline=80.0, done=0.5), now=40.0) == "bigx2"
    assert dstar_label(job(1, RT, deadline=95.0, done=0.5), now=40.0) == "smallx1"


def test_d_star_counts_boot_time():
    slow_boot = VMType("small", gpu("K80"), 1, 3.6, boot_time=30.0)
    configs = configurations((slow_boot, BIG))
    assert dstar_label(job(1, RT, deadline=120.0), configs=configs) == "bigx2"
    assert dstar_label(job(1, RT, deadline=130.0), configs=configs) == "smallx1"


def test_d_star_skips_unsupported_and_breaks_ties():
    assert dstar_label(job(1, (INF, 100.0, 60.0), deadline=1e9)) == "bigx2"
    assert dstar_label(job(1, (INF, INF, INF))) is None
    # small x1 (200 s) and big x1 (100 s) both cost 0.2, big x2 costs 0.3: the faster of the tie wins
    assert dstar_label(job(1, (200.0, 100.0, 150.0), deadline=1e9)) == "bigx1"
    # none meets, equal speed: cheaper wins
    assert dstar_label(job(1, (100.0, 100.0, 100.0), deadline=10.0)) == "smallx1"


def three_jobs():
    # submit order 1,2,3; deadline order 3,1,2; weight order 2,3,1
    return [
        job(1, RT, submit=0.0, deadline=500.0, weight=0.003),
        job(2, RT, submit=1.0, deadline=900.0, weight=0.015),
        job(3, RT, submit=2.0, deadline=300.0, weight=0.010),
    ]


@pytest.mark.parametrize(
    "kind, order",
    [("fifo", [1, 2, 3]), ("edf", [3, 1, 2]), ("priority", [2, 3, 1]), ("ps", [2, 3, 1])],
)
def test_queue_orders(kind, order):
    policy = optim.build(kind)
    assert not policy.may_preempt and not policy.pack  # without packing, every job on a free node of its own:
    jobs = three_jobs()
    plan = policy.decide(snapshot(waiting=reversed(jobs), nodes=3))
    assert [a.job_id for a in plan.start] == order
    assert [a.node for a in plan.start] == [0, 1, 2]
    assert dict(plan.vms) == {0: "small", 1: "small", 2: "small"}
    one = policy.decide(snapshot(waiting=jobs, nodes=1))
    assert [a.job_id for a in one.start] == order[:1]


def test_ties_broken_by_submission_then_id():
    a = job(5, RT, submit=3.0, deadline=100.0, weight=0.01)
    b = job(4, RT, submit=3.0, deadline=100.0, weight=0.01)
    c = job(9, RT, submit=1.0, deadline=100.0, weight=0.01)
    for kind in ("fifo", "edf", "priority"):
        plan = optim.build(kind).decide(snapshot(waiting=[a, b, c], nodes=3))
        assert [x.job_id for x in plan.start] == [9, 4, 5], kind


def test_assignment_uses_d_star_gpus_on_empty_nodes_only():
    busy = NodeView(0, vm=BIG, used_gpus=1)
    jobs = [job(1, RT, deadline=70.0), job(2, RT, deadline=1e9)]
    plan = optim.build("fifo").decide(snapshot(waiting=jobs, nodes=[busy, NodeView(1), NodeView(2)]))
    assert plan.start == (Assignment(1, 1, 2), Assignment(2, 2, 1))
    assert dict(plan.vms) == {1: "big", 2: "small"}
    assert not plan.keep_idle and not plan.move and not plan.preempt


def test_no_empty_node_waits():
    busy = NodeView(0, vm=SMALL, used_gpus=1)
    plan = optim.build("edf").decide(snapshot(waiting=[job(1, RT)], nodes=[busy]))
    assert not plan.start and not plan.vms


def test_head_of_line_blocking():
    # the head runs only on "big", the only empty node accepts only "small": nobody starts, not even job 2
    nodes = [NodeView(0, allowed=frozenset({"small"})), NodeView(1, allowed=frozenset({"big"}), vm=BIG, used_gpus=2)]
    head = job(1, (INF, 100.0, 60.0), submit=0.0)
    other = job(2, RT, submit=1.0)
    plan = optim.build("fifo").decide(snapshot(waiting=[head, other], nodes=nodes))
    assert not plan.start and not plan.vms


def test_restricted_slots_steer_d_star():
    nodes = [NodeView(0, allowed=frozenset({"big"})), NodeView(1, allowed=frozenset({"small"}))]
    # loose deadline: cheapest overall is small x1, and node 1 accepts it
    plan = optim.build("fifo").decide(snapshot(waiting=[job(1, RT)], nodes=nodes))
    assert plan.start == (Assignment(1, 1, 1),) and dict(plan.vms) == {1: "small"}
    # only the big-only slot is empty: D* is chosen among big configs -> big x2 (0.12 < 0.20)
    nodes = [NodeView(0, allowed=frozenset({"big"})), NodeView(1, allowed=frozenset({"small"}), vm=SMALL, used_gpus=1)]
    plan = optim.build("fifo").decide(snapshot(waiting=[job(1, RT)], nodes=nodes))
    assert plan.start == (Assignment(1, 0, 2),) and dict(plan.vms) == {0: "big"}
    # two jobs, both slots empty: the second gets the remaining (big-only) slot with its best big config
    nodes = [NodeView(0, allowed=frozenset({"big"})), NodeView(1, allowed=frozenset({"small"}))]
    plan = optim.build("fifo").decide(snapshot(waiting=[job(1, RT), job(2, RT, submit=1.0)], nodes=nodes))
    assert plan.start == (Assignment(1, 1, 1), Assignment(2, 0, 2))


def _idle_snapshot(vm):
    """Node 0 hosts an idle ``vm`` just left by a completion; node 1 is empty; one job waits."""
    nodes = [NodeView(0, allowed=None, vm=vm, ready_at=0.0, used_gpus=0), NodeView(1)]
    snap = snapshot([job(7, RT, deadline=1000.0)], [], nodes, time=50.0)
    from dataclasses import replace

    return replace(snap, idle_nodes=(0,))


def test_idle_vm_of_the_wanted_type_is_reused_in_place():
    plan = optim.build("fifo").decide(_idle_snapshot(SMALL))  # D* is small x1: reuse node 0 as it is
    assert plan.start == (Assignment(7, 0, 1),) and dict(plan.vms) == {}


def test_idle_vm_of_another_type_counts_as_a_free_node():
    plan = optim.build("fifo").decide(_idle_snapshot(BIG))  # D* is small x1: node 0 is free, its VM is replaced
    assert plan.start == (Assignment(7, 0, 1),) and dict(plan.vms) == {0: "small"}


def test_a_completion_frees_the_node_for_the_queue_at_that_instant():
    """One node; job 0 (A) at t=0 takes big x2 (cost tie 0.10 with small x1, faster: 50 s); job 1 (B) at t=1 waits,
    then starts exactly when job 0 ends, on small x1 (50 s, $0.05 < big x2 30 s, $0.06), replacing the idle VM."""
    from sim.engine import Simulation
    from tests.sim.helpers import A, B, cluster, table
    from tests.sim.helpers import job as sim_job

    for kind in ("fifo", "edf", "priority"):
        res = Simulation(cluster(1), [sim_job(0, A, 0.0), sim_job(1, B, 1.0)], optim.build(kind), table()).run()
        starts = dict(zip(res.jobs["job_id"], res.jobs["start_time"]))
        assert starts == {0: 0.0, 1: 50.0}, kind
        assert list(res.nodes["vm_type"]) == ["big", "small"]
        assert res.summary["vm_cost"] == pytest.approx(50 * 0.002 + 50 * 0.001)
