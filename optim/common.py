"""What every policy shares: per-configuration arrays, the ``(VM name, GPUs) → config index`` map, D*, and the cost
of running a job alone.

A policy gets these from ``config_table(snapshot.configs)``, built once per configurations tuple and reused across
decisions (the engine passes the same tuple every time), so no policy rebuilds them or keeps its own copy.
"""

from __future__ import annotations

import math

import numpy as np

from sim.model import Config, JobView, NodeView, VMType, per_configs

__all__ = ["ConfigTable", "config_table", "d_star", "d_star_ranking", "standalone_cost", "standalone_costs", "where",
           "hosted"]


class ConfigTable:
    """Per-configuration arrays of one ``Snapshot.configs`` tuple, indexed like ``JobView.estimates``.

    ``price`` ($/s of the whole VM, or of all the VMs a gang configuration rents), ``boot`` (s), ``gpus``, ``vms``
    (VMs rented: 1, or more for a gang over several VMs) and ``vm_of`` (the VM type's name) per configuration;
    ``index`` maps ``(VM name, GPUs)`` to the configuration's index; ``vm_names`` lists the VM types in order of first
    appearance, ``vm_index`` gives each configuration's position in it and ``vm_gpus`` each type's GPUs per VM.
    ``spot`` marks configurations on spot VMs (their risk is priced by ``sim.risk``);
    ``single`` those on one VM (``all_single``: every one), ``any_spot`` whether any is on spot.
    """

    def __init__(self, configs: tuple[Config, ...]):
        self.configs = configs
        self.vms = np.array([-(-c.gpus // c.vm.gpus) for c in configs], dtype=int)
        self.price = np.array([c.vm.price_per_second for c in configs], dtype=float) * self.vms
        self.spot = np.array([c.vm.spot for c in configs], dtype=bool)
        self.boot = np.array([c.vm.boot_time for c in configs], dtype=float)
        self.gpus = np.array([c.gpus for c in configs], dtype=int)
        self.vm_of = tuple(c.vm.name for c in configs)
        self.index: dict[tuple[str, int], int] = {(c.vm.name, c.gpus): k for k, c in enumerate(configs)}
        self.vm_names = tuple(dict.fromkeys(self.vm_of))
        vm_pos = {name: i for i, name in enumerate(self.vm_names)}
        self.vm_index = np.array([vm_pos[name] for name in self.vm_of], dtype=int)
        self.single = self.vms <= 1
        self.all_single = bool(self.single.all())
        """No gang configuration (each runs on one VM)."""
        self.any_spot = bool(self.spot.any())
        self.any_free = bool((self.price == 0).any())
        """Some configuration costs nothing (a fixed server priced 0): price × an unsupported (inf) runtime is NaN."""
        per_vm = {c.vm.name: c.vm.gpus for c in configs}
        self.vm_gpus = np.array([per_vm[name] for name in self.vm_names], dtype=int)
        """GPUs of one VM of each type, in ``vm_names`` order."""
        self.vm_by_name = {c.vm.name: c.vm for c in configs}
        gpu_models = {name: i for i, name in enumerate(dict.fromkeys(c.vm.gpu.name for c in configs))}
        self.gpu_models = gpu_models
        """The GPU models of the configurations, numbered in order of first appearance."""
        self.model_index = np.array([gpu_models[c.vm.gpu.name] for c in configs], dtype=int)
        """Each configuration's GPU model number."""
        self._class_masks: dict[frozenset[str] | None, np.ndarray] = {}
        self._ranked: dict[tuple[int, bytes | None], tuple[np.ndarray, list[tuple[float, int, float, float]] | None]]
        self._ranked = {}
        """``d_star``'s configurations of a fresh job by cost, per estimates row and mask (``_by_cost``)."""

    def accepted_by(self, allowed: frozenset[str] | None) -> np.ndarray:
        """Boolean mask of the configurations a node slot with this ``allowed`` set may host."""
        mask = self._class_masks.get(allowed)
        if mask is None:
            if allowed is None:
                mask = np.ones(len(self.configs), dtype=bool)
            else:
                mask = np.isin(self.vm_index, [i for i, n in enumerate(self.vm_names) if n in allowed])
            self._class_masks[allowed] = mask
        return mask


config_table = per_configs(ConfigTable)
"""The ConfigTable of a configs tuple, built once per tuple."""


def _cost(table: ConfigTable, remaining: np.ndarray) -> np.ndarray:
    """Price × remaining time per configuration; NaN where a free VM meets an unsupported (inf) runtime, which no
    caller chooses (the warning is silenced only where it can arise: ``np.errstate`` costs more than the product)."""
    if not table.any_free:
        return table.price * remaining
    with np.errstate(invalid="ignore"):
        return table.price * remaining


def d_star(job: JobView, now: float, table: ConfigTable, mask: np.ndarray | None = None) -> int | None:
    """Index of job's D* configuration among ``mask``: cheapest that meets the deadline, else the fastest.

    A VM on an empty node must boot first, so the finish time is now + boot + remaining. Cost is c_v · remaining
    (the job rents the whole VM). Ties: faster, then catalogue order (for the fastest: cheaper, then order).
    Returns None when no allowed configuration is supported.
    """
    if job.done == 0.0:
        rows = _by_cost(job.estimates, table, mask)
        if rows is not None:
            return _d_star_fresh(rows, now, job.job.deadline)
    remaining = (1.0 - job.done) * job.estimates
    ok = np.isfinite(remaining)
    if mask is not None:
        ok &= mask
    if not ok.any():
        return None
    finish = now + table.boot + remaining
    cost = _cost(table, remaining)
    meets = ok & (finish <= job.job.deadline)
    if meets.any():  # the head of d_star_ranking, without ranking the rest
        idx = meets.nonzero()[0]
        primary, secondary = cost[idx], finish[idx]
    else:
        idx = ok.nonzero()[0]
        primary, secondary = finish[idx], cost[idx]
    return int(idx[np.lexsort((idx, secondary, primary))[0]])


def _by_cost(estimates: np.ndarray, table: ConfigTable, mask: np.ndarray | None
             ) -> list[tuple[float, int, float, float]] | None:
    """The allowed, supported configurations of a job that has done no work, as (cost, index, boot, runtime) by cost
    then index: its cost order is the same at every decision, and the rows of one spec are shared by its jobs. Kept
    from the second time a row is seen (None the first time: a row of one job is not worth ordering)."""
    cache = table._ranked
    key = (id(estimates), None if mask is None else mask.tobytes())
    hit = cache.get(key)
    if hit is not None and hit[0] is estimates:
        if hit[1] is not None:
            return hit[1]
        ok = np.isfinite(estimates)
        if mask is not None:
            ok &= mask
        cost = _cost(table, estimates)
        rows = sorted((float(cost[k]), int(k), float(table.boot[k]), float(estimates[k])) for k in ok.nonzero()[0])
        cache[key] = (estimates, rows)
        return rows
    if len(cache) >= 4096:
        cache.clear()
    cache[key] = (estimates, None)  # holding the row keeps its id from being reused while the key stands
    return None


def _d_star_fresh(rows: list[tuple[float, int, float, float]], now: float, deadline: float) -> int | None:
    """``d_star`` of a job that has done no work, from its ``_by_cost`` rows: the same choice and tie-breaks, with
    finish times computed as ``d_star`` computes them (``now + boot + runtime``, left to right)."""
    best: tuple[float, float, int] | None = None
    for c, k, b, e in rows:
        if best is not None and c != best[0]:
            break  # the cheapest cost that meets the deadline is found; a dearer one cannot win
        f = now + b + e
        if f <= deadline and (best is None or (f, k) < best[1:]):
            best = (c, f, k)
    if best is not None:
        return best[2]
    fastest = min(((now + b + e, c, k) for c, k, b, e in rows), default=None)
    return None if fastest is None else fastest[2]


def d_star_ranking(job: JobView, now: float, table: ConfigTable, mask: np.ndarray | None = None) -> list[int]:
    """The whole D* list among ``mask``: configurations that meet the deadline by cost (then finish time, then
    catalogue order), followed by those that miss it by finish time (then cost, then order). Its head is ``d_star``."""
    remaining = (1.0 - job.done) * job.estimates
    finish = now + table.boot + remaining
    ok = np.isfinite(remaining)
    if mask is not None:
        ok &= mask
    cost = _cost(table, remaining)
    meets = ok & (finish <= job.job.deadline)
    late = ok & ~meets
    a, b = meets.nonzero()[0], late.nonzero()[0]
    first = a[np.lexsort((a, finish[a], cost[a]))]
    then = b[np.lexsort((b, cost[b], finish[b]))]
    return [int(k) for k in first] + [int(k) for k in then]


def standalone_costs(remaining: np.ndarray, start: float, weight: np.ndarray, deadline: np.ndarray,
                     table: ConfigTable, usable: np.ndarray) -> np.ndarray:
    """S(start) of jobs that share one row of ``remaining`` runtimes (overhead included): per job, the cheapest
    whole-VM rental (boot included) plus tardiness of running it alone from ``start`` on a ``usable``
    configuration; inf where none is usable."""
    span = table.boot + remaining
    with np.errstate(invalid="ignore"):  # a free configuration × an unsupported (inf) runtime: NaN, masked below
        total = table.price * span + weight[:, None] * np.maximum(0.0, (start + span) - deadline[:, None])
    total = np.where(usable & np.isfinite(remaining), total, np.inf)
    return total.min(axis=1) if total.shape[1] else np.full(len(weight), math.inf)


def standalone_cost(jv: JobView, start: float, table: ConfigTable, usable: np.ndarray, overhead: float = 0.0) -> float:
    """S_j(start): the cheapest whole-VM rental (boot included) plus tardiness of running ``jv`` alone from ``start``
    on a ``usable`` configuration, ``overhead`` seconds added to its remaining work; inf if none is usable."""
    t = (1.0 - jv.done) * jv.estimates + overhead
    return float(standalone_costs(t, start, np.array([jv.job.weight]), np.array([jv.job.deadline]), table, usable)[0])


def where(jv: JobView) -> tuple[int, int]:
    """(node, config index) of a running job; a waiting job has neither (ValueError)."""
    if jv.node is None or jv.config is None:
        raise ValueError(f"job {jv.id} is not running: it has no node and configuration")
    return jv.node, jv.config


def hosted(nv: NodeView) -> VMType:
    """The VM node ``nv`` hosts (one that runs or has just run a job always hosts one; ValueError otherwise)."""
    if nv.vm is None:
        raise ValueError(f"node {nv.index} hosts no VM")
    return nv.vm
