"""Gavel's policy set (issue 21): the two rules where the replay followed capsim rather than Gavel, ECOS's answers to
Gavel's LPs, and each policy's allocation on hand-computed cases and through the engine."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

import optim
from optim.gavel import ipm
from optim.gavel.allocation import max_min_fairness
from optim.gavel.fairness import FinishTimeState, horizon, isolated, min_total_duration
from optim.gavel.packing import AlloX
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import CapsimError, ClusterRules, Job, JobSpec, VMType
from tests.optim.worlds import World, check

V100, P100, K80 = (VMType(n.lower(), gpu(n), 1, 0.0) for n in ("V100", "P100", "K80"))
ECOS_CASES = json.loads((Path(__file__).parent / "data" / "ecos_gavel_lps.json").read_text())["cases"]


# ----- ECOS's answers -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", range(len(ECOS_CASES)))
def test_ipm_gives_ecos_answer_on_gavels_lps(case):
    """Problems of Gavel's family (a feasibility problem of min_total_duration_perf, max-min problems of 4:4:4 and
    2:6:8 clusters with 1-, 2- and 4-GPU jobs) solved by ECOS through cvxpy as Gavel writes them
    (``data/ecos_gavel_lps.json``, cvxpy 1.9.3, ECOS 2.0.14): the same X, where the optimum leaves it open."""
    c = ECOS_CASES[case]
    x, optimal = ipm.solve(np.array(c["a"]), np.array(c["sf"]), np.array(c["gpus"]), np.array(c["d"]),
                           with_t=c["kind"] == "max_min")
    assert optimal
    assert np.abs(x - np.clip(np.array(c["x"]), 0.0, 1.0)).max() < 1e-8


@pytest.mark.parametrize("seed", range(5))
def test_ipm_max_min_reaches_the_optimum_and_feasibility_meets_every_demand(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 15)), 3
    a = rng.uniform(0.1, 5.0, (n, m)) * (rng.random((n, m)) > 0.2)
    a[:, 1] += 0.1
    sf = rng.choice([1.0, 2.0, 4.0], size=(n, 1)).repeat(m, axis=1)
    gpus = rng.integers(1, 9, m).astype(float)
    x, optimal = ipm.solve(a, sf, gpus, np.zeros(n), with_t=True)
    assert optimal and (x.sum(axis=1) <= 1 + 1e-7).all() and ((sf * x).sum(axis=0) <= gpus + 1e-7).all()
    c = np.zeros(n * m + 1)
    c[-1] = -1.0
    rows = [np.concatenate([(-a * (np.arange(n) == j)[:, None]).ravel(), [1.0]]) for j in range(n)]
    rows += [np.concatenate([(np.arange(n) == j).repeat(m).astype(float), [0.0]]) for j in range(n)]
    rows += [np.concatenate([(sf * (np.arange(m) == w)).ravel(), [0.0]]) for w in range(m)]
    rhs = [0.0] * n + [1.0] * n + list(gpus)
    best = -linprog(c, A_ub=np.array(rows), b_ub=rhs, bounds=[(0, None)] * (n * m) + [(None, None)]).fun
    assert (a * x).sum(axis=1).min() == pytest.approx(best, rel=1e-6)
    demand = 0.9 * best * np.ones(n)  # strictly feasible
    y, optimal = ipm.solve(a, sf, gpus, demand, with_t=False)
    assert optimal and ((a * y).sum(axis=1) >= demand - 1e-7).all() and (y.sum(axis=1) <= 1 + 1e-7).all()


def test_ipm_splits_a_symmetric_cluster_in_equal_thirds():
    """Every type alike (4:4:4, rate 1 everywhere): ECOS's point is symmetric, each share split in equal thirds."""
    x, _ = ipm.solve(np.ones((5, 3)), np.ones((5, 3)), np.array([4.0, 4.0, 4.0]), np.zeros(5), with_t=True)
    assert x == pytest.approx(np.full((5, 3), 1 / 3), abs=1e-7)
    x, _ = ipm.solve(np.ones((20, 3)), np.ones((20, 3)), np.array([4.0, 4.0, 4.0]), np.zeros(20), with_t=True)
    assert x == pytest.approx(np.full((20, 3), 12 / 20 / 3), abs=1e-7), "12 GPUs over 20 jobs"


# ----- rule (b): a gang on a type with fewer GPUs --------------------------------------------------------------------

