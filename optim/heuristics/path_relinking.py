"""PathRelinking (docs/heuristics.md §H6) as intended: the elite pool grows with what relinking finds and every
relinking makes moves (the published code's pool stayed at one plan, so it never moved), on the shared cost.

From the best plan B toward each elite plan E: while jobs differ (in E a job waits, or runs in another VM type or GPU
count), apply the cheapest of the moves that make one job agree with E, up to ``depth`` moves (default: the number of
slots). A job goes to the slot it is on if it is alone there or that slot's VM has room for E's setup, else to the
first slot whose VM matches with room, else to the first slot with no VM. The best plan met on the way, polished, joins
the pool. No look-ahead (the published FUTURE_SIGHT option) is made.
"""

from __future__ import annotations

import numpy as np

from optim.base import register
from optim.heuristics.base import Heuristic, greedy_pool, polish
from optim.heuristics.decision import Decision, Schedule

__all__ = ["PathRelinking", "relink"]


def _slot_for(s: Schedule, j: int, k: int) -> int | None:
    """Where job j goes to take configuration k (§6.3): its own slot, a matching open slot, or a closed one."""
    dec = s.dec
    vm_name = dec.table.vm_of[k]
    src = s.at.get(j)
    if src is not None and s.delta_move(j, src[0], k) is not None:
        return src[0]
    closed = None
    for n in range(len(s.vm)):
        vm = s.vm[n]
        if not dec.ok[n, k]:
            continue
        if vm is None:
            closed = n if closed is None else closed
        elif vm.name == vm_name and s.delta_move(j, n, k) is not None:
            return n
    return closed


def relink(start: Schedule, guide: Schedule, depth: int) -> Schedule | None:
    """Walk from ``start`` toward ``guide`` by the cheapest agreeing move at each step; the cheapest plan met on the
    way (other than ``start`` and ``guide``), or None when the path has no intermediate plan."""
    dec = start.dec
    cur = start.copy()
    best: Schedule | None = None
    ends = {start.key(), guide.key()}
    for _ in range(depth):
        moves: list[tuple[float, int, int | None, int]] = []
        for j in range(dec.n_jobs):
            want, have = guide.at.get(j), cur.at.get(j)
            if want is None:
                if have is not None:
                    moves.append((cur.delta_remove(j), j, None, -1))
                continue
            k = want[1]
            if have is not None and have[1] == k:
                continue
            n = _slot_for(cur, j, k)
            if n is None:
                continue
            step = cur.delta_move(j, n, k)
            if step is not None:
                moves.append((step, j, n, k))
        if not moves:
            break
        _, j, target, k = min(moves, key=lambda m: (m[0], m[1]))
        if target is None:
            cur.remove(j)
        else:
            cur.move(j, target, k)
        if cur.key() not in ends and (best is None or cur.cost < best.cost):
            best = cur.copy()
    return best


@register("path_relinking")
class PathRelinking(Heuristic):
    """PathRelinking of the published family (defaults: the published parameters): an elite pool of ``elite``
    plans from ``iterations`` (randomised) greedy runs with setup randomisation ``alpha``, relinked from the best
    toward each other member with at most ``depth`` moves (``None``: the number of slots); each relinking's best
    plan joins the pool. ``swap``, ``beta`` and ``seed``: the randomised greedy runs' queue swaps, node draw and seed
    (``RandomGreedy``)."""

    def __init__(self, iterations: int = 100, alpha: float = 0.3, swap: float = 0.05, beta: float = 0.2,
                 elite: int = 10, depth: int | None = None, seed: int = 0):
        self.iterations = iterations
        self.alpha = alpha
        self.swap = swap
        self.beta = beta
        self.elite = elite
        self.depth = depth
        self.seed = seed
        self._check_search("iterations", "alpha", "swap", "beta", "elite", "seed")
        self.check_param("depth", int, low=1, optional=True)

    def search(self, dec: Decision, rng: np.random.Generator) -> Schedule:
        pool = greedy_pool(dec, rng, self.iterations, self.alpha, self.swap, self.beta, self.elite)
        depth = self.depth if self.depth is not None else len(dec.vm0)
        for guide in list(pool[1:]):
            found = relink(pool[0], guide, depth)
            if found is None:
                continue
            found = polish(found)
            merged = {s.key(): s for s in [*pool, found]}
            pool = sorted(merged.values(), key=lambda s: (s.cost, s.key()))[: self.elite]
        return polish(pool[0].copy())
