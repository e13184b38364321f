"""Round mode (``sim.timing.rounds``) on hand-computed cases: boundaries, admission, no backfilling, whole iterations,
the round's end at its slowest micro-task, restart overhead between rounds, stalls."""

from __future__ import annotations

import pytest

from optim.baselines import FIFO
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Job, JobSpec, Plan, Snapshot, VMType
from tests.optim.worlds import World, check
from tests.sim.helpers import Scripted

GPU = VMType("v100", gpu("V100"), 1, 0.0)
LONG = JobSpec("resnet", "pytorch", 1000, 64, name="LONG")   # 1 iteration per second
SHORT = JobSpec("resnet", "pytorch", 100, 64, name="SHORT")  # 1 iteration per second
HALF = JobSpec("resnet", "pytorch", 500, 64, name="HALF")    # 1 iteration per second
ODD = JobSpec("resnet", "pytorch", 1000, 64, name="ODD")     # 0.999 iterations per second
RUNTIMES = TablePredictor({"LONG/v100/1": 1000.0, "SHORT/v100/1": 100.0, "HALF/v100/1": 500.0,
                           "ODD/v100/1": 1001.0})


def servers(n: int, **kw) -> Cluster:
    return Cluster((GPU,), tuple(NodeSlot(frozenset({"v100"}), fixed=True) for _ in range(n)),
                   rules=ClusterRules(round_length=360.0, **kw))


def run(cluster: Cluster, jobs: list[Job], policy):
    result = Simulation(cluster, jobs, policy, RUNTIMES).run()
    check(World(cluster, jobs, RUNTIMES, None, 0), result)
    return result


def ends(r) -> dict[int, tuple[float, float]]:
    return {int(j): (s, e) for j, s, e in zip(r.jobs.job_id, r.jobs.start_time, r.jobs.end_time)}


def test_a_lone_job_runs_in_rounds_from_its_arrival():
    r = run(servers(1), [Job(0, LONG, 100.0, 1e9, 0.0)], FIFO())
    assert ends(r) == {0: (100.0, 1100.0)}
    assert list(r.decisions.time) == [100.0, 460.0, 820.0] and set(r.decisions.trigger) == {"round"}
    assert r.jobs.final_round_iterations.iloc[0] == 280  # 1000 - 2 x 360
    assert len(r.segments) == 1, "a job the plan leaves alone keeps its server: one run segment"


def test_an_arrival_waits_for_the_next_boundary():
    r = run(servers(2), [Job(0, LONG, 0.0, 1e9, 0.0), Job(1, SHORT, 50.0, 1e9, 0.0)], FIFO())
    assert ends(r) == {0: (0.0, 1000.0), 1: (360.0, 460.0)}


def test_no_backfilling_inside_a_round():
    jobs = [Job(0, SHORT, 0.0, 1e9, 0.0), Job(1, LONG, 0.0, 1e9, 0.0), Job(2, SHORT, 0.0, 1e9, 0.0)]
    r = run(servers(2), jobs, FIFO())
    assert ends(r) == {0: (0.0, 100.0), 1: (0.0, 1000.0), 2: (360.0, 460.0)}, "server 0 idles from 100 to 360"


def test_a_round_ends_with_its_slowest_micro_task():
    """Alone, jobs 0 and 1 would end at 100 and 200: the round of job 0 ends at 100, so job 1 starts then."""
    r = run(servers(1), [Job(0, SHORT, 0.0, 1e9, 0.0), Job(1, SHORT, 0.0, 1e9, 0.0)], FIFO())
    assert ends(r) == {0: (0.0, 100.0), 1: (100.0, 200.0)}


def test_rounds_run_whole_iterations():
    """ODD runs 0.999 it/s: 359 whole iterations (359.359 s) fit in a round of 360 s. Beside a job that fills the
    round, it does 359 per round and its last 282 iterations start at 720."""
    r = run(servers(2), [Job(0, LONG, 0.0, 1e9, 0.0), Job(1, ODD, 0.0, 1e9, 0.0)], FIFO())
    assert ends(r)[1] == (0.0, pytest.approx(720.0 + 282 * 1.001))
    assert ends(r)[0] == (0.0, 1000.0)
    assert list(r.decisions.time) == [0.0, 360.0, 720.0]
    assert dict(zip(r.jobs.job_id, r.jobs.final_round_iterations)) == {0: 280, 1: 282}
    alone = run(servers(1), [Job(1, ODD, 0.0, 1e9, 0.0)], FIFO())
    assert ends(alone)[1] == (0.0, pytest.approx(1001.0)), "alone, its rounds end with its own micro-tasks"
    assert list(alone.decisions.time) == pytest.approx([0.0, 359.359, 718.718])


