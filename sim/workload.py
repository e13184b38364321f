"""Workloads: Poisson arrivals over a job mix, or jobs replayed from a trace.

Arrivals, the mix, deadlines and weights each draw from their own stream of the run's seed (``sim.streams``), so
the same seed gives the same jobs to every policy and changing one concern leaves the others untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sim.catalogue import job_types
from sim.contracts import Predictor
from sim.model import CapsimError, Config, Job, JobSpec
from sim.streams import streams
from sim.traces.base import COLUMNS as _TRACE_COLUMNS
from sim.traces.base import REQUIRED as _TRACE_REQUIRED

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


def _trace_error(source: str, row: Any, column: str, value: Any, expected: str) -> CapsimError:
    where = f"row {row}" if row is not None else "header"
    return CapsimError(f"{source}: {where}, column {column!r}: expected {expected}, found {value!r}")


def _number(source: str, row: int, column: str, value: Any, *, integer: bool, minimum: float) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    ok = math.isfinite(x) and x >= minimum and (not integer or x == int(x))
    if not ok:
        kind = "an integer" if integer else "a finite number"
        raise _trace_error(source, row, column, value, f"{kind} >= {minimum:g}")
    return x


@dataclass(frozen=True)
class TraceRows:
    """A trace table whose every cell was checked (``validate_trace``): per row, in table order, the submission
    time, the job spec, the deadline and weight when given (None: drawn from the seed) and the fairness weight."""

    source: str
    submit: tuple[float, ...]
    specs: tuple[JobSpec, ...]
    deadlines: tuple[float | None, ...]
    weights: tuple[float | None, ...]
    priorities: tuple[float, ...] = ()
    durations: tuple[float | None, ...] = ()
    """Seconds each job ran in the trace (a ``duration`` column), None where not given."""

    def __len__(self) -> int:
        return len(self.specs)


def validate_trace(rows: pd.DataFrame, source: str) -> TraceRows:
    """Check every cell of a trace table (read from a file by a ``sim.traces`` reader) and keep them parsed.

    Columns: ``sim.traces.REQUIRED`` (submit_time, application, framework, iterations, batch_size), and optionally
    name, deadline, weight, gpus (the GPU count asked for; empty: the policy chooses), priority (a fairness weight,
    ``Job.priority``; empty: 1), duration (seconds the job ran in the trace, ``Job.duration``); others are ignored.
    Missing
    deadlines and weights (absent column or empty cell) are drawn as in ``poisson_jobs`` with ``deadline_factor`` and
    ``weight_range``. Rows are numbered from 1 in table order (a CSV file's rows after its header); a table without
    rows, or a bad cell, raises a CapsimError naming ``source``, the row and the column.
    """
    missing = [c for c in _TRACE_REQUIRED if c not in rows.columns]
    if missing:
        optional = [c for c in _TRACE_COLUMNS if c not in _TRACE_REQUIRED]
        raise CapsimError(f"{source}: missing column(s) {', '.join(missing)}; a trace needs "
                          f"{', '.join(_TRACE_REQUIRED)} and may add {', '.join(optional)}")
    if len(rows) == 0:
        raise CapsimError(f"{source}: no jobs (the trace has its columns but no rows); expected one row per job")
    has_d = "deadline" in rows.columns
    has_w = "weight" in rows.columns
    has_name = "name" in rows.columns
    has_g = "gpus" in rows.columns
    has_p = "priority" in rows.columns
    has_t = "duration" in rows.columns
    submit, specs, given_d, given_w, prios = [], [], [], [], []
    durations: list[float | None] = []
    for i, r in enumerate(rows.to_dict("records"), start=1):
        s = _number(source, i, "submit_time", r["submit_time"], integer=False, minimum=0.0)
        app, fw = r["application"], r["framework"]
        for col, val in (("application", app), ("framework", fw)):
            if not isinstance(val, str) or not val.strip():
                raise _trace_error(source, i, col, val, "a non-empty name")
        if fw not in ("pytorch", "tensorflow"):
            raise _trace_error(source, i, "framework", fw, "'pytorch' or 'tensorflow'")
        it = _number(source, i, "iterations", r["iterations"], integer=True, minimum=1)
        bs = _number(source, i, "batch_size", r["batch_size"], integer=True, minimum=1)
        name = r.get("name") if has_name else None
        name = "" if name is None or (isinstance(name, float) and math.isnan(name)) else str(name)
        g = r.get("gpus") if has_g else None
        if g is not None and not (isinstance(g, float) and math.isnan(g)):
            g = int(_number(source, i, "gpus", g, integer=True, minimum=1))
        else:
            g = None
        t = r.get("duration") if has_t else None
        durations.append(None if _empty(t) else _number(source, i, "duration", t, integer=False, minimum=0.0))
        p = r.get("priority") if has_p else None
        prios.append(1.0 if _empty(p) else _number(source, i, "priority", p, integer=False, minimum=0.0))
        if prios[-1] <= 0:
            raise _trace_error(source, i, "priority", p, "a finite number > 0")
        specs.append(JobSpec(application=app.strip(), framework=fw, iterations=int(it), batch_size=int(bs), name=name,
                             gpus=g))
        submit.append(s)
        d = r.get("deadline") if has_d else None
        w = r.get("weight") if has_w else None
        d = None if d is None or (isinstance(d, float) and math.isnan(d)) else d
        w = None if w is None or (isinstance(w, float) and math.isnan(w)) else w
        if d is not None:
            d = _number(source, i, "deadline", d, integer=False, minimum=s)
        if w is not None:
            w = _number(source, i, "weight", w, integer=False, minimum=0.0)
        given_d.append(d)
        given_w.append(w)
    return TraceRows(source, tuple(submit), tuple(specs), tuple(given_d), tuple(given_w), tuple(prios),
                     tuple(durations) if has_t else ())


def trace_jobs(
    rows: pd.DataFrame | TraceRows, truth: Predictor, configs: Sequence[Config], seed: int, source: str, *,
    deadline_factor: tuple[float, float] = (1.0, 3.0), weight_range: tuple[float, float] = (0.003, 0.015),
) -> list[Job]:
    """Jobs replayed from a trace table (checked by ``validate_trace`` unless it already was), ids 0..n-1 in
    submission order (ties keep the row order).

    Missing deadlines and weights (absent column or empty cell) are drawn as in ``poisson_jobs`` with
    ``deadline_factor`` and ``weight_range``. A job spec no configuration can run under ``truth`` is a CapsimError
    naming ``source`` and the rows that hold it.
    """
    t = rows if isinstance(rows, TraceRows) else validate_trace(rows, source)
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
    submit_a = np.asarray(submit, dtype=float)
    drawn_d, drawn_w = _deadlines_weights(submit_a, t_min, streams(seed), deadline_factor, weight_range)
    order = sorted(range(n), key=lambda k: submit[k])
    return [
        Job(id=new, spec=specs[k], submit_time=submit[k], deadline=_given_or(t.deadlines[k], drawn_d[k]),
            weight=_given_or(t.weights[k], drawn_w[k]), priority=t.priorities[k] if t.priorities else 1.0,
            duration=t.durations[k] if t.durations else None)
        for new, k in enumerate(order)
    ]


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _given_or(given: float | None, drawn: float) -> float:
    return float(given) if given is not None else float(drawn)
