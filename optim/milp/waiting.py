"""What leaving a job waiting costs in the MILP's objective: Δ, the expected delay until capacity frees up, and the
waiting penalty p_j (docs/milp.md, "The waiting penalty")."""

from __future__ import annotations

import math

import numpy as np

from optim.common import config_table, standalone_cost
from sim.model import JobView, Snapshot

__all__ = ["WAIT_ESTIMATES", "next_decision_delay", "waiting_penalty"]

WAIT_ESTIMATES = ("mean", "earliest")


def next_decision_delay(snapshot: Snapshot, how: str = "mean") -> float:
    """Δ: the delay a job that waits now should expect before capacity frees up for it.

    ``earliest``: the earliest estimated completion of a running job (the next decision the model can count on).
    ``mean``: the mean over the running jobs' estimated completions; in a busy system several waiting jobs compete
    for the first capacity to free up, so a single job's expected wait is longer than the earliest completion.
    """
    now = snapshot.time
    ends = [
        max(0.0, snapshot.nodes[r.node].ready_at - now) + r.remaining(r.config)
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
    """p_j: what leaving ``jv`` waiting now costs: S_j(now + Δ), plus REFERENCE §4's urgency term, plus ε·S_j(now).

    S_j (``optim.common.standalone_cost``) is non-decreasing in the start time, so p_j > S_j(now): starting a job
    alone on an empty node beats leaving it waiting, and waiting is never free. It stays finite when the job has no
    usable config (then it just waits).
    """
    table = config_table(snapshot.configs)
    now = snapshot.time
    s_now = standalone_cost(jv, now, table, usable, overhead)
    if not math.isfinite(s_now):
        return 1.0
    s_later = standalone_cost(jv, now + delta, table, usable, overhead)
    t = (1.0 - jv.done) * jv.estimates[usable] + overhead
    t_max = float(t[np.isfinite(t)].max())
    late = max(0.0, now + t_max - jv.job.deadline)
    return s_later + urgency * jv.job.weight * late + epsilon * s_now + 1e-9
