"""Deadline-aware strategies that reason about slack: the paper's greedy (and the simulator's ``strawman``) and
Uniform Progress, with the tick arithmetic they share.

Slack is counted in whole ticks, as Can't Be Late does: the time left is rounded *down* to ticks, the work left plus
one (or two) restart overheads rounded *up*. With exact seconds instead, switch points move by a tick.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from optim.spot.base import SpotStrategy, register
from sim.model import CapsimError
from sim.spotjob import SpotJob, TickMarket, TickView, Use

__all__ = ["DONE", "ticks_up", "time_left", "safety_net", "SpotGreedy", "UniformProgress"]

DONE = 1e-3
"""Seconds of work left below which a job counts as done: a strategy then asks for nothing (the paper's Thrifty)."""


def ticks_up(seconds: float, gap: float) -> float:
    """``seconds`` rounded up to whole ticks."""
    return math.ceil(seconds / gap) * gap


def time_left(view: TickView) -> float:
    """Time to the deadline, rounded down to whole ticks."""
    gap = view.market.gap
    return math.floor((view.job.deadline - view.elapsed) / gap) * gap


def safety_net(view: TickView, want: Use) -> Use:
    """Overrule ``want`` when the deadline is near (the paper's Safety Net, §3.4): with less slack than the work left
    plus two overheads, leave an idle or on-demand state only for on demand; with less than one overhead, stay only
    on a spot VM already past its overhead, else go on demand."""
    gap, d = view.market.gap, view.job.overhead
    left = time_left(view)
    if ticks_up(view.work_left + 2 * d, gap) >= left and view.current is not Use.SPOT:
        want = Use.ON_DEMAND
    if ticks_up(view.work_left + d, gap) >= left:
        settled = view.current is Use.SPOT and view.overhead_left < DONE
        want = Use.SPOT if settled or (d == 0 and view.spot_available) else Use.ON_DEMAND
    return want


@register("spot_greedy")
class SpotGreedy(SpotStrategy):
    """Spot whenever it is available, nothing otherwise, until the deadline forces on demand (the paper's Greedy:
    Exploitation, Thrifty and the Safety Net).

    ``variant: strawman`` is the greedy of Can't Be Late's simulator (``strawman``): its margin is one overhead, not
    two, over the time left unrounded; it keeps any spot VM while the deadline is near, even one still paying its
    overhead; and it has no done check, so it pays for one more tick after the job is done. It can miss the deadline
    by a fraction of a tick.
    """

    VARIANTS: ClassVar[tuple[str, ...]] = ("paper", "strawman")

    def __init__(self, variant: str = "paper"):
        self.variant = variant

    def reset(self, job: SpotJob, market: TickMarket, future: Sequence[bool] | None = None) -> None:
        if self.variant not in self.VARIANTS:
            raise CapsimError(f"spot_greedy: variant must be one of {', '.join(self.VARIANTS)}, got {self.variant!r}")

    def decide(self, view: TickView) -> Use:
        want = Use.SPOT if view.spot_available else Use.NONE
        if self.variant == "strawman":
            d, gap = view.job.overhead, view.market.gap
            if ticks_up(view.work_left + d, gap) >= view.job.deadline - view.elapsed:
                want = Use.SPOT if view.current is Use.SPOT else Use.ON_DEMAND
                if d == 0 and view.spot_available:
                    want = Use.SPOT
            return want
        if view.work_left <= DONE:
            return Use.NONE
        return safety_net(view, want)


@register("uniform_progress")
class UniformProgress(SpotStrategy):
    """The paper's Uniform Progress (§5.2.2): keep the job's progress at least at the uniform pace work/deadline.

    Behind the pace it runs spot if available, else on demand; ahead of it, spot if available, else nothing. Once on
    demand it stays there while spot is unavailable or until it is two overheads ahead of the pace (hysteresis, so
    it does not flap between markets). The Safety Net of ``spot_greedy`` has the last word.
    """

    def decide(self, view: TickView) -> Use:
        if view.work_left <= DONE:
            return Use.NONE
        job, t = view.job, view.elapsed
        want = Use.SPOT if view.spot_available else Use.NONE
        if view.work_done < t * job.work / job.deadline:
            want = Use.SPOT if view.spot_available else Use.ON_DEMAND
        ahead = view.work_done > (t + 2 * job.overhead) * job.work / job.deadline
        if view.current is Use.ON_DEMAND and (not view.spot_available or not ahead):
            want = Use.ON_DEMAND
        return safety_net(view, want)
