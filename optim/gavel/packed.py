"""Gavel's round mechanism with packing: two jobs may share a GPU as a pair (PACKING.md §2-§5 of the Gavel notes;
``docs/gavel.md``, "Packing").

What changes from ``optim.gavel.mechanism.TimeSliced``:

1. Pairs. When a job arrives, a pair is made with every active job that takes as many GPUs on every type (Gavel's
   ``JobIdPair``, in its order: the new job, then its pairs with the active jobs in admission order). A pair's rate
   on a type is each member's rate times its slowdown next to the other (``Snapshot.colocation``, the estimator's
   interference model); a pair that may not share a type has rate 0 there, and one that may share none is kept only
   by a policy that ``keeps_idle_pairs`` (Gavel's LPs carry such pairs, whose shares no one uses; it never runs).
   Pairs go when a member leaves.
2. Allocation. A packing policy's ``allocate_pairs`` gives X for the jobs alone and for the pairs.
3. Credit. Time a pair runs is credited to the pair (its micro-task: the later member's end), not to its members. A
   pair starts with no credit, where a job starts with half a round: at the next recompute its deficit grows by half
   a round (Gavel's +180 s quirk, kept).
4. Mapping. Per type, jobs and pairs together, by priority, deficit, X and creation order; a job runs at most once
   per round, alone or in one pair; a pair skips a type where either member has rate 0. Entries outside the
   allocation (created since the last recompute) reserve their GPUs but do not run.
5. Placement. A job or pair that runs on the type it ran on stays; a pair is put on the GPUs of a member that stays
   (``Assignment.partner``), else on free GPUs of one server; everything else is preempted. The types are visited in
   the fixed order, fastest first (packing policies are exempt from Gavel's shuffle).

Without co-location in the cluster (``ClusterRules.jobs_per_gpu`` 1, ``Snapshot.colocation`` None) no pair can run:
the policies then schedule jobs alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from optim.common import config_table, where
from optim.gavel.fill import fill
from optim.gavel.jobs import JobTable
from optim.gavel.mechanism import TimeSliced, _fit
from optim.gavel.pairs import PairTable
from sim.model import Assignment, JobSpec, Plan, Snapshot

__all__ = ["Packed", "PairTable"]

Key = tuple[int, int]


def _ranked(prio: np.ndarray, deficit: np.ndarray, alloc: np.ndarray, seq: np.ndarray,
            head: int = 64) -> Iterator[int]:
    """Entries by priority, deficit and X (highest first), then creation order: Gavel's order of a type's list.
    A round places a few entries, so the ``head`` highest priorities (with all their ties) are sorted first and the
    rest only if the round gets that far; ``seq`` is unique, so each part is exactly the full order's run."""
    def order(ix: np.ndarray) -> list[int]:
        return ix[np.lexsort((seq[ix], -alloc[ix], -deficit[ix], -prio[ix]))].tolist()

    everything = np.arange(len(prio))
    if len(prio) <= 4 * head or not np.isfinite(prio).all():
        yield from order(everything)
        return
    cut = np.partition(prio, len(prio) - head)[len(prio) - head]
    top = prio >= cut
    yield from order(everything[top])
    yield from order(everything[~top])


