"""What the seeded heuristics share: a random stream per decision drawn from the run's seed, the pool of greedy and
randomised-greedy plans, and the cost-driven polish applied to a plan before it is returned."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import Policy
from optim.greedy import construct, pressure_order
from optim.heuristics.decision import Decision, Schedule
from sim.model import Plan, Snapshot

__all__ = ["Heuristic", "greedy_pool", "polish", "has_room"]


def has_room(snapshot: Snapshot) -> bool:
    """Whether some slot could take a job now: one without running jobs, or with free GPUs."""
    return any(nv.vm is None or nv.used_gpus < nv.vm.gpus for nv in snapshot.nodes)


class Heuristic(Policy):
    """A heuristic that decides the waiting jobs (running jobs stay) by searching on the shared cost of
    ``optim.heuristics.decision``. A subclass provides ``search(decision, rng) -> Schedule``.

    ``seed`` seeds its random choices. The experiments runner passes the run's seed; each decision draws from a
    stream keyed by the seed and the decision's time and queue length, so a decision depends only on its snapshot
    and the seed, never on which decisions the same object took before.
    """

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = True

    def _check_search(self, *names: str) -> None:
        """Validate the search parameters the heuristics share (those of ``names`` this one has): counts of at least
        1, fractions ``alpha`` and ``beta`` in (0, 1], ``swap`` in [0, 0.5], a ``seed`` >= 0."""
        rules: dict[str, dict] = {"alpha": dict(kind=float, above=0.0, high=1.0),
                                  "beta": dict(kind=float, above=0.0, high=1.0),
                                  "swap": dict(kind=float, low=0.0, high=0.5), "seed": dict(kind=int, low=0)}
        for name in names:
            self.check_param(name, **rules.get(name, dict(kind=int, low=1)))

    def rng(self, snapshot: Snapshot) -> np.random.Generator:
        time_bits = int(np.array(snapshot.time, dtype=np.float64).view(np.uint64))
        return np.random.default_rng([int(getattr(self, "seed", 0)), time_bits, len(snapshot.waiting)])

    def search(self, dec: Decision, rng: np.random.Generator) -> Schedule:
        raise NotImplementedError(self)

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting or not has_room(snapshot):
            return Plan()
        plan = self.search(Decision(snapshot), self.rng(snapshot)).to_plan()
        if not plan.start and snapshot.trigger == "stall":
            # nothing runs and nothing else will happen: waiting looks free to the shared cost (no running job to
            # wait for), but the run would end with these jobs unfinished; start what the greedy construction starts
            return construct(snapshot, colocate=False)
        return plan


def greedy_pool(
    dec: Decision, rng: np.random.Generator, iterations: int, alpha: float, swap: float, beta: float, size: int
) -> list[Schedule]:
    """The ``size`` cheapest distinct plans among one greedy and ``iterations − 1`` randomised greedy runs
    (docs/heuristics.md §H4), cheapest first."""
    seen: dict[tuple, Schedule] = {}
    queue = pressure_order(dec.snapshot)
    for i in range(max(1, iterations)):
        plan = (construct(dec.snapshot, queue=queue, colocate=False) if i == 0
                else construct(dec.snapshot, rng, alpha, swap, beta, queue, colocate=False))
        s = Schedule.from_plan(dec, plan)
        seen.setdefault(s.key(), s)
    return sorted(seen.values(), key=lambda s: (s.cost, s.key()))[:size]


def polish(s: Schedule) -> Schedule:
    """Postprocessing by cost (docs/heuristics.md §H3.3, on the shared cost): on each slot with new jobs, hand idle GPUs
    to the job that gains most, and move a newly opened VM to a smaller one of the same GPU model when that pays."""
    dec = s.dec
    table = dec.table
    for n in range(len(s.vm)):
        if not s.on[n]:
            continue
        while s.room(n) > 0:
            best, gain = None, -1e-12
            for j, k in s.on[n].items():
                more = table.index.get((table.vm_of[k], int(table.gpus[k]) + 1))
                if more is None:
                    continue
                d = s.delta_move(j, n, more)
                if d is not None and d < gain:
                    best, gain = (j, more), d
            if best is None:
                break
            s.move(best[0], n, best[1])
        if dec.pinned[n]:
            continue
        vm, used = s.vm[n], s.used[n]
        assert vm is not None
        for cand in sorted(dec.vm_by_name.values(), key=lambda v: (v.gpus, v.price_per_hour)):
            if cand.gpu.name != vm.gpu.name or cand.name == vm.name or cand.gpus < used:
                continue
            jobs = {j: table.index.get((cand.name, int(table.gpus[k]))) for j, k in s.on[n].items()}
            if any(k is None or not dec.ok[n, k] or not np.isfinite(dec.t[j, k]) for j, k in jobs.items()):
                continue
            if s.delta_slot(n, cand, jobs) < -1e-12:  # type: ignore[arg-type]
                s.set_slot(n, cand, jobs)  # type: ignore[arg-type]
                break
    return s
