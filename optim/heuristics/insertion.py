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

No solver is used.
"""

from __future__ import annotations

import numpy as np

from optim.base import register
from optim.heuristics.base import Heuristic, polish
from optim.heuristics.decision import Decision, Schedule
from sim.model import VMType

__all__ = ["Insertion", "insert_cheapest", "descend"]

_TOL = 1e-9


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
        key = (nv.allowed, dec.vm0[n].name if dec.vm0[n] else None, float(dec.wait[n].min()))
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
        t, i = divmod(int(np.where(deltas < -_TOL, per_gpu, np.inf).argmin()), waiting.size)
        if not deltas[t, i] < -_TOL:
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
            if saving < -_TOL and (best is None or saving < best[0]):
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


def descend(s: Schedule, limit: int, rounds: int) -> Schedule:
    """Apply the cheapest improving move of each round (see the module docstring) until none improves."""
    dec = s.dec
    table = dec.table
    for _ in range(rounds):
        best: tuple[float, tuple] | None = None

        def consider(d: float | None, move: tuple) -> None:
            nonlocal best
            if d is not None and d < -_TOL * max(1.0, abs(s.cost)) and (best is None or d < best[0]):
                best = (d, move)

        targets = _targets(s)
        placed = list(s.at)
        waiting = sorted((j for j in range(dec.n_jobs) if j not in s.at), key=lambda j: (-dec.p[j], j))[:limit]
        for j in placed:
            consider(s.delta_remove(j), ("remove", j))
            n0, k0 = s.at[j]
            for n in dict.fromkeys([n0, *targets]):
                for k in np.flatnonzero(dec.ok[n]).tolist():
                    if (n, k) != (n0, k0):
                        consider(s.delta_move(j, n, k), ("move", j, n, k))
        for q in waiting:
            for b in placed:
                consider(s.delta_replace(b, q), ("replace", b, q))
            for n in targets:
                for k in np.flatnonzero(dec.ok[n]).tolist():
                    consider(s.delta_move(q, n, k), ("move", q, n, k))
        for a in placed:  # give up GPUs so that a waiting job can join
            n, k = s.at[a]
            g = int(table.gpus[k])
            for g2 in range(1, g):
                k2 = table.index.get((table.vm_of[k], g2))
                d = s.delta_move(a, n, k2) if k2 is not None else None
                if d is None:
                    continue
                t = s.copy()
                t.move(a, n, k2)
                for q in waiting:
                    for k3 in np.flatnonzero(dec.ok[n]).tolist():
                        d3 = t.delta_move(q, n, k3)
                        if d3 is not None:
                            consider(d + d3, ("shrink", a, n, k2, q, k3))
        for n in dict.fromkeys(s.at[j][0] for j in placed):  # GPUs pass between two jobs of one slot
            on = list(s.on[n].items())
            for a, ka in on:
                ga = int(table.gpus[ka])
                for b, kb in on:
                    if a == b:
                        continue
                    gb = int(table.gpus[kb])
                    t = s.copy()
                    d = t.delta_remove(b)
                    t.remove(b)
                    for g in range(ga + 1, ga + gb + 1 + t.room(n) - gb):
                        k = table.index.get((table.vm_of[ka], g))
                        d2 = t.delta_move(a, n, k) if k is not None else None
                        if d2 is not None:
                            consider(d + d2, ("grow", b, a, n, k))
                    for g in (ga + 1,):
                        k, kb2 = table.index.get((table.vm_of[ka], g)), table.index.get((table.vm_of[kb], gb - 1))
                        if k is None or kb2 is None:
                            continue
                        u = s.copy()
                        d3 = u.delta_move(b, n, kb2)
                        if d3 is None:
                            continue
                        u.move(b, n, kb2)
                        d4 = u.delta_move(a, n, k)
                        if d4 is not None:
                            consider(d3 + d4, ("pass", b, kb2, a, n, k))
        if best is None:
            break
        move = best[1]
        if move[0] == "remove":
            s.remove(move[1])
        elif move[0] == "move":
            s.move(*move[1:])
        elif move[0] == "replace":
            s.replace(move[1], move[2])
        elif move[0] == "grow":
            _, b, a, n, k = move
            s.remove(b)
            s.move(a, n, k)
        elif move[0] == "pass":
            _, b, kb2, a, n, k = move
            s.move(b, n, kb2)
            s.move(a, n, k)
        else:
            _, a, n, k2, q, k3 = move
            s.move(a, n, k2)
            s.move(q, n, k3)
    return s


@register("insertion")
class Insertion(Heuristic):
    """Cheapest insertion then descent on the MILP's objective (module docstring): ``limit`` waiting jobs (those
    with the highest waiting penalty) are tried in the descent's moves, for at most ``rounds`` moves."""

    def __init__(self, limit: int = 10, rounds: int = 50, seed: int = 0):
        self.limit = int(limit)
        self.rounds = int(rounds)
        self.seed = int(seed)
        self._check(limit=self.limit, rounds=self.rounds)

    def search(self, dec: Decision, rng: np.random.Generator) -> Schedule:
        s = insert_cheapest(Schedule(dec))
        s = descend(s, self.limit, self.rounds)
        return polish(s)
