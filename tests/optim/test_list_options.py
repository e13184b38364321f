"""The list schedulers' options: packing jobs onto running VMs, gangs over several nodes, and renting spot VMs at
their expected cost."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optim
from predictors.table import TablePredictor
from sim.catalogue import gpu, spot_variant
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import ClusterRules, Job, JobSpec, VMType
from sim.risk import expected_runtime, spot_rates
from tests.optim.helpers import job, snapshot

SRV = VMType("srv", gpu("K80"), 4, 0.0)
ONE = JobSpec("alexnet", "pytorch", 10, 32, name="one", gpus=1)
EIGHT = JobSpec("alexnet", "pytorch", 10, 32, name="eight", gpus=8)
TABLE = TablePredictor({"one/srv/1": 100.0, "eight/srv/8": 50.0})


def servers(n: int = 2) -> Cluster:
    return Cluster((SRV,), tuple(NodeSlot(frozenset({"srv"}), fixed=True) for _ in range(n)),
                   rules=ClusterRules(gang=True))


def jobs(spec: JobSpec, count: int) -> list[Job]:
    return [Job(i, spec, 0.0, 1e9, 0.01) for i in range(count)]


def test_pack_puts_jobs_on_running_vms_best_fit_and_without_it_one_job_per_node():
    packed = Simulation(servers(), jobs(ONE, 5), optim.build("edf", pack=True), TABLE).run()
    assert list(packed.jobs.end_time) == [100.0] * 5
    assert sorted(packed.jobs.node.tolist()) == [0, 0, 0, 0, 1], "the first server fills before the second opens"
    alone = Simulation(servers(), jobs(ONE, 5), optim.build("edf"), TABLE).run()
    assert sorted(alone.jobs.end_time.tolist()) == [100.0, 100.0, 200.0, 200.0, 300.0]


def test_a_job_larger_than_a_server_runs_as_a_gang_over_whole_servers():
    r = Simulation(servers(), jobs(EIGHT, 1), optim.build("fifo"), TABLE).run()
    seg = r.segments
    assert sorted(zip(seg.node, seg.gpus)) == [(0, 4), (1, 4)] and r.jobs.end_time.iloc[0] == 50.0


def test_a_packed_gang_waits_at_the_head_of_the_queue_until_its_gpus_are_free():
    mixed = [Job(0, ONE, 0.0, 1e9, 0.01), Job(1, EIGHT, 1.0, 1e9, 0.01), Job(2, ONE, 2.0, 1e9, 0.01)]
    r = Simulation(servers(), mixed, optim.build("fifo", pack=True), TABLE).run()
    end = dict(zip(r.jobs.job_id, r.jobs.end_time))
    assert end == {0: 100.0, 1: 150.0, 2: 250.0}, "strict head-of-line: job 2 waits behind the gang, then for it"


OD = VMType("od", gpu("K80"), 1, 3.6, spot_price_per_hour=1.8)


def spot_choice(rate: float, deadline: float = 1e9, policy: str = "edf", **params) -> str:
    types = (OD, spot_variant(OD, rate))
    s = snapshot(waiting=[job(0, (3600.0, 3600.0), deadline=deadline)], nodes=1, vm_types=types)
    plan = optim.build(policy, **params).decide(s)
    return plan.vms[0]


def test_spot_is_rented_only_with_the_option_and_where_its_expected_cost_is_lower():
    assert spot_choice(0.01) == "od", "without the option a spot VM is never rented"
    # λT = 0.01: expected 3600 s x (e^0.01 - 1) / 0.01 = 3618 s at $1.8/h = $1.81 < $3.60 on demand
    assert spot_choice(0.01, spot=True) == "od-spot"
    # λT = 2: expected 1800 s x (e^2 - 1) = 11,500 s at $1.8/h = $5.75 > $3.60
    assert spot_choice(2.0, spot=True) == "od"
    # cheaper, but expected to finish at 3618 s, after the deadline the on-demand VM meets
    assert spot_choice(0.01, deadline=3610.0, spot=True) == "od"
    assert spot_choice(0.01, deadline=3620.0, spot=True) == "od-spot"


@pytest.mark.parametrize("policy", ["greedy", "milp"])
def test_greedy_and_the_milp_rent_spot_where_its_expected_cost_is_lower(policy):
    assert spot_choice(0.01, policy=policy) == "od-spot"
    assert spot_choice(2.0, policy=policy) == "od"


def test_greedy_runs_a_gang_over_whole_servers_beside_the_jobs_it_packs():
    mixed = [Job(0, EIGHT, 0.0, 1e9, 0.01), Job(1, ONE, 0.0, 1e9, 0.01), Job(2, ONE, 0.0, 1e9, 0.01)]
    r = Simulation(servers(3), mixed, optim.build("greedy"), TABLE).run()
    seg = r.segments
    # pressure order: the two longer 1-GPU jobs first, best fit on server 0; the gang on the two free servers
    assert set(seg[seg.job_id > 0].node) == {0} and list(r.jobs.end_time) == [50.0, 100.0, 100.0]
    assert sorted(zip(seg[seg.job_id == 0].node, seg[seg.job_id == 0].gpus)) == [(1, 4), (2, 4)]
    short = Simulation(servers(2), mixed, optim.build("greedy"), TABLE).run()
    assert list(short.jobs.end_time) == [150.0, 100.0, 100.0], "no two free servers: the gang waits for them"


def test_expected_runtime_on_spot_by_hand():
    types = (OD, spot_variant(OD, 3.6))  # λ = 0.001 per second
    rates = spot_rates(snapshot(vm_types=types).configs)
    rem = np.array([3600.0, 3600.0])
    no_ckpt = expected_runtime(rem, rates, ClusterRules())
    assert no_ckpt[0] == 3600.0 and no_ckpt[1] == pytest.approx(1000.0 * (math.e ** 3.6 - 1.0))
    # checkpoints every 600 s: six segments of (1/λ + 60 s restart) x (e^0.6 - 1)
    ckpt = expected_runtime(rem, rates, ClusterRules(restart_overhead=60.0, checkpoint_interval=600.0))
    assert ckpt[1] == pytest.approx(6 * 1060.0 * (math.e ** 0.6 - 1.0))
