"""Writing one decision's MILP: variables x, y, h, z (and w, co-located pairs), the objective and constraints (1)–(5)
of docs/milp.md.

``write_lp`` writes it as arrays (``LinearProgram``), which HiGHS takes directly; ``write_problem`` turns those
arrays into a PuLP problem for CBC, Gurobi, ``extra_constraints`` and ``.lp`` files. Columns come in the order PuLP
gives them (sorted by name) and rows in the order they are written, so both routes hand a solver the same model.
``build_model`` reduces a snapshot and writes its arrays in one call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pulp

from optim.colocate import promising_pairs
from optim.common import hosted
from optim.milp.model import Model
from optim.milp.reductions import reduce_snapshot
from sim.model import Snapshot

__all__ = ["LinearProgram", "build_model", "snapshot_at_now", "write_lp", "write_problem", "apply_start"]


@dataclass
class LinearProgram:
    """A decision's MILP as arrays. Columns are named like PuLP's variables and sorted by name; rows keep their
    order. ``obj_order`` lists the objective's columns in the order the objective sums them, ``constant`` its
    constant C. ``x``: the column of each placement; ``y``, ``h``, ``z``: the columns of those variables by key."""

    names: list[str]
    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    row_names: list[str]
    row_lower: np.ndarray
    row_upper: np.ndarray
    row_cols: list[list[int]]
    row_vals: list[list[float]]
    obj_order: list[int]
    constant: float
    x: np.ndarray
    y: dict[tuple[int, str], int]
    h: dict[tuple[int, str], int]
    z: dict[int, int]
    w: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    @property
    def size(self) -> tuple[int, int]:
        """(variables, constraints), counting the variables that some constraint uses (as PuLP counts them): a pinned
        slot's h with no job to add is a constant of the objective."""
        used = {c for rc in self.row_cols for c in rc}
        return len(used), len(self.row_names)


def build_model(
    snapshot: Snapshot,
    preempt: bool = False,
    urgency: float = 0.0,
    dominance: str = "safe",
    extra_constraints: Callable[[Model], None] | None = None,
    wait_estimate: str = "mean",
    reduced: Model | None = None,
) -> Model:
    """Reduce the snapshot (infeasible and dominated configs, symmetric empty slots) and write the MILP.

    Running jobs are first brought to the decision time (``JobView.at``): their remaining work counts the time they
    have already run, and a pinned job's end its pace (a co-located or MIG-sliced job runs ``pace`` times slower).
    ``extra_constraints`` receives the model with its PuLP problem written. ``reduced``: the reduction of this
    snapshot with these options (``reduce_snapshot`` on ``snapshot_at_now``), when the caller has made it already.
    """
    if reduced is None:
        snapshot = snapshot_at_now(snapshot)
        model = reduce_snapshot(snapshot, preempt, urgency, dominance, wait_estimate)
    else:
        model, snapshot = reduced, reduced.snapshot
    if snapshot.colocation is not None and not preempt:
        model.pairs = promising_pairs(snapshot, model.penalties, set(model.pinned))
    write_lp(model)
    if extra_constraints is not None:
        write_problem(model)
        extra_constraints(model)
    return model


def snapshot_at_now(snapshot: Snapshot) -> Snapshot:
    """The snapshot with its running jobs brought to the decision time (``JobView.at``), as the model sees them."""
    return replace(snapshot, running=tuple(r.at(snapshot.time) for r in snapshot.running))


