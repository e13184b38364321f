"""Gavel's policies: the allocations on hand-computed and random cases (the LP against SciPy's), and the round
mechanism through the engine (recompute throttle and its t = 0 sentinel, time slicing by priority, gangs, sticky
types)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import optim
from optim.gavel.allocation import fifo_perf, fifo_sticky, max_min_fairness
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import ClusterRules, Job, JobSpec, VMType
from tests.optim.worlds import World, check

V100, P100, K80 = (VMType(n.lower(), gpu(n), 1, 0.0) for n in ("V100", "P100", "K80"))
BY_NAME = np.array([2, 1, 0])  # columns v100, p100, k80; sorted by name: k80, p100, v100


def test_fifo_perf_gives_each_job_its_fastest_type_with_room_in_arrival_order():
    rate = np.array([[3.0, 2, 1], [3, 2, 1], [1, 5, 1], [2, 2, 2], [1, 1, 1]])
    x = fifo_perf(rate, np.ones((5, 3), dtype=int), np.array([1, 1, 1]), BY_NAME)
    assert x.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]]
    tie = fifo_perf(np.array([[2.0, 2, 2]]), np.ones((1, 3), dtype=int), np.array([1, 1, 1]), BY_NAME)
    assert tie.tolist() == [[0, 0, 1]], "ties go to the first type by name (k80), as Gavel's strict > gives"
    blocked = fifo_perf(np.array([[1.0, 1, 1], [1, 1, 1]]), np.array([[4, 4, 4], [1, 1, 1]]), np.array([2, 2, 2]),
                        BY_NAME)
    assert not blocked.any(), "a job that fits nowhere blocks those behind it"
    never = fifo_perf(np.array([[0.0, 0, 0], [1, 1, 1]]), np.ones((2, 3), dtype=int), np.array([1, 1, 1]), BY_NAME)
    assert never[1].sum() == 1, "a job no type can run does not block the queue"


def test_fifo_perf_passes_over_a_head_job_whose_fastest_type_with_room_it_cannot_run():
    """Gavel's rule (issue 21): one V100 and two K80s free; job 0 (2 GPUs) fits only on the K80s, where it cannot
    run (rate 0): Gavel still allocates it there, holding both K80s, and goes on: job 1 gets the V100. The corrected
    model (``skip_zero``) considers only types the job can run on: job 0 fits nowhere and blocks the queue."""
    rate = np.array([[5.0, 3.0, 0.0], [4.0, 2.0, 1.0], [1.0, 1.0, 1.0]])  # columns v100, p100, k80
    sf = np.array([[2, 2, 2], [1, 1, 1], [1, 1, 1]])
    gpus = np.array([1, 0, 2])
    assert fifo_perf(rate, sf, gpus, BY_NAME).tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    assert not fifo_perf(rate, sf, gpus, BY_NAME, skip_zero=True).any()


def test_fifo_sticky_keeps_types_hands_freed_ones_to_the_head_and_fills_fastest_first():
    rate = np.ones((4, 3))
    sf = np.ones((4, 3), dtype=int)
    kept = np.array([0, -1, -1, -1])
    x = fifo_sticky(rate, sf, np.array([1, 1, 1]), kept, np.arange(3), handed=[2])
    assert x.tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0]]


def test_max_min_fairness_splits_one_gpu_by_priority_weight():
    x = max_min_fairness(np.ones((2, 1)), np.ones((2, 1), dtype=int), np.array([1]), np.array([1.0, 1.0]))
    assert x.ravel() == pytest.approx([0.5, 0.5], abs=1e-6)
    x = max_min_fairness(np.ones((2, 1)), np.ones((2, 1), dtype=int), np.array([1]), np.array([2.0, 1.0]))
    assert x.ravel() == pytest.approx([2 / 3, 1 / 3], abs=1e-6)


@pytest.mark.parametrize("runnable", [False, True], ids=["gavel", "runnable"])
@pytest.mark.parametrize("seed", range(6))
def test_max_min_fairness_reaches_the_lp_optimum(seed, runnable):
    """Gavel's LP (X free where the rate is 0, solved as ECOS does) and the corrected one (X = 0 there, HiGHS)
    both reach the optimum SciPy finds for the same LP."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 12)), 3
    rate = rng.uniform(0.1, 5.0, (n, m)) * (rng.random((n, m)) > 0.2)
    rate[:, 0] += 0.1  # every job runs somewhere
    sf = rng.choice([1, 2, 4], size=(n, 1)).repeat(m, axis=1)
    gpus = rng.integers(1, 6, m)
    weight = rng.choice([1.0, 2.0], n)
    x = max_min_fairness(rate, sf, gpus, weight, rate > 0 if runnable else None)
    assert (x >= 0).all() and (x <= 1).all() and (not runnable or (x[rate == 0] == 0).all())
    assert (x.sum(axis=1) <= 1 + 1e-6).all() and ((sf * x).sum(axis=0) <= gpus + 1e-6).all()
    prop = rate @ gpus / gpus.sum()
    coef = rate * sf / (weight * prop)[:, None]
    value = (coef * x).sum(axis=1).min()
    # the same LP by SciPy: variables X (row-major) and t; maximise t
    c = np.zeros(n * m + 1)
    c[-1] = -1.0
    rows, rhs = [], []
    for j in range(n):
        r = np.zeros(n * m + 1)
        r[j * m:(j + 1) * m], r[-1] = -coef[j], 1.0
        rows.append(r), rhs.append(0.0)
        r = np.zeros(n * m + 1)
        r[j * m:(j + 1) * m] = 1.0
        rows.append(r), rhs.append(1.0)
    for w in range(m):
        r = np.zeros(n * m + 1)
        r[w:n * m:m] = sf[:, w]
        rows.append(r), rhs.append(float(gpus[w]))
    bounds = [(0.0, 1.0 if rate[j, w] > 0 or not runnable else 0.0) for j in range(n) for w in range(m)]
    bounds += [(None, None)]
    best = -linprog(c, A_ub=np.array(rows), b_ub=rhs, bounds=bounds, method="highs").fun
    assert value == pytest.approx(best, rel=1e-5)


