"""Cheapest insertion on the MILP's objective, then a descent over richer moves (the ``insertion`` policy).

The MILP's edge over the list schedulers comes from weighing, for every waiting job, the cost of starting now on the
VMs it could join or open against the penalty of waiting (docs/milp.md): it waits for cheap shared capacity and packs
several jobs onto big in-house VMs. This heuristic weighs the same costs, one job at a time:

1. **Insertion.** Every waiting job's cheapest way to start now is priced: on a slot that already hosts a VM (the
   rent that its horizon grows by, plus its tardiness), or on a slot with no VM (the whole rent of a VM of any type
   the slot accepts), minus its waiting penalty. The cheapest of all is applied while it saves money; only the slot
   it changed is priced again.
2. **Descent.** Moves that insertion cannot see are tried until none saves money: a placed job moves to another
   slot or configuration or back to waiting; a waiting job takes a placed job's place; a placed job gives up GPUs so
   that a waiting job can join its VM; a newly opened VM changes type.

Where GPUs may be shared (``Snapshot.colocation``), the jobs the plan leaves waiting may then join running jobs alone
on their GPUs, when the pair costs less than waiting to run alone (``optim.colocate.pair_waiting``).

No solver is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from itertools import chain
from typing import ClassVar

import numpy as np

from optim.base import register
from optim.colocate import pair_waiting
from optim.heuristics.base import Heuristic, polish
from optim.heuristics.decision import Decision, Schedule
from optim.spot.fleet import check_spot_rule, uniform_progress_snapshot
from sim.model import Plan, Snapshot, VMType

__all__ = ["Insertion", "insert_cheapest", "descend"]

_TOL = 1e-9
"""The least saving, relative to the schedule's cost, for which the descent makes a move (below it: rounding)."""
_START_TOL = 1e-10
"""The least saving for which insertion starts a job: below the 1e-9 every waiting penalty adds
(``optim.milp.waiting``), so that a job whose start costs nothing (a free slot of an owned server) starts rather than
waits, waiting being no cheaper."""


def _targets(s: Schedule) -> list[int]:
    """Slots a job could join now: those hosting a VM with room, and the first closed slot of each class."""
    return _open_slots(s) + _closed_classes(s)


def _open_slots(s: Schedule) -> list[int]:
    """Slots hosting a VM (running jobs, or opened by this plan) with free GPUs."""
    return [n for n in range(len(s.vm)) if s.vm[n] is not None and s.room(n) > 0]


def _closed_classes(s: Schedule) -> list[int]:
    """The first slot with no VM of each class of interchangeable slots (allowed types, idle VM, readiness)."""
    dec = s.dec
    out, seen = [], set()
    for n in range(len(s.vm)):
        if s.vm[n] is not None:
            continue
        nv = dec.snapshot.nodes[n]
        key = (nv.allowed, vm0.name if (vm0 := dec.vm0[n]) is not None else None, float(dec.wait[n].min()))
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


