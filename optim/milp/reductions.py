"""Shrinking a decision before it is written: infeasible and dominated configurations, interchangeable empty slots,
and the candidate placements that remain (docs/milp.md, "Reductions")."""

from __future__ import annotations

import math

import numpy as np

from optim.common import config_table, hosted, where
from optim.milp.model import Model, Placement
from optim.milp.waiting import next_decision_delay, waiting_penalty
from sim.model import JobView, Snapshot

__all__ = ["pareto_configs", "reduce_snapshot"]


def _dominated(times: list[tuple[int, int, float]]) -> set[int]:
    """Configs of one VM type (index, gpus, runtime) beaten by one with no more GPUs and no longer runtime."""
    out: set[int] = set()
    best = math.inf
    for k, _, t in sorted(times, key=lambda r: (r[1], r[2])):
        if t >= best:
            out.add(k)
        else:
            best = t
    return out


def pareto_configs(
    runtime: np.ndarray, snapshot: Snapshot, candidates: list[int], covers: dict[tuple[str, str], bool]
) -> list[int]:
    """Candidates not beaten by another that is no slower, no dearer (whole VM and GPU share), uses no more GPUs,
    and whose VM type every slot accepting this one also accepts; strictly better in one of these."""
    if len(candidates) < 2:
        return candidates
    table = config_table(snapshot.configs)
    cs = [snapshot.configs[k] for k in candidates]
    boot = table.boot[candidates]
    price = table.price[candidates]
    g = np.array([c.gpus for c in cs], dtype=float)
    share = g / np.array([c.vm.gpus for c in cs], dtype=float)
    t = boot + runtime[candidates]
    crit = np.stack([t, price * t, price * share * t, g], axis=1)
    names = [c.vm.name for c in cs]
    cov = np.array([[covers[a, b] for b in names] for a in names])
    le = (crit[None, :, :] <= crit[:, None, :] + 1e-12).all(axis=2)
    lt = (crit[None, :, :] < crit[:, None, :] - 1e-12).any(axis=2)
    beaten = np.asarray((le & lt & cov).any(axis=1))
    return [k for k, b in zip(candidates, beaten) if not b]


def _candidates(
    snapshot: Snapshot, jobs: list[JobView], urgency: float, dominance: str, wait_estimate: str
) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, float]]:
    """Per job: configs kept after the reductions, those kept by the exact rule alone, and the waiting penalty p_j."""
    nodes, configs = snapshot.nodes, snapshot.configs
    vm_of = config_table(configs).vm_of
    covers = {
        (a.name, b.name): all(nv.accepts(b.name) for nv in nodes if nv.accepts(a.name))
        for a in snapshot.vm_types
        for b in snapshot.vm_types
    }
    accepted_any = np.array([any(nv.accepts(vm) for nv in nodes) for vm in vm_of], dtype=bool)
    delta = next_decision_delay(snapshot, wait_estimate)
    cands: dict[int, list[int]] = {}
    exact: dict[int, list[int]] = {}
    penalties: dict[int, float] = {}
    for jv in jobs:
        est = jv.estimates
        by_vm: dict[str, list[tuple[int, int, float]]] = {}
        for k in np.flatnonzero(np.isfinite(est) & accepted_any):
            by_vm.setdefault(vm_of[k], []).append((int(k), configs[k].gpus, float(est[k])))
        keep = sorted(k for rows in by_vm.values() for k in {r[0] for r in rows} - _dominated(rows))
        exact[jv.id] = keep
        if dominance == "pareto":
            keep = pareto_configs((1.0 - jv.done) * est, snapshot, keep, covers)
        if jv.running and jv.config is not None and jv.config not in keep:
            keep.append(jv.config)
        cands[jv.id] = sorted(keep)
        overhead = snapshot.restart_overhead if jv.running else 0.0
        penalties[jv.id] = waiting_penalty(jv, snapshot, delta, accepted_any, overhead, urgency)
    return cands, exact, penalties