def write_lp(model: Model) -> LinearProgram:
    """Write the arrays of a reduced model: objective and constraints (1)–(5) of docs/milp.md.

    Interchangeable empty slots get no ordering constraint: the solvers' own symmetry handling does better without
    one (docs/milp.md, "Symmetric slots").
    """
    snapshot, placements, pinned = model.snapshot, model.placements, model.pinned
    now, nodes = snapshot.time, snapshot.nodes
    vm_by_name = {v.name: v for v in snapshot.vm_types}
    vm_pos = {v.name: i for i, v in enumerate(snapshot.vm_types)}
    penalties, pinned_area, on_node = model.penalties, model.pinned_area, model.on_node

    # columns, named as PuLP names them; (name, cost, lower, upper, integer) in creation order
    cols: list[tuple[str, float, float, float, bool]] = []
    x_pos = []
    for i, pl in enumerate(placements):
        x_pos.append(len(cols))
        cols.append((f"x_{i}", pl.cost, 0.0, 1.0, True))
    used_vms: dict[int, set[str]] = {}
    for pl in placements:
        used_vms.setdefault(pl.node, set()).add(pl.vm)
    for n, (vm, _) in pinned.items():
        used_vms.setdefault(n, set()).add(vm)
    h_pos: dict[tuple[int, str], int] = {}
    y_pos: dict[tuple[int, str], int] = {}
    for n in model.kept_nodes:
        for vm in sorted(used_vms.get(n, ())):
            lb = pinned[n][1] if n in pinned else 0.0
            h_pos[n, vm] = len(cols)
            cols.append((f"h_{n}_{vm_pos[vm]}", vm_by_name[vm].price_per_second, lb, np.inf, False))
            if n not in pinned:
                y_pos[n, vm] = len(cols)
                cols.append((f"y_{n}_{vm_pos[vm]}", 0.0, 0.0, 1.0, True))
    z_pos = {}
    for j in model.jobs:
        z_pos[j] = len(cols)
        cols.append((f"z_{j}", penalties[j], 0.0, 1.0, False))
    w_pos = []
    for i, (_, _, pair_cost) in enumerate(model.pairs):
        w_pos.append(len(cols))
        cols.append((f"w_{i}", pair_cost, 0.0, 1.0, True))

    constant = 0.0
    for n in pinned:
        for r in on_node[n]:
            end = now + max(0.0, nodes[n].ready_at - now) + r.remaining_at(now)
            constant += r.job.weight * max(0.0, end - r.job.deadline)
    obj_order = (
        list(h_pos.values()) + [x_pos[i] for i, pl in enumerate(placements) if pl.cost != 0.0] + list(z_pos.values())
        + w_pos
    )

    rows: list[tuple[str, float, float, list[int], list[float]]] = []
    by_job: dict[int, list[int]] = {}
    by_node_vm: dict[tuple[int, str], list[int]] = {}
    by_job_node_vm: dict[tuple[int, int, str], list[int]] = {}
    for i, pl in enumerate(placements):
        by_job.setdefault(pl.job, []).append(i)
        by_node_vm.setdefault((pl.node, pl.vm), []).append(i)
        by_job_node_vm.setdefault((pl.job, pl.node, pl.vm), []).append(i)
    pairs_of: dict[int, list[int]] = {}
    partners_of: dict[int, list[int]] = {}
    for i, (j, host, _) in enumerate(model.pairs):
        pairs_of.setdefault(j, []).append(w_pos[i])
        partners_of.setdefault(host, []).append(w_pos[i])
    for j, zc in z_pos.items():
        idx = by_job.get(j, [])
        ws = pairs_of.get(j, [])
        rows.append((f"one_{j}", 1.0, 1.0, [x_pos[i] for i in idx] + [zc] + ws, [1.0] * (len(idx) + 1 + len(ws))))
    for host, ws in partners_of.items():
        if len(ws) > 1:
            rows.append((f"partner_{host}", -np.inf, 1.0, ws, [1.0] * len(ws)))
    for n in model.kept_nodes:
        ys = [y_pos[n, vm] for vm in sorted(used_vms.get(n, ())) if (n, vm) in y_pos]
        if len(ys) > 1:
            rows.append((f"vm_{n}", -np.inf, 1.0, ys, [1.0] * len(ys)))
    for (n, vm), idx in by_node_vm.items():
        n_v = float(vm_by_name[vm].gpus)
        c_cols = [x_pos[i] for i in idx]
        c_vals = [float(placements[i].gpus) for i in idx]
        if n in pinned:
            cap = hosted(nodes[n]).gpus - nodes[n].used_gpus
            rows.append((f"cap_{n}_{vm_pos[vm]}", -np.inf, float(cap), c_cols, c_vals))
        else:
            rows.append((f"cap_{n}_{vm_pos[vm]}", -np.inf, 0.0, c_cols + [y_pos[n, vm]], c_vals + [-n_v]))
        a_vals = [placements[i].gpus * placements[i].span / n_v for i in idx] + [-1.0]
        rows.append((f"area_{n}_{vm_pos[vm]}", -np.inf, -pinned_area.get(n, 0.0), c_cols + [h_pos[n, vm]], a_vals))
    for (j, n, vm), idx in by_job_node_vm.items():
        rows.append((f"hor_{j}_{n}_{vm_pos[vm]}", -np.inf, 0.0, [x_pos[i] for i in idx] + [h_pos[n, vm]],
                     [placements[i].span for i in idx] + [-1.0]))

    # PuLP's column order: by name
    order = sorted(range(len(cols)), key=lambda c: cols[c][0])
    new = np.empty(len(cols), dtype=int)
    new[order] = np.arange(len(cols))
    row_cols, row_vals = [], []
    for _, _, _, rc, rv in rows:
        keep = [(int(new[c]), v) for c, v in zip(rc, rv) if v != 0]
        row_cols.append([c for c, _ in keep])
        row_vals.append([v for _, v in keep])
    lp = LinearProgram(
        names=[cols[c][0] for c in order],
        cost=np.array([cols[c][1] for c in order], dtype=float),
        lower=np.array([cols[c][2] for c in order], dtype=float),
        upper=np.array([cols[c][3] for c in order], dtype=float),
        integer=np.array([cols[c][4] for c in order], dtype=bool),
        row_names=[r[0] for r in rows],
        row_lower=np.array([r[1] for r in rows], dtype=float),
        row_upper=np.array([r[2] for r in rows], dtype=float),
        row_cols=row_cols,
        row_vals=row_vals,
        obj_order=[int(new[c]) for c in obj_order],
        constant=constant,
        x=new[np.array(x_pos, dtype=int)] if x_pos else np.zeros(0, dtype=int),
        y={k: int(new[c]) for k, c in y_pos.items()},
        h={k: int(new[c]) for k, c in h_pos.items()},
        z={k: int(new[c]) for k, c in z_pos.items()},
        w=new[np.array(w_pos, dtype=int)] if w_pos else np.zeros(0, dtype=int),
    )
    model.lp, model.constant = lp, constant
    return lp


