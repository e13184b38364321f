"""The vocabulary of deadline replays on a homogeneous GPU cluster, as ElasticFlow's simulator runs them.

A replay cluster is ``servers`` servers of ``gpus_per_server`` GPUs of one model. A job (``ReplayJob``) is a trace
job with its throughput row: iterations per second of the whole job on each power-of-two GPU count (a *level*).
Elastic policies give a job any level and count its work in iterations; rigid ones run it on the GPUs it asked for
and count the trace's ``duration`` seconds of service as its work.

The engine side (``sim.elasticflow``) advances time and asks a ``ReplayPolicy`` what to do at each decision point,
in one of four ways (the policy's ``clock``), each the time model of one family of ElasticFlow's simulator:

- ``elastic`` (EDF, ElasticFlow, Chronus): decisions at arrivals, planned completions and the policy's wake-up
  times, at least 60 s apart; ``decide(ElasticView) -> ElasticPlan``.
- ``las`` (Tiresias): decisions at arrivals, the earliest completion and the next queue demotion;
  ``decide(LasView) -> RigidPlan``.
- ``lease`` (Themis): a decision every 60 s; ``decide(LasView) -> RigidPlan``.
- ``slices`` (Gandiva): decisions at arrivals only; the policy's node sets time-slice their jobs
  (``sim.elasticflow.slices``), so it has no ``decide``.

A replay policy is a ``sim.contracts.Policy`` that declares ``time_model = "elasticflow"``: it is registered, listed,
built and checked (``sim.testing.check_policy``) with every other policy, and the engine runs it on this time model.

This module is part of the floor: it imports only ``sim.model`` and ``sim.contracts``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from sim.contracts import Policy
from sim.model import CapsimError

__all__ = ["LEVELS", "SLOT", "ReplayCluster", "ReplayJob", "JobStatus", "ElasticView", "ElasticPlan", "LasView",
           "RigidPlan", "ReplayPolicy", "align", "next_level", "last_level"]

LEVELS = (1, 2, 4, 8, 16, 32, 64)
"""The GPU counts of ElasticFlow's throughput tables, in table order."""
SLOT = 60
"""ElasticFlow's scheduling slot (s) by default (``--scheduling_slot=60``): decisions at least this far apart, plans
on a grid of this step, the restart overhead every this many decisions."""


def align(start: float, t: float, step: float = SLOT) -> float:
    """``t`` rounded up onto the grid ``start + k * step`` (ElasticFlow's ``align_to_time_slot``)."""
    slots = (t - start) // step
    if (t - start) % step > 0:
        slots += 1
    return start + slots * step


@dataclass(frozen=True, slots=True)
class ReplayCluster:
    """``servers`` servers of ``gpus_per_server`` GPUs of the model ``gpu``."""

    servers: int
    gpus_per_server: int
    gpu: str

    def __post_init__(self) -> None:
        if self.servers < 1 or self.gpus_per_server < 1:
            raise CapsimError(f"replay cluster: expected at least one server of at least one GPU, found "
                              f"{self.servers} x {self.gpus_per_server}")

    @property
    def gpus(self) -> int:
        return self.servers * self.gpus_per_server


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """One trace job as every replay policy may know it (everything but its future).

    ``id`` is its index in submission order; ``gpus`` the GPUs it asked for; ``duration`` the seconds it ran on them
    in the trace (the work the rigid policies count); ``iterations`` its work for the elastic ones. ``rates[i]`` is
    the job's throughput (iterations/s of the whole job) on ``LEVELS[i]`` GPUs, 0 where the table has none.
    """

    id: int
    name: str
    model: str
    batch_size: int
    submit: float
    deadline: float
    gpus: int
    duration: float
    iterations: float
    rates: tuple[float, ...]

    def rate(self, gpus: int) -> float:
        """Iterations per second on ``gpus`` GPUs (a level), 0 if the table has none."""
        return self.rates[LEVELS.index(gpus)] if gpus in LEVELS else 0.0

    @property
    def top(self) -> int:
        """The largest level the table gives a throughput for (ElasticFlow's cap for every policy but its own)."""
        best = 0
        for g, r in zip(LEVELS, self.rates):
            if r > 0:
                best = g
        return best


