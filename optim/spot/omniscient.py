"""The omniscient optimum: the cheapest plan in hindsight, by dynamic programming over ticks (a reference, not a
policy: it is given the whole future availability series)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from optim.spot.base import SpotStrategy, register
from optim.spot.slack import DONE
from sim.model import CapsimError
from sim.spotjob import SpotJob, TickMarket, TickView, Use

__all__ = ["Omniscient", "cheapest_plan"]

_USES = (Use.NONE, Use.SPOT, Use.ON_DEMAND)
_MAX_CELLS = 200_000_000


def cheapest_plan(available: Sequence[bool], job: SpotJob, market: TickMarket,
                  model: str = "ilp") -> tuple[float, list[Use]] | None:
    """The cheapest per-tick plan over the deadline's ``ceil(deadline / gap)`` ticks that does the job's work, and
    its cost; ``None`` when no plan can.

    A plan's work is ``gap`` per tick used less ``overhead`` per launch (a tick whose use differs from the previous
    tick's and is not idle). ``model: ilp`` is Can't Be Late's Omniscient ILP (``ideal_ilp_overhead``): the first
    tick's launch is free but one overhead is owed up front, so a plan that starts idle pays its first launch twice.
    ``exact`` counts every launch once. Work is counted in units of the gcd of tick, work and overhead (whole
    milliseconds); a run of one use shorter than an overhead only wastes money, so partial sums below minus two
    overheads and a tick are never optimal and are dropped.
    """
    if model not in Omniscient.MODELS:
        raise CapsimError(f"omniscient: model must be one of {', '.join(Omniscient.MODELS)}, got {model!r}")
    ms = [round(x * 1000) for x in (market.gap, job.work, job.overhead)]
    unit = math.gcd(*ms)
    g, need, pen_d = (x // unit for x in ms)
    n = min(math.ceil(job.deadline / market.gap - 1e-9), len(available))
    lo, hi = -(2 * pen_d + g), need + g - 1
    size = hi - lo + 1
    if n * 3 * size > _MAX_CELLS:
        raise CapsimError(f"omniscient: {n} ticks x {size} work states is too large to solve exactly; give the "
                          f"tick, work and overhead in round numbers of seconds (their gcd sets the work unit)")
    ilp = model == "ilp"
    price = [market.tick_cost(u) for u in _USES]
    best = np.full((3, size), np.inf)
    best[0, (-pen_d if ilp else 0) - lo] = 0.0
    back = np.zeros((n, 3, size), dtype=np.int8)
    cand = np.empty((3, size))
    for i in range(n):
        new = np.full((3, size), np.inf)
        back[i, 0] = np.argmin(best, axis=0)
        new[0] = best.min(axis=0)
        for use in (1, 2):
            if use == 1 and not available[i]:
                continue
            cand.fill(np.inf)
            for prev in range(3):
                step = g - (0 if prev == use or (ilp and i == 0) else pen_d)
                src = best[prev] + price[use]
                if step >= 0:
                    cand[prev, step:] = src[:size - step]
                else:
                    cand[prev, :size + step] = src[-step:]
            back[i, use] = np.argmin(cand, axis=0)
            new[use] = cand.min(axis=0)
        best = new
    done = best[:, need - lo:]
    if not np.isfinite(done).any():
        return None
    last, over = np.unravel_index(int(np.argmin(done)), done.shape)
    cost = float(done[last, over])
    use_now, w = int(last), int(over) + need
    plan: list[Use] = []
    for i in range(n - 1, -1, -1):
        prev = int(back[i, use_now, w - lo])
        if use_now:
            w -= g - (0 if prev == use_now or (ilp and i == 0) else pen_d)
        plan.append(_USES[use_now])
        use_now = prev
    plan.reverse()
    return cost, plan


@register("omniscient")
class Omniscient(SpotStrategy):
    """Follows the cheapest plan in hindsight (``cheapest_plan``), computed from the whole availability series at
    the job's start; after the plan's ticks, or when no plan meets the deadline, it runs on demand. A reference that
    knows the future (``clairvoyant``), never a policy. ``plan_cost_`` is the plan's own cost (``nan`` without one).
    """

    clairvoyant: ClassVar[bool] = True
    MODELS: ClassVar[tuple[str, ...]] = ("ilp", "exact")

    def __init__(self, model: str = "ilp"):
        self.model = model

    def reset(self, job: SpotJob, market: TickMarket, future: Sequence[bool] | None = None) -> None:
        if future is None:
            raise CapsimError("omniscient: needs the future availability series (run it with sim.spot_ticks)")
        found = cheapest_plan(future, job, market, self.model)
        self.plan_cost_, self._plan = (math.nan, []) if found is None else found

    def decide(self, view: TickView) -> Use:
        if view.work_left <= DONE:
            return Use.NONE
        return self._plan[view.tick] if view.tick < len(self._plan) else Use.ON_DEMAND