def write_problem(model: Model) -> pulp.LpProblem:
    """The model's arrays as a PuLP problem (``model.problem`` and its variables ``x``, ``y``, ``h``, ``z``), with the
    warm start of ``model.start`` if any as its variables' initial values."""
    lp = model.lp if model.lp is not None else write_lp(model)
    prob = pulp.LpProblem("capsim_decision", pulp.LpMinimize)
    var = [
        prob.add_variable(name, lo, None if np.isinf(up) else up, pulp.LpBinary if integer else pulp.LpContinuous)
        for name, lo, up, integer in zip(lp.names, lp.lower.tolist(), lp.upper.tolist(), lp.integer.tolist())
    ]
    prob += pulp.LpAffineExpression([(var[c], float(lp.cost[c])) for c in lp.obj_order], constant=lp.constant)
    for name, lo, up, rc, rv in zip(lp.row_names, lp.row_lower.tolist(), lp.row_upper.tolist(), lp.row_cols,
                                    lp.row_vals):
        expr = pulp.LpAffineExpression([(var[c], v) for c, v in zip(rc, rv)])
        prob += (expr == lo if lo == up else expr <= up), name
    model.problem = prob
    model.x = [var[c] for c in lp.x.tolist()]
    model.y = {k: var[c] for k, c in lp.y.items()}
    model.h = {k: var[c] for k, c in lp.h.items()}
    model.z = {k: var[c] for k, c in lp.z.items()}
    apply_start(model)
    return prob


def apply_start(model: Model) -> None:
    """Copy ``model.start`` (one value per column) into the PuLP variables' initial values, when both exist."""
    if model.start is None or model.problem is None:
        return
    for v, value in zip(sorted(model.problem.variables(), key=lambda v: v.name), model.start.tolist()):
        v.setInitialValue(value)
