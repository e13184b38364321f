"""The lower bound (optim.bound): on instances small enough to enumerate every offline schedule, bound ≤ optimum ≤
every policy's cost through the engine; more slots never raise it; the runner reports it in every summary row."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import optim
from experiments.running.tasks import Task, execute
from experiments.scenario import PolicySpec, Scenario
from optim.bound import instance_bound, lower_bound
from predictors.table import TablePredictor
from sim.catalogue import configurations, gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import CapsimError, Job, JobSpec, VMType
from tests.optim.test_conformance import make


def one_gpu_instance(seed: int):
    """2–4 jobs, 1–2 slots and two VM types of one GPU each: a VM runs one job at a time, so every schedule is a
    sequence of jobs per slot, and its cheapest timing starts each job as early as its slot and arrival allow."""
    rng = np.random.default_rng(seed)
    vms = (VMType("slow", gpu("K80"), 1, float(rng.uniform(0.5, 2.0))),
           VMType("fast", gpu("M60"), 1, float(rng.uniform(2.0, 6.0))))
    n_jobs = int(rng.integers(2, 5))
    n_slots = int(rng.integers(1, 3))
    jobs, table = [], {}
    for i in range(n_jobs):
        spec = JobSpec("resnet50", "pytorch", 100, 64, name=f"T{i}")
        slow = float(rng.uniform(100, 600))
        table[f"T{i}/slow/1"] = slow
        if rng.random() < 0.8:
            table[f"T{i}/fast/1"] = slow * float(rng.uniform(0.3, 0.9))
        submit = float(rng.uniform(0, 300))
        jobs.append(Job(i, spec, submit, submit + float(rng.uniform(50, 700)), float(rng.uniform(0.002, 0.05))))
    cluster = Cluster(vms, tuple(NodeSlot() for _ in range(n_slots)))
    return cluster, jobs, TablePredictor(table)


def runtimes(cluster: Cluster, jobs: list[Job], truth: TablePredictor) -> np.ndarray:
    return np.array([[truth.runtime(j.spec, c.vm, c.gpus) for c in cluster.configs] for j in jobs])


def optimum(cluster: Cluster, jobs: list[Job], truth: TablePredictor) -> float:
    """The cheapest offline schedule: every order of the jobs, slot and VM type per job, each job as early as can be."""
    t = runtimes(cluster, jobs, truth)
    types = list(cluster.configs)
    best = math.inf
    for order in itertools.permutations(range(len(jobs))):
        for slots in itertools.product(range(cluster.n_nodes), repeat=len(jobs)):
            for ks in itertools.product(range(len(types)), repeat=len(jobs)):
                if any(not math.isfinite(t[j, ks[j]]) for j in range(len(jobs))):
                    continue
                free = [0.0] * cluster.n_nodes
                cost = 0.0
                for j in order:
                    job, k, n = jobs[j], ks[j], slots[j]
                    end = max(free[n], job.submit_time) + t[j, k]
                    free[n] = end
                    cost += types[k].vm.price_per_second * t[j, k] + job.weight * max(0.0, end - job.deadline)
                best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_bound_below_the_enumerated_optimum_below_every_policy(seed):
    cluster, jobs, truth = one_gpu_instance(seed)
    bound = lower_bound(jobs, cluster.configs, runtimes(cluster, jobs, truth), [s.allowed for s in cluster.slots])
    best = optimum(cluster, jobs, truth)
    assert 0.0 < bound <= best + 1e-9
    for kind, cls in optim.registry(aliases=False).items():
        if not cls.plans_capacity:
            continue  # policies of fixed clusters (Gavel's, ElasticFlow's) do not rent VMs: not this instance's problem
        cost = Simulation(cluster, jobs, make(kind), truth).run().summary["total_cost"]
        assert best <= cost + 1e-9 * max(1.0, cost), (kind, best, cost)


def test_the_bound_sees_two_jobs_competing_for_one_slot():
    """Two jobs arrive together, each needing the slot's only GPU for 100 s by a deadline 100 s away: one of them is
    100 s late. One slot forces tardiness into the bound; with two slots there is none and the bound is the rent."""
    vm = VMType("one", gpu("K80"), 1, 3.6)  # $0.001 per second
    spec = JobSpec("resnet50", "pytorch", 100, 64, name="T")
    jobs = [Job(i, spec, 0.0, 100.0, 1.0) for i in range(2)]
    configs = configurations((vm,))
    t = np.full((2, 1), 100.0)
    rent = 2 * 100 * 0.001
    alone = lower_bound(jobs, configs, t, [None])
    assert lower_bound(jobs, configs, t, [None, None]) == pytest.approx(rent, rel=1e-6)
    assert rent + 50.0 < alone <= rent + 100.0 + 1e-6


def test_more_slots_never_raise_the_bound():
    cluster, jobs, truth = one_gpu_instance(3)
    t = runtimes(cluster, jobs, truth)
    bounds = [lower_bound(jobs, cluster.configs, t, [None] * n) for n in (1, 2, 4)]
    assert bounds[0] >= bounds[1] - 1e-9 >= bounds[2] - 2e-9


def test_a_job_no_slot_can_run_is_a_clear_error():
    cluster, jobs, truth = one_gpu_instance(0)
    with pytest.raises(CapsimError, match="no configuration that a slot accepts"):
        lower_bound(jobs, cluster.configs, runtimes(cluster, jobs, truth), [frozenset({"nothing"})])


def test_a_run_whose_bound_cannot_be_computed_gets_nan(caplog):
    cluster, jobs, truth = one_gpu_instance(1)
    assert math.isnan(instance_bound(jobs, cluster.configs, truth, [frozenset({"nothing"})]))
    assert "no lower bound" in caplog.text


def test_instance_bound_reads_the_truth_and_is_computed_once():
    cluster, jobs, truth = one_gpu_instance(5)
    slots = [s.allowed for s in cluster.slots]
    first = instance_bound(jobs, cluster.configs, truth, slots)
    assert first == lower_bound(jobs, cluster.configs, runtimes(cluster, jobs, truth), slots)
    calls = []
    truth.runtimes = lambda *a: calls.append(a) or []  # type: ignore[method-assign]
    assert instance_bound(jobs, cluster.configs, truth, slots) == first and not calls


def test_the_runner_reports_the_bound_and_passes_the_run_seed(monkeypatch):
    import sim.engine

    seen = []
    real = sim.engine.Simulation

    class Spy(real):  # type: ignore[misc, valid-type]
        def __init__(self, cluster, jobs, policy, *args, **kwargs):
            seen.append(policy.get_params())
            super().__init__(cluster, jobs, policy, *args, **kwargs)

    monkeypatch.setattr(sim.engine, "Simulation", Spy)
    sc = Scenario.model_validate({"cluster": {"nodes": 2}, "workload": {"jobs": 6}, "seeds": [7]})
    out = execute(Task.make(sc, PolicySpec(kind="random_greedy", iterations=3), 7))
    assert out.ok, out.error
    assert seen[0]["seed"] == 7 and seen[0]["iterations"] == 3
    s = out.summary
    assert 0 < s["lower_bound"] <= s["total_cost"]
    assert s["bound_ratio"] == pytest.approx(s["total_cost"] / s["lower_bound"])
    pinned = execute(Task.make(sc, PolicySpec(kind="random_greedy", iterations=3, seed=1), 7))
    assert pinned.ok and seen[1]["seed"] == 1
