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
   visited fastest GPU first (V100, P100, K80), or, for Gavel's heterogeneity-agnostic policies (``shuffled``), in
   an order shuffled at every decision by Python's ``random.Random(seed + 5)`` as Gavel's simulator does (the same
   stream, so the same orders); each job placed once, where it can run, on as many GPUs as it
   takes. FIFO policies skip jobs of priority 0 (X = 0). A job admitted since the last recompute is a candidate
   with priority 0 and reserves its GPUs, but is not run (Gavel gives workers only to jobs in the allocation);
   "job order" is the order of admission, Gavel's order of its priority lists;
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
import random
from collections.abc import Iterator, Sequence
from typing import ClassVar

import numpy as np

from optim.base import Policy
from optim.common import config_table, where
from optim.gavel.fill import fill
from optim.gavel.jobs import JobTable
from sim.model import Assignment, CapsimError, DecisionInfo, JobView, Plan, Snapshot

__all__ = ["TimeSliced", "JobTable"]

_DEFAULT_ROUND = 360.0


class TimeSliced(Policy):
    """Gavel's round mechanism (module docstring); subclasses give ``allocate``."""

    may_preempt: ClassVar[bool] = True
    may_share: ClassVar[bool] = True
    may_gang: ClassVar[bool] = True
    plans_capacity: ClassVar[bool] = False
    prices_unplaceable: ClassVar[bool] = True
    """Gavel's LPs see a gang's rate on a type with fewer GPUs than the gang (``Cluster.unplaceable_gangs``)."""
    fifo: ClassVar[bool] = False
    """FIFO-family mapping: a job runs only where its allocation is positive."""
    shuffled: ClassVar[bool] = False
    """Visit the server types in an order shuffled at every decision (Gavel's policies without "Perf" or "Packing"
    in their names)."""

    def __init__(self, recompute_interval: float = 1920.0, type_order: Sequence[str] | None = None, seed: int = 0):
        """``recompute_interval``: Gavel's least time between two allocations (s); ``type_order``: the server types'
        visiting order (default fastest GPU first); ``seed``: the run's seed (Gavel's ``--seed``), for the shuffled
        type order and the policies' own random choices."""
        if not (recompute_interval >= 0 and math.isfinite(recompute_interval)):
            raise CapsimError(f"policy {self.name!r}: recompute_interval must be a finite number >= 0 s, got "
                              f"{recompute_interval!r}")
        self.recompute_interval = recompute_interval
        self.type_order = type_order
        self.seed = seed
        if type_order is not None and (isinstance(type_order, str) or not all(isinstance(t, str) for t in type_order)):
            raise CapsimError(f"policy {self.name!r}: type_order must be a list of server type names (or null), got "
                              f"{type_order!r}")
        self.check_param("seed", int, low=0)
        self._restart()

    _fell_back: tuple[str, str] | None = None
    """What this decision's allocation fell back to, and why (``fall_back``), until its plan records it."""

    def fall_back(self, kind: str, reason: str) -> None:
        """Record that this decision's allocation fell back (``kind``: what to, ``reason``: why): its plan says so."""
        self._fell_back = (kind, reason)

    def _info(self) -> DecisionInfo:
        """This decision's record: a fallback if the allocation recorded one (then forgotten), else plain."""
        if self._fell_back is None:
            return DecisionInfo()
        (kind, reason), self._fell_back = self._fell_back, None
        return DecisionInfo(status="fallback", fallback=kind, reason=reason)

    def _restart(self) -> None:
        self._fell_back = None
        self._types: tuple[str, ...] = ()
        self._signature: tuple | None = None
        self._table = JobTable(0)
        self._rows: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._speeds: dict[tuple, float] = {}
        self._last_time = -math.inf
        self._last_reset = 0.0
        self._need_update = True
        self._now = 0.0
        self._shuffler = random.Random(self.seed + 5)
        self._config_src: tuple | None = None
        self._config_type: list[int] = []

    # ----- the hook -----------------------------------------------------------------------------------------------

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        """X for the jobs in ``rows`` of ``table`` (admission order) on the server types: ``(len(rows), types)``."""
        raise NotImplementedError(self)

    def forget(self, jobs: list[int]) -> None:
        """Jobs that left since the last decision (a hook for allocations that keep per-job state)."""

    def alone(self, job: int) -> bool:
        """Whether the job's time since the last decision is credited to itself (a hook: the packing mechanism
        credits a pair's time to the pair)."""
        return True

    def ages(self, rows: np.ndarray) -> np.ndarray:
        """Seconds since each job's submission, at the recompute under way (Gavel's ``times_since_start``)."""
        return self._now - self._table.arrival[rows]

    def remaining(self, rows: np.ndarray) -> np.ndarray:
        """Iterations each job has still to run (Gavel's ``num_steps_remaining``, whole steps)."""
        t = self._table
        return np.round(t.iters[rows] * t.left[rows])

    def lp_rate(self, rows: np.ndarray) -> np.ndarray:
        """Throughputs as Gavel's LPs see them (iterations per second): the table's rate of the job's gang on a type
        even where the type has fewer GPUs than the gang (X there can never run); ``steps_rate`` elsewhere."""
        return self._table.speed[rows]

    def _reference(self) -> int:
        """The reference type of the agnostic policies: the fastest GPU (V100 on Gavel's clusters)."""
        return self._fastest

    def steps_rate(self, rows: np.ndarray) -> np.ndarray:
        """Iterations per second of each job on each type (Gavel's throughputs; 0 where it cannot run)."""
        return self._table.speed[rows]

    # ----- the decision -------------------------------------------------------------------------------------------

    def decide(self, s: Snapshot) -> Plan:
        now = s.time
        if now < self._last_time:
            self._restart()  # a new run
        start, self._last_time = self._last_time, now
        opened = self._servers(s)
        if not self._types:
            return Plan(vms=opened)
        credit = (s.rules.round_length if s.rules.rounds else _DEFAULT_ROUND) / 2.0
        self._account(s, credit, start if s.rules.rounds else None)
        if "stall" in s.trigger:
            self._last_reset = 0.0
        if self._need_update and (now - self._last_reset >= self.recompute_interval or self._last_reset == 0.0):
            self._recompute(now, credit)
        order = list(range(len(self._types)))
        if self.shuffled:
            self._shuffler.shuffle(order)
        return self._place(s, self._map(order), opened)

    def _servers(self, s: Snapshot) -> dict[int, str]:
        """Fix the server types on the first decision; VMs to start on empty slots (the slot's largest type)."""
        opened: dict[int, str] = {}
        for n in s.empty_nodes:
            nv = s.nodes[n]
            types = [v for v in s.vm_types if nv.accepts(v.name) and v.name not in s.unavailable]
            if types:
                opened[n] = max(types, key=lambda v: (v.gpus, v.gpu.fp32_tflops, v.name)).name
        signature = tuple(nv.vm.name if nv.vm is not None else opened.get(nv.index) for nv in s.nodes)
        if signature == self._signature:
            return opened
        self._signature = signature
        vm = {v.name: v for v in s.vm_types}
        if not self._types:
            present = {name: vm[name] for name in signature if name is not None}
            if self.type_order is not None:
                unknown = sorted(set(self.type_order) - set(present))
                if unknown:
                    raise CapsimError(f"policy {self.name!r}: type_order names {unknown}, which the cluster's servers "
                                      f"are not (server types: {sorted(present)})")
            rank = {name: i for i, name in enumerate(self.type_order or ())}
            self._types = tuple(sorted(present, key=lambda t: (rank.get(t, len(rank)), -present[t].gpu.fp32_tflops,
                                                               t)))
            self._index = {t: i for i, t in enumerate(self._types)}
            self._by_name = np.array(sorted(range(len(self._types)), key=lambda w: self._types[w]))
            self._fastest = max(range(len(self._types)), key=lambda w: (present[self._types[w]].gpu.fp32_tflops, -w))
            self._table = JobTable(len(self._types))
        gpus = np.zeros(len(self._types), dtype=np.int64)
        self._nodes: list[list[int]] = [[] for _ in self._types]
        self._node_gpus: dict[int, int] = {}
        for n, name in enumerate(signature):
            if name is None:
                continue
            w = self._index.get(name, -1)
            if w >= 0:
                gpus[w] += vm[name].gpus
                self._nodes[w].append(n)
                self._node_gpus[n] = vm[name].gpus
        self._gpus = gpus
        return opened

    def _account(self, s: Snapshot, credit: float, start: float | None) -> None:
        """Credit the time run since the last decision; add new jobs, drop those gone; note whether any changed.

        In round mode (``start``: the round's start) a job is credited its micro-task's length as Gavel computes it,
        (start + steps / throughput) − start: jobs that ran alike get exactly equal credits, so that the priority
        ties Gavel breaks by deficit and allocation are ties here too."""
        t = self._table
        present = {jv.job.id for jv in s.running}
        present.update(jv.job.id for jv in s.waiting)
        gone = [j for j in t.row if j not in present]
        for j in gone:
            t.drop(j)
        if gone:
            self.forget(gone)
        configs, now, row, index, alone, placed = s.configs, s.time, t.row.get, self._index.get, self.alone, t.type
        seen, done, ran_rows, ran_types, ran_done, runtime = [], [], [], [], [], []
        for jv in s.running:
            jid = jv.job.id
            r = row(jid)
            if r is None:
                continue
            seen.append(r)
            done.append(jv.done)
            if placed[r] >= 0:
                c = where(jv)[1]
                w = index(configs[c].vm.name, -1)
                if w >= 0 and alone(jid):
                    ran_rows.append(r)
                    ran_types.append(w)
                    ran_done.append(jv.at(now).done)
                    runtime.append(jv.estimates[c])
        if seen:
            t.left[seen] = 1.0 - np.array(done)
        if ran_rows:  # the credits, as whole arrays (the same float operations job by job)
            rr, ww = np.array(ran_rows), np.array(ran_types)
            ran = np.array(ran_done) - t.done[rr]
            est = np.array(runtime, dtype=float)
            if start is None:
                credit_run = ran * est
            else:
                iters = t.iters[rr]
                credit_run = (start + np.round(ran * iters) / (iters / est)) - start
            ok = ran > 0
            t.received[rr[ok], ww[ok]] += credit_run[ok]
        new = sorted((jv for jv in (*s.waiting, *s.running) if jv.job.id not in t.row), key=lambda v: v.job.id)
        for jv in new:
            rate, sf, speed = self._job_rows(s, jv)
            t.add(jv.id, rate, sf, jv.job.priority, credit, jv.job.submit_time, float(jv.job.spec.iterations), speed)
            t.left[t.row[jv.id]] = 1.0 - jv.done
        if gone or new:
            self._need_update = True

    def _job_rows(self, s: Snapshot, jv: JobView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per type: throughput (1 / estimated runtime, 0 where it cannot run or its gang does not fit), GPUs, and
        iterations per second (where the job has an estimate, also for a gang larger than the type).

        Iterations per second are iterations / runtime, the same number for every job of one kind (name, GPUs,
        type) up to rounding; the first job's value is kept for the others, so that jobs Gavel sees at exactly
        equal rates (ties its solvers and matchings break alike) are at exactly equal rates here too."""
        est = jv.estimates
        hit = self._rows.get(id(est))
        if hit is not None and hit[3] is est:
            return hit[0], hit[1], hit[2]
        index = config_table(s.configs).index
        m = len(self._types)
        rate, sf, speed = np.zeros(m), np.ones(m, dtype=np.int64), np.zeros(m)
        spec = jv.job.spec
        asked = spec.gpus
        for w, name in enumerate(self._types):
            for g in ([asked] if asked is not None else range(1, int(self._gpus[w]) + 1)):
                k = index.get((name, g))
                if k is not None and math.isfinite(est[k]) and est[k] > 0:
                    sf[w] = g
                    if g <= self._gpus[w]:  # a gang larger than the type is priced by the LPs, never placed
                        rate[w] = 1.0 / float(est[k])
                    v = float(spec.iterations) / float(est[k])
                    seen = self._speeds.setdefault((spec.name, spec.application, spec.batch_size, g, name), v)
                    speed[w] = seen if abs(seen - v) <= 1e-12 * v else v
                    break
            else:
                if asked is not None:
                    sf[w] = asked
        self._rows[id(est)] = (rate, sf, speed, est)
        return rate, sf, speed

    def _recompute(self, now: float, credit: float) -> None:
        """Gavel's reset: deficits += X · elapsed − received; received back to the credit; a new allocation."""
        t = self._table
        rows = t.live()
        elapsed = now - self._last_reset
        should = np.where(t.allocated[rows, None], t.alloc[rows] * elapsed, 0.0)
        t.deficit[rows] += should - (t.received[rows] - credit)
        t.received[rows] = credit
        self._now = now
        t.alloc[rows] = self.allocate(t, rows, self._gpus)  # also with no jobs: policies with memory forget then
        t.allocated[rows] = True
        self._need_update = False
        self._last_reset = now

    def _map(self, order: list[int]) -> dict[int, int]:
        """Job id → server type index for this round (jobs outside the allocation included: they hold GPUs idle);
        the types visited in ``order``."""
        t = self._table
        rows = t.live()
        if not len(rows):
            return {}
        rate, sf, ids = t.rate[rows], t.sf[rows], t.ids[rows]
        alloc = np.where(t.allocated[rows, None], t.alloc[rows], 0.0)
        deficit = t.deficit[rows]
        priority = np.where((alloc > 0) & (rate > 0), alloc / t.received[rows], 0.0)
        fifo = self.fifo

        def offers(w: int) -> Iterator[tuple[int, int, int, int]]:
            # the candidates: a job that cannot run here is never mapped here; FIFO maps only priorities > 0, which
            # sort before every priority 0, so dropping the others beforehand changes no job's place in the order
            cand = np.flatnonzero(priority[:, w] > 0 if fifo else rate[:, w] > 0)
            cand = cand[np.lexsort((cand, -alloc[cand, w], -deficit[cand, w], -priority[cand, w]))]
            jobs = ids[cand].tolist()
            return zip(jobs, jobs, jobs, sf[cand, w].tolist())

        return dict(fill(order, self._gpus.copy(), offers, set()))

    def _place(self, s: Snapshot, mapped: dict[int, int], opened: dict[int, str]) -> Plan:
        """Keep, preempt, move and start jobs so that the mapped ones run on their types (module docstring, 4)."""
        t = self._table
        row = t.row
        free = dict(self._node_gpus)
        configs = s.configs
        if configs is not self._config_src:  # each configuration's server type index (-1: not one of the types)
            self._config_src = configs
            self._config_type = [self._index.get(cfg.vm.name, -1) for cfg in configs]
        config_type = self._config_type
        now = s.time
        preempt, todo = [], []
        placed_rows, placed_types, placed_done = [], [], []  # written to the table at the end
        for jv in s.running:
            jid = jv.job.id
            w = mapped.get(jid, -1)
            node, c = where(jv)
            if w >= 0 and w == config_type[c]:
                for n, g in jv.parts or ((node, configs[c].gpus),):
                    free[n] -= g
                placed_rows.append(row[jid])
                placed_types.append(w)
                placed_done.append(jv.at(now).done)
            elif w >= 0:
                todo.append((jid, jv))
            else:
                preempt.append(jid)
                placed_rows.append(row[jid])
                placed_types.append(-1)
                placed_done.append(math.nan)
        allocated = t.allocated
        todo += [(jv.job.id, jv) for jv in s.waiting if jv.job.id in mapped and allocated[row[jv.job.id]]]
        rows = [row[jid] for jid, _ in todo]
        wanted = [mapped[jid] for jid, _ in todo]
        size = t.sf[rows, wanted].tolist() if todo else []
        start: list[Assignment] = []
        move: list[Assignment] = []
        open_nodes: dict[int, list[int]] = {}  # per type, its nodes with a free GPU, in index order
        gang = s.rules.gang
        for k in sorted(range(len(todo)), key=lambda k: (-size[k], todo[k][0])):
            jid, jv = todo[k]
            r, w = rows[k], wanted[k]
            nodes = open_nodes.get(w)
            if nodes is None:
                nodes = open_nodes[w] = [n for n in self._nodes[w] if free[n] > 0]
            parts = _fit(nodes, free, size[k], gang)
            placed_rows.append(r)
            if parts is None:
                if jv.running:
                    preempt.append(jid)
                placed_types.append(-1)
                placed_done.append(math.nan)
                continue
            for n, g in parts:
                free[n] -= g
                if free[n] == 0:
                    nodes.remove(n)
            a = Assignment(jid, parts[0][0], parts[0][1], gang=tuple(parts[1:]))
            (move if jv.running else start).append(a)
            placed_types.append(w)
            placed_done.append(jv.at(now).done)
        if placed_rows:
            types = np.array(placed_types, dtype=np.int64)
            t.type[placed_rows] = types
            on = types >= 0
            t.done[np.array(placed_rows)[on]] = np.array(placed_done)[on]
        keep = frozenset(self._node_gpus)
        return Plan(vms=opened, start=tuple(start), move=tuple(move), preempt=tuple(preempt), keep_idle=keep,
                    info=self._info())


def _fit(nodes: list[int], free: dict[int, int], g: int, gang: bool) -> list[tuple[int, int]] | None:
    """``g`` GPUs on ``nodes`` (those with a free GPU): the first node with room for all of them, else (``gang``)
    free GPUs taken node by node in order; None if they are not there."""
    for n in nodes:
        if free[n] >= g:
            return [(n, g)]
    if not gang:
        return None
    parts, left = [], g
    for n in nodes:
        take = min(free[n], left)
        parts.append((n, take))
        left -= take
        if left == 0:
            return parts
    return None
