"""The single-job spot mode: one job run tick by tick on spot, on demand or nothing, as a strategy decides.

The rules are those of Can't Be Late's simulator (Wu et al., NSDI'24; its ``sky_spot`` engine), so its numbers can be
reproduced (``docs/clouds.md``):

- Time runs in ticks of the market's ``gap``. At each tick boundary the strategy sees what ran in the tick that just
  ended and whether spot is available for the next one, and chooses the next tick's use. A spot VM that ran in a tick
  did the whole tick's work; it is revoked at the boundary where the series turns unavailable, never inside a tick.
- Every launch (the first, a relaunch after a revocation or after idling, a switch between spot and on demand)
  restarts the overhead: the VM works only after ``overhead`` seconds (an overhead still pending is replaced, not
  added to). Idling and staying cost nothing. Progress is kept at every tick.
- Billing ``tick`` (the reference's): every tick a VM was asked for is billed whole at that VM's price, overhead and
  the partly used last tick included, and so is a tick asked for after the job is done. ``second``: the same, except
  that the tick in which the job finishes is billed only up to the finish.
- The deadline is not enforced: the job runs until done; ``deadline_met`` says whether it finished by then. The
  job's time starts at the series' tick ``ceil(start / gap)``; a job still running at the series' end stops there
  (status ``trace_ended``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.availability import AvailabilitySeries
from sim.model import CapsimError
from sim.spotjob import SpotJob, SpotStrategy, TickMarket, TickView, Use

__all__ = ["BILLING", "SpotJobRun", "run_spot_job"]

BILLING = ("tick", "second")
USE_CODES = {Use.NONE: 0, Use.SPOT: 1, Use.ON_DEMAND: 2}


@dataclass(frozen=True, eq=False)
class SpotJobRun:
    """The outcome of one job under one strategy. Times in seconds from the job's start, money in dollars.

    ``revocations`` and ``launches`` count those before the tick at which completion is seen; ``spot_seconds`` and
    ``on_demand_seconds`` are the billed times; ``post_finish_ticks`` the ticks billed after the job was done.
    ``uses`` holds each tick's use (0 none, 1 spot, 2 on demand), ``available`` each tick's spot availability.
    """

    status: str
    cost: float
    finish: float
    deadline_met: bool
    revocations: int
    launches: int
    spot_launches: int
    on_demand_launches: int
    spot_seconds: float
    on_demand_seconds: float
    post_finish_ticks: int
    start_tick: int
    uses: np.ndarray
    available: np.ndarray


def run_spot_job(strategy: SpotStrategy, job: SpotJob, series: AvailabilitySeries, market: TickMarket, *,
                 start: float = 0.0, billing: str = "tick") -> SpotJobRun:
    """Run ``job`` from ``start`` seconds into ``series`` with ``strategy`` deciding every tick of ``market``."""
    if billing not in BILLING:
        raise CapsimError(f"spot job: billing must be one of {', '.join(BILLING)}, got {billing!r}")
    if not (math.isfinite(start) and start >= 0):
        raise CapsimError(f"spot job: start must be a time >= 0 s into the series, got {start!r}")
    gap = market.gap
    s0 = math.ceil(start / gap - 1e-9)
    avail = series.tick_values(gap, s0 * gap) if s0 * gap < series.end else np.zeros(0, dtype=bool)
    strategy.reset(job, market, avail.tolist() if strategy.clairvoyant else None)
    price = {u: market.tick_cost(u) / gap for u in Use}
    last, overhead_left, done = Use.NONE, 0.0, 0.0
    finish, status = math.nan, "trace_ended"
    revocations = launches = spot_launches = od_launches = post = 0
    billed = {Use.SPOT: 0.0, Use.ON_DEMAND: 0.0}
    uses: list[int] = []
    t = 0
    while True:
        work_now = 0.0
        pending = overhead_left
        if last is not Use.NONE:
            work_now = min(max(gap - overhead_left, 0.0), job.work - done)
            overhead_left -= min(gap, overhead_left)
            done += work_now
        finished = done >= job.work
        if finished:
            finish = (t - 1) * gap + min(gap, pending) + work_now
            status = "ok"
            if billing == "second" and last is not Use.NONE:
                billed[last] -= t * gap - finish
        if t >= len(avail):
            break
        has_spot = bool(avail[t])
        revoked = last is Use.SPOT and not has_spot
        current = Use.NONE if revoked else last
        revocations += revoked and not finished
        use = strategy.decide(TickView(t, t * gap, has_spot, last, current, revoked, done, work_now, overhead_left,
                                       job, market))
        if not isinstance(use, Use):
            raise CapsimError(f"spot strategy {strategy.describe()}: decide() returned {use!r}, expected a sim.Use")
        if use is Use.SPOT and not has_spot:
            raise CapsimError(f"spot strategy {strategy.describe()}: asked for spot at tick {t}, when the series "
                              f"{series.name!r} has none")
        if use is not Use.NONE and use is not current:
            overhead_left = job.overhead
            if not finished:
                launches += 1
                spot_launches += use is Use.SPOT
                od_launches += use is Use.ON_DEMAND
        uses.append(USE_CODES[use])
        if use is not Use.NONE:
            billed[use] += gap
        if finished:
            post = int(use is not Use.NONE)
            break
        last = use
        t += 1
    cost = sum(price[u] * s for u, s in billed.items())
    return SpotJobRun(
        status=status, cost=cost, finish=finish, deadline_met=status == "ok" and finish <= job.deadline + 1e-6,
        revocations=revocations, launches=launches, spot_launches=spot_launches, on_demand_launches=od_launches,
        spot_seconds=billed[Use.SPOT], on_demand_seconds=billed[Use.ON_DEMAND], post_finish_ticks=post,
        start_tick=s0, uses=np.array(uses, dtype=np.int8), available=avail[:len(uses)].copy(),
    )
