"""Writing one decision's MILP with PuLP: variables x, y, h, z, the objective and constraints (1)–(5) of
docs/milp.md; ``build_model`` reduces a snapshot and writes its problem in one call."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import pulp

from optim.common import hosted, where
from optim.milp.model import Model
from optim.milp.reductions import reduce_snapshot
from sim.model import Snapshot

__all__ = ["build_model", "write_problem"]


def build_model(
    snapshot: Snapshot,
    preempt: bool = False,
    urgency: float = 0.0,
    dominance: str = "safe",
    extra_constraints: Callable[[Model], None] | None = None,
    wait_estimate: str = "mean",
) -> Model:
    """Reduce the snapshot (infeasible and dominated configs, symmetric empty slots) and write the MILP with PuLP.

    Running jobs are first brought to the decision time (``JobView.at``): their remaining work counts the time they
    have already run.
    """
    snapshot = replace(snapshot, running=tuple(r.at(snapshot.time) for r in snapshot.running))
    model = reduce_snapshot(snapshot, preempt, urgency, dominance, wait_estimate)
    write_problem(model)
    if extra_constraints is not None:
        extra_constraints(model)
    return model


def write_problem(model: Model) -> None:
    """Write the PuLP problem of a reduced model: objective and constraints (1)–(5) of docs/milp.md.

    Interchangeable empty slots get no ordering constraint: the solvers' own symmetry handling does better without
    one (docs/milp.md, "Symmetric slots").
    """
    snapshot, placements, pinned = model.snapshot, model.placements, model.pinned
    now, nodes = snapshot.time, snapshot.nodes
    vm_by_name = {v.name: v for v in snapshot.vm_types}
    penalties, kept_nodes = model.penalties, model.kept_nodes
    pinned_area, on_node = model.pinned_area, model.on_node
    prob = pulp.LpProblem("capsim_decision", pulp.LpMinimize)
    x = [prob.add_variable(f"x_{i}", 0, 1, pulp.LpBinary) for i in range(len(placements))]
    used_vms: dict[int, set[str]] = {}
    for pl in placements:
        used_vms.setdefault(pl.node, set()).add(pl.vm)
    for n, (vm, _) in pinned.items():
        used_vms.setdefault(n, set()).add(vm)
    y: dict[tuple[int, str], pulp.LpVariable] = {}
    h: dict[tuple[int, str], pulp.LpVariable] = {}
    vm_pos = {v.name: i for i, v in enumerate(snapshot.vm_types)}
    for n in kept_nodes:
        for vm in sorted(used_vms.get(n, ())):
            lb = pinned[n][1] if n in pinned else 0.0
            h[n, vm] = prob.add_variable(f"h_{n}_{vm_pos[vm]}", lowBound=lb)
            if n not in pinned:
                y[n, vm] = prob.add_variable(f"y_{n}_{vm_pos[vm]}", 0, 1, pulp.LpBinary)

    z = {j: prob.add_variable(f"z_{j}", 0, 1) for j in model.jobs}
    constant = 0.0
    for n, (vm, horizon) in pinned.items():
        for r in on_node[n]:
            end = now + max(0.0, nodes[n].ready_at - now) + r.remaining(where(r)[1])
            constant += r.job.weight * max(0.0, end - r.job.deadline)
    obj = pulp.LpAffineExpression(
        [(h[key], vm_by_name[key[1]].price_per_second) for key in h]
        + [(x[i], pl.cost) for i, pl in enumerate(placements) if pl.cost != 0.0]
        + [(z[j], penalties[j]) for j in z],
        constant=constant,
    )
    prob += obj

    by_job: dict[int, list[int]] = {}
    by_node_vm: dict[tuple[int, str], list[int]] = {}
    by_job_node_vm: dict[tuple[int, int, str], list[int]] = {}
    for i, pl in enumerate(placements):
        by_job.setdefault(pl.job, []).append(i)
        by_node_vm.setdefault((pl.node, pl.vm), []).append(i)
        by_job_node_vm.setdefault((pl.job, pl.node, pl.vm), []).append(i)

    for j, zj in z.items():
        terms = [(x[i], 1.0) for i in by_job.get(j, [])] + [(zj, 1.0)]
        prob += pulp.LpAffineExpression(terms) == 1, f"one_{j}"
    for n in kept_nodes:
        ys = [y[n, vm] for vm in sorted(used_vms.get(n, ())) if (n, vm) in y]
        if len(ys) > 1:
            prob += pulp.LpAffineExpression([(v, 1.0) for v in ys]) <= 1, f"vm_{n}"
    for (n, vm), idx in by_node_vm.items():
        n_v = float(vm_by_name[vm].gpus)
        terms = [(x[i], float(placements[i].gpus)) for i in idx]
        if n in pinned:
            cap = hosted(nodes[n]).gpus - nodes[n].used_gpus
            prob += pulp.LpAffineExpression(terms) <= cap, f"cap_{n}_{vm_pos[vm]}"
        else:
            terms.append((y[n, vm], -n_v))
            prob += pulp.LpAffineExpression(terms) <= 0, f"cap_{n}_{vm_pos[vm]}"
        area = [(x[i], placements[i].gpus * placements[i].span / n_v) for i in idx] + [(h[n, vm], -1.0)]
        prob += pulp.LpAffineExpression(area) <= -pinned_area.get(n, 0.0), f"area_{n}_{vm_pos[vm]}"
    for (j, n, vm), idx in by_job_node_vm.items():
        terms = [(x[i], placements[i].span) for i in idx] + [(h[n, vm], -1.0)]
        prob += pulp.LpAffineExpression(terms) <= 0, f"hor_{j}_{n}_{vm_pos[vm]}"

    model.problem, model.x, model.y, model.h, model.z, model.constant = prob, x, y, h, z, constant