def test_max_min_fairness_perf_prices_a_gang_on_a_type_too_small_for_it():
    """Gavel's LP (issue 21): a 4-GPU job A on 3 V100s and 10 K80s, with a 1-GPU job B. Gavel uses A's table
    throughput on the V100s, so the LP gives A up to 0.75 there, an allocation it can never run; the corrected
    model gives A nothing on the V100s."""
    rate = np.array([[10.0, 2.0], [5.0, 1.0]])  # columns v100, k80
    sf = np.array([[4, 4], [1, 1]])
    gpus = np.array([3, 10])
    weight = np.ones(2)
    gavel = max_min_fairness(rate, sf, gpus, weight)
    fixed = max_min_fairness(rate, sf, gpus, weight, np.array([[False, True], [True, True]]))
    assert 0.1 < gavel[0, 0] <= 0.75 + 1e-7
    assert fixed[0, 0] == 0.0 and fixed[0, 1] > gavel[0, 1] + 0.1


# ----- through the engine -------------------------------------------------------------------------------------------

SPECS = {name: JobSpec("resnet", "pytorch", secs, 64, name=name, gpus=g)
         for name, secs, g in (("A", 10_000, 1), ("C", 100, 1), ("Z", 720, 2), ("G", 3600, 4), ("S", 3600, 1))}
TIMES = {"A": {V100: 1.0, P100: 2.0, K80: 4.0}, "C": {V100: 1.0, P100: 2.0, K80: 4.0},
         "Z": {V100: 1.0, P100: 2.0}, "G": {V100: 1.0, K80: 4.0}, "S": {V100: 1.0, P100: 1.0, K80: 1.0}}
RUNTIMES = TablePredictor({f"{n}/{v.name}/{SPECS[n].gpus}": float(SPECS[n].iterations) * f
                           for n, per in TIMES.items() for v, f in per.items()})


def servers(*types: tuple[VMType, int], unplaceable: bool = False) -> Cluster:
    vms = tuple(v for v, _ in types)
    return Cluster(vms, tuple(NodeSlot(frozenset({v.name}), fixed=True) for v, n in types for _ in range(n)),
                   rules=ClusterRules(gang=True, round_length=360.0, unplaceable_gangs=unplaceable))


def run(cluster: Cluster, arrivals: list[tuple[str, float]], kind: str, **params) -> tuple[dict, object]:
    jobs = [Job(i, SPECS[name], t, 1e9, 0.0) for i, (name, t) in enumerate(arrivals)]
    r = Simulation(cluster, jobs, optim.build(kind, **params), RUNTIMES).run()
    check(World(cluster, jobs, RUNTIMES, None, 0), r)
    return {int(j): (s, e) for j, s, e in zip(r.jobs.job_id, r.jobs.start_time, r.jobs.end_time)}, r


def test_fifo_perf_serves_the_jobs_behind_a_head_it_cannot_run():
    """Two V100s and two K80s; A takes a V100; Z (2 GPUs, no K80 rate) finds room only on the K80s: Gavel holds them
    for it and C, behind it, takes the other V100 at once. fifo_perf_runnable blocks C behind Z until A ends."""
    cluster = servers((V100, 2), (K80, 2))
    arrivals = [("A", 0.0), ("Z", 0.0), ("C", 0.0)]
    gavel, _ = run(cluster, arrivals, "fifo_perf")
    fixed, _ = run(cluster, arrivals, "fifo_perf_runnable")
    assert gavel[2] == (0.0, 100.0)
    assert fixed[2][0] >= 10_000.0, "C waits until A ends and Z takes the V100s"


def test_a_gang_too_large_for_a_type_changes_the_schedule_but_never_runs_there():
    """Three V100s and four K80s, a 4-GPU job G and five 1-GPU jobs: the cluster prices G on the V100s
    (``unplaceable_gangs``), Gavel's LP gives it a share there and the corrected model does not, so the schedules
    differ; G never runs on the V100s under either."""
    cluster = servers((V100, 3), (K80, 4), unplaceable=True)
    assert max(c.gpus for c in cluster.configs if c.vm.name == "v100") == 4 and cluster.placeable_gpus["v100"] == 3
    arrivals = [("G", 0.0)] + [("A", 0.0)] * 5
    gavel, r1 = run(cluster, arrivals, "max_min_fairness_perf")
    fixed, r2 = run(cluster, arrivals, "max_min_fairness_perf_runnable")
    assert gavel != fixed
    for r in (r1, r2):
        assert set(r.segments[r.segments.job_id == 0].vm_type) == {"k80"}


