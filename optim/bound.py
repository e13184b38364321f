"""A lower bound on the total cost (VM rent + weighted tardiness) of any schedule of a whole instance.

Not a policy: it sees the whole instance at once (every job's arrival, deadline, weight and *true* runtimes), like a
clairvoyant scheduler, and bounds from below what any policy can achieve on it, so that a run's
``total_cost / lower_bound`` says how far it is from the best possible.

The bound is the optimum of a linear program, solved once with HiGHS (docs/heuristics.md, "The lower bound"). Time
from the first arrival to a horizon is cut into intervals; ``x[j, k, l]`` is the fraction of job j's work done in
configuration k during interval l, from its submission on; after the horizon a tail interval has no limit. Valid for
every policy capsim can run, preemptive or not, moving jobs between configurations or not:

- **work**: each job does all its work: Σ x[j, k, l] = 1.
- **one configuration at a time**: in an interval, job j runs at most its length: Σ_k x[j, k, l]·T[j, k] ≤ |l|.
- **slots**: a slot hosts one VM at a time, and jobs on a VM hold disjoint GPUs, so a job on g of a VM's n GPUs holds
  g/n of a slot: Σ x·T·g/n ≤ (slots that accept those VM types)·|l|, for all types and for each type.
- **rent**: jobs on a VM hold disjoint GPUs, so the VM is on at least Σ g·t/n over them: job j pays at least
  x·T·c·g/n.
- **tardiness** ``u[j] ≥ 0`` (seconds late, weighted by w): the job ends no earlier than its submission plus the
  work it does at the speeds it does it, ``u ≥ s + Σ x·T − d``; and if a fraction r of its work is left at a grid time
  τ ≥ s + t_min (t_min its fastest runtime), it ends no earlier than s + t_min + r·(τ − s) (a lower envelope of
  τ + r·t_min and s + t_min), so ``u ≥ s + t_min + (1 − W)·(τ − s) − d``, W its work done before τ.

Boot times, billing quanta and restart overheads only add cost and are left out. Configurations no slot accepts are
dropped; one that another beats at once in rent per job, slot share and runtime (on slots that accept it) is dropped
too, which leaves the optimum unchanged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from optim.highs import new_highs
from sim.contracts import Predictor
from sim.model import CapsimError, Config, Job

__all__ = ["lower_bound", "instance_bound"]

log = logging.getLogger("optim.bound")


def _accepts(allowed: frozenset[str] | None, vm: str) -> bool:
    return allowed is None or vm in allowed


def _useful(a: np.ndarray, q: np.ndarray, t: np.ndarray, cover: list[frozenset[int]]) -> list[int]:
    """Configurations (finite t) that no other beats at once in rent a, slot share q and runtime t, among those
    accepted by at least the same slots."""
    idx = [k for k in np.flatnonzero(np.isfinite(t)) if cover[k]]
    keep = []
    for k in idx:
        beaten = False
        for k2 in idx:
            if k2 == k or not cover[k2] >= cover[k]:
                continue
            le = a[k2] <= a[k] and q[k2] <= q[k] and t[k2] <= t[k]
            if le and (a[k2] < a[k] or q[k2] < q[k] or t[k2] < t[k] or k2 < k):
                beaten = True
                break
        if not beaten:
            keep.append(int(k))
    return keep


def lower_bound(
    jobs: Sequence[Job],
    configs: Sequence[Config],
    runtimes: np.ndarray,
    slots: Sequence[frozenset[str] | None],
    intervals: int = 40,
) -> float:
    """A lower bound on the total cost of any schedule of ``jobs`` on ``slots`` (each slot's allowed VM types, None
    for any), given the true runtime of each job on each configuration (``runtimes``, shape jobs × configs, inf where
    unsupported). ``intervals`` is the number of time intervals up to the horizon (more: tighter and slower)."""
    import highspy

    runtimes = np.asarray(runtimes, dtype=float)
    n_jobs, n_cfg = len(jobs), len(configs)
    if runtimes.shape != (n_jobs, n_cfg):
        raise CapsimError(f"lower_bound: runtimes has shape {runtimes.shape}, expected ({n_jobs}, {n_cfg})")
    if not jobs:
        return 0.0
    if not slots:
        raise CapsimError("lower_bound: the cluster has no node slot")
    cover = [frozenset(i for i, s in enumerate(slots) if _accepts(s, c.vm.name)) for c in configs]
    share = np.array([c.gpus / c.vm.gpus for c in configs])
    price = np.array([c.vm.price_per_second for c in configs])
    submit = np.array([j.submit_time for j in jobs])
    deadline = np.array([j.deadline for j in jobs])
    usable = np.isfinite(runtimes) & np.array([bool(c) for c in cover])[None, :]
    if not usable.any(axis=1).all():
        bad = jobs[int(np.flatnonzero(~usable.any(axis=1))[0])]
        raise CapsimError(f"lower_bound: job {bad.id} has no configuration that a slot accepts")
    t_min = np.where(usable, runtimes, np.inf).min(axis=1)

    # the grid: from the first arrival to a horizon by which the whole load fits the slots many times over
    slot_time = float(sum(np.where(usable[j], runtimes[j] * share, np.inf).min() for j in range(n_jobs)))
    start = float(submit.min())
    end = float(submit.max() + 2.0 * t_min.max() + 2.0 * slot_time / len(slots))
    grid = np.linspace(start, end, max(1, int(intervals)) + 1)
    length = np.diff(grid)
    types = sorted({c.vm.name for c in configs})
    per_type_slots = {v: sum(_accepts(s, v) for s in slots) for v in types}

    cost: list[float] = []
    upper: list[float] = []
    rows: dict[str, list] = {"lo": [], "up": [], "idx": [], "val": []}

    def col(c: float, ub: float = np.inf) -> int:
        cost.append(c)
        upper.append(ub)
        return len(cost) - 1

    def row(lo: float, up: float, idx: list[int], val: list[float]) -> None:
        rows["lo"].append(lo)
        rows["up"].append(up)
        rows["idx"].append(idx)
        rows["val"].append(val)

    capacity: dict[tuple[str | None, int], tuple[list[int], list[float]]] = {}
    for j, job in enumerate(jobs):
        t = runtimes[j]
        keep = _useful(price * share * t, share * t, np.where(usable[j], t, np.inf), cover)
        u = col(job.weight)
        work_idx: list[int] = []
        first = int(np.searchsorted(grid, submit[j], side="right")) - 1
        first = min(max(first, 0), len(length))
        w_prev: int | None = None
        for iv in range(first, len(length) + 1):
            tail = iv == len(length)
            xs = [col(float(price[k] * share[k] * t[k])) for k in keep]
            work_idx += xs
            if not tail:
                span = float(grid[iv + 1] - max(grid[iv], submit[j]))
                row(-np.inf, max(span, 0.0), xs, [float(t[k]) for k in keep])
                for k, x in zip(keep, xs):
                    for key in (None, configs[k].vm.name):
                        ids, vals = capacity.setdefault((key, iv), ([], []))
                        ids.append(x)
                        vals.append(float(t[k] * share[k]))
            # tardiness from the work left at the start of interval iv
            tau = float(grid[iv]) if iv < len(grid) else end
            if iv > first and tau >= submit[j] + t_min[j] and tau + t_min[j] > deadline[j] and w_prev is not None:
                row(tau + t_min[j] - deadline[j], np.inf, [u, w_prev], [1.0, tau - submit[j]])
            if not tail:
                w = col(0.0, 1.0)
                if w_prev is None:
                    row(0.0, 0.0, [w, *xs], [1.0] + [-1.0] * len(xs))
                else:
                    row(0.0, 0.0, [w, w_prev, *xs], [1.0, -1.0] + [-1.0] * len(xs))
                w_prev = w
        row(1.0, 1.0, work_idx, [1.0] * len(work_idx))
        row(submit[j] - deadline[j], np.inf, [u] + work_idx,
            [1.0] + [-float(t[k]) for k in keep] * (len(work_idx) // len(keep)))
    for (key, iv), (ids, vals) in capacity.items():
        n_slots = len(slots) if key is None else per_type_slots[key]
        if key is not None and n_slots == len(slots):
            continue
        row(-np.inf, n_slots * float(length[iv]), ids, vals)

    h = new_highs()
    lp = highspy.HighsLp()
    lp.num_col_ = len(cost)
    lp.num_row_ = len(rows["lo"])
    lp.col_cost_ = np.array(cost)
    lp.col_lower_ = np.zeros(len(cost))
    lp.col_upper_ = np.array(upper)
    lp.row_lower_ = np.array(rows["lo"], dtype=float)
    lp.row_upper_ = np.array(rows["up"], dtype=float)
    counts = [len(i) for i in rows["idx"]]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
    lp.a_matrix_.start_ = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    lp.a_matrix_.index_ = np.fromiter((i for r in rows["idx"] for i in r), dtype=np.int32, count=sum(counts))
    lp.a_matrix_.value_ = np.fromiter((v for r in rows["val"] for v in r), dtype=float, count=sum(counts))
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise CapsimError(f"lower_bound: the linear program ended with {h.modelStatusToString(h.getModelStatus())}")
    value = float(h.getInfo().objective_function_value)
    return max(0.0, value - 1e-7 * max(1.0, abs(value)))  # the solver's tolerance never lifts it above the optimum


def instance_bound(jobs: Sequence[Job], configs: Sequence[Config], truth: Predictor,
                   slots: Sequence[frozenset[str] | None], intervals: int = 40) -> float:
    """``lower_bound`` of a run's instance with the truth predictor's runtimes, computed once per instance in a
    process (the policies of one scenario and seed share it); NaN, with a logged reason, if it cannot be computed,
    so that a run never fails for its bound."""
    try:
        return _cached(tuple(jobs), tuple(configs), truth, tuple(slots), int(intervals))
    except CapsimError as e:
        log.warning("no lower bound for this run: %s", e)
        return math.nan


@lru_cache(maxsize=8)
def _cached(jobs: tuple[Job, ...], configs: tuple[Config, ...], truth: Predictor,
            slots: tuple[frozenset[str] | None, ...], intervals: int) -> float:
    specs = list(dict.fromkeys(j.spec for j in jobs))
    table = np.asarray(truth.runtimes(specs, configs), dtype=float) if specs else np.zeros((0, len(configs)))
    row = {spec: i for i, spec in enumerate(specs)}
    runtimes = table[[row[j.spec] for j in jobs]] if jobs else np.zeros((0, len(configs)))
    return lower_bound(jobs, configs, runtimes, slots, intervals)
