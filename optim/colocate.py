"""Co-location in capacity planning: whether a waiting job should share the GPUs of a running job rather than run
alone (``docs/sharing.md``, *Co-locating policies*).

A pair's cost is what sharing adds, in the estimator's terms: the new job runs at its slowdown ``s_a`` next to the
host, the host at ``s_h`` until one of them finishes, then the other alone at full speed. With ``T`` the new job's
remaining time alone on the host's configuration and ``R`` the host's:

- the new job finishes first when ``s_a T <= s_h R``: at ``s_a T``; the host then has ``R - s_a T / s_h`` left;
- otherwise the host finishes at ``s_h R`` and the new job ``T - s_h R / s_a`` later.

The host's VM is held until the later of the two ends instead of ``R``: that extra time at the VM's price (the whole
VM, as D* prices a job alone), plus the new job's tardiness and the host's added tardiness, plus the tardiness of the
jobs queued behind the host (``queue_behind``: they start and end as much later), is the pair's cost. The job
is paired when that is below its cost alone (``standalone_cost``: the cheapest whole-VM rental plus tardiness, from
now where the cluster has room for it, else from the earliest moment a running job is expected to free its GPUs).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from optim.common import ConfigTable, config_table, standalone_cost
from sim.model import Assignment, JobView, Plan, Snapshot

__all__ = ["Host", "HostIndex", "pair_times", "pair_cost", "hosts", "best_host", "earliest_free", "pair_waiting",
           "promising_pairs", "queue_behind", "Behind", "next_cost"]


def pair_times(t_new: float, r_host: float, s_new: float, s_host: float) -> tuple[float, float]:
    """(the new job's, the host's) time to finish from now when they share (module docstring)."""
    if s_new * t_new <= s_host * r_host:
        first = s_new * t_new
        return first, first + (r_host - first / s_host)
    first = s_host * r_host
    return first + (t_new - first / s_new), first


def _late(weight: float, deadline: float, finish: float) -> float:
    return weight * max(0.0, finish - deadline)


@dataclass(frozen=True, slots=True)
class Host:
    """A running job a waiting job may join, with what every pair with it needs, computed once per decision: its
    node, configuration and GPUs, its time left alone (``remaining``) and its VM's price per second."""

    view: JobView
    node: int
    config: int
    gpus: int
    remaining: float
    price: float
    memory: float = math.nan
    """Its memory per GPU for the pair's fit (``Colocation.fit_gb``; NaN unknown)."""


class HostIndex:
    """One decision's hosts grouped by configuration, so that a job is priced only against hosts it may share with:
    a group is skipped whole where the job cannot share that configuration's GPUs with anyone
    (``Colocation.shares``), asks another GPU count, or does not fit next to the group's smallest memory, and a host
    where the two memories do not fit together. Every host skipped is one ``pair_cost`` prices ``inf``; the others
    come in the order they were given, so picking among them decides as the full list does."""

    def __init__(self, snapshot: Snapshot, candidates: Sequence[Host]):
        self._snapshot = snapshot
        self._order = {h.view.id: i for i, h in enumerate(candidates)}
        self._groups: dict[int, list[Host]] = {}
        for h in candidates:
            self._groups.setdefault(h.config, []).append(h)
        self._least = {k: _least(h.memory for h in group) for k, group in self._groups.items()}
        self._size = len(candidates)

    def __len__(self) -> int:
        return self._size

    def remove(self, host: Host) -> None:
        """Take ``host`` out (it has a partner now); the group's least memory stays a lower bound."""
        self._groups[host.config].remove(host)
        self._size -= 1

    def for_job(self, jv: JobView) -> list[Host]:
        """The hosts ``jv`` may share with, in the order given."""
        col = self._snapshot.colocation
        if col is None or not self._size:
            return []
        spec, asked, configs = jv.job.spec, jv.job.spec.gpus, self._snapshot.configs
        out: list[Host] = []
        groups = 0
        for k, group in self._groups.items():
            if not group or (asked is not None and group[0].gpus != asked) or not col.shares(spec, k):
                continue
            memory, cap = col.fit_gb(spec, k), configs[k].vm.gpu.memory_gb
            if memory + self._least[k] > cap:
                continue
            fitting = [h for h in group if not memory + h.memory > cap]  # NaN (unknown) fits, as the engine's check
            if fitting:
                out += fitting
                groups += 1
        if groups > 1:
            out.sort(key=lambda h: self._order[h.view.id])
        return out


def _least(memories: Iterable[float]) -> float:
    """The least of some memories, NaN when any is unknown (then nothing is ruled out by it)."""
    least = math.inf
    for m in memories:
        if math.isnan(m):
            return math.nan
        least = min(least, m)
    return least