def swap_every_round(s: Snapshot) -> Plan:
    """One server: at every boundary the running job makes way for the waiting one."""
    if s.waiting and s.running:
        return Plan(preempt=(s.running[0].id,), start=(Assignment(s.waiting[0].id, 0, 1),))
    if s.waiting:
        return Plan(start=(Assignment(s.waiting[0].id, 0, 1),))
    return Plan()


def test_time_slicing_pays_the_restart_overhead_between_rounds():
    jobs = [Job(0, HALF, 0.0, 1e9, 0.0), Job(1, HALF, 0.0, 1e9, 0.0)]
    r = run(servers(1, restart_overhead=10.0), jobs, Scripted(swap_every_round, preempt=True))
    # 0: 0-360 (360 it); 1: 360-720 (360 it); 0: 720-870 (10 s restart + 140 it); 1: 870-1020 (10 s + 140 it)
    assert ends(r) == {0: (0.0, 870.0), 1: (360.0, 1020.0)}
    seg = r.segments.sort_values("start_time")
    assert list(seg.job_id) == [0, 1, 0, 1] and list(seg.done) == [0.72, 0.72, 1.0, 1.0]


def r_seen(jobs):
    """The snapshots the swapping policy sees (a running job's view is renewed at each boundary)."""
    policy = Scripted(swap_every_round, preempt=True)
    Simulation(servers(1), jobs, policy, RUNTIMES).run()
    return policy.seen


def test_running_views_are_renewed_at_each_boundary():
    seen = r_seen([Job(0, HALF, 0.0, 1e9, 0.0), Job(1, HALF, 0.0, 1e9, 0.0)])
    at_360 = next(s for s in seen if s.time == 360.0)
    (jv,) = at_360.running
    assert (jv.id, jv.since, jv.done) == (0, 360.0, 0.72)
    assert at_360.rules.round_length == 360.0 and at_360.trigger == "round"


def test_a_stall_in_round_mode_asks_the_policy_again():
    policy = Scripted(lambda s: Plan(start=(Assignment(s.waiting[0].id, 0, 1),)) if s.trigger == "stall" else Plan())
    r = run(servers(1), [Job(0, SHORT, 0.0, 1e9, 0.0)], policy)
    assert list(r.decisions.trigger) == ["round", "stall"] and ends(r) == {0: (0.0, 100.0)}
    never = Scripted(lambda s: Plan())
    with pytest.raises(CapsimError, match="left 1 jobs waiting forever.*'stall' decision at t=0"):
        Simulation(servers(1), [Job(0, SHORT, 0.0, 1e9, 0.0)], never, RUNTIMES).run()


def test_round_mode_excludes_periodic_decisions():
    with pytest.raises(CapsimError, match="round_length and decision_interval exclude each other"):
        servers(1, decision_interval=60.0)


def test_gavels_metrics_beside_capsims():
    """On four one-GPU servers: GANG (4 GPUs, 363 iterations at 1 it/s) ends its first round with 3 iterations left:
    Gavel would fail that round and drop the job; capsim runs it (363 s) and reports it, leaving it out of Gavel's
    average JCT. SHORT runs first on one server (0-100); the gang waits for all four."""
    gang = JobSpec("resnet", "pytorch", 363, 64, name="GANG", gpus=4)
    truth = TablePredictor({"GANG/v100/4": 363.0, "SHORT/v100/1": 100.0})
    cluster = Cluster((GPU,), tuple(NodeSlot(frozenset({"v100"}), fixed=True) for _ in range(4)),
                      rules=ClusterRules(gang=True, round_length=360.0))

    class GangFirst(Scripted):
        may_gang = True

    def script(s: Snapshot) -> Plan:
        if s.waiting and not s.running:
            jv = s.waiting[0]
            if jv.job.spec.gpus == 4:
                return Plan(start=(Assignment(jv.id, 0, 1, gang=((1, 1), (2, 1), (3, 1))),))
            return Plan(start=(Assignment(jv.id, 0, 1),))
        return Plan()

    jobs = [Job(0, SHORT, 0.0, 1e9, 0.0), Job(1, gang, 0.0, 1e9, 0.0)]
    r = Simulation(cluster, jobs, GangFirst(script), truth).run()
    check(World(cluster, jobs, truth, None, 0), r)
    # SHORT 0-100 (the round ends at 100), GANG 100-463: 360 iterations, then 3 in its last round
    assert ends(r) == {0: (0.0, 100.0), 1: (100.0, 463.0)}
    assert list(r.jobs.final_round_iterations) == [100, 3]
    s = r.summary
    assert s["gavel_dropped"] == 1 and s["gavel_mean_jct"] == 100.0 and s["mean_jct"] == (100.0 + 463.0) / 2
    assert s["gavel_makespan"] == 463.0
    assert s["gavel_utilisation"] == pytest.approx((100 + 4 * 363) / (4 * 463))
