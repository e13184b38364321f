"""The MILP against brute force on tiny instances, and the three solvers against each other."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optim.milp import build_model, solve
from sim.catalogue import configurations, gpu
from sim.model import NodeView, VMType
from tests.optim.enumerate_plans import best_by_enumeration
from tests.optim.helpers import job, snapshot


def has_gurobi() -> bool:
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return False
    return True


def random_instance(seed: int):
    """≤3 jobs, 2 node slots, 2 VM types; random restrictions, idle or booting VMs, pinned jobs, preemption."""
    rng = np.random.default_rng(seed)
    boot = float(rng.choice([0.0, 20.0]))
    small = VMType("small", gpu("K80"), 1, float(rng.uniform(1, 4)), boot_time=boot)
    big = VMType("big", gpu("K80"), 2, float(rng.uniform(3, 9)), boot_time=0.0)
    vms = (small, big)
    configs = configurations(vms)
    now = 100.0
    preempt = bool(rng.random() < 0.3)

    def estimates():
        est = rng.uniform(50, 400, len(configs))
        est[rng.random(len(configs)) < 0.2] = math.inf
        if not np.isfinite(est).any():
            est[-1] = 120.0
        return est

    def deadline():
        return now + float(rng.uniform(20, 500))

    nodes, running = [], []
    jid = 0
    for n in range(2):
        allowed = [None, frozenset({"small"}), frozenset({"big"})][rng.integers(3)]
        ok = [k for k, c in enumerate(configs) if allowed is None or c.vm.name in allowed]
        state = rng.integers(3)
        if state == 0:
            nodes.append(NodeView(n, allowed=allowed))
        elif state == 1:
            vm = configs[int(rng.choice(ok))].vm
            nodes.append(NodeView(n, allowed=allowed, vm=vm, ready_at=now + float(rng.choice([0.0, 10.0]))))
        else:
            k = int(rng.choice(ok))
            est = estimates()
            est[k] = float(rng.uniform(100, 300))
            running.append(job(jid, est, deadline(), done=0.4, node=n, config=k, since=50.0, weight=0.05))
            jid += 1
            nodes.append(NodeView(n, allowed=allowed, vm=configs[k].vm, ready_at=60.0, used_gpus=configs[k].gpus))
    waiting = [job(jid + i, estimates(), deadline(), weight=float(rng.uniform(0.01, 0.1)))
               for i in range(int(rng.integers(1, 4 - len(running))))]
    snap = snapshot(waiting, running, nodes, time=now, vm_types=vms, restart_overhead=15.0)
    return snap, preempt


@pytest.mark.parametrize("seed", range(40))
def test_milp_matches_enumeration(seed):
    snap, preempt = random_instance(seed)
    model = build_model(snap, preempt=preempt, dominance="safe")
    out = solve(model, "highs", time_limit=30, gap=0.0)
    assert out.status == "optimal"
    best = best_by_enumeration(snap, preempt=preempt)
    assert out.objective == pytest.approx(best, rel=1e-6, abs=1e-9)
    # the Pareto reduction only removes options: never better than the exact optimum
    heuristic = solve(build_model(snap, preempt=preempt, dominance="pareto"), "highs", time_limit=30, gap=0.0)
    assert heuristic.objective >= best - 1e-9 * max(1.0, abs(best))


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_solvers_agree(seed):
    snap, preempt = random_instance(seed)
    objectives = {}
    for solver in ("highs", "cbc") + (("gurobi",) if has_gurobi() else ()):
        out = solve(build_model(snap, preempt=preempt, dominance="safe"), solver, time_limit=30, gap=0.0)
        assert out.status == "optimal", (solver, out)
        objectives[solver] = out.objective
    ref = objectives["highs"]
    for solver, obj in objectives.items():
        assert obj == pytest.approx(ref, rel=1e-6, abs=1e-9), (solver, objectives)


def test_running_jobs_count_the_time_already_run():
    """A job that started at t=0 with a 100 s estimate has 40 s left at t=60: the next decision is 40 s away."""
    from optim.milp import next_decision_delay
    from sim.model import NodeView
    from tests.optim.helpers import BIG, CONFIGS

    k = CONFIGS.index(next(c for c in CONFIGS if c.vm is BIG and c.gpus == 1))
    est = [math.inf] * len(CONFIGS)
    est[k] = 100.0
    running = job(0, est, node=0, config=k, since=0.0)
    snap = snapshot([job(1, [50.0] * len(CONFIGS))], [running], [NodeView(0, vm=BIG, used_gpus=1), NodeView(1)],
                    time=60.0)
    model = build_model(snap)
    assert next_decision_delay(model.snapshot, "earliest") == pytest.approx(40.0)
    assert model.pinned[0][1] == pytest.approx(40.0)


def test_a_paced_running_job_ends_at_its_pace_in_the_milp_and_the_heuristics():
    """A pinned job at pace 2 (sharing its GPU, or on a half-speed MIG slice) with a 100 s alone estimate, started at
    t=0, is 30 % done at t=60 and ends 140 s later, at t=200 -- not at t=130 as alone. Its deadline t=150 is missed
    by 50 s: the MILP's constant C, the slot's horizon H_n and GPU-seconds E_n, the expected wait and the heuristics'
    decision all use the paced end."""
    from dataclasses import replace

    from optim.heuristics import Decision
    from optim.milp import next_decision_delay
    from sim.model import NodeView
    from tests.optim.helpers import BIG, CONFIGS

    k = CONFIGS.index(next(c for c in CONFIGS if c.vm is BIG and c.gpus == 1))
    est = [math.inf] * len(CONFIGS)
    est[k] = 100.0
    running = replace(job(0, est, deadline=150.0, weight=0.5, node=0, config=k, since=0.0), pace=2.0)
    snap = snapshot([job(1, [50.0] * len(CONFIGS))], [running], [NodeView(0, vm=BIG, used_gpus=1), NodeView(1)],
                    time=60.0)
    model = build_model(snap)
    assert model.pinned[0][1] == pytest.approx(140.0)
    assert model.pinned_area[0] == pytest.approx(140.0 * 1 / 2)
    assert model.constant == pytest.approx(0.5 * 50.0)
    assert next_decision_delay(model.snapshot, "earliest") == pytest.approx(140.0)
    assert next_decision_delay(snap, "earliest") == pytest.approx(140.0)  # a view not yet brought to now
    dec = Decision(snap)
    assert dec.horizon[0] == pytest.approx(140.0)
    assert dec.constant == pytest.approx(0.5 * 50.0)
    # alone (pace 1) the same job ends at t=100, in time
    alone = build_model(replace(snap, running=(replace(running, pace=1.0),)))
    assert (alone.pinned[0][1], alone.constant) == (pytest.approx(40.0), 0.0)


def test_expected_wait_is_the_mean_or_the_earliest_running_completion():
    from optim.milp import next_decision_delay
    from sim.model import NodeView
    from tests.optim.helpers import BIG, CONFIGS, SMALL

    ks = [CONFIGS.index(next(c for c in CONFIGS if c.vm is vm and c.gpus == 1)) for vm in (SMALL, BIG)]
    views = []
    for node, (k, rt) in enumerate(zip(ks, (100.0, 300.0))):
        est = [math.inf] * len(CONFIGS)
        est[k] = rt
        views.append(job(node, est, node=node, config=k, since=0.0))
    nodes = [NodeView(0, allowed=None, vm=SMALL, ready_at=0.0, used_gpus=1), NodeView(1, vm=BIG, used_gpus=1)]
    model = build_model(snapshot([job(9, [50.0] * len(CONFIGS))], views, nodes, time=40.0))  # 60 s and 260 s left
    assert next_decision_delay(model.snapshot, "earliest") == pytest.approx(60.0)
    assert next_decision_delay(model.snapshot, "mean") == pytest.approx(160.0)


@pytest.mark.parametrize("seed", range(3))
def test_highs_defaults_and_symmetric_slots_keep_the_optimum(seed):
    """Stress decisions with interchangeable empty slots (no ordering constraint among them): HiGHS with its
    defaults, HiGHS with the switched-off heuristics and restarts back on, and CBC all reach one optimum."""
    from optim.milp import HIGHS_DEFAULTS
    from sim.catalogue import vm_types
    from tests.instances import instance, runtime_table

    table, _ = runtime_table(configurations(tuple(vm_types().values())))
    snap = instance(4, 9, seed, table)
    assert sum(nv.vm is None for nv in snap.nodes) >= 2
    back_on = {key: not value for key, value in HIGHS_DEFAULTS.items()}
    objectives = [
        solve(build_model(snap), "highs", time_limit=60, gap=0.0).objective,
        solve(build_model(snap), "highs", time_limit=60, gap=0.0, options=back_on).objective,
        solve(build_model(snap), "cbc", time_limit=60, gap=0.0).objective,
    ]
    assert objectives[1] == pytest.approx(objectives[0], rel=1e-6)
    assert objectives[2] == pytest.approx(objectives[0], rel=1e-6)
