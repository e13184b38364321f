"""The two fixed references: always on demand, and spot only (which ignores the deadline)."""

from __future__ import annotations

from optim.spot.base import SpotStrategy, register
from optim.spot.slack import DONE
from sim.spotjob import TickView, Use

__all__ = ["OnDemand", "OnlySpot"]


@register("on_demand")
class OnDemand(SpotStrategy):
    """On demand every tick until the job is done: the cost every saving is measured against."""

    def decide(self, view: TickView) -> Use:
        return Use.NONE if view.work_left <= DONE else Use.ON_DEMAND


@register("only_spot")
class OnlySpot(SpotStrategy):
    """Spot whenever available, nothing otherwise, whatever the deadline: the cheapest way, often late."""

    def decide(self, view: TickView) -> Use:
        if view.work_left <= DONE:
            return Use.NONE
        return Use.SPOT if view.spot_available else Use.NONE
