"""A warm start must never stand in for the optimum: HiGHS 1.16 can report the objective of presolve's reduced space
(and gap 0) while handing back the warm start's own column values. The saved decision
(``data/milp_warm_start_reduced.json``, one decision of a co-located Gavel-workload run) triggers it; ``solve``
must price the values it returns, notice the difference and solve again without the start."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optim.highs import new_highs
from optim.milp.formulation import LinearProgram, write_problem
from optim.milp.model import Model
from optim.milp.solvers import _objective_mismatch, solve

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
