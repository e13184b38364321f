"""Gang jobs across servers, fixed servers and jobs that ask for a GPU count, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from optim.baselines import FIFO
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Job, JobSpec, Plan, Snapshot, VMType
from tests.optim.worlds import World, check
from tests.sim.helpers import Scripted

V100 = VMType("v100", gpu("V100"), 1, 3.6)  # one GPU per server, $0.001 per second
BIG = VMType("big", gpu("V100"), 4, 14.4)
GANG = JobSpec("resnet", "pytorch", 1000, 64, name="G", gpus=4)
ONE = JobSpec("resnet", "pytorch", 1000, 64, name="S", gpus=1)
RUNTIMES = TablePredictor({"G/v100/4": 100.0, "G/v100/1": 300.0, "S/v100/1": 50.0, "G/big/4": 100.0,
                           "G/big/2": 160.0, "S/big/1": 50.0})


def servers(n: int = 4, vm: VMType = V100, gang: bool = True, **kw) -> Cluster:
    return Cluster((vm,), tuple(NodeSlot(frozenset({vm.name}), fixed=True) for _ in range(n)),
                   rules=ClusterRules(gang=gang, **kw))


class GangFirstFit(Scripted):
    """Queue order; each waiting job takes as many idle one-GPU servers as it asks for, as one gang."""

    may_gang = True

    def __init__(self) -> None:
        super().__init__(self._plan)

    @staticmethod
    def _plan(s: Snapshot) -> Plan:
        idle = [n.index for n in s.nodes if n.used_gpus == 0]
        start = []
        for jv in s.waiting:
            g = jv.job.spec.gpus or 1
            if g > len(idle):
                break
            take, idle = idle[:g], idle[g:]
            start.append(Assignment(jv.id, take[0], 1, gang=tuple((n, 1) for n in take[1:])))
        return Plan(start=tuple(start))


def run(cluster: Cluster, jobs: list[Job], policy) -> object:
    result = Simulation(cluster, jobs, policy, RUNTIMES).run()
    check(World(cluster, jobs, RUNTIMES, None, 0), result)
    return result


def test_a_four_gpu_job_runs_on_four_one_gpu_servers():
    r = run(servers(), [Job(0, GANG, 0.0, 1e9, 0.0)], GangFirstFit())
    job = r.jobs.iloc[0]
    assert (job.start_time, job.end_time, job.gpus, job.vm_type) == (0.0, 100.0, 4, "v100")
    seg = r.segments
    assert sorted(seg.node) == [0, 1, 2, 3] and (seg.gpus == 1).all()
    assert (seg.start_time == 0.0).all() and (seg.end_time == 100.0).all() and (seg.done == 1.0).all()
    # four fixed servers from t=0 to the last end, $0.001/s each; the job ran on all of them the whole time
    assert list(r.nodes.stop_time) == [100.0] * 4
    assert r.summary["vm_cost"] == pytest.approx(0.4)
    assert job.cost_share == pytest.approx(0.4) and r.summary["idle_cost"] == 0.0


def test_a_gang_waits_until_four_servers_are_free():
    jobs = [Job(0, ONE, 0.0, 1e9, 0.0), Job(1, GANG, 10.0, 1e9, 0.0)]
    r = run(servers(), jobs, GangFirstFit())
    ends = dict(zip(r.jobs.job_id, zip(r.jobs.start_time, r.jobs.end_time)))
    assert ends[0] == (0.0, 50.0)
    assert ends[1] == (50.0, 150.0), "three servers were free at t=10; the gang starts when the fourth is"
    # servers 1-3 idle from 0 to 50 and server 0 from 50 to... never: the gang holds all four until 150
    busy = (r.segments.end_time - r.segments.start_time) * r.segments.gpus
    assert busy.sum() == pytest.approx(50 + 4 * 100)
    assert r.summary["idle_cost"] == 0.0  # fixed servers that ran any job carry no idle cost


def test_a_job_that_asks_for_gpus_sees_only_that_count():
    seen = []

    def script(s: Snapshot) -> Plan:
        seen.append(s)
        return Plan(start=(Assignment(0, 0, 4),)) if s.waiting else Plan()

    r = Simulation(servers(1, BIG), [Job(0, GANG, 0.0, 1e9, 0.0)], Scripted(script), RUNTIMES).run()
    est = seen[0].waiting[0].estimates
    labels = [c.label for c in seen[0].configs]
    assert labels == ["bigx1", "bigx2", "bigx3", "bigx4"]
    assert [math.isfinite(x) for x in est] == [False, False, False, True]  # big/2 is in the table, but G asks for 4
    assert r.jobs.end_time.iloc[0] == 100.0


class SingleNodeFIFO(FIFO):
    may_gang = False


def test_a_policy_without_may_gang_never_sees_gang_configurations():
    with pytest.raises(CapsimError, match="asks for 4 GPUs.*no feasible configuration.*for a policy without may_gang"):
        Simulation(servers(), [Job(0, GANG, 0.0, 1e9, 0.0)], SingleNodeFIFO(), RUNTIMES)
    r = run(servers(), [Job(0, ONE, 0.0, 1e9, 0.0), Job(1, ONE, 0.0, 1e9, 0.0)], SingleNodeFIFO())
    assert sorted(r.jobs.node) == [0, 1] and (r.jobs.end_time == 50.0).all()


def gang(nodes, gpus=1):
    return Assignment(0, nodes[0], gpus, gang=tuple((n, gpus) for n in nodes[1:]))


REJECTED = {
    "gang without may_gang": (dict(gang=False), servers(2, BIG), gang([0, 1], 2), "does not declare may_gang"),
    "cluster without gangs": (dict(), servers(2, BIG, gang=False), gang([0, 1], 2), "the cluster does not allow gangs"),
    "node twice": (dict(), servers(), gang([0, 1, 1, 2]), "names node 1 twice"),
    "too many GPUs on a part": (dict(), servers(), gang([0, 1], 2), "asks for 2 GPUs on node 0"),
    "beyond the configurations": (dict(), servers(2), gang([0, 1], 1), "estimator marks infeasible"),
}


@pytest.mark.parametrize("case", REJECTED)
def test_bad_gangs_are_rejected(case):
    flags, cluster, assignment, message = REJECTED[case]
    policy = Scripted(lambda s: Plan(start=(assignment,)) if s.waiting else Plan(), gang=flags.get("gang", True))
    with pytest.raises(CapsimError, match=message):
        Simulation(cluster, [Job(0, GANG if case != "beyond the configurations" else ONE, 0.0, 1e9, 0.0)],
                   policy, RUNTIMES).run()


def test_a_gang_over_two_vm_types_is_rejected():
    cluster = Cluster((V100, BIG),
                      (NodeSlot(frozenset({"v100"}), fixed=True), NodeSlot(frozenset({"big"}), fixed=True)),
                      rules=ClusterRules(gang=True))
    policy = Scripted(lambda s: Plan(start=(Assignment(0, 0, 1, gang=((1, 3),)),)) if s.waiting else Plan(),
                      gang=True)
    with pytest.raises(CapsimError, match="spread over v100 and big: a gang runs on one VM type"):
        Simulation(cluster, [Job(0, GANG, 0.0, 1e9, 0.0)], policy, RUNTIMES).run()


def test_a_gang_moves_and_stops_as_one():
    """Started at 0 on servers 0-3, preempted at t=40 when job 1 arrives, restarted on all four at t=90."""

    def script(s: Snapshot) -> Plan:
        if s.time == 0.0:
            return Plan(start=(gang([0, 1, 2, 3]),))
        if s.time == 40.0:
            return Plan(preempt=(0,), start=(Assignment(1, 2, 1),))
        if s.time == 90.0 and s.waiting:
            return Plan(start=(gang([3, 2, 1, 0]),))
        return Plan()

    policy = Scripted(script, preempt=True, gang=True)
    jobs = [Job(0, GANG, 0.0, 1e9, 0.0), Job(1, ONE, 40.0, 1e9, 0.0)]
    r = run(servers(), jobs, policy)
    seg = r.segments[r.segments.job_id == 0].sort_values(["start_time", "node"])
    assert list(seg.start_time) == [0.0] * 4 + [90.0] * 4 and list(seg.end_time) == [40.0] * 4 + [150.0] * 4
    assert list(seg.done) == [0.4] * 4 + [1.0] * 4
    assert r.jobs.set_index("job_id").end_time.to_dict() == {0: 150.0, 1: 90.0}
    with pytest.raises(CapsimError, match="fixed server allows exactly one VM type"):
        Cluster((V100,), (NodeSlot(None, fixed=True),))


def test_a_fixed_server_is_never_stopped_and_a_plan_cannot_change_it():
    stop = Scripted(lambda s: Plan(vms={0: None}, start=(Assignment(0, 1, 1),)) if s.waiting else Plan())
    r = run(servers(2), [Job(0, ONE, 0.0, 1e9, 0.0)], stop)
    assert list(r.nodes.start_time) == [0.0, 0.0] and list(r.nodes.stop_time) == [50.0, 50.0]
    assert r.summary["idle_cost"] == pytest.approx(0.05)  # server 0 ran no job: its 50 s are idle cost
    other = Cluster((V100, BIG), (NodeSlot(frozenset({"v100"}), fixed=True), NodeSlot(frozenset({"big"}))))
    change = Scripted(lambda s: Plan(vms={0: "big"}))
    with pytest.raises(CapsimError, match="only allows \\['v100'\\]"):
        Simulation(other, [Job(0, ONE, 0.0, 1e9, 0.0)], change, RUNTIMES).run()
