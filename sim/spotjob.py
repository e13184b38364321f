"""The vocabulary and contract of the single-job spot mode: one job, one VM at a time, decided tick by tick.

This is the setting of Can't Be Late (Wu et al., NSDI'24): a job of ``work`` seconds must finish by ``deadline``;
at every tick a strategy chooses to run on a spot VM (cheap, available only when the market's series says so, and
revoked at a tick boundary when it stops being available), on an on-demand VM, or on nothing; every launch or
switch costs ``overhead`` seconds of work. ``sim.spot_ticks`` runs it; ``optim.spot`` holds the strategies.

Floor module: it imports only the vocabulary and the registry. Units: seconds and dollars per hour.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from sim.contracts import Component
from sim.model import CapsimError
from sim.registry import Registry

__all__ = ["Use", "SpotJob", "TickMarket", "TickView", "SpotStrategy", "SPOT_STRATEGIES"]


class Use(enum.Enum):
    """What the job runs on during one tick."""

    NONE = "none"
    SPOT = "spot"
    ON_DEMAND = "on_demand"


def _positive(owner: str, name: str, value: float, *, zero: bool = False) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        want = ">= 0" if zero else "> 0"
        raise CapsimError(f"{owner}: {name} must be a finite number {want}, got {value!r}")
    return v


@dataclass(frozen=True, slots=True)
class SpotJob:
    """One job: ``work`` seconds of computation, due ``deadline`` seconds after it starts; every launch (the first,
    a relaunch after a revocation or after idling, a switch between spot and on demand) costs ``overhead`` seconds
    before work resumes. Work done is never lost (progress is kept at every tick)."""

    work: float
    deadline: float
    overhead: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "work", _positive("spot job", "work", self.work))
        object.__setattr__(self, "deadline", _positive("spot job", "deadline", self.deadline))
        object.__setattr__(self, "overhead", _positive("spot job", "overhead", self.overhead, zero=True))


@dataclass(frozen=True, slots=True)
class TickMarket:
    """The market a strategy decides in: ticks of ``gap`` seconds and the two prices (dollars per hour).

    Can't Be Late's setting is 600-s ticks, $3.06/h on demand and $0.9731/h spot (p3.2xlarge, us-west-2)."""

    gap: float
    spot_price: float
    on_demand_price: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "gap", _positive("tick market", "gap", self.gap))
        object.__setattr__(self, "spot_price", _positive("tick market", "spot_price", self.spot_price, zero=True))
        object.__setattr__(self, "on_demand_price",
                           _positive("tick market", "on_demand_price", self.on_demand_price, zero=True))

    def tick_cost(self, use: Use) -> float:
        """Dollars one whole tick of ``use`` costs."""
        price = {Use.NONE: 0.0, Use.SPOT: self.spot_price, Use.ON_DEMAND: self.on_demand_price}[use]
        return price * self.gap / 3600.0


@dataclass(frozen=True, slots=True)
class TickView:
    """What a strategy knows at tick ``tick`` (time ``elapsed`` = tick × gap since the job started) when it chooses
    the use of the next tick.

    ``last`` is what ran in the tick that just ended; ``current`` is what still runs now (``Use.NONE`` when the spot
    VM was revoked at this boundary: ``revoked``); ``spot_available`` says whether a spot VM can run in the coming
    tick. ``work_done`` is the job's progress so far, ``work_last_tick`` the part of it made in the tick that just
    ended, ``overhead_left`` the launch overhead still to be paid by the VM that runs now.
    """

    tick: int
    elapsed: float
    spot_available: bool
    last: Use
    current: Use
    revoked: bool
    work_done: float
    work_last_tick: float
    overhead_left: float
    job: SpotJob
    market: TickMarket

    @property
    def work_left(self) -> float:
        return self.job.work - self.work_done


class SpotStrategy(Component):
    """Chooses, tick by tick, what one job runs on (the single-job spot mode of ``sim.spot_ticks``).

    A subclass provides:

    - ``decide(view) -> Use`` (required): the use of the tick starting now. ``Use.SPOT`` only when
      ``view.spot_available``. It is asked at every tick until the job is done, *including* the tick at which its
      completion is observed (a strategy that still asks for a VM then pays for one more tick, as in Can't Be Late's
      simulator).
    - ``reset(job, market, future)`` (optional): called once before the first tick; a strategy keeping state between
      ticks clears it here. ``future`` is the availability of every tick from the job's start (``True`` = spot
      available) and is given only to a ``clairvoyant`` strategy: a reference that knows the future (the omniscient
      optimum), never a policy.

    Parameters follow the ``Component`` contract (stored under their own names, no work in ``__init__``).
    """

    name: ClassVar[str] = "spot strategy"
    family: ClassVar[str] = "spot strategy"
    clairvoyant: ClassVar[bool] = False

    def reset(self, job: SpotJob, market: TickMarket, future: Sequence[bool] | None = None) -> None:
        """Prepare for a new job (the default keeps no state)."""

    def decide(self, view: TickView) -> Use:
        raise NotImplementedError(self)


SPOT_STRATEGIES: Registry[SpotStrategy] = Registry("spot strategy")
"""Every registered spot strategy kind; importing ``optim`` registers the built-in ones (``optim.spot``)."""