# ----- through the engine -------------------------------------------------------------------------------------------

SPECS = {name: JobSpec("resnet", "pytorch", secs, 64, name=name, gpus=g)
         for name, secs, g in (("A", 10_000, 1), ("B", 10_000, 1), ("C", 100, 1), ("H", 720, 1), ("G", 360, 4))}
RUNTIMES = TablePredictor({f"{n}/{v.name}/{s.gpus}": float(s.iterations) * f
                           for n, s in SPECS.items() for v, f in ((V100, 1.0), (P100, 2.0), (K80, 4.0))})


def servers(*types: tuple[VMType, int]) -> Cluster:
    vms = tuple(v for v, _ in types)
    return Cluster(vms, tuple(NodeSlot(frozenset({v.name}), fixed=True) for v, n in types for _ in range(n)),
                   rules=ClusterRules(gang=True, round_length=360.0))


def run(cluster: Cluster, arrivals: list[tuple[str, float]], kind: str, **params) -> dict[int, tuple[float, float]]:
    jobs = [Job(i, SPECS[name], t, 1e9, 0.0) for i, (name, t) in enumerate(arrivals)]
    r = Simulation(cluster, jobs, optim.build(kind, **params), RUNTIMES).run()
    check(World(cluster, jobs, RUNTIMES, None, 0), r)
    return {int(j): (s, e) for j, s, e in zip(r.jobs.job_id, r.jobs.start_time, r.jobs.end_time)}


@pytest.mark.parametrize("kind", ["fifo_perf", "max_min_fairness_perf", "gavel_fifo"])
def test_a_new_job_waits_for_the_recompute_throttle(kind):
    """Three V100 servers. A arrives at 0 (recompute at t=0, which keeps Gavel's sentinel), B at 100 (admitted and
    allocated at the boundary 360: the sentinel lets that recompute through), C at 500: admitted at 720 but the
    last recompute was at 360, so it waits for the first boundary at least 1920 s later, 2520, on an idle server."""
    ends = run(servers((V100, 3)), [("A", 0.0), ("B", 100.0), ("C", 500.0)], kind)
    assert ends[1][0] == 360.0
    assert ends[2] == (2520.0, 2620.0)
    assert run(servers((V100, 3)), [("A", 0.0), ("B", 100.0), ("C", 500.0)], kind, recompute_interval=0)[2][0] == 720


def test_max_min_fairness_time_slices_one_server_by_priority():
    """Two 720-s jobs on one V100: X = 1/2 each; the one that has received less time on it runs next (ties by job
    order): 0 in rounds 1 and 3, 1 in rounds 2 and 4."""
    ends = run(servers((V100, 1)), [("H", 0.0), ("H", 0.0)], "max_min_fairness_perf")
    assert ends == {0: (0.0, 1080.0), 1: (360.0, 1440.0)}


def test_fifo_perf_runs_a_gang_on_four_one_gpu_servers_before_the_next_job():
    ends = run(servers((V100, 4)), [("G", 0.0), ("C", 0.0)], "fifo_perf")
    assert ends == {0: (0.0, 360.0), 1: (360.0, 460.0)}, "C is blocked behind the gang, then runs after it"


def test_gavel_fifo_keeps_a_job_on_its_first_type_and_fifo_perf_moves_it():
    """A on the V100 and B on the K80 (4x slower); A ends at 100; fifo_perf moves B to the V100 at the next
    recompute (t=360, the sentinel), gavel_fifo leaves it on the K80."""
    arrivals = [("C", 0.0), ("B", 0.0)]
    sticky = run(servers((V100, 1), (K80, 1)), arrivals, "gavel_fifo")
    moved = run(servers((V100, 1), (K80, 1)), arrivals, "fifo_perf")
    assert sticky[1] == (0.0, 40_000.0)
    assert moved[1][1] == pytest.approx(360.0 + (10_000 - 360 / 4))
