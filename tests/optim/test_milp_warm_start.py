"""Warm starts. One must never stand in for the optimum: HiGHS 1.16 can report the objective of presolve's reduced
space (and gap 0) while handing back the warm start's own column values. The saved decision
(``data/milp_warm_start_reduced.json``, one decision of a co-located Gavel-workload run) triggers it; ``solve``
must price the values it returns, notice the difference and solve again without the start. And a start built from
the fallback's plan must be that plan: jobs sharing one of its VMs share one slot of the model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optim.base import build
from optim.highs import new_highs
from optim.milp.formulation import LinearProgram, build_model, write_problem
from optim.milp.model import Model
from optim.milp.solution import set_warm_start
from optim.milp.solvers import _objective_mismatch, solve
from sim.model import Assignment, Plan
from tests.optim.helpers import BIG, job, snapshot

INF = float("inf")
DATA = Path(__file__).parent / "data" / "milp_warm_start_reduced.json"


def _model(start: bool) -> Model:
    d = json.loads(DATA.read_text())
    lp = LinearProgram(
        names=d["names"], cost=np.array(d["cost"]), lower=np.array(d["lower"]), upper=np.array(d["upper"]),
        integer=np.array(d["integer"], dtype=bool), row_names=d["row_names"], row_lower=np.array(d["row_lower"]),
        row_upper=np.array(d["row_upper"]), row_cols=d["row_cols"], row_vals=d["row_vals"],
        obj_order=d["obj_order"], constant=d["constant"], x=np.array(d["x"], dtype=int),
        y={(n, v): c for n, v, c in d["y"]}, h={(n, v): c for n, v, c in d["h"]}, z={j: c for j, c in d["z"]},
        w=np.array(d["w"], dtype=int),
    )
    return Model(snapshot=None, preempt=False, placements=[], penalties={}, pinned={}, pinned_area={},  # type: ignore[arg-type]
                 on_node={}, kept_nodes=[], classes={}, node_class={}, jobs={}, lp=lp,
                 start=np.array(d["start"]) if start else None)


def _priced(model: Model) -> float:
    assert model.values is not None
    return model.lp.constant + float(model.lp.cost @ model.values)


def _feasible(model: Model) -> bool:
    lp, v = model.lp, model.values
    assert v is not None
    rows = np.array([sum(v[c] * a for c, a in zip(rc, rv)) for rc, rv in zip(lp.row_cols, lp.row_vals)])
    ints = v[lp.integer]
    return bool(np.all(rows >= lp.row_lower - 1e-6) and np.all(rows <= lp.row_upper + 1e-6)
                and np.all(v >= lp.lower - 1e-6) and np.all(v <= lp.upper + 1e-6)
                and np.allclose(ints, np.round(ints), atol=1e-6))


@pytest.mark.parametrize("pulp_path", [False, True], ids=["direct", "pulp"])
def test_warm_start_never_replaces_the_optimum(pulp_path: bool) -> None:
    cold = _model(start=False)
    warm = _model(start=True)
    if pulp_path:
        write_problem(cold)
        write_problem(warm)
    start_cost = warm.lp.constant + float(warm.lp.cost @ warm.start)
    ref = solve(cold, "highs", gap=0.01, warm_start=False, node_limit=500)
    out = solve(warm, "highs", gap=0.01, warm_start=True, node_limit=500)
    assert ref.status == out.status == "optimal"
    assert ref.objective is not None and out.objective is not None
    assert ref.objective < start_cost - 1.0  # the case is one where the start is far from optimal
    if not pulp_path:  # the direct path reads the values back; PuLP keeps them on its variables
        assert out.objective == pytest.approx(_priced(warm), abs=1e-6)
        assert _feasible(warm)
    assert out.objective <= ref.objective * 1.01 + 1e-6
    assert out.reason is not None and out.reason.startswith("warm_start_rejected")


def test_mismatch_detector_compares_reported_objective_with_the_values() -> None:
    import highspy

    h = new_highs()
    inf = highspy.kHighsInf
    h.addVars(2, np.array([0.0, 0.0]), np.array([inf, inf]))
    h.changeColsCost(2, np.array([0, 1], dtype=np.int32), np.array([1.0, 2.0]))
    h.addRow(1.0, inf, 2, np.array([0, 1], dtype=np.int32), np.array([1.0, 1.0]))
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(1.0)
    assert _objective_mismatch(h) is None
    other = highspy.HighsSolution()
    other.col_value = [0.0, 1.0]  # feasible, costs 2 while the reported objective stays 1
    other.value_valid = True
    h.setSolution(other)
    assert "cost 2" in (_objective_mismatch(h) or "")


def _start_is_feasible(model: Model) -> bool:
    lp, v = model.lp, model.start
    assert v is not None
    rows = np.array([sum(v[c] * a for c, a in zip(rc, rv)) for rc, rv in zip(lp.row_cols, lp.row_vals)])
    return bool(np.all(rows >= lp.row_lower - 1e-9) and np.all(rows <= lp.row_upper + 1e-9)
                and np.all(v >= lp.lower - 1e-9) and np.all(v <= lp.upper + 1e-9))


def _opened(model: Model) -> list[int]:
    assert model.start is not None
    return sorted(n for (n, _), c in model.lp.y.items() if model.start[c] > 0.5)


@pytest.mark.parametrize("fallback", ["greedy", "insertion"])
def test_jobs_the_fallback_packs_on_one_new_vm_share_one_slot_of_the_warm_start(fallback: str) -> None:
    # two jobs that run only on one GPU of the 2-GPU VM, three empty interchangeable slots: the fallback opens one
    # big VM for both; the start must do the same, so its objective is that plan's rent (no tardiness) and no more
    jobs = [job(0, [INF, 100.0, INF], deadline=1e6), job(1, [INF, 100.0, INF], deadline=1e6)]
    snap = snapshot(jobs, nodes=3)
    plan = build(fallback).decide(snap)
    assert len({a.node for a in plan.start}) == 1 and len(plan.start) == 2 and list(plan.vms.values()) == ["big"]
    model = build_model(snap)
    assert set_warm_start(model, plan) == 2
    assert model.start is not None and _start_is_feasible(model)
    assert len(_opened(model)) == 1
    assert model.lp.constant + float(model.lp.cost @ model.start) == pytest.approx(BIG.price_per_second * 100.0)


def test_a_plan_node_outside_the_kept_slots_maps_its_jobs_onto_one_kept_slot() -> None:
    # the plan puts both jobs on slot 2; only two of the three interchangeable slots are kept (two jobs), so slot 2
    # is stood for by a kept one, the same one for both jobs
    jobs = [job(0, [INF, 100.0, INF], deadline=1e6), job(1, [INF, 100.0, 200.0], deadline=1e6)]
    snap = snapshot(jobs, nodes=3)
    model = build_model(snap)
    assert 2 not in model.kept_nodes
    plan = Plan(vms={2: "big"}, start=(Assignment(0, 2, 1), Assignment(1, 2, 1)))
    assert set_warm_start(model, plan) == 2
    assert model.start is not None and _start_is_feasible(model)
    assert len(_opened(model)) == 1
    assert model.lp.constant + float(model.lp.cost @ model.start) == pytest.approx(BIG.price_per_second * 100.0)
