"""Tiresias (Gu et al., NSDI'19) as ElasticFlow's simulator runs it (``dlas-gpu``): discretised two-dimensional
least-attained-service on GPU-time, rigid jobs.

Three queues split at 3,250 and 7,200 GPU-seconds of attained service (service seconds x requested GPUs); a new job
enters the first queue at its tail and a running job moves down when it crosses its queue's limit (never back up:
the starvation rule is off). At each decision the queues are walked in order, each in its order, and a job runs when
its GPUs are free, otherwise it is skipped (a smaller job behind it may still run) and preempted if it was running;
then every waiting job goes to the tail of its queue. The next decision is due at the next demotion, computed as
coded: ``(limit - service seconds) / GPUs`` seconds ahead (seconds and GPU-seconds mixed), at least 60 s ahead.
"""

from __future__ import annotations

import math
from typing import ClassVar

from optim.base import register
from sim.elasticflow.vocabulary import LasView, ReplayCluster, ReplayPolicy, RigidPlan

__all__ = ["Tiresias"]

LIMITS = (3250.0, 7200.0)
"""Queue limits in GPU-seconds (the third limit of the original, 18,000, is never read)."""


@register("tiresias")
class Tiresias(ReplayPolicy):
    """2D-LAS with three queues (see the module docstring)."""

    clock: ClassVar[str] = "las"

    def reset(self, cluster: ReplayCluster) -> None:
        self._queues: list[list[int]] = [[], [], []]
        self._queue: dict[int, int] = {}

    def decide(self, view: LasView) -> RigidPlan:  # type: ignore[override]
        queues, where = self._queues, self._queue
        live = {s.id for s in view.runnable}
        for q in queues:
            q[:] = [i for i in q if i in live]
        for i in [i for i in where if i not in live]:
            del where[i]
        for s in view.runnable:
            if s.id not in where:
                where[s.id] = 0
                queues[0].append(s.id)
        status = {s.id: s for s in view.runnable}
        for s in view.runnable:
            level = where[s.id]
            if s.running and level < len(LIMITS) and int(s.executed * s.job.gpus) >= LIMITS[level]:
                where[s.id] = level + 1
                queues[level + 1].append(s.id)
                queues[level].remove(s.id)
        free = view.cluster.gpus
        run: list[int] = []
        for q in queues:
            for i in q:
                g = status[i].job.gpus
                if free >= g:
                    run.append(i)
                    free -= g
        chosen = set(run)
        for q in queues:
            q[:] = [i for i in q if i in chosen] + [i for i in q if i not in chosen]
        wake = math.inf
        for i in run:
            s, level = status[i], where[i]
            if level < len(LIMITS):
                wake = min(wake, int(math.ceil((LIMITS[level] - s.executed) / s.job.gpus) + view.time))
        return RigidPlan(tuple(run), wake)
