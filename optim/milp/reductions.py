"""Shrinking a decision before it is written: infeasible and dominated configurations, interchangeable empty slots,
and the candidate placements that remain (docs/milp.md, "Reductions")."""

from __future__ import annotations

import math

import numpy as np

from optim.common import config_table, hosted, where
from optim.milp.model import Model, Placement
from optim.milp.waiting import next_decision_delay, waiting_penalties
from sim.model import JobView, Snapshot

__all__ = ["pareto_configs", "reduce_snapshot", "accepted_configs"]


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


def _acceptance(snapshot: Snapshot) -> tuple[dict[tuple[str, str], bool], np.ndarray]:
    """``covers[a, b]``: every slot accepting VM type a accepts b; and per configuration, whether any slot accepts it.
    Both depend only on the slots' allowed sets, so they are computed once per distinct set of slots."""
    key = (snapshot.vm_types, tuple(nv.allowed for nv in snapshot.nodes), snapshot.configs)
    hit = _ACCEPTANCE.get(key)
    if hit is None:
        allowed = set(key[1])
        vm_of = config_table(snapshot.configs).vm_of

        def accepts(a: frozenset[str] | None, name: str) -> bool:
            return a is None or name in a

        covers = {
            (a.name, b.name): all(accepts(s, b.name) for s in allowed if accepts(s, a.name))
            for a in snapshot.vm_types
            for b in snapshot.vm_types
        }
        accepted_any = np.array([any(accepts(s, vm) for s in allowed) for vm in vm_of], dtype=bool)
        if len(_ACCEPTANCE) > 64:
            _ACCEPTANCE.clear()
        hit = _ACCEPTANCE[key] = (covers, accepted_any)
    return hit


_ACCEPTANCE: dict[tuple, tuple[dict[tuple[str, str], bool], np.ndarray]] = {}


def accepted_configs(snapshot: Snapshot) -> np.ndarray:
    """Per configuration, whether some slot of the snapshot may host its VM type."""
    return _acceptance(snapshot)[1]


def _candidates(
    snapshot: Snapshot, jobs: list[JobView], urgency: float, dominance: str, wait_estimate: str
) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, float]]:
    """Per job: configs kept after the reductions, those kept by the exact rule alone, and the waiting penalty p_j.

    The exact rule depends only on a job's estimates (shared by the jobs of one spec), so it runs once per spec.
    """
    configs = snapshot.configs
    vm_of = config_table(configs).vm_of
    covers, accepted_any = _acceptance(snapshot)
    delta = next_decision_delay(snapshot, wait_estimate)
    cands: dict[int, list[int]] = {}
    exact: dict[int, list[int]] = {}
    by_spec: dict[int, list[int]] = {}
    for jv in jobs:
        est = jv.estimates
        keep = by_spec.get(id(est))
        if keep is None:
            by_vm: dict[str, list[tuple[int, int, float]]] = {}
            for k in np.flatnonzero(np.isfinite(est) & accepted_any):
                by_vm.setdefault(vm_of[k], []).append((int(k), configs[k].gpus, float(est[k])))
            keep = by_spec[id(est)] = sorted(
                k for rows in by_vm.values() for k in {r[0] for r in rows} - _dominated(rows))
        exact[jv.id] = keep
        if dominance == "pareto":
            keep = pareto_configs((1.0 - jv.done) * est, snapshot, keep, covers)
        if jv.running and jv.config is not None and jv.config not in keep:
            keep = keep + [jv.config]
        cands[jv.id] = sorted(keep)
    overheads = [snapshot.rules.restart_overhead if jv.running else 0.0 for jv in jobs]
    p = waiting_penalties(jobs, snapshot, delta, accepted_any, overheads, urgency)
    penalties = {jv.id: float(v) for jv, v in zip(jobs, p)}
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
            ends = [ready + r.remaining_at(now) for r in here]
            pinned[nv.index] = (host.name, max(ends))
            pinned_area[nv.index] = sum(configs[where(r)[1]].gpus * end for r, end in zip(here, ends)) / host.gpus
        else:
            free_nodes.append(nv.index)

    cands, exact, penalties = _candidates(snapshot, jobs, urgency, dominance, wait_estimate)
    kept_classes, node_class, unique = _slot_classes(snapshot, free_nodes, on_node, jobs, cands)
    kept_nodes = sorted(unique + [n for c in kept_classes.values() for n in c] + list(pinned))
    placements = _placements(snapshot, jobs, kept_nodes, pinned, cands, exact, dominance)

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