Behind = Mapping[int, Sequence[tuple[int, float, float, float]]]
"""Per running job (by id), the waiting jobs projected to run on its GPUs after it: (job id, weight, deadline, projected
end), in order (``queue_behind``)."""


def queue_behind(snapshot: Snapshot, waiting: Iterable[JobView]) -> dict[int, list[tuple[int, float, float, float]]]:
    """Where the ``waiting`` jobs are projected to run once running jobs free their GPUs (``Behind``): by deadline,
    each takes the GPUs of the running job (alone on one node, on whole GPUs) that free up first among those it can run
    on (its GPU count, a finite estimate there), and frees them in turn at its estimated end: a list schedule of the
    queue.
    A slowed host delays every job behind it by as much as it ends later (``pair_cost``)."""
    now, configs = snapshot.time, snapshot.configs
    heaps: dict[int, list[tuple[float, int]]] = {}
    for jv in snapshot.running:
        if jv.partner is None and not jv.parts and jv.slice is None and jv.config is not None:
            heapq.heappush(heaps.setdefault(jv.config, []), (now + jv.remaining_at(now), jv.id))
    out: dict[int, list[tuple[int, float, float, float]]] = {}
    if not heaps:
        return out
    for jv in sorted(waiting, key=lambda v: (v.job.deadline, v.id)):
        asked, best = jv.job.spec.gpus, None
        for k, heap in heaps.items():
            if asked is not None and configs[k].gpus != asked:
                continue
            t = (1.0 - jv.done) * float(jv.estimates[k])
            if math.isfinite(t) and (best is None or heap[0][0] < best[0]):
                best = (heap[0][0], k, t)
        if best is None:
            continue
        free, k, t = best
        _, host = heapq.heappop(heaps[k])
        end = free + t + (snapshot.rules.restart_overhead if jv.done > 0 else 0.0)
        out.setdefault(host, []).append((jv.id, jv.job.weight, jv.job.deadline, end))
        heapq.heappush(heaps[k], (end, host))
    return out


def _time_on(snapshot: Snapshot, jv: JobView, k: int) -> float:
    """``jv``'s remaining time alone on configuration ``k`` (with the restart overhead once it has run)."""
    t = (1.0 - jv.done) * float(jv.estimates[k])
    return t + snapshot.rules.restart_overhead if jv.done > 0 and math.isfinite(t) else t


def _delay_behind(jv: JobView, host: Host, held: float, behind: Behind | None) -> float:
    """The tardiness the jobs projected to follow ``host`` on its GPUs (``jv`` aside) gain when they free ``held``
    seconds later."""
    if behind is None or held <= 0:
        return 0.0
    return sum(_late(w, d, end + held) - _late(w, d, end)
               for j, w, d, end in behind.get(host.view.id, ()) if j != jv.id)


def pair_cost(snapshot: Snapshot, jv: JobView, host: Host, behind: Behind | None = None) -> float:
    """The cost of starting ``jv`` on ``host``'s GPUs now (module docstring); inf where they may not share. With
    ``behind`` (``queue_behind``), the tardiness the jobs projected to follow the host on its GPUs gain from its GPUs
    freeing later counts too."""
    k = host.config
    if snapshot.colocation is None:
        return math.inf
    t_new = _time_on(snapshot, jv, k)
    if not math.isfinite(t_new):
        return math.inf
    s_new, s_host = snapshot.colocation.slowdowns(jv.job.spec, host.view.job.spec, k)
    if not math.isfinite(s_new):
        return math.inf
    now, r_host, hj = snapshot.time, host.remaining, host.view.job
    fin_new, fin_host = pair_times(t_new, r_host, s_new, s_host)
    held = max(fin_new, fin_host) - r_host
    return (host.price * held + _late(jv.job.weight, jv.job.deadline, now + fin_new)
            + _late(hj.weight, hj.deadline, now + fin_host) - _late(hj.weight, hj.deadline, now + r_host)
            + _delay_behind(jv, host, held, behind))


def next_cost(snapshot: Snapshot, jv: JobView, host: Host, behind: Behind | None = None) -> float:
    """The cost, in ``pair_cost``'s terms, of ``jv`` running alone on ``host``'s GPUs next, once the host ends: the
    VM held ``jv``'s time beyond the host's end, ``jv``'s tardiness then, and the jobs ``behind`` the host delayed by
    as much. Sharing is only worth it where it beats this (``promising_pairs``): a pair whose slowdowns leave less
    than one GPU's worth of progress holds the GPUs longer than the two jobs one after the other."""
    t_new = _time_on(snapshot, jv, host.config)
    if not math.isfinite(t_new):
        return math.inf
    return (host.price * t_new + _late(jv.job.weight, jv.job.deadline, snapshot.time + host.remaining + t_new)
            + _delay_behind(jv, host, t_new, behind))


