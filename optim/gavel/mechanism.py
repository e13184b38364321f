"""Gavel's round mechanism, shared by its heterogeneity-aware policies (GAVEL.md §4–§6; ``docs/gavel.md``).

A subclass provides ``allocate``: the allocation X[job, server type], the share of time each job should get on each
type between two recomputes. At every decision (a round boundary in round mode), ``TimeSliced.decide``:

1. credits each job that ran since the last decision with the time it ran on its type (its progress times its
   estimated runtime there: the micro-task's length);
2. recomputes X if jobs arrived or left since the last recompute *and* the throttle allows it: at least
   ``recompute_interval`` seconds (T, 1920 s in Gavel) since the last recompute, or the last one was at t = 0
   (Gavel's ``_last_reset_time == 0`` sentinel), or the engine reports a stall (Gavel then forces a reset). A
   recompute first adds to each job's deficit what it should have received (X · elapsed) minus what it received;
3. maps X onto this round: per type, the jobs sorted by priority X / time received on that type (each job starts
   every period with a credit of half a round), then deficit, then X, highest first (job order breaks ties); types
   visited fastest GPU first (V100, P100, K80); each job placed once, where it can run, on as many GPUs as it
   takes. FIFO policies skip jobs of priority 0 (X = 0). A job admitted since the last recompute is a candidate
   with priority 0 and reserves its GPUs, but is not run (Gavel gives workers only to jobs in the allocation);
4. keeps every job that runs on the same type where it is (a lease extension), preempts those not mapped, moves
   those mapped to another type and starts the others, largest GPU count first, on one server if it fits, else as
   a gang over several servers of the type.

Servers are the nodes hosting a VM; on a slot without one (a cloud cluster) the policy starts the allowed VM type
with the most GPUs and keeps it: Gavel schedules a fixed cluster. A server type is a VM type (``v100``, ``p100``,
``k80`` for Gavel's clusters). A job runs on ``JobSpec.gpus`` GPUs, or, when it leaves the count open, the smallest
count it can run with on that type.
"""

from __future__ import annotations

import math
from typing import ClassVar, Sequence

import numpy as np

from optim.base import Policy
from optim.common import config_table
from sim.model import Assignment, CapsimError, JobView, Plan, Snapshot

__all__ = ["TimeSliced", "Job"]

_DEFAULT_ROUND = 360.0


class Job:
    """What the mechanism keeps about one job: per type its throughput (``rate``, 0 where it cannot run), GPUs
    (``sf``) and configuration; time received since the last recompute, deficit, allocation; where it ran."""

    __slots__ = ("id", "rate", "sf", "cfg", "weight", "received", "deficit", "alloc", "done", "type")

    def __init__(self, jid: int, rate: np.ndarray, sf: np.ndarray, cfg: np.ndarray, weight: float, credit: float):
        self.id, self.rate, self.sf, self.cfg, self.weight = jid, rate, sf, cfg, weight
        self.received = np.full(len(rate), credit)
        self.deficit = np.zeros(len(rate))
        self.alloc: np.ndarray | None = None
        self.done = 0.0
        self.type = -1