def next_level(levels: tuple[int, ...], gpus: int) -> int:
    """The level after ``gpus`` in ``levels`` (the first level for 0); ``gpus`` itself at the top."""
    if gpus == 0:
        return levels[0] if levels else 0
    for i, g in enumerate(levels):
        if g == gpus:
            return levels[i + 1] if i + 1 < len(levels) else gpus
    return gpus


def last_level(levels: tuple[int, ...], below: int) -> int:
    """The largest level strictly below ``below`` (0 if none): what fits in ``below - 1`` free GPUs."""
    best = 0
    for g in levels:
        if g >= below:
            break
        best = g
    return best


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A runnable job at a decision: iterations ``left`` (elastic) or seconds of service ``executed`` (rigid), the
    GPUs it holds now and whether it has started."""

    job: ReplayJob
    left: float
    executed: float
    gpus: int
    running: bool

    @property
    def id(self) -> int:
        return self.job.id


@dataclass(frozen=True, slots=True)
class ElasticView:
    """A decision of the ``elastic`` clock: the time, the jobs that arrived since the last decision (not yet
    admitted) and the runnable ones (admitted earlier, running or waiting), the cluster."""

    time: float
    arrivals: tuple[JobStatus, ...]
    runnable: tuple[JobStatus, ...]
    cluster: ReplayCluster
    count: int
    """Decisions taken before this one."""


@dataclass(frozen=True, slots=True)
class ElasticPlan:
    """An ``elastic`` policy's answer: GPUs per runnable job from now on (in the order the policy places them), the
    time each is planned to end (its completion event) and, where the policy judges by its plan, the exact planned
    end (``real_end``: the on-time verdict and the end of its progress); arrivals it rejects; when to decide again."""

    gpus: tuple[tuple[int, int], ...]
    ends: Mapping[int, float]
    real_ends: Mapping[int, float] = field(default_factory=dict)
    rejected: tuple[int, ...] = ()
    wake: float = math.inf


@dataclass(frozen=True, slots=True)
class LasView:
    """A decision of the ``las`` or ``lease`` clock: the time and every runnable job (arrival order)."""

    time: float
    runnable: tuple[JobStatus, ...]
    cluster: ReplayCluster
    count: int


@dataclass(frozen=True, slots=True)
class RigidPlan:
    """A rigid policy's answer: the jobs that run from now on (each on its requested GPUs) and when it wants to decide
    again (a queue demotion), if before the next event; ``order``, if given, is the order it keeps the runnable jobs
    in (the order the next view lists them)."""

    run: tuple[int, ...]
    wake: float = math.inf
    order: tuple[int, ...] = ()


class ReplayPolicy(Policy):
    """A deadline policy of ElasticFlow's simulator (see the module docstring for the clocks and their hooks).

    It may keep private state between decisions of one run (``reset()`` is called before each run) and never sees
    a job before it arrives or its progress beyond what the view says. It schedules the servers it is given
    (``plans_capacity`` false) on ElasticFlow's time model (``time_model``), never on the engine's.

    ``slot``: ElasticFlow's scheduling slot in seconds (its ``--scheduling_slot``), which the time model and the
    policy both read: decisions at least ``slot`` apart (Themis's rounds are ``slot`` long), plans aligned to a grid of
    ``slot``, the restart overhead on every ``slot``-th decision. 60 is what ElasticFlow's released scripts pass;
    its earlier Fig. 8b script passed 240 (docs/elasticflow.md).
    """

    name: ClassVar[str] = "replay policy"
    plans_capacity: ClassVar[bool] = False
    time_model: ClassVar[str] = "elasticflow"
    clock: ClassVar[str] = "elastic"

    def __init__(self, slot: int = SLOT):
        self.slot = slot
        self.check_param("slot", int, low=1)

    def reset(self, cluster: ReplayCluster) -> None:
        """Forget every run before this one."""

    def decide(self, view: ElasticView | LasView) -> ElasticPlan | RigidPlan:  # type: ignore[override]
        raise NotImplementedError(self)
