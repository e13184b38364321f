"""One job of a replay as the time model tracks it, the decision log, and the overhead ElasticFlow charges a job at a
decision."""

from __future__ import annotations

import math

from sim.elasticflow.vocabulary import LEVELS, JobStatus, ReplayJob

__all__ = ["Run", "Log", "overhead"]


class Run:
    """A job's progress and placement: iterations ``left`` (elastic) or seconds ``executed`` (rigid) at the true
    throughputs ``true_rates`` (per level; the policy is told ``job.rates``, the estimator's), the GPUs it holds,
    its planned ``end`` (its completion event) and exact planned end ``real_end``, the overhead it pays in the
    next interval, its node set and whether its GPU set is cached; what the records need (``start``, ``finish``,
    ``on_time``, the GPUs it ended on, its segments)."""

    __slots__ = ("job", "id", "left", "executed", "gpus", "status", "end", "real_end", "overhead", "nodeset",
                 "cached", "start", "finish", "on_time", "final_gpus", "since", "node", "segments", "queue",
                 "total", "last_check", "remaining", "true_rates")

    def __init__(self, job: ReplayJob, true_rates: tuple[float, ...] | None = None):
        self.job = job
        self.true_rates = job.rates if true_rates is None else true_rates
        self.id = job.id
        self.left = float(job.iterations)
        self.executed = 0.0
        self.gpus = 0
        self.status = "new"
        self.end = 0.0
        self.real_end: float | None = None
        self.overhead = 0.0
        self.nodeset = None
        self.cached = False
        self.start = math.nan
        self.finish = math.nan
        self.on_time = False
        self.final_gpus = 0
        self.since = math.nan
        self.node = -1
        self.segments: list[tuple[int, int, float, float]] = []
        self.queue = 0
        self.total = 0.0
        self.last_check = job.submit
        self.remaining = job.duration

    def true_rate(self, gpus: int) -> float:
        """Iterations per second the job really makes on ``gpus`` GPUs (a level)."""
        return self.true_rates[LEVELS.index(gpus)]

    def status_view(self) -> JobStatus:
        return JobStatus(self.job, self.left, self.executed, self.gpus, self.status == "running")

    def set_gpus(self, g: int, now: float, node: int) -> None:
        """Record the end of the current segment and start one on ``g`` GPUs from ``node`` on (nothing if the count
        is unchanged: a new placement of the same count is the same segment)."""
        if g == self.gpus:
            return
        if self.gpus > 0 and now > self.since:
            self.segments.append((self.node, self.gpus, self.since, now))
        self.gpus = g
        self.node = node
        self.since = now

    def ran(self, node: int, gpus: int, start: float, end: float) -> None:
        """Record that the job held ``gpus`` GPUs from ``node`` on over ``[start, end]`` (joined to its last segment
        when they meet)."""
        if end <= start:
            return
        if self.segments and self.segments[-1][3] == start and self.segments[-1][:2] == (node, gpus):
            self.segments[-1] = (node, gpus, self.segments[-1][2], end)
        else:
            self.segments.append((node, gpus, start, end))
        self.final_gpus = gpus

    def close(self, end: float) -> None:
        """The job completed at ``end``: close its last segment."""
        if self.gpus > 0 and end > self.since:
            self.segments.append((self.node, self.gpus, self.since, end))
        self.final_gpus = self.gpus or self.final_gpus
        self.since = end


class Log:
    """The decisions of a run (one row each) and the jobs rejected, as the time models report them."""

    def __init__(self, cluster_gpus: int):
        self.cluster_gpus = cluster_gpus
        self.rows: list[tuple[float, str, int, int, int, float]] = []
        self.rejections = 0

    def decision(self, now: float, trigger: str, runnable: int, running: int, started: int, wall: float) -> None:
        self.rows.append((now, trigger, runnable, running, started, wall))

    def rejected(self, run: Run) -> None:
        self.rejections += 1


def overhead(gpus: int, total_gpus: int, restart: bool = False, cached: bool = False) -> float:
    """Seconds of progress a job on ``gpus`` GPUs loses at a decision (ElasticFlow's ``estimate_overhead``): 2 s (7 s
    on clusters of 256 GPUs or more) with a cached GPU set, else also 2 (log2 g + 1) s, plus 27 s (47 s) on a
    restart round."""
    big = total_gpus >= 256
    base = 7.0 if big else 2.0
    if cached:
        return base
    if restart:
        base += 47.0 if big else 27.0
    return base + (math.log(gpus, 2) + 1) * 2
