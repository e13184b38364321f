"""The assignment rules of a fixed heterogeneous cluster (``even``, ``gpu_priority``), by hand, on the MLPerf table."""

from __future__ import annotations

import pytest

from optim.gpu_assignment import Even, GPUPriority
from predictors import build
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Job, JobSpec, VMType

P100 = VMType("p100", gpu("P100"), 1, 0.0, provider="fixed")
V100 = VMType("v100", gpu("V100"), 1, 0.0, provider="fixed")
X = JobSpec("X", "pytorch", 1, 1, name="X")  # gains 2x on a V100
Y = JobSpec("Y", "pytorch", 1, 1, name="Y")  # gains 1.1x
TIMES = TablePredictor({"X/p100/1": 200.0, "X/v100/1": 100.0, "Y/p100/1": 110.0, "Y/v100/1": 100.0})


def fixed(*types: VMType) -> Cluster:
    return Cluster(tuple(dict.fromkeys(types)), tuple(NodeSlot(frozenset({t.name}), fixed=True) for t in types))


def ends(policy, jobs, cluster=None) -> dict[int, tuple[str, float]]:
    r = Simulation(cluster or fixed(P100, V100), jobs, policy, TIMES).run()
    return {int(j.job_id): (j.vm_type, float(j.end_time)) for j in r.jobs.itertuples()}


def test_priority_gives_the_v100_to_the_job_that_gains_most() -> None:
    jobs = [Job(0, Y, 0.0, 1e6, 0.01), Job(1, X, 0.0, 1e6, 0.01)]
    assert ends(GPUPriority(), jobs) == {0: ("p100", 110.0), 1: ("v100", 100.0)}
    # even ignores the GPU type: arrival order, round robin from the first server (the P100)
    assert ends(Even(), jobs) == {0: ("p100", 110.0), 1: ("v100", 100.0)}
    swapped = [Job(0, X, 0.0, 1e6, 0.01), Job(1, Y, 0.0, 1e6, 0.01)]
    assert ends(Even(), swapped) == {0: ("p100", 200.0), 1: ("v100", 100.0)}
    assert ends(GPUPriority(), swapped) == {0: ("v100", 100.0), 1: ("p100", 110.0)}


def test_even_spreads_jobs_round_robin_over_the_servers() -> None:
    jobs = [Job(i, Y, 0.0, 1e6, 0.01) for i in range(4)]
    got = ends(Even(), jobs, fixed(P100, P100, V100, V100))
    assert sorted(vm for vm, _ in got.values()) == ["p100", "p100", "v100", "v100"]
    later = [Job(i, Y, 1000.0 * i, 1e6, 0.01) for i in range(4)]  # one at a time: still every server in turn
    r = Simulation(fixed(P100, P100, V100, V100), later, Even(), TIMES).run()
    assert list(r.jobs.sort_values("job_id").node) == [0, 1, 2, 3]


def test_the_mlperf_table_holds_the_published_times() -> None:
    t = build("throughput", table="mlperf")
    run = JobSpec("SR", "pytorch", 1, 1, name="SR")
    assert t.runtime(run, P100, 1) == pytest.approx(15 * 3600 + 7 * 60 + 34)
    assert t.runtime(run, V100, 1) == pytest.approx(10 * 3600 + 53 * 60 + 32)
    assert t.runtime(JobSpec("RM", "pytorch", 1, 1), V100, 1) > t.runtime(JobSpec("RM", "pytorch", 1, 1), P100, 1)
    assert t.support(JobSpec("XX", "pytorch", 1, 1), P100, 1) is not None
