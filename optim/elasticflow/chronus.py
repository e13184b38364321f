"""Chronus (Gao et al., SoCC'21) on ElasticFlow's clock: deadline guarantees by leases and admission control, rigid
jobs.

ElasticFlow compares with Chronus through Chronus's own simulator (``chronus-scheduler``), whose job selection
solves mixed-integer programs with Gurobi, so its Fig. 8 bars have no run to check against here (see
docs/elasticflow.md). This policy follows Chronus's design with the parameters of ElasticFlow's Fig. 8b script
(``--lease_term_interval=240``) and solves its program with HiGHS:

- time is cut into leases of 240 s; decisions at lease boundaries (arrivals wait for the next one);
- *admission*: at a boundary each arrival, in submission order, is accepted (its deadline guaranteed) when every
  accepted job and it still pack into the leases before their deadlines: ``ceil(service left / lease)`` leases each,
  on its requested GPUs, at most the cluster per lease. Chronus's greedy packing (jobs with the latest deadlines
  first, each into the latest leases with room) decides where it succeeds; where it fails, the exact 0-1 program
  (Chronus's MILP) on HiGHS, for deadlines within ``HORIZON`` leases. An arrival that does not fit runs as best
  effort;
- *selection*: the accepted jobs the packing needs in the current lease run; the GPUs left go to the other jobs in
  Chronus's order (accepted first, then the least GPU-time left, then the oldest), each that still fits.
"""

from __future__ import annotations

import math
from typing import ClassVar

from optim.base import register
from optim.highs import new_highs
from sim.elasticflow.vocabulary import JobStatus, LasView, ReplayCluster, ReplayPolicy, RigidPlan

__all__ = ["Chronus", "pack", "packable"]

LEASE = 240.0
"""Seconds per lease (ElasticFlow's Fig. 8b runs Chronus with ``--lease_term_interval=240``)."""


@register("chronus")
class Chronus(ReplayPolicy):
    """Lease-based deadline guarantees with admission control (see the module docstring).

    ``lease``: seconds per lease."""

    clock: ClassVar[str] = "lease"

    def __init__(self, lease: float = LEASE):
        self.lease = lease
        self.check_param("lease", float, above=0.0)

    def reset(self, cluster: ReplayCluster) -> None:
        self._seen: set[int] = set()
        self._accepted: set[int] = set()

    def decide(self, view: LasView) -> RigidPlan:  # type: ignore[override]
        n, now, lease = view.cluster.gpus, view.time, self.lease
        live = {s.id: s for s in view.runnable}
        self._accepted &= set(live)
        accepted = [live[i] for i in sorted(self._accepted)]
        for s in view.runnable:
            if s.id in self._seen:
                continue
            self._seen.add(s.id)
            if s.job.gpus <= n and packable(accepted + [s], now, lease, n):
                accepted.append(s)
                self._accepted.add(s.id)
        plan = pack(accepted, now, lease, n) or {}
        forced = [s for s in accepted if 0 in plan.get(s.id, ())]
        free = n - sum(s.job.gpus for s in forced)
        others = [s for s in view.runnable if s not in forced and s.job.gpus <= free]
        chosen = _select(others, free, self._accepted, now)
        run = [s.id for s in forced] + [others[k].id for k in chosen]
        return RigidPlan(tuple(run))


def _blocks(s: JobStatus, lease: float) -> int:
    return max(1, math.ceil((s.job.duration - s.executed) / lease))


def pack(jobs: list[JobStatus], now: float, lease: float, n: int) -> dict[int, list[int]] | None:
    """Chronus's greedy packing: the leases (0 = the current one) each job takes so that it gets its remaining
    service before its deadline, or None when the jobs do not all fit."""
    rows = []
    for s in jobs:
        window = int(math.floor((s.job.deadline - now) / lease))
        rows.append((window, _blocks(s, lease), s.job.gpus, s.id))
    rows.sort(reverse=True)
    used: dict[int, int] = {}
    out: dict[int, list[int]] = {}
    for window, need, g, i in rows:
        if need > window:
            return None
        got: list[int] = []
        for k in range(window - 1, -1, -1):
            if n - used.get(k, 0) >= g:
                used[k] = used.get(k, 0) + g
                got.append(k)
                if len(got) == need:
                    break
        if len(got) < need:
            return None
        out[i] = got
    return out


HORIZON = 96
"""Leases the exact admission program looks ahead (6.4 h of 240 s leases); beyond it the greedy packing decides."""


def packable(jobs: list[JobStatus], now: float, lease: float, n: int) -> bool:
    """Whether the jobs fit before their deadlines: Chronus's greedy packing, and where it fails, the exact 0-1
    program on HiGHS (``x[j, l]``: job j runs in lease l < its deadline; ``sum_l x[j, l]`` = its leases left;
    ``sum_j g_j x[j, l] <= n``)."""
    if pack(jobs, now, lease, n) is not None:
        return True
    rows = [(int(math.floor((s.job.deadline - now) / lease)), _blocks(s, lease), s.job.gpus) for s in jobs]
    if any(need > window for window, need, _ in rows):
        return False
    if max(window for window, _, _ in rows) > HORIZON:
        return False
    import highspy

    cols: list[tuple[int, int]] = [(j, k) for j, (window, _, _) in enumerate(rows) for k in range(window)]
    m = len(cols)
    h = new_highs()  # silent, one thread, no banner on stdout (optim/highs.py)
    lp = highspy.HighsLp()
    lp.num_col_ = m
    n_rows = len(rows) + HORIZON
    lp.num_row_ = n_rows
    lp.col_cost_ = [0.0] * m
    lp.col_lower_, lp.col_upper_ = [0.0] * m, [1.0] * m
    lp.row_lower_ = [float(need) for _, need, _ in rows] + [-highspy.kHighsInf] * HORIZON
    lp.row_upper_ = [float(need) for _, need, _ in rows] + [float(n)] * HORIZON
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = m, n_rows
    lp.a_matrix_.start_ = list(range(0, 2 * m + 1, 2))
    index, value = [], []
    for j, k in cols:
        index += [j, len(rows) + k]
        value += [1.0, float(rows[j][2])]
    lp.a_matrix_.index_, lp.a_matrix_.value_ = index, value
    lp.integrality_ = [highspy.HighsVarType.kInteger] * m
    h.passModel(lp)
    h.run()
    return h.getModelStatus() == highspy.HighsModelStatus.kOptimal


def _select(jobs: list[JobStatus], free: int, accepted: set[int], now: float) -> list[int]:
    """Indices of the jobs to run on ``free`` GPUs, in Chronus's order: accepted jobs first, then the least GPU-time
    left, then the longest wait; each job that still fits runs."""
    order = sorted(range(len(jobs)), key=lambda k: (jobs[k].id not in accepted,
                                                    (jobs[k].job.duration - jobs[k].executed) * jobs[k].job.gpus,
                                                    jobs[k].job.submit))
    out = []
    for k in order:
        if jobs[k].job.gpus <= free:
            out.append(k)
            free -= jobs[k].job.gpus
    return out