def test_agnostic_policies_visit_types_in_pythons_shuffled_order():
    """One job on one server each of V100, P100, K80, all as fast: isolated puts it, every round, on the first type
    of that round's order, which Gavel shuffles with random.Random(seed + 5): the same order here."""
    _, r = run(servers((V100, 1), (P100, 1), (K80, 1)), [("S", 0.0)], "isolated", seed=3)
    shuffler = random.Random(3 + 5)
    firsts = []
    for _ in range(10):  # ten 360-s rounds, one decision each
        order = ["v100", "p100", "k80"]
        shuffler.shuffle(order)
        firsts.append(order[0])
    per_round = [vm for s, e, vm in zip(r.segments.start_time, r.segments.end_time, r.segments.vm_type)
                 for _ in range(round((e - s) / 360.0))]
    assert per_round == firsts and len(set(firsts)) > 1


def test_allox_matches_jobs_to_gpus_by_least_total_completion_time():
    """A (100 iterations left) and B (30) wait; a V100 runs both at 2/s, a K80 at 0.5/s. Least total completion
    time: both on the V100, B first (15 + 65 = 80 s; A on the V100 and B on the K80: 50 + 60). AlloX gives the
    V100 to B and nothing to A until the next call, leaving the K80 idle."""
    x = AlloX().allocate([0, 1], np.array([[2.0, 0.5], [2.0, 0.5]]), np.array([1, 1]), np.array([10.0, 5.0]),
                         np.array([100.0, 30.0]), np.array([0, 1]))
    assert x.tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_allox_refuses_a_job_of_several_gpus():
    with pytest.raises(CapsimError, match="job 1 runs on 4 GPUs.*single-GPU jobs only"):
        run(servers((V100, 2), (K80, 4)), [("A", 0.0), ("G", 0.0)], "allox")


def test_isolated_and_the_horizon_bisection_by_hand():
    """Isolated: 1/3 of 6 and of 3 GPUs per job, over its GPU count, rows scaled to 1. The horizon: Gavel's
    bisection ends within 5 % above the least feasible horizon, or in the next decade past 1e6 s."""
    x = isolated(np.array([[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]]), np.array([6, 3]))
    assert x == pytest.approx(np.array([[2 / 3, 1 / 3], [2 / 3, 1 / 3], [2 / 3, 1 / 3]]))
    x = isolated(np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]), np.array([1, 1]))
    assert x == pytest.approx(np.full((4, 2), 0.25)), "rows under 1 are kept"
    for best in (150.0, 4000.0, 999_000.0, 2.5e6):
        assert best <= horizon(best) < 1.05 * best


def test_min_total_duration_meets_every_jobs_pace_and_finish_time_state_counts_isolated_time():
    """Two jobs, one GPU of each of two types: the least horizon T* is where max s (rate_j·X_j ≥ s·R_j) is 1/T*
    (SciPy's LP here); the allocation gives each job at least R_j / horizon(T*)."""
    rate, left = np.array([[4.0, 1.0], [2.0, 2.0]]), np.array([4000.0, 3000.0])
    x = min_total_duration(rate, np.ones((2, 2)), np.array([1, 1]), left)
    a_ub = [[-4, -1, 0, 0, 4000], [0, 0, -2, -2, 3000], [1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [1, 0, 1, 0, 0],
            [0, 1, 0, 1, 0]]
    s = -linprog([0, 0, 0, 0, -1], A_ub=a_ub, b_ub=[0, 0, 1, 1, 1, 1], bounds=[(0, None)] * 5).fun
    assert ((rate * x).sum(axis=1) >= left / horizon(1.0 / s) - 1e-6).all()
    assert (x.sum(axis=1) <= 1 + 1e-7).all() and (x.sum(axis=0) <= 1 + 1e-7).all()
    state = FinishTimeState()
    assert state.update([0, 1], np.array([100.0, 50.0]), np.array([2.0, 5.0])).tolist() == [0.0, 0.0]
    assert state.update([1, 2], np.array([30.0, 80.0]), np.array([4.0, 1.0])).tolist() == [4.0, 0.0]
