"""The MILP policy through the real engine: plans that run, and every failure path falling back without losing a job."""

from __future__ import annotations

import dataclasses
import os
import warnings

import pulp
import pytest

import optim
import optim.milp.solvers as milp_solvers
import predictors
from sim.catalogue import configurations, vm_types
from sim.model import CapsimError, ClusterRules
from tests.instances import instance, runtime_table
from tests.optim.helpers import job, snapshot

engine = pytest.importorskip("sim.engine", reason="the SimPy engine (sim/engine.py) is not there yet")
from sim.cluster import Cluster, NodeSlot  # noqa: E402
from sim.workload import WorkloadSpec, poisson_jobs  # noqa: E402

PRED = predictors.build("measured")
VMS = tuple(vm_types().values())


def run(policy, nodes: int = 3, n_jobs: int = 12, interarrival: float = 30.0, seed: int = 0, burst: bool = False,
        **cluster):
    """Run ``policy`` through the engine; ``burst`` submits every job at time 0 (one large first decision)."""
    cl = Cluster(VMS, tuple(NodeSlot() for _ in range(nodes)), rules=ClusterRules(**cluster))
    jobs = poisson_jobs(WorkloadSpec(n_jobs, interarrival), PRED, cl.configs, seed)
    if burst:
        jobs = [dataclasses.replace(j, submit_time=0.0) for j in jobs]
    result = engine.Simulation(cl, jobs, policy, PRED).run()
    done = result.jobs
    assert sorted(done["job_id"]) == sorted(j.id for j in jobs), "every job finishes exactly once"
    assert (done["end_time"] >= done["submit_time"]).all()
    return result


def test_milp_runs_end_to_end_and_reports_its_solver():
    res = run(optim.build("milp"))
    d = res.decisions
    solved = d[d["status"] == "optimal"]
    assert len(solved) > 0 and (solved["solver"] == "highs").all()
    assert (solved["variables"] > 0).all() and solved["objective"].notna().all()
    assert d["fallback"].isna().all()


def test_milp_with_preemption_runs_end_to_end():
    res = run(optim.build("milp", preempt=True, time_limit=2), nodes=2, n_jobs=6, restart_overhead=30.0)
    assert res.summary["fallbacks"] == 0


def forbid_everything(model):
    """An impossible constraint: some job both waits and runs (test-only handle for forced infeasibility)."""
    j = next(iter(model.z))
    model.problem += model.z[j] >= 2, "force_infeasible"


def broken_hook(model):
    raise RuntimeError("a research hook that fails")


@pytest.mark.parametrize(
    "params, status",
    [
        ({"extra_constraints": forbid_everything}, "infeasible"),
        ({"extra_constraints": broken_hook}, "error"),
        ({"solver": "cbc", "solver_path": "/nonexistent/cbc"}, "missing_solver"),
    ],
)
def test_failures_fall_back_and_lose_no_job(params, status):
    res = run(optim.build("milp", **params))
    d = res.decisions
    failed = d[d["status"] == status]
    assert len(failed) > 0
    assert (failed["fallback"] == "edf").all() and failed["reason"].notna().all()
    assert res.summary["fallbacks"] == len(failed)


def test_tiny_time_limit_uses_incumbent_or_falls_back():
    res = run(optim.build("milp", time_limit=1e-6, warm_start=True), nodes=5, n_jobs=25, interarrival=5.0)
    d = res.decisions
    tl = d[d["status"] == "time_limit"]
    assert len(tl) > 0, set(d["status"])
    kept = tl[tl["fallback"].isna()]
    assert kept["objective"].notna().all()
    assert (tl[tl["fallback"].notna()]["fallback"] == "edf").all()  # stopped before any incumbent: EDF decided
    assert res.summary["deterministic"] == 0.0  # the wall clock decided where these decisions stopped


def test_default_limits_are_deterministic_work_limits():
    milp = optim.build("milp")
    assert milp.time_limit is None and milp.node_limit is not None
    res = run(milp)
    assert res.summary["deterministic"] == 1.0
    assert not (res.decisions["status"] == "time_limit").any()


def test_node_limit_stops_deterministically_and_keeps_the_incumbent():
    # this 10-slot, 30-job stress decision needs hundreds of nodes to close the 1% gap; 3 nodes stop it early
    snap = instance(10, 30, 1, runtime_table(configurations(VMS))[0])
    plans = [optim.build("milp", node_limit=3).decide(snap) for _ in range(2)]
    for plan in plans:
        assert plan.info.status == "work_limit" and plan.info.fallback is None and plan.start
        assert plan.info.gap is not None and plan.info.gap > 0.01
    assert plans[0] == plans[1]  # the same nodes, the same incumbent