def hosts(snapshot: Snapshot) -> list[Host]:
    """The running jobs a waiting job may join: alone on their whole GPUs (not a MIG slice), on one node, able to share
    them with some job (``Colocation.shares``)."""
    col = snapshot.colocation
    if col is None:
        return []
    out = []
    for jv in snapshot.running:
        k = jv.config
        if (jv.partner is None and not jv.parts and jv.slice is None and k is not None and jv.node is not None
                and col.shares(jv.job.spec, k)):
            c = snapshot.configs[k]
            out.append(Host(jv, jv.node, k, c.gpus, jv.remaining_at(snapshot.time), c.vm.price_per_second,
                            col.fit_gb(jv.job.spec, k)))
    return out


def earliest_free(snapshot: Snapshot) -> float:
    """When the first running job is expected to finish (now when none runs)."""
    return snapshot.time + min((jv.remaining_at(snapshot.time) for jv in snapshot.running), default=0.0)


def best_host(snapshot: Snapshot, jv: JobView, candidates: Sequence[Host], table: ConfigTable,
              reachable: np.ndarray, later: float, behind: Behind | None = None) -> tuple[Host, float] | None:
    """The host among ``candidates`` (``HostIndex.for_job``) whose pair costs least (with the delay of the jobs
    ``behind`` it), if that is below ``jv``'s cost alone (from now on a ``reachable`` configuration, or from ``later``
    on any when none is), with the pair's cost; else None."""
    best, cost = None, math.inf
    for host in candidates:
        c = pair_cost(snapshot, jv, host, behind)
        if c < cost:
            best, cost = host, c
    if best is None:
        return None
    overhead = snapshot.rules.restart_overhead if jv.done > 0 else 0.0
    alone = standalone_cost(jv, snapshot.time, table, reachable, overhead) if reachable.any() else math.inf
    if not math.isfinite(alone):
        alone = standalone_cost(jv, later, table, np.ones(len(table.configs), dtype=bool), overhead)
    return (best, cost) if cost < alone else None


def pair_waiting(snapshot: Snapshot, plan: Plan) -> Plan:
    """``plan`` with the jobs it leaves waiting paired with running jobs where that is cheaper than their cost alone
    from the earliest moment GPUs free up (by deadline, then id; each host once). Hosts the plan moves, preempts or
    already pairs are left alone."""
    busy = {a.job_id for a in plan.move} | set(plan.preempt) | {a.partner for a in plan.start if a.partner is not None}
    free = HostIndex(snapshot, [h for h in hosts(snapshot) if h.view.id not in busy])
    if not free:
        return plan
    started = {a.job_id for a in plan.start}
    table = config_table(snapshot.configs)
    nowhere = np.zeros(len(snapshot.configs), dtype=bool)
    later = earliest_free(snapshot)
    paired = []
    queue = sorted((jv for jv in snapshot.waiting if jv.id not in started), key=lambda v: (v.job.deadline, v.id))
    behind = None
    for jv in queue:
        partners = free.for_job(jv)
        if not partners:
            continue
        behind = behind if behind is not None else queue_behind(snapshot, queue)
        pair = best_host(snapshot, jv, partners, table, nowhere, later, behind)
        if pair is None:
            continue
        free.remove(pair[0])
        paired.append(Assignment(jv.id, pair[0].node, pair[0].gpus, partner=pair[0].view.id))
        if not free:
            break
    return replace(plan, start=plan.start + tuple(paired)) if paired else plan


def promising_pairs(snapshot: Snapshot, penalties: dict[int, float], stays: set[int], per_job: int = 3
                    ) -> list[tuple[int, int, float]]:
    """(waiting job, host, pair cost) for the MILP's pair variables: each waiting job in ``penalties`` with its
    ``per_job`` cheapest hosts among the running jobs alone on nodes that ``stays`` keeps, where the pair costs less
    than leaving the job waiting: its penalty, and its cost running next on the GPUs of whichever of those hosts
    it could share with is cheapest (``next_cost``; the penalty prices waiting from the mean running end, so a pair
    checked against it alone may cost more than waiting for the first of the GPUs it could share to free); by job
    then cost."""
    candidates = HostIndex(snapshot, [h for h in hosts(snapshot) if h.node in stays])
    out: list[tuple[int, int, float]] = []
    if not candidates:
        return out
    behind = None
    for jv in snapshot.waiting:
        partners = candidates.for_job(jv) if jv.id in penalties else []
        if not partners:
            continue
        behind = behind if behind is not None else queue_behind(snapshot, snapshot.waiting)
        wait = min(penalties[jv.id], min(next_cost(snapshot, jv, h, behind) for h in partners))
        costs = sorted((c, h.view.id) for h in partners if (c := pair_cost(snapshot, jv, h, behind)) < wait)
        out += [(jv.id, h, c) for c, h in costs[:per_job]]
    return out
