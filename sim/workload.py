"""Workloads: Poisson arrivals over a job mix, or jobs replayed from a trace.

Arrivals, the mix, deadlines and weights each draw from their own stream of the run's seed (``sim.streams``), so
the same seed gives the same jobs to every policy and changing one concern leaves the others untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim.catalogue import job_types
from sim.contracts import Predictor
from sim.model import CapsimError, Config, Job, JobSpec
from sim.streams import streams
from sim.traces.table import TraceRows, fit_to_cluster, validate_trace

__all__ = ["WorkloadSpec", "poisson_jobs", "TraceRows", "validate_trace", "trace_jobs", "fastest_runtimes"]


def _default_mix() -> tuple[tuple[JobSpec, float], ...]:
    return tuple((spec, 1.0) for spec in job_types().values())


@dataclass(frozen=True)
class WorkloadSpec:
    """A Poisson workload: ``n_jobs`` jobs, exponential inter-arrivals of mean ``mean_interarrival`` s.

    Each job's spec is drawn from ``mix`` (spec, weight); its deadline is ``s + U(a, b) * t_min`` with
    ``(a, b) = deadline_factor`` and its tardiness weight ``U(weight_range)`` $ per second late.
    """

    n_jobs: int
    mean_interarrival: float
    mix: tuple[tuple[JobSpec, float], ...] = field(default_factory=_default_mix)
    deadline_factor: tuple[float, float] = (1.0, 3.0)
    weight_range: tuple[float, float] = (0.003, 0.015)
    start_time: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mix", tuple((s, float(w)) for s, w in self.mix))
        if not (isinstance(self.n_jobs, (int, np.integer)) and self.n_jobs >= 0):
            raise CapsimError(f"workload: n_jobs must be an integer >= 0, got {self.n_jobs!r}")
        if not (self.mean_interarrival > 0 and math.isfinite(self.mean_interarrival)):
            raise CapsimError(f"workload: mean_interarrival must be a finite number > 0 s, "
                              f"got {self.mean_interarrival}")
        if (not self.mix or any(not (w >= 0 and math.isfinite(w)) for _, w in self.mix)
                or sum(w for _, w in self.mix) <= 0):
            raise CapsimError("workload: mix needs at least one job spec and finite weights >= 0 with a positive sum")
        a, b = self.deadline_factor
        if not (0 <= a <= b and math.isfinite(b)):
            raise CapsimError(f"workload: deadline_factor must be (a, b) with 0 <= a <= b, got {self.deadline_factor}")
        lo, hi = self.weight_range
        if not (0 <= lo <= hi and math.isfinite(hi)):
            raise CapsimError(f"workload: weight_range must be (lo, hi) with 0 <= lo <= hi, got {self.weight_range}")


def _fastest(specs: Sequence[JobSpec], truth: Predictor, configs: Sequence[Config]) -> np.ndarray:
    if not specs:
        return np.empty(0)
    table = np.asarray(truth.runtimes(list(specs), list(configs)), dtype=float)
    asks = [i for i, s in enumerate(specs) if s.gpus is not None]
    if asks:  # a job that asks for a GPU count runs only with it
        counts = np.array([c.gpus for c in configs])
        table = table.copy()
        for i in asks:
            table[i, counts != specs[i].gpus] = math.inf
    return table.min(axis=1) if table.shape[1] else np.full(len(specs), math.inf)


def _infeasible(spec: JobSpec, truth: Predictor) -> CapsimError:
    label = spec.name or f"{spec.application}/{spec.framework}"
    asks = f", {spec.gpus} GPUs" if spec.gpus is not None else ""
    return CapsimError(
        f"job spec {label!r} ({spec.application}, {spec.framework}, {spec.iterations} iterations, batch "
        f"{spec.batch_size}{asks}) has no feasible configuration under the truth predictor "
        f"{type(truth).__name__}; remove it from the workload or add VM types it can run on"
    )


def fastest_runtimes(specs: Sequence[JobSpec], truth: Predictor, configs: Sequence[Config]) -> np.ndarray:
    """t_min of each spec: its fastest true runtime over ``configs``; a spec with none feasible is a CapsimError."""
    t_min = _fastest(specs, truth, configs)
    for spec, t in zip(specs, t_min):
        if not math.isfinite(t):
            raise _infeasible(spec, truth)
    return t_min


def _spec_index(specs: Sequence[JobSpec]) -> tuple[list[JobSpec], np.ndarray]:
    uniq: dict[JobSpec, int] = {}
    idx = np.fromiter((uniq.setdefault(s, len(uniq)) for s in specs), dtype=np.int64, count=len(specs))
    return list(uniq), idx


def _deadlines_weights(
    submit: np.ndarray, t_min: np.ndarray, rng: dict[str, np.random.Generator],
    factor: tuple[float, float], weight_range: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray]:
    n = len(submit)
    f = rng["deadlines"].uniform(factor[0], factor[1], size=n)
    w = rng["weights"].uniform(weight_range[0], weight_range[1], size=n)
    return submit + f * t_min, w


def poisson_jobs(spec: WorkloadSpec, truth: Predictor, configs: Sequence[Config], seed: int) -> list[Job]:
    """Jobs of a Poisson workload, ids 0..n-1 in arrival order; same seed, same jobs, whatever the policy."""
    rng = streams(seed)
    n = int(spec.n_jobs)
    gaps = rng["arrivals"].exponential(spec.mean_interarrival, size=n)
    submit = spec.start_time + np.cumsum(gaps)
    weights = np.array([w for _, w in spec.mix], dtype=float)
    choice = rng["mix"].choice(len(spec.mix), size=n, p=weights / weights.sum())
    mix_specs = [s for s, _ in spec.mix]
    uniq, idx = _spec_index(mix_specs)
    t_min = fastest_runtimes(uniq, truth, configs)[idx[choice]]
    deadline, weight = _deadlines_weights(submit, t_min, rng, spec.deadline_factor, spec.weight_range)
    return [
        Job(id=i, spec=mix_specs[choice[i]], submit_time=float(submit[i]), deadline=float(deadline[i]),
            weight=float(weight[i]))
        for i in range(n)
    ]


def trace_jobs(
    rows: pd.DataFrame | TraceRows, truth: Predictor, configs: Sequence[Config], seed: int, source: str, *,
    deadline_factor: tuple[float, float] = (1.0, 3.0), weight_range: tuple[float, float] = (0.003, 0.015),
) -> list[Job]:
    """Jobs replayed from a trace table (checked by ``validate_trace`` unless it already was), ids 0..n-1 in
    submission order (ties keep the row order).

    Missing deadlines and weights (absent column or empty cell) are drawn as in ``poisson_jobs`` with
    ``deadline_factor`` and ``weight_range``; a drawn deadline is a placeholder that steers the policies but counts
    in no metric (``Job.deadline_given``). A job a production trace measured has its deadline drawn from that run
    time instead of its fastest runtime, so that deadlines do not depend on the runtime model. A production
    trace's jobs larger than the cluster are left out and counted in its report (``fit_to_cluster``); any other job
    spec no configuration can run under ``truth`` is a CapsimError naming ``source`` and the rows that hold it.
    """
    t = fit_to_cluster(rows if isinstance(rows, TraceRows) else validate_trace(rows, source), configs)
    specs, submit = t.specs, t.submit
    n = len(specs)
    uniq, idx = _spec_index(specs)
    t_uniq = _fastest(uniq, truth, configs)
    for k, t_k in enumerate(t_uniq):
        if not math.isfinite(t_k):
            where = [i + 1 for i in range(n) if idx[i] == k]
            rows_text = ", ".join(map(str, where[:5])) + (", ..." if len(where) > 5 else "")
            raise CapsimError(f"{source}: {_infeasible(uniq[k], truth)} (row {rows_text}, column 'application')")
    t_min = t_uniq[idx] if n else np.empty(0)
    measured = np.array([math.nan if s.measured is None else s.measured.seconds for s in specs], dtype=float)
    base = np.where(np.isnan(measured), t_min, measured) if n else t_min
    submit_a = np.asarray(submit, dtype=float)
    drawn_d, drawn_w = _deadlines_weights(submit_a, base, streams(seed), deadline_factor, weight_range)
    order = sorted(range(n), key=lambda k: submit[k])
    return [
        Job(id=new, spec=specs[k], submit_time=submit[k], deadline=_given_or(t.deadlines[k], drawn_d[k]),
            weight=_given_or(t.weights[k], drawn_w[k]), priority=t.priorities[k] if t.priorities else 1.0,
            duration=t.durations[k] if t.durations else None, deadline_given=t.deadlines[k] is not None)
        for new, k in enumerate(order)
    ]


def _given_or(given: float | None, drawn: float) -> float:
    return float(given) if given is not None else float(drawn)