def _node_options(snapshot: Snapshot, kept_nodes: list[int], pinned: dict[int, tuple[str, float]]
                  ) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The kept slots that can take a job, and per slot and configuration whether it may (``ok``) and how long the
    job waits there before running (``wait``): the VM's readiness if the slot hosts that type, else its boot time."""
    now, nodes = snapshot.time, snapshot.nodes
    table = config_table(snapshot.configs)
    vm_names = table.vm_names
    vm_index = table.vm_index
    boot = {v.name: v.boot_time for v in snapshot.vm_types}
    rows, oks, waits = [], [], []
    for n in kept_nodes:
        nv = nodes[n]
        ok = table.accepted_by(nv.allowed).copy()
        if n in pinned:
            ok &= (np.asarray(table.vm_of) == pinned[n][0]) & (table.gpus <= hosted(nv).gpus - nv.used_gpus)
            if not ok.any():
                continue
        per_vm = np.array([max(0.0, nv.ready_at - now) if nv.vm is not None and nv.vm.name == name else boot[name]
                           for name in vm_names])
        rows.append(n)
        oks.append(ok)
        waits.append(per_vm[vm_index])
    k = len(snapshot.configs)
    return rows, np.array(oks, dtype=bool).reshape(-1, k), np.array(waits, dtype=float).reshape(-1, k)


def _placements(
    snapshot: Snapshot,
    jobs: list[JobView],
    kept_nodes: list[int],
    pinned: dict[int, tuple[str, float]],
    cands: dict[int, list[int]],
    exact: dict[int, list[int]],
    dominance: str,
) -> list[Placement]:
    """Every candidate placement (job, kept slot, kept config), in job, slot and config order.

    Jobs with the same estimates, progress and candidates (the waiting jobs of one spec) share one evaluation of
    which (slot, config) pairs are open to them and of the spans there; only the tardiness cost is per job.
    """
    now, nodes = snapshot.time, snapshot.nodes
    table = config_table(snapshot.configs)
    vm_of, gpus_of = table.vm_of, table.gpus.tolist()
    overhead = snapshot.rules.restart_overhead
    rows, ok, wait = _node_options(snapshot, kept_nodes, pinned)
    if not rows:
        return []
    row_nodes = np.array(rows)
    # a VM that is already there keeps every exact option under ``pareto``: sharing it is what the heuristic loses
    hosts = [vm.name if (vm := nodes[n].vm) is not None and dominance == "pareto" else None for n in rows]
    shared: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    placements: list[Placement] = []
    for jv in jobs:
        key = (id(jv.estimates), jv.done, tuple(cands[jv.id]), jv.node, jv.config)
        hit = shared.get(key)
        if hit is None:
            mask = np.zeros(len(vm_of), dtype=bool)
            mask[cands[jv.id]] = True
            valid = ok & mask
            if any(hosts):
                ex = np.zeros(len(vm_of), dtype=bool)
                ex[exact[jv.id]] = True
                for r, host in enumerate(hosts):
                    if host is not None:
                        valid[r] = ok[r] & (mask | (ex & (np.asarray(vm_of) == host)))
            r_idx, k_idx = np.nonzero(valid)
            t = (1.0 - jv.done) * jv.estimates[k_idx]
            if jv.running:
                moved = ~((row_nodes[r_idx] == jv.node) & (k_idx == jv.config))
                t = np.where(moved, t + overhead, t)
            span = wait[r_idx, k_idx] + t
            hit = shared[key] = (row_nodes[r_idx], k_idx, span)
        n_idx, k_idx, span = hit
        cost = jv.job.weight * np.maximum(0.0, (now + span) - jv.job.deadline)
        jid = jv.id
        placements.extend(
            Placement(jid, n, k, vm_of[k], gpus_of[k], s, c)
            for n, k, s, c in zip(n_idx.tolist(), k_idx.tolist(), span.tolist(), cost.tolist())
        )
    return placements