def test_time_limit_that_never_binds_changes_nothing():
    runs = [run(optim.build("milp", **limit)) for limit in ({}, {"time_limit": 600})]
    keep = [c for c in runs[0].jobs.columns if "wall" not in c]
    assert runs[0].jobs[keep].equals(runs[1].jobs[keep])
    assert runs[1].summary["deterministic"] == 1.0  # set, but it stopped no decision


def test_a_thread_count_change_within_a_process_still_solves():
    # HiGHS sizes one scheduler per process at its first run: a later model with another thread count used to
    # stop unsolved ("Not Set") and fall back; capsim rebuilds the scheduler when the count changes
    snap = instance(5, 15, 0, runtime_table(configurations(VMS))[0])
    for threads in (1, 2, 1):
        plan = optim.build("milp", threads=threads).decide(snap)
        assert plan.info.fallback is None and plan.info.status in ("optimal", "work_limit"), plan.info


def test_time_limit_keeps_the_incumbent():
    # a 10-slot, 30-job stress decision cannot be closed in 50 ms: HiGHS stops with the warm-start incumbent
    snap = instance(10, 30, 0, runtime_table(configurations(VMS))[0])
    plan = optim.build("milp", time_limit=0.05).decide(snap)
    assert plan.info.status == "time_limit" and plan.info.fallback is None
    assert (plan.info.gap is None or plan.info.gap > 0) and plan.start  # None: stopped before any dual bound


@pytest.mark.skipif(os.environ.get("GRB_LICENSE_FILE") is not None, reason="a full Gurobi licence is configured")
def test_gurobi_licence_too_small_falls_back_and_warns_once():
    pytest.importorskip("gurobipy")
    milp_solvers._licence_reported = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run(optim.build("milp", solver="gurobi", time_limit=2, dominance="safe"), nodes=8, n_jobs=30, burst=True)
    d = res.decisions
    licence = d[d["status"] == "licence"]
    if licence.empty:
        pytest.skip("no decision exceeded the size-limited licence (a larger licence may be installed)")
    assert (licence["fallback"] == "edf").all()
    assert (licence["variables"] > 2000).any() or (licence["constraints"] > 2000).any()
    mine = [w for w in caught if "licence is too small" in str(w.message)]
    assert len(mine) == 1


def test_progress_guard_when_solution_leaves_everyone_waiting():
    def everyone_waits(model):
        for j, zj in model.z.items():
            model.problem += zj >= 1, f"wait_{j}"

    snap = snapshot(waiting=[job(1, (100.0, 100.0, 60.0))], nodes=2)
    plan = optim.build("milp", extra_constraints=everyone_waits).decide(snap)
    assert plan.info.status == "no_progress" and plan.info.fallback == "edf" and len(plan.start) == 1


def test_bad_options_are_clear_errors():
    with pytest.raises(CapsimError, match="unknown solver"):
        optim.build("milp", solver="cplex")
    with pytest.raises(CapsimError, match="fallback"):
        optim.build("milp", fallback="milp")
    with pytest.raises(CapsimError, match="fallback .nope. is not a policy"):
        optim.build("milp", fallback="nope")
    with pytest.raises(CapsimError, match="gap"):
        optim.build("milp", gap=2)
    with pytest.raises(CapsimError, match="node_limit"):
        optim.build("milp", node_limit=0)
    with pytest.raises(CapsimError, match="node_limit"):
        optim.build("milp", node_limit=2.5)
    with pytest.raises(CapsimError, match="depends on the machine"):
        optim.build("milp", threads=0)


def test_pulp_solvers_available():
    assert pulp.HiGHS().available()


def test_objective_is_the_engines_cost_when_every_job_starts_at_once():
    # all jobs arrive together and the MILP starts them all: with no later arrival, the first decision's objective
    # (VM rent until each VM's last job ends + tardiness) must be what the engine bills
    res = run(optim.build("milp", gap=0.0), nodes=4, n_jobs=4, burst=True)
    first = res.decisions.iloc[0]
    assert first["started"] == 4
    assert first["objective"] == pytest.approx(res.summary["total_cost"], rel=1e-9)
