"""What leaving a job waiting costs in the MILP's objective: Δ, the expected delay until capacity frees up, and the
waiting penalty p_j (docs/milp.md, "The waiting penalty")."""

from __future__ import annotations

import math

import numpy as np

from optim.common import config_table, standalone_costs
from sim.model import JobView, Snapshot

__all__ = ["WAIT_ESTIMATES", "next_decision_delay", "waiting_penalty", "waiting_penalties"]

WAIT_ESTIMATES = ("mean", "earliest")


def next_decision_delay(snapshot: Snapshot, how: str = "mean") -> float:
    """Δ: the delay a job that waits now should expect before capacity frees up for it.

    ``earliest``: the earliest estimated completion of a running job (the next decision the model can count on).
    ``mean``: the mean over the running jobs' estimated completions; in a busy system several waiting jobs compete
    for the first capacity to free up, so a single job's expected wait is longer than the earliest completion.
    """
    now = snapshot.time
    ends = [
        max(0.0, snapshot.nodes[r.node].ready_at - now) + r.remaining_at(now)
        for r in snapshot.running
        if r.config is not None and r.node is not None
    ]
    finite = [e for e in ends if math.isfinite(e)]
    if not finite:
        return 0.0
    return min(finite) if how == "earliest" else sum(finite) / len(finite)


def waiting_penalty(
    jv: JobView,
    snapshot: Snapshot,
    delta: float,
    usable: np.ndarray,
    overhead: float = 0.0,
    urgency: float = 0.0,
    epsilon: float = 1e-3,
) -> float:
    """p_j: what leaving ``jv`` waiting now costs: S_j(now + Δ), plus the urgency term of docs/reference.md §4, plus
    ε·S_j(now).

    S_j (``optim.common.standalone_cost``) is non-decreasing in the start time, so p_j > S_j(now): starting a job
    alone on an empty node beats leaving it waiting, and waiting is never free. It stays finite when the job has no
    usable config (then it just waits).
    """
    return float(waiting_penalties([jv], snapshot, delta, usable, [overhead], urgency, epsilon)[0])


def waiting_penalties(
    jobs: list[JobView],
    snapshot: Snapshot,
    delta: float,
    usable: np.ndarray,
    overheads: list[float] | None = None,
    urgency: float = 0.0,
    epsilon: float = 1e-3,
) -> np.ndarray:
    """``waiting_penalty`` of every job in ``jobs`` (``overheads``: each one's restart overhead, default 0).

    S_j(start) is the least over usable configurations of the whole VM's rent from boot to the job's end plus its
    tardiness (``optim.common.standalone_cost``, in the same floating-point operations). Jobs that share their
    estimates array, progress and overhead (the usual case: waiting jobs of one spec) are evaluated as one matrix.
    """
    out = np.empty(len(jobs), dtype=float)
    if not jobs:
        return out
    table = config_table(snapshot.configs)
    now = snapshot.time
    later = now + delta
    groups: dict[tuple[int, float, float], list[int]] = {}
    for i, jv in enumerate(jobs):
        oh = overheads[i] if overheads is not None else 0.0
        groups.setdefault((id(jv.estimates), jv.done, oh), []).append(i)
    for (_, done, oh), idx in groups.items():
        t = (1.0 - done) * jobs[idx[0]].estimates + oh
        ok = usable & np.isfinite(t)
        if not ok.any():
            out[idx] = 1.0
            continue
        w = np.array([jobs[i].job.weight for i in idx])
        d = np.array([jobs[i].job.deadline for i in idx])
        s_now = standalone_costs(t, now, w, d, table, usable)
        s_later = standalone_costs(t, later, w, d, table, usable)
        tu = t[usable]
        t_max = float(tu[np.isfinite(tu)].max())
        late = np.maximum(0.0, (now + t_max) - d)
        out[idx] = s_later + urgency * w * late + epsilon * s_now + 1e-9
    return out
