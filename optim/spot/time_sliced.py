"""Time Sliced: the deadline cut into slices, each owing its share of the work (Can't Be Late's ``pair_amortize``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from optim.spot.base import SpotStrategy, register
from optim.spot.slack import DONE, ticks_up
from sim.model import CapsimError
from sim.spotjob import SpotJob, TickMarket, TickView, Use

__all__ = ["TimeSliced"]


@register("time_sliced")
class TimeSliced(SpotStrategy):
    """The deadline is cut into ``ceil(deadline / slice_hours)`` slices, each owing an equal share of the work. Within
    a slice it runs spot when available and waits otherwise, until waiting through the coming tick would leave less
    time in the slice, plus the gain carried over from earlier slices (work done beyond their share: ``gain:
    average`` spreads it over the slices left, ``total`` lends all of it), than the slice's remaining share plus one
    overhead (rounded up to ticks in the last slice); or until the whole job's work plus an overhead, rounded up to
    ticks, no longer fits before the deadline. Then it keeps a spot VM it has and otherwise runs on demand.

    Faithful to Can't Be Late's simulator's ``pair_amortize`` as its recorded runs behave (8-h slices, average gain:
    all 96 development runs reproduced to the cent), including two quirks: a slice's progress is counted from the
    tick *before* the slice starts (one tick of the previous slice counts twice), and there is no done check, so it
    pays for one more tick after the job is done; ``done_check: true`` adds the check.
    """

    GAINS: ClassVar[tuple[str, ...]] = ("average", "total")

    def __init__(self, slice_hours: float = 8.0, gain: str = "average", done_check: bool = False):
        self.slice_hours = slice_hours
        self.gain = gain
        self.done_check = done_check

    def reset(self, job: SpotJob, market: TickMarket, future: Sequence[bool] | None = None) -> None:
        if self.gain not in self.GAINS:
            raise CapsimError(f"time_sliced: gain must be one of {', '.join(self.GAINS)}, got {self.gain!r}")
        length = float(self.slice_hours) * 3600
        ticks = round(length / market.gap)
        if not (length > 0 and abs(ticks * market.gap - length) < 1e-4):
            raise CapsimError(f"time_sliced: slice_hours must be a whole number (> 0) of the market's "
                              f"{market.gap:g}-s ticks, got {self.slice_hours!r} h")
        self._length, self._ticks = length, ticks
        self._slices = math.ceil(job.deadline / length)
        self._share = job.work / self._slices
        self._index, self._carried, self._spread = 0, 0.0, 0.0
        self._progress: list[float] = []

    def decide(self, view: TickView) -> Use:
        self._progress.append(view.work_last_tick)
        if self.done_check and view.work_left <= DONE:
            return Use.NONE
        gap, d, t = view.market.gap, view.job.overhead, view.elapsed
        if (self._index + 1) * self._length - t < 1e-2 and self._index + 1 < self._slices:
            self._index += 1
            self._carried += sum(self._progress[-self._ticks:]) - self._share
            self._spread = self._carried / (self._slices - self._index)
        first = self._index * self._ticks
        slice_left = (self._index + 1) * self._ticks * gap - t
        owed = self._share - sum(self._progress[first:]) + d
        if self._index == self._slices - 1:
            owed = ticks_up(owed, gap)
        lent = self._spread if self.gain == "average" else self._carried
        late = ticks_up(view.work_left + d, gap) >= view.job.deadline - t
        if owed > slice_left - gap + lent or late:
            return Use.SPOT if view.current is Use.SPOT else Use.ON_DEMAND
        return Use.SPOT if view.spot_available else Use.NONE
