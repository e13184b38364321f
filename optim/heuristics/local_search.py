"""LocalSearch (docs/heuristics.md §H5) with a pool that grows and shrinks as described (the published code's pool
stayed at one plan), on the shared cost.

The seven neighbourhoods, in capsim's non-preemptive setting (only jobs started by this decision move; a slot that
runs jobs keeps its VM):

- N1 swap the setups (slot and configuration) of a top-``neighbours`` tardy job and a top on-time job by VM cost;
- N2 swap a top tardy job with the scheduled jobs of lowest pressure;
- N3 a waiting job takes the setup of a scheduled job of no higher pressure, which waits instead;
- N4 a newly opened VM changes to another type of the same size (another GPU model), every job keeping its GPUs;
- N5 it doubles its size and every job's GPUs; N6 it halves them when all are even;
- N7 one job on a slot takes another GPU count that fits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np

from optim.base import register
from optim.heuristics.base import Heuristic, greedy_pool, polish
from optim.heuristics.decision import Decision, Schedule
from sim.model import VMType

__all__ = ["LocalSearch", "best_neighbour", "neighbourhoods"]

Move = Callable[[Schedule], None]


def _pressure(dec: Decision, j: int) -> float:
    return float(dec.now + dec.t_min[j] - dec.d[j])


def _tardy_and_on_time(s: Schedule, limit: int) -> tuple[list[int], list[int]]:
    """Scheduled jobs that end late, by tardiness cost; and those on time, by their share of the VM's rent."""
    dec = s.dec
    tardy, on_time = [], []
    for j, (n, k) in s.at.items():
        span = dec.span(j, n, k)
        late = dec.tardiness(j, span)
        if late > 0:
            tardy.append((-late, j))
        else:
            vm = s.vm[n]
            share = vm.price_per_second * span * int(dec.table.gpus[k]) / vm.gpus if vm else 0.0
            on_time.append((-share, j))
    return [j for _, j in sorted(tardy)[:limit]], [j for _, j in sorted(on_time)[:limit]]


def _resized(s: Schedule, n: int, factor: float, same_size: bool) -> Iterator[tuple[VMType, dict[int, int]]]:
    """Other VMs for opened slot n: same size and another GPU model (``same_size``), or ``factor`` times the size
    of the same GPU model with every job's GPUs scaled alike; each with the jobs' new configurations."""
    dec = s.dec
    vm = s.vm[n]
    if vm is None or dec.pinned[n]:
        return
    table = dec.table
    for cand in dec.vm_by_name.values():
        if cand.name == vm.name:
            continue
        if same_size and not (cand.gpus == vm.gpus and cand.gpu.name != vm.gpu.name):
            continue
        if not same_size and not (cand.gpu.name == vm.gpu.name and cand.gpus == vm.gpus * factor):
            continue
        jobs = {}
        for j, k in s.on[n].items():
            g = int(table.gpus[k]) * (1.0 if same_size else factor)
            c = table.index.get((cand.name, int(g))) if g == int(g) else None
            if c is None or not dec.ok[n, c] or not np.isfinite(dec.t[j, c]):
                break
            jobs[j] = c
        else:
            yield cand, jobs


def neighbourhoods(s: Schedule, limit: int) -> Iterator[tuple[float, Move]]:
    """Every neighbour of the seven neighbourhoods as (cost change, move)."""
    dec = s.dec
    tardy, on_time = _tardy_and_on_time(s, limit)
    by_pressure = sorted(s.at, key=lambda j: (_pressure(dec, j), j))
    for a in tardy:  # N1, N2
        for b in dict.fromkeys(on_time + by_pressure[:limit]):
            if a != b:
                d = s.delta_swap(a, b)
                if d is not None:
                    yield d, partial(Schedule.swap, a=a, b=b)
    waiting = sorted((j for j in range(dec.n_jobs) if j not in s.at), key=lambda j: (-_pressure(dec, j), j))
    for q in waiting[:limit]:  # N3
        for b in by_pressure[:limit]:
            if _pressure(dec, b) > _pressure(dec, q):
                break
            d = s.delta_replace(b, q)
            if d is not None:
                yield d, partial(Schedule.replace, b=b, q=q)
    slots = dict.fromkeys(s.at[j][0] for j in tardy)
    for n in slots:  # N4, N5, N6
        for factor, same in ((1.0, True), (2.0, False), (0.5, False)):
            for vm, jobs in _resized(s, n, factor, same):
                yield s.delta_slot(n, vm, jobs), partial(Schedule.set_slot, n=n, vm=vm, jobs=jobs)
    table = dec.table
    for j, (n, k) in list(s.at.items()):  # N7
        host = s.vm[n]
        for g in range(1, (host.gpus if host is not None else 0) + 1):
            c = table.index.get((table.vm_of[k], g))
            if c is None or c == k:
                continue
            d = s.delta_move(j, n, c)
            if d is not None:
                yield d, partial(Schedule.move, j=j, n=n, k=c)


def best_neighbour(s: Schedule, limit: int) -> Schedule | None:
    """The cheapest neighbour of ``s`` if it is cheaper than ``s``, else None."""
    best: tuple[float, Move] | None = None
    for d, move in neighbourhoods(s, limit):
        if d < -1e-9 * max(1.0, abs(s.cost)) and (best is None or d < best[0]):
            best = (d, move)
    if best is None:
        return None
    t = s.copy()
    best[1](t)
    return t


@register("local_search")
class LocalSearch(Heuristic):
    """LocalSearch of the published family (defaults: the published parameters): an elite pool of ``elite`` plans
    from ``iterations`` (randomised) greedy runs with setup randomisation ``alpha``; up to ``rounds`` rounds in which
    every member is replaced by its best neighbour (``neighbours`` caps each candidate list) when that is cheaper;
    the pool becomes the best plan plus the improved ones, and the search stops when it is down to one plan.
    ``swap``, ``beta`` and ``seed``: the randomised greedy runs' queue swaps, node draw and seed (``RandomGreedy``)."""

    def __init__(self, iterations: int = 100, alpha: float = 0.3, swap: float = 0.05, beta: float = 0.2,
                 elite: int = 10, neighbours: int = 10, rounds: int = 10, seed: int = 0):
        self.iterations = iterations
        self.alpha = alpha
        self.swap = swap
        self.beta = beta
        self.elite = elite
        self.neighbours = neighbours
        self.rounds = rounds
        self.seed = seed
        self._check_search("iterations", "alpha", "swap", "beta", "elite", "neighbours", "rounds", "seed")

    def search(self, dec: Decision, rng: np.random.Generator) -> Schedule:
        pool = greedy_pool(dec, rng, self.iterations, self.alpha, self.swap, self.beta, self.elite)
        for _ in range(self.rounds):
            improved = [t for t in (best_neighbour(s, self.neighbours) for s in pool) if t is not None]
            merged = {s.key(): s for s in [pool[0], *improved]}
            pool = sorted(merged.values(), key=lambda s: (s.cost, s.key()))[: self.elite]
            if len(pool) == 1:
                break
        return polish(pool[0].copy())