class Packed(TimeSliced):
    """Gavel's round mechanism with packing (module docstring); subclasses give ``allocate_pairs``."""

    may_colocate: ClassVar[bool] = True
    packs: ClassVar[bool] = True
    """Gavel's packing policies: a Gavel replay switches co-location on for them (``docs/gavel.md``)."""

    def keeps_idle_pairs(self) -> bool:
        """Whether pairs that may share no type (rate 0 on every type) are kept and given to ``allocate_pairs``."""
        return False

    def _restart(self) -> None:
        super()._restart()
        self._pairs = PairTable(0)
        self._seq: dict[int, int] = {}
        self._counter = 0
        self._in_pair: dict[int, Key] = {}
        self._specs: dict[int, JobSpec] = {}
        self._pair_speed: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    # ----- the hook -----------------------------------------------------------------------------------------------

    def allocate_pairs(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray,
                       gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """X of the jobs in ``rows`` of ``table`` and of the pairs in ``prow`` of ``pairs`` on the server types."""
        raise NotImplementedError(self)

    def allocate(self, table: JobTable, rows: np.ndarray, gpus: np.ndarray) -> np.ndarray:
        p = self._pairs
        prow = p.live()
        xs, xp = self.allocate_pairs(table, rows, p, prow, gpus)
        p.alloc[prow] = xp
        p.allocated[prow] = True
        return xs

    def alone(self, job: int) -> bool:
        return job not in self._in_pair

    # ----- what changes -------------------------------------------------------------------------------------------

    def _account(self, s: Snapshot, credit: float, start: float | None) -> None:
        t, p = self._table, self._pairs
        if p.m != len(self._types):
            p = self._pairs = PairTable(len(self._types))
        running = {jv.job.id: jv for jv in s.running}
        for key in set(self._in_pair.values()):
            r = p.row.get(key)
            if r is None or key[0] not in running or key[1] not in running:
                continue  # a member left: Gavel deletes the pair with its credit
            w = int(t.type[t.row[key[0]]])
            length = 0.0
            for j, speed in ((key[0], p.speed_a[r, w]), (key[1], p.speed_b[r, w])):
                k = t.row[j]
                steps = round((running[j].at(s.time).done - t.done[k]) * t.iters[k])
                length = max(length, steps / speed if start is None else (start + steps / speed) - start)
            p.received[r, w] += length
        known = set(t.row)
        super()._account(s, credit, start)
        for j in known - set(t.row):
            p.drop_job(j)
            self._seq.pop(j, None)
            self._specs.pop(j, None)
        new = [j for j in t.row if j not in self._seq]
        if new:
            views = {jv.job.id: jv for jv in (*s.waiting, *s.running)}
            for j in sorted(new, key=lambda j: t.row[j]):
                self._add_job(s, j, views[j].job.spec)

    def _add_job(self, s: Snapshot, j: int, spec: JobSpec) -> None:
        """Number job ``j`` and make its pairs with the active jobs (module docstring, 1)."""
        t, p = self._table, self._pairs
        self._seq[j] = self._counter
        self._counter += 1
        self._specs[j] = spec
        col = s.colocation
        if col is None:
            return
        r = t.row[j]
        sf = t.sf[r]
        for other in sorted(self._seq, key=self._seq.__getitem__):
            if other == j:
                continue
            o = t.row[other]
            if not np.array_equal(t.sf[o], sf):
                continue
            a, b = (other, j) if other < j else (j, other)
            sa, sb = self._pair_rates(s, a, b)
            if not ((sa > 0) & (sb > 0)).any() and not self.keeps_idle_pairs():
                continue
            p.add(a, b, sa, sb, self._counter)
            self._counter += 1

    def _pair_rates(self, s: Snapshot, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Each member's iterations per second next to the other on each type (0 where they may not share it),
        the same for every pair of two jobs of the same kinds (what the interference models read: name, network,
        framework, depth, batch, GPUs) and speeds and GPUs alone."""
        t = self._table
        ra, rb = t.row[a], t.row[b]
        spa, spb = self._specs[a], self._specs[b]
        key = tuple((sp.name, sp.application, sp.framework, sp.depth, sp.batch_size, sp.gpus, t.speed[r].tobytes(),
                     t.sf[r].tobytes()) for sp, r in ((spa, ra), (spb, rb)))
        hit = self._pair_speed.get(key)
        if hit is None:
            assert s.colocation is not None
            index = config_table(s.configs).index
            m = len(self._types)
            xa, xb = np.zeros(m), np.zeros(m)
            for w, name in enumerate(self._types):
                k = index.get((name, int(t.sf[ra, w])))
                if k is None or t.speed[ra, w] <= 0 or t.speed[rb, w] <= 0 or t.rate[ra, w] <= 0 or t.rate[rb, w] <= 0:
                    continue
                da, db = s.colocation.slowdowns(spa, spb, k)
                if math.isfinite(da) and math.isfinite(db) and da > 0 and db > 0:
                    xa[w], xb[w] = t.speed[ra, w] / da, t.speed[rb, w] / db
            hit = self._pair_speed[key] = (xa, xb)
        return hit

    def _recompute(self, now: float, credit: float) -> None:
        p = self._pairs
        prow = p.live()
        elapsed = now - self._last_reset
        should = np.where(p.allocated[prow, None], p.alloc[prow] * elapsed, 0.0)
        p.deficit[prow] += should - (p.received[prow] - credit)
        p.received[prow] = credit
        super()._recompute(now, credit)

    def _map(self, order: list[int]) -> dict[int, int]:
        """Jobs alone and pairs for this round (module docstring, 4); the pairs are kept for ``_place``."""
        t, p = self._table, self._pairs
        rows, prow = t.live(), p.live()
        self._run_pairs: dict[Key, int] = {}
        if not len(rows):
            return {}
        n = len(rows)
        ids = t.ids[rows]
        alloc = np.where(t.allocated[rows, None], t.alloc[rows], 0.0)
        rate = t.rate[rows]
        sf = t.sf[rows]
        prio = np.where((alloc > 0) & (rate > 0), alloc / t.received[rows], 0.0)
        palloc = np.where(p.allocated[prow, None], p.alloc[prow], 0.0)
        pok = (p.speed_a[prow] > 0) & (p.speed_b[prow] > 0)
        pprio = np.where((palloc > 0) & pok, palloc / np.maximum(p.received[prow], 1e-300), 0.0)
        prio_all = np.concatenate([prio, pprio])
        deficit_all = np.concatenate([t.deficit[rows], p.deficit[prow]])
        alloc_all = np.concatenate([alloc, palloc])
        seq = np.concatenate([np.array([self._seq[int(j)] for j in ids], dtype=np.int64), p.seq[prow]])
        pa, pb = p.a[prow].tolist(), p.b[prow].tolist()
        allocated = np.concatenate([t.allocated[rows], p.allocated[prow]]).tolist()
        idl = ids.tolist()
        pos = dict(zip(idl, range(n)))  # a job's place in ``rows``
        fifo = self.fifo

        def offers(w: int) -> Iterator[tuple[int, int, int, int]]:
            pw, okw = prio_all[:, w], pok[:, w]
            rw, sw = rate[:, w].tolist(), sf[:, w].tolist()
            for i in _ranked(pw, deficit_all[:, w], alloc_all[:, w], seq):
                if fifo and pw[i] <= 0:
                    return
                if i < n:
                    if rw[i] > 0:
                        yield i, idl[i], idl[i], sw[i]
                elif okw[i - n]:
                    a = pa[i - n]
                    yield i, a, pb[i - n], sw[pos[a]]

        mapped: dict[int, int] = {}
        for i, w in fill(order, self._gpus.copy(), offers, set()):  # entries outside the allocation hold GPUs idle
            if not allocated[i]:
                continue
            if i < n:
                mapped[idl[i]] = w
            else:
                self._run_pairs[(pa[i - n], pb[i - n])] = w
        return mapped

    def _place(self, s: Snapshot, mapped: dict[int, int], opened: dict[int, str]) -> Plan:
        """Keep, preempt, move and start jobs and pairs so that the mapped ones run (module docstring, 5)."""
        t = self._table
        row = t.row
        now = s.time
        configs = s.configs
        index = self._index
        running = {jv.job.id: jv for jv in s.running}
        waiting = {jv.job.id: jv for jv in s.waiting}
        groups: list[tuple[tuple[int, ...], int]] = [((j,), w) for j, w in mapped.items()]
        groups += [(key, w) for key, w in self._run_pairs.items()]
        groups.sort(key=lambda g: (-int(t.sf[row[g[0][0]], g[1]]), len(g[0]), g[0]))

        def current(j: int) -> tuple[int, ...]:
            jv = running[j]
            return (j,) if jv.partner is None else tuple(sorted((j, jv.partner)))

        def on_type(j: int) -> int:
            jv = running.get(j)
            return -1 if jv is None else index.get(configs[where(jv)[1]].vm.name, -1)

        stays: set[int] = set()
        free = dict(self._node_gpus)
        todo: list[tuple[tuple[int, ...], int]] = []
        for g, w in groups:  # a job or pair running as it will: it stays (a lease extension)
            if all(j in running and on_type(j) == w and current(j) == g for j in g):
                stays.update(g)
                node, c = where(running[g[0]])
                for n, k in running[g[0]].parts or ((node, configs[c].gpus),):
                    free[n] -= k
            else:
                todo.append((g, w))
        start: list[Assignment] = []
        move: list[Assignment] = []
        later: list[tuple[tuple[int, ...], int]] = []
        for g, w in todo:  # a member running alone-or-paired on the type keeps its GPUs; its old partner goes
            host = next((j for j in g if j in running and on_type(j) == w and not running[j].parts
                         and running[j].partner not in stays), None)
            if host is None:
                later.append((g, w))
                continue
            jv = running[host]
            node, c = where(jv)
            stays.add(host)
            free[node] -= configs[c].gpus
            for j in g:
                if j != host:
                    a = Assignment(j, node, configs[c].gpus, partner=host)
                    (move if j in running else start).append(a)
        placed = {a.job_id for a in (*start, *move)}
        open_nodes: dict[int, list[int]] = {}
        for g, w in later:
            nodes = open_nodes.get(w)
            if nodes is None:
                nodes = open_nodes[w] = [n for n in self._nodes[w] if free[n] > 0]
            need = int(t.sf[row[g[0]], w])
            parts = _fit(nodes, free, need, s.rules.gang and len(g) == 1)
            if parts is None:
                continue
            for n, k in parts:
                free[n] -= k
            if any(free[n] == 0 for n, _ in parts):
                nodes[:] = [n for n in nodes if free[n] > 0]
            host = g[0]
            a = Assignment(host, parts[0][0], parts[0][1], gang=tuple(parts[1:]))
            (move if host in running else start).append(a)
            placed.add(host)
            for j in g[1:]:
                (move if j in running else start).append(Assignment(j, parts[0][0], parts[0][1], partner=host))
                placed.add(j)
        self._in_pair = {}
        for g, w in groups:
            if not all(j in stays or j in placed for j in g):
                continue
            for j in g:
                r = row[j]
                jv = running.get(j) or waiting[j]
                t.type[r], t.done[r] = w, jv.at(now).done
                if len(g) == 2:
                    self._in_pair[j] = (g[0], g[1])
        preempt = [j for j in running if j not in stays and j not in placed]
        for j in preempt:
            t.type[row[j]] = -1
        for j in waiting:
            if j not in placed:
                t.type[row[j]] = -1
        keep = frozenset(self._node_gpus)
        return Plan(vms=opened, start=tuple(start), move=tuple(move), preempt=tuple(preempt), keep_idle=keep,
                    info=self._info())