def _price_slot(s: Schedule, n: int, jobs: np.ndarray, vm: VMType | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each waiting job in ``jobs``: the cheapest cost change of starting it on slot n (with VM ``vm`` if the
    slot has none yet), and the configuration."""
    dec = s.dec
    table = dec.table
    vm = s.vm[n] or vm
    ok = dec.ok[n].copy()
    if vm is not None:
        room = s.room(n) if s.vm[n] is not None else vm.gpus
        ok &= (np.asarray(table.vm_of) == vm.name) & (table.gpus <= room)
    ks = np.flatnonzero(ok)
    if ks.size == 0 or jobs.size == 0:
        return np.full(jobs.size, np.inf), np.zeros(jobs.size, dtype=int)
    span = dec.wait[n, ks][None, :] + dec.t[np.ix_(jobs, ks)]
    tard = dec.w[jobs, None] * np.maximum(0.0, dec.now + span - dec.d[jobs, None])
    with np.errstate(invalid="ignore"):  # a free VM (an owned server) × an unsupported (inf) span: NaN, masked below
        if vm is None:
            rent = table.price[ks][None, :] * span
        else:
            h = max(float(dec.horizon[n]), max((dec.span(j, n, k) for j, k in s.on[n].items()), default=0.0))
            rent = vm.price_per_second * np.maximum(0.0, span - h)
    delta = rent + tard - dec.p[jobs, None]
    delta = np.where(np.isfinite(span), delta, np.inf)
    best = (delta / table.gpus[ks][None, :]).argmin(axis=1)
    return delta[np.arange(jobs.size), best], ks[best]


def _waiting(s: Schedule) -> np.ndarray:
    return np.array([j for j in range(s.dec.n_jobs) if j not in s.at], dtype=int)


def _fill(s: Schedule, slots: list[int], vm: VMType | None = None) -> float:
    """Start waiting jobs on ``slots`` (a closed slot takes ``vm``), the cheapest start first, while it saves
    money; returns the saving."""
    waiting = _waiting(s)
    if waiting.size == 0 or not slots:
        return 0.0
    cols = {n: _price_slot(s, n, waiting, vm) for n in slots}
    alive = np.ones(waiting.size, dtype=bool)
    total = 0.0
    while alive.any() and cols:
        order = list(cols)
        deltas = np.stack([np.where(alive, cols[n][0], np.inf) for n in order])
        per_gpu = deltas / np.stack([s.dec.table.gpus[cols[n][1]] for n in order])
        t, i = divmod(int(np.where(deltas < -_START_TOL, per_gpu, np.inf).argmin()), waiting.size)
        if not deltas[t, i] < -_START_TOL:
            break
        n, j = order[t], int(waiting[i])
        total += float(deltas[t, i])
        s.place(j, n, int(cols[n][1][i]))
        alive[i] = False
        if s.room(n) > 0:
            cols[n] = _price_slot(s, n, waiting)
        else:
            del cols[n]
    return total


def _best_bundle(s: Schedule) -> tuple[float, int, VMType] | None:
    """The closed slot and VM type whose filling (``_fill`` on that slot alone) saves the most."""
    dec = s.dec
    best = None
    for n in _closed_classes(s):
        for name in dict.fromkeys(dec.table.vm_of[k] for k in np.flatnonzero(dec.ok[n])):
            vm = dec.vm_by_name[name]
            trial = s.copy()
            saving = _fill(trial, [n], vm)
            if saving < -_START_TOL and (best is None or saving < best[0]):
                best = (saving, n, vm)
    return best


def insert_cheapest(s: Schedule) -> Schedule:
    """Fill the slots that host a VM with room, cheapest start first; then open the closed slot whose best VM and
    jobs save the most, and repeat while opening a slot saves money."""
    while True:
        _fill(s, _open_slots(s))
        bundle = _best_bundle(s)
        if bundle is None:
            return s
        _, n, vm = bundle
        _fill(s, [n], vm)


Move = Callable[[Schedule], None]


def _then(*steps: Move) -> Move:
    """One move made of several, applied in order."""

    def apply(s: Schedule) -> None:
        for step in steps:
            step(s)

    return apply


def _slot_configs(s: Schedule, n: int) -> list[int]:
    """Configurations a job could take on slot n: those of its VM, or any the slot accepts if it has none."""
    dec = s.dec
    vm = s.vm[n]
    if vm is None:
        return np.flatnonzero(dec.ok[n]).tolist()
    return [k for k in dec.configs_of(vm) if dec.ok[n, k]]


def _relocations(s: Schedule, targets: list[int]) -> Iterator[tuple[float | None, Move]]:
    """A placed job goes back to waiting, or to another slot or configuration."""
    for j, (n0, k0) in list(s.at.items()):
        yield s.delta_remove(j), partial(Schedule.remove, j=j)
        for n in dict.fromkeys([n0, *targets]):
            alone = n == n0 and len(s.on[n]) == 1  # its slot may change VM
            for k in np.flatnonzero(s.dec.ok[n]).tolist() if alone else _slot_configs(s, n):
                if (n, k) != (n0, k0):
                    yield s.delta_move(j, n, k), partial(Schedule.move, j=j, n=n, k=k)


def _entries(s: Schedule, waiting: list[int], targets: list[int]) -> Iterator[tuple[float | None, Move]]:
    """A waiting job starts on a slot, or takes a placed job's slot and configuration (that job waits)."""
    placed = list(s.at)
    for q in waiting:
        for b in placed:
            yield s.delta_replace(b, q), partial(Schedule.replace, b=b, q=q)
        for n in targets:
            for k in _slot_configs(s, n):
                yield s.delta_move(q, n, k), partial(Schedule.move, j=q, n=n, k=k)


def _make_room(s: Schedule, waiting: list[int]) -> Iterator[tuple[float | None, Move]]:
    """A placed job gives up GPUs so that a waiting job can join its VM."""
    table = s.dec.table
    for a, (n, k) in list(s.at.items()):
        for g in range(1, int(table.gpus[k])):
            k2 = table.index.get((table.vm_of[k], g))
            d = s.delta_move(a, n, k2) if k2 is not None else None
            if k2 is None or d is None:
                continue
            t = s.copy()
            t.move(a, n, k2)
            for q in waiting:
                for k3 in _slot_configs(t, n):
                    d3 = t.delta_move(q, n, k3)
                    if d3 is not None:
                        yield d + d3, _then(partial(Schedule.move, j=a, n=n, k=k2),
                                            partial(Schedule.move, j=q, n=n, k=k3))


def _regroup(s: Schedule) -> Iterator[tuple[float | None, Move]]:
    """Two jobs of one slot: one leaves (waits) and the other takes its GPUs, or one passes a GPU to the other."""
    table = s.dec.table
    for n in dict.fromkeys(n for n, _ in s.at.values()):
        on = list(s.on[n].items())
        for a, ka in on:
            ga, vm = int(table.gpus[ka]), table.vm_of[ka]
            for b, kb in on:
                if a == b:
                    continue
                t = s.copy()
                d = t.delta_remove(b)
                t.remove(b)
                for g in range(ga + 1, ga + t.room(n) + 1):
                    k = table.index.get((vm, g))
                    d2 = t.delta_move(a, n, k) if k is not None else None
                    if k is not None and d2 is not None:
                        yield d + d2, _then(partial(Schedule.remove, j=b), partial(Schedule.move, j=a, n=n, k=k))
                kb2, k1 = table.index.get((vm, int(table.gpus[kb]) - 1)), table.index.get((vm, ga + 1))
                if kb2 is None or k1 is None:
                    continue
                t = s.copy()
                d3 = t.delta_move(b, n, kb2)
                if d3 is None:
                    continue
                t.move(b, n, kb2)
                d4 = t.delta_move(a, n, k1)
                if d4 is not None:
                    yield d3 + d4, _then(partial(Schedule.move, j=b, n=n, k=kb2),
                                         partial(Schedule.move, j=a, n=n, k=k1))


def descend(s: Schedule, limit: int, rounds: int) -> Schedule:
    """Apply the cheapest improving move (module docstring) until none improves or ``rounds`` moves are made;
    ``limit`` waiting jobs, those with the highest waiting penalty, are tried in the moves that start a job."""
    dec = s.dec
    for _ in range(rounds):
        targets = _targets(s)
        waiting = sorted((j for j in range(dec.n_jobs) if j not in s.at), key=lambda j: (-dec.p[j], j))[:limit]
        best: tuple[float, Move] | None = None
        tol = -_TOL * max(1.0, abs(s.cost))
        moves = chain(_relocations(s, targets), _entries(s, waiting, targets), _make_room(s, waiting), _regroup(s))
        for d, move in moves:
            if d is not None and d < tol and (best is None or d < best[0]):
                best = (d, move)
        if best is None:
            break
        best[1](s)
    return s


@register("insertion")
class Insertion(Heuristic):
    """Cheapest insertion, then descent, on the MILP's objective (module docstring); deterministic, no solver.
    ``limit`` waiting jobs (those with the highest waiting penalty) are tried in the descent's moves that start a
    job, and the descent makes at most ``rounds`` moves. ``spot_rule: uniform_progress`` narrows each waiting job to
    the market Uniform Progress allows it (``optim.spot.fleet``). Where the cluster lets jobs share a GPU, jobs left
    waiting may join running ones (module docstring)."""

    may_colocate: ClassVar[bool] = True

    def __init__(self, limit: int = 10, rounds: int = 50, spot_rule: str | None = None):
        self.limit = limit
        self.rounds = rounds
        self.spot_rule = spot_rule
        self._check_search("limit", "rounds")
        check_spot_rule(self.name, spot_rule)

    def decide(self, snapshot: Snapshot) -> Plan:
        if self.spot_rule is not None:
            snapshot = uniform_progress_snapshot(snapshot)
        plan = super().decide(snapshot)
        return pair_waiting(snapshot, plan) if snapshot.colocation is not None else plan

    def search(self, dec: Decision, rng: np.random.Generator) -> Schedule:
        return polish(descend(insert_cheapest(Schedule(dec)), self.limit, self.rounds))
