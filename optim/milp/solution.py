"""Between a solved model and the engine: the Plan the chosen placements make, and a Plan written back into the
model as a warm start."""

from __future__ import annotations

import numpy as np

from optim.common import config_table, where
from optim.milp.formulation import apply_start
from optim.milp.model import Model, Placement
from sim.model import Assignment, DecisionInfo, Plan

__all__ = ["chosen", "chosen_pairs", "to_plan", "set_warm_start"]


def chosen(model: Model) -> list[Placement]:
    """The placements the current solution selects (x = 1): the solver's column values, or the PuLP variables'."""
    if model.values is not None:
        x = model.values[model.lp.x] if len(model.placements) else np.zeros(0)
        return [pl for pl, v in zip(model.placements, x.tolist()) if v > 0.5]
    return [pl for pl, v in zip(model.placements, model.x) if (v.varValue or 0.0) > 0.5]


def chosen_pairs(model: Model) -> list[tuple[int, int, float]]:
    """The co-located pairs the current solution selects (w = 1)."""
    if not model.pairs:
        return []
    if model.values is not None:
        return [p for p, v in zip(model.pairs, model.values[model.lp.w].tolist()) if v > 0.5]
    names = {v.name: v for v in model.problem.variables()} if model.problem is not None else {}
    return [p for i, p in enumerate(model.pairs) if (getattr(names.get(f"w_{i}"), "varValue", 0.0) or 0.0) > 0.5]


def to_plan(model: Model, info: DecisionInfo) -> Plan:
    """Turn the selected placements into a Plan: VMs per node, starts, and (with preemption) moves and preemptions."""
    snap = model.snapshot
    picks = chosen(model)
    vm_after: dict[int, str] = {n: vm for n, (vm, _) in model.pinned.items()}
    for pl in picks:
        vm_after[pl.node] = pl.vm
    vms: dict[int, str | None] = {}
    for nv in snap.nodes:
        now_vm = nv.vm.name if nv.vm is not None else None
        after = vm_after.get(nv.index)
        if after != now_vm:
            vms[nv.index] = after
    start, move = [], []
    placed = set()
    for pl in picks:
        jv = model.jobs[pl.job]
        placed.add(pl.job)
        if not jv.running:
            start.append(Assignment(pl.job, pl.node, pl.gpus))
        elif (pl.node, pl.config) != (jv.node, jv.config):
            move.append(Assignment(pl.job, pl.node, pl.gpus))
    running = {r.id: r for r in snap.running}
    for job, host, _ in chosen_pairs(model):
        node, k = where(running[host])
        start.append(Assignment(job, node, snap.configs[k].gpus, partner=host))
    preempt = tuple(r.id for r in snap.running if model.preempt and r.id not in placed)
    return Plan(vms=vms, start=tuple(start), move=tuple(move), preempt=preempt, info=info)


def set_warm_start(model: Model, plan: Plan) -> int:
    """Set a warm start from a baseline plan in ``model.start`` and, when the PuLP problem is written, in its
    variables' initial values; returns how many jobs it placed. Each node of the plan is stood for by one kept slot
    of its class, so jobs the plan puts on one VM share one slot (and one VM's rent) in the start too."""
    snap, lp = model.snapshot, model.lp
    start = np.zeros(len(lp.names), dtype=float)
    for c in lp.z.values():
        start[c] = 1.0
    for (n, _), c in lp.h.items():
        start[c] = model.pinned[n][1] if n in model.pinned else 0.0
    index = {(pl.job, pl.node, pl.config): i for i, pl in enumerate(model.placements)}
    config_index = config_table(snap.configs).index
    spare = {key: [n for n in members] for key, members in model.classes.items()}
    placed = 0
    wanted: list[tuple[int, int, int]] = []
    if model.preempt:
        wanted += [(r.id, *where(r)) for r in snap.running]
    pair_index = {(j, h): i for i, (j, h, _) in enumerate(model.pairs)}
    for a in plan.start:
        if a.partner is not None:
            i = pair_index.get((a.job_id, a.partner))
            if i is not None:
                start[lp.w[i]], start[lp.z[a.job_id]] = 1.0, 0.0
                placed += 1
            continue
        host = snap.nodes[a.node].vm
        vm = plan.vms.get(a.node) or (host.name if host else None)
        wanted.append((a.job_id, a.node, -1 if vm is None else config_index.get((vm, a.gpus), -1)))
    slot_of: dict[int, int] = {}  # the plan's node → the kept slot standing for it, so its jobs stay together
    for job, node, k in wanted:
        key = model.node_class.get(node)
        if node in slot_of:
            node = slot_of[node]
        elif key is not None:
            if not spare[key]:
                continue
            slot = node if node in spare[key] else spare[key][0]
            spare[key].remove(slot)
            slot_of[node] = slot
            node = slot
        i = index.get((job, node, k))
        if i is None:
            continue
        pl = model.placements[i]
        start[lp.x[i]] = 1.0
        start[lp.z[job]] = 0.0
        if (node, pl.vm) in lp.y:
            start[lp.y[node, pl.vm]] = 1.0
        hc = lp.h[node, pl.vm]
        start[hc] = max(start[hc], pl.span)
        placed += 1
    model.start = start
    apply_start(model)
    return placed