def _slot_classes(
    snapshot: Snapshot,
    free_nodes: list[int],
    on_node: dict[int, list[JobView]],
    jobs: list[JobView],
    cands: dict[int, list[int]],
) -> tuple[dict[tuple, list[int]], dict[int, tuple], list[int]]:
    """Interchangeable free slots (same allowed set, same idle VM and readiness, no running job) grouped in classes.

    Returns the kept members of each class (as many as jobs could use them), every free slot's class, and the
    slots that are unique (they carry running jobs that may move).
    """
    now = snapshot.time
    vm_of = config_table(snapshot.configs).vm_of
    classes: dict[tuple, list[int]] = {}
    unique: list[int] = []
    for n in free_nodes:
        nv = snapshot.nodes[n]
        if n in on_node:
            unique.append(n)
            continue
        key = (nv.allowed, nv.vm.name if nv.vm else None, max(0.0, nv.ready_at - now) if nv.vm else 0.0)
        classes.setdefault(key, []).append(n)
    kept: dict[tuple, list[int]] = {}
    for key, members in classes.items():
        allowed = key[0]
        usable = sum(1 for jv in jobs if any(allowed is None or vm_of[k] in allowed for k in cands[jv.id]))
        kept[key] = members[:usable]
    node_class = {n: key for key, members in classes.items() for n in members}
    return kept, node_class, unique


def reduce_snapshot(
    snapshot: Snapshot, preempt: bool, urgency: float, dominance: str, wait_estimate: str = "mean"
) -> Model:
    """The model's data: pinned slots, kept slots and their classes, candidate placements and waiting penalties."""
    now = snapshot.time
    configs = snapshot.configs
    vm_of = config_table(configs).vm_of
    gpus_of = [c.gpus for c in configs]
    vm_by_name = {v.name: v for v in snapshot.vm_types}
    overhead = snapshot.restart_overhead
    nodes = snapshot.nodes

    movable = list(snapshot.running) if preempt else []
    jobs = list(snapshot.waiting) + movable
    on_node: dict[int, list[JobView]] = {}
    for r in snapshot.running:
        on_node.setdefault(where(r)[0], []).append(r)

    # node slots: pinned (running jobs stay, non-preemptive), or free to choose a VM
    pinned: dict[int, tuple[str, float]] = {}
    pinned_area: dict[int, float] = {}
    free_nodes: list[int] = []
    for nv in nodes:
        if nv.index in on_node and not preempt:
            host, here = hosted(nv), on_node[nv.index]
            ready = max(0.0, nv.ready_at - now)
            ends = [ready + r.remaining(where(r)[1]) for r in here]
            pinned[nv.index] = (host.name, max(ends))
            pinned_area[nv.index] = sum(configs[where(r)[1]].gpus * end for r, end in zip(here, ends)) / host.gpus
        else:
            free_nodes.append(nv.index)

    def wait(n: int, vm: str) -> float:
        nv = nodes[n]
        if nv.vm is not None and nv.vm.name == vm:
            return max(0.0, nv.ready_at - now)
        return vm_by_name[vm].boot_time

    cands, exact, penalties = _candidates(snapshot, jobs, urgency, dominance, wait_estimate)
    kept_classes, node_class, unique = _slot_classes(snapshot, free_nodes, on_node, jobs, cands)
    kept_nodes = sorted(unique + [n for c in kept_classes.values() for n in c] + list(pinned))

    placements: list[Placement] = []
    for jv in jobs:
        w, d = jv.job.weight, jv.job.deadline
        rem = 1.0 - jv.done
        for n in kept_nodes:
            nv = nodes[n]
            if n in pinned:
                vm_fixed = pinned[n][0]
                cap = hosted(nv).gpus - nv.used_gpus
            ks = cands[jv.id]
            if nv.vm is not None and dominance == "pareto":
                # a VM that is already there keeps every exact option: sharing it is what the heuristic would lose
                ks = sorted(set(ks) | {k for k in exact[jv.id] if vm_of[k] == nv.vm.name})
            for k in ks:
                vm = vm_of[k]
                if not nv.accepts(vm):
                    continue
                if n in pinned and (vm != vm_fixed or gpus_of[k] > cap):
                    continue
                t = rem * float(jv.estimates[k])
                if jv.running and not (n == jv.node and k == jv.config):
                    t += overhead
                span = wait(n, vm) + t
                cost = w * max(0.0, now + span - d)
                placements.append(Placement(jv.id, n, k, vm, gpus_of[k], span, cost))

    return Model(
        snapshot=snapshot,
        preempt=preempt,
        placements=placements,
        penalties=penalties,
        pinned=pinned,
        pinned_area=pinned_area,
        on_node=on_node,
        kept_nodes=kept_nodes,
        classes=kept_classes,
        node_class=node_class,
        jobs={jv.id: jv for jv in jobs},
    )