class TimeSliced(Policy):
    """Gavel's round mechanism (module docstring); subclasses give ``allocate``."""

    may_preempt: ClassVar[bool] = True
    may_share: ClassVar[bool] = True
    may_gang: ClassVar[bool] = True
    plans_capacity: ClassVar[bool] = False
    fifo: ClassVar[bool] = False
    """FIFO-family mapping: a job runs only where its allocation is positive."""

    def __init__(self, recompute_interval: float = 1920.0, type_order: Sequence[str] | None = None):
        if not (recompute_interval >= 0 and math.isfinite(recompute_interval)):
            raise CapsimError(f"policy {self.name!r}: recompute_interval must be a finite number >= 0 s, got "
                              f"{recompute_interval!r}")
        self.recompute_interval = recompute_interval
        self.type_order = None if type_order is None else list(type_order)
        self._restart()

    def _restart(self) -> None:
        self._types: tuple[str, ...] = ()
        self._jobs: dict[int, Job] = {}
        self._rows: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._last_time = -math.inf
        self._last_reset = 0.0
        self._need_update = True

    # ----- the hook -----------------------------------------------------------------------------------------------

    def allocate(self, jobs: list[Job], gpus: np.ndarray) -> np.ndarray:
        """X for ``jobs`` (in job order) on the server types, shape ``(len(jobs), len(gpus))``."""
        raise NotImplementedError(self)

    # ----- the decision -------------------------------------------------------------------------------------------

    def decide(self, s: Snapshot) -> Plan:
        now = s.time
        if now < self._last_time:
            self._restart()  # a new run
        self._last_time = now
        opened = self._servers(s)
        if not self._types:
            return Plan(vms=opened)
        credit = (s.round_length if math.isfinite(s.round_length) else _DEFAULT_ROUND) / 2.0
        views = self._account(s, credit)
        if "stall" in s.trigger:
            self._last_reset = 0.0
        if self._need_update and (now - self._last_reset >= self.recompute_interval or self._last_reset == 0.0):
            self._recompute(now, credit)
        jobs = [self._jobs[j] for j in sorted(self._jobs)]
        mapped = self._map(jobs)
        plan = self._place(s, views, mapped, opened)
        return plan

    def _servers(self, s: Snapshot) -> dict[int, str]:
        """Fix the server types on the first decision; VMs to start on empty slots (the slot's largest type)."""
        opened: dict[int, str] = {}
        for n in s.empty_nodes:
            nv = s.nodes[n]
            types = [v for v in s.vm_types if nv.accepts(v.name)]
            if types:
                opened[n] = max(types, key=lambda v: (v.gpus, v.gpu.fp32_tflops, v.name)).name
        if not self._types:
            present = {nv.vm.name: nv.vm for nv in s.nodes if nv.vm is not None}
            present.update({name: s.vm_type(name) for name in opened.values()})
            if self.type_order is not None:
                unknown = sorted(set(self.type_order) - set(present))
                if unknown:
                    raise CapsimError(f"policy {self.name!r}: type_order names {unknown}, which the cluster's servers "
                                      f"are not (server types: {sorted(present)})")
                rank = {name: i for i, name in enumerate(self.type_order)}
            else:
                rank = {}
            self._types = tuple(sorted(present, key=lambda t: (rank.get(t, len(rank)), -present[t].gpu.fp32_tflops,
                                                               t)))
            self._index = {t: i for i, t in enumerate(self._types)}
            self._by_name = np.array(sorted(range(len(self._types)), key=lambda w: self._types[w]))
        gpus = np.zeros(len(self._types), dtype=int)
        self._nodes: list[list[int]] = [[] for _ in self._types]
        for nv in s.nodes:
            name = nv.vm.name if nv.vm is not None else opened.get(nv.index)
            w = self._index.get(name, -1) if name is not None else -1
            if w >= 0:
                gpus[w] += s.vm_type(name).gpus
                self._nodes[w].append(nv.index)
        self._gpus = gpus
        return opened

    def _account(self, s: Snapshot, credit: float) -> dict[int, JobView]:
        """Credit the time run since the last decision; add new jobs, drop those gone; note whether any changed."""
        views = {jv.id: jv for jv in s.running}
        views.update((jv.id, jv) for jv in s.waiting)
        gone = [j for j in self._jobs if j not in views]
        for j in gone:
            del self._jobs[j]
        configs = s.configs
        for jv in s.running:
            rec = self._jobs.get(jv.id)
            if rec is not None and rec.type >= 0:
                ran = jv.at(s.time).done - rec.done
                if ran > 0:
                    w = self._index.get(configs[jv.config].vm.name, -1)
                    if w >= 0:
                        rec.received[w] += ran * float(jv.estimates[jv.config])
        new = [jv for jv in views.values() if jv.id not in self._jobs]
        for jv in sorted(new, key=lambda v: v.id):
            rate, sf, cfg = self._job_rows(s, jv)
            self._jobs[jv.id] = Job(jv.id, rate, sf, cfg, jv.job.priority, credit)
        if gone or new:
            self._need_update = True
        return views

    def _job_rows(self, s: Snapshot, jv: JobView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per type: throughput (1 / estimated runtime, 0 where it cannot run), GPUs and configuration index."""
        key = id(jv.estimates)
        hit = self._rows.get(key)
        if hit is not None and hit[3] is jv.estimates:
            return hit[0], hit[1], hit[2]
        index = config_table(s.configs).index
        est = jv.estimates
        m = len(self._types)
        rate, sf, cfg = np.zeros(m), np.ones(m, dtype=int), np.full(m, -1)
        for w, name in enumerate(self._types):
            counts = [jv.job.spec.gpus] if jv.job.spec.gpus is not None else range(1, int(self._gpus[w]) + 1)
            for g in counts:
                k = index.get((name, g))
                if k is not None and math.isfinite(est[k]) and est[k] > 0:
                    rate[w], sf[w], cfg[w] = 1.0 / float(est[k]), g, k
                    break
            else:
                if jv.job.spec.gpus is not None:
                    sf[w] = jv.job.spec.gpus
        self._rows[key] = (rate, sf, cfg, est)
        return rate, sf, cfg

    def _recompute(self, now: float, credit: float) -> None:
        """Gavel's reset: deficits += X · elapsed − received; received back to the credit; a new allocation."""
        elapsed = now - self._last_reset
        jobs = [self._jobs[j] for j in sorted(self._jobs)]
        for rec in jobs:
            should = rec.alloc * elapsed if rec.alloc is not None else 0.0
            rec.deficit += should - (rec.received - credit)
            rec.received[:] = credit
        x = self.allocate(jobs, self._gpus) if jobs else np.zeros((0, len(self._types)))
        for rec, row in zip(jobs, x):
            rec.alloc = row
        self._need_update = False
        self._last_reset = now

    def _map(self, jobs: list[Job]) -> dict[int, int]:
        """Job id → server type index for this round (jobs outside the allocation included: they hold GPUs idle)."""
        n, m = len(jobs), len(self._types)
        if n == 0:
            return {}
        rate = np.array([r.rate for r in jobs])
        sf = np.array([r.sf for r in jobs])
        alloc = np.array([r.alloc if r.alloc is not None else np.zeros(m) for r in jobs])
        deficit = np.array([r.deficit for r in jobs])
        received = np.array([r.received for r in jobs])
        priority = np.where((alloc > 0) & (rate > 0), alloc / received, 0.0)
        left = self._gpus.copy()
        mapped: dict[int, int] = {}
        position = np.arange(n)
        for w in range(m):
            if left[w] <= 0:
                continue
            order = np.lexsort((position, -alloc[:, w], -deficit[:, w], -priority[:, w]))
            for i in order:
                if left[w] <= 0:
                    break
                if self.fifo and priority[i, w] <= 0:
                    break
                jid = jobs[i].id
                if jid in mapped or rate[i, w] <= 0 or sf[i, w] > left[w]:
                    continue
                left[w] -= sf[i, w]
                mapped[jid] = w
        return mapped

    def _place(self, s: Snapshot, views: dict[int, JobView], mapped: dict[int, int], opened: dict[int, str]) -> Plan:
        """Keep, preempt, move and start jobs so that the mapped ones run on their types (module docstring, 4)."""
        free = {}
        for w, nodes in enumerate(self._nodes):
            for n in nodes:
                vm = s.nodes[n].vm
                free[n] = (vm.gpus if vm is not None else s.vm_type(opened[n]).gpus)
        configs = s.configs
        preempt, todo = [], []
        for jv in s.running:
            rec = self._jobs[jv.id]
            w = mapped.get(jv.id, -1)
            here = self._index.get(configs[jv.config].vm.name, -1)
            if w >= 0 and w == here:
                for n, g in jv.parts or ((jv.node, configs[jv.config].gpus),):
                    free[n] -= g
                rec.type, rec.done = w, jv.at(s.time).done
            elif w >= 0:
                todo.append(jv)
            else:
                preempt.append(jv.id)
                rec.type = -1
        todo += [jv for jv in s.waiting if jv.id in mapped and self._jobs[jv.id].alloc is not None]
        for jv in s.waiting:
            self._jobs[jv.id].type = -1
        todo.sort(key=lambda jv: (-int(self._jobs[jv.id].sf[mapped[jv.id]]), jv.id))
        start, move = [], []
        for jv in todo:
            rec = self._jobs[jv.id]
            w = mapped[jv.id]
            parts = _fit(self._nodes[w], free, int(rec.sf[w]), s.gang)
            if parts is None:
                if jv.running:
                    preempt.append(jv.id)
                rec.type = -1
                continue
            for n, g in parts:
                free[n] -= g
            a = Assignment(jv.id, parts[0][0], parts[0][1], tuple(parts[1:]))
            (move if jv.running else start).append(a)
            rec.type, rec.done = w, jv.at(s.time).done
        keep = frozenset(n for nodes in self._nodes for n in nodes)
        return Plan(vms=opened, start=tuple(start), move=tuple(move), preempt=tuple(preempt), keep_idle=keep)


def _fit(nodes: list[int], free: dict[int, int], g: int, gang: bool) -> list[tuple[int, int]] | None:
    """``g`` GPUs on ``nodes``: the first node with room for all of them, else (``gang``) free GPUs taken node by
    node in order; None if they are not there."""
    for n in nodes:
        if free[n] >= g:
            return [(n, g)]
    if not gang:
        return None
    parts, left = [], g
    for n in nodes:
        if free[n] > 0 and left > 0:
            take = min(free[n], left)
            parts.append((n, take))
            left -= take
    return parts if left == 0 else None
