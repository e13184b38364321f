"""The trace table checked cell by cell (``validate_trace``) and fitted to a cluster (``fit_to_cluster``).

Every reader's table passes here once, when a scenario is loaded, so every format gets the same checks and the same
messages, naming the file, the row (counted from 1 in table order) and the column of the first bad cell. The checks
run column by column over whole arrays (a production trace has 10^5 to 10^6 rows) and report the cell a row-by-row
reading would have met first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.model import CapsimError, JobSpec, Measured
from sim.traces.base import COLUMNS, MEASURED, REQUIRED
from sim.traces.report import Step, TraceReport

if TYPE_CHECKING:
    from sim.model import Config

__all__ = ["TraceRows", "validate_trace", "fit_to_cluster"]

FRAMEWORKS = ("pytorch", "tensorflow")


@dataclass(frozen=True)
class TraceRows:
    """A trace table whose every cell was checked (``validate_trace``): per row, in table order, the submission
    time, the job spec, the deadline and weight when given (None: drawn from the seed) and the fairness weight.
    ``report`` is what the reader did with the rows it could not use (production traces; None for the others)."""

    source: str
    submit: tuple[float, ...]
    specs: tuple[JobSpec, ...]
    deadlines: tuple[float | None, ...]
    weights: tuple[float | None, ...]
    priorities: tuple[float, ...] = ()
    report: TraceReport | None = None
    durations: tuple[float | None, ...] = ()
    """Seconds each job ran in the trace (its ``duration`` column; ``Job.duration``), None where not given."""

    def __len__(self) -> int:
        return len(self.specs)

    def subset(self, keep: np.ndarray) -> TraceRows:
        """The rows where ``keep`` is true, in their order."""
        idx = np.flatnonzero(keep)
        pick = (lambda t: tuple(t[i] for i in idx)) if len(idx) < len(keep) else tuple
        return replace(self, submit=pick(self.submit), specs=pick(self.specs), deadlines=pick(self.deadlines),
                       weights=pick(self.weights), priorities=pick(self.priorities) if self.priorities else (),
                       durations=pick(self.durations) if self.durations else ())


def _error(source: str, row: int, column: str, value: Any, expected: str) -> CapsimError:
    return CapsimError(f"{source}: row {row}, column {column!r}: expected {expected}, found {value!r}")


class _Checks:
    """Column checks of one table; ``fail`` keeps the bad cell a row-by-row reading would meet first."""

    def __init__(self, rows: pd.DataFrame, source: str):
        self.rows, self.source = rows, source
        self.n = len(rows)
        self.first: tuple[int, int, CapsimError] | None = None
        self.order = 0

    def raw(self, column: str) -> np.ndarray | None:
        return self.rows[column].to_numpy() if column in self.rows.columns else None

    def empty(self, raw: np.ndarray) -> np.ndarray:
        """Cells with no value: missing, NaN, or blank text."""
        if raw.dtype.kind in "fc":
            return np.isnan(raw)
        if raw.dtype.kind in "iub":
            return np.zeros(len(raw), dtype=bool)
        return np.fromiter((v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not
                            v.strip()) or v is pd.NA for v in raw), dtype=bool, count=len(raw))

    def fail(self, column: str, bad: np.ndarray, raw: np.ndarray, expected: str) -> None:
        """Note the first row where ``bad`` holds (rows counted from 1)."""
        self.order += 1
        if bad.any():
            i = int(np.argmax(bad))
            key = (i, self.order)
            if self.first is None or key < self.first[:2]:
                value = raw[i].item() if isinstance(raw[i], np.generic) else raw[i]
                self.first = (i, self.order, _error(self.source, i + 1, column, value, expected))

    def numbers(self, column: str, *, integer: bool, minimum: float, required: bool,
                above: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(values, empty) of a numeric column; bad cells are noted (an empty one only when ``required``)."""
        raw = self.raw(column)
        if raw is None:
            return np.full(self.n, np.nan), np.ones(self.n, dtype=bool)
        empty = self.empty(raw)
        if raw.dtype.kind in "iufb":
            x = raw.astype(float)
        else:
            x = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(x) & ((x > minimum) if above else (x >= minimum))
            if integer:
                ok &= np.floor(x) == x
        bad = ~ok & (~empty | required)
        kind = "an integer" if integer else "a finite number"
        self.fail(column, bad, raw, f"{kind} {'>' if above else '>='} {minimum:g}")
        return x, empty

    def raise_first(self) -> None:
        if self.first is not None:
            raise self.first[2]


def _texts(raw: np.ndarray | None, empty: np.ndarray, n: int) -> list[str]:
    if raw is None:
        return [""] * n
    return ["" if e else str(v) for v, e in zip(raw.tolist(), empty)]


def validate_trace(rows: pd.DataFrame, source: str) -> TraceRows:
    """Check every cell of a trace table (read from a file by a ``sim.traces`` reader) and keep them parsed.

    A row is a job known by its work (``sim.traces.REQUIRED``: submit_time, application, framework, iterations,
    batch_size) or by a run a production trace measured (``sim.traces.MEASURED``: submit_time, duration, with the
    GPU count in ``measured_gpus`` or ``gpus``); the optional columns are listed in ``sim.traces.COLUMNS``, others
    are ignored. A measured job without iterations counts one per second of its run time (round mode runs whole
    iterations) and has batch size 1; its application and framework may be empty (unknown). Missing deadlines and
    weights are drawn by ``sim.workload.trace_jobs``. Rows are numbered from 1 in table order (a CSV file's rows
    after its header); a table without rows, or a bad cell, raises a CapsimError naming ``source``, the row and the
    column.
    """
    cols = set(rows.columns)
    measured = "duration" in cols
    missing = [c for c in (MEASURED if measured else REQUIRED) if c not in cols]
    if missing:
        optional = [c for c in COLUMNS if c not in REQUIRED]
        raise CapsimError(f"{source}: missing column(s) {', '.join(missing)}; a trace needs {', '.join(REQUIRED)} "
                          f"(jobs known by their work) or {', '.join(MEASURED)} (jobs known by a measured run) and "
                          f"may add {', '.join(optional)}")
    if len(rows) == 0:
        raise CapsimError(f"{source}: no jobs (the trace has its columns but no rows); expected one row per job")
    c = _Checks(rows, source)
    n = c.n
    submit, _ = c.numbers("submit_time", integer=False, minimum=0.0, required=True)
    names: dict[str, list[str]] = {}
    for col in ("application", "framework"):
        raw = c.raw(col)
        if raw is None:
            names[col] = [""] * n
            continue
        empty = c.empty(raw)
        not_text = np.fromiter((not isinstance(v, str) for v in raw), dtype=bool, count=n) & ~empty
        c.fail(col, not_text | (empty & (not measured)), raw, "a non-empty name")
        names[col] = _texts(raw, empty, n)
        if col == "framework":
            wrong = np.fromiter((v != "" and v not in FRAMEWORKS for v in names[col]), dtype=bool, count=n)
            c.fail(col, wrong, raw, "'pytorch' or 'tensorflow'")
    iters, no_iters = c.numbers("iterations", integer=True, minimum=1, required=not measured)
    batch, no_batch = c.numbers("batch_size", integer=True, minimum=1, required=not measured)
    gpus, no_gpus = c.numbers("gpus", integer=True, minimum=1, required=False)
    prio, no_prio = c.numbers("priority", integer=False, minimum=0.0, required=False)
    raw_p = c.raw("priority")
    if raw_p is not None:
        c.fail("priority", (prio <= 0) & ~no_prio, raw_p, "a finite number > 0")
    raw_d = c.raw("deadline")
    deadline, no_deadline = np.full(n, np.nan), np.ones(n, dtype=bool)
    if raw_d is not None:
        no_deadline = c.empty(raw_d)
        deadline = pd.to_numeric(pd.Series(raw_d, dtype=object), errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            early = ~no_deadline & ~(np.isfinite(deadline) & (deadline >= submit))
        if early.any():
            c.fail("deadline", early, raw_d, f"a finite number >= {submit[int(np.argmax(early))]:g}")
    weight, no_weight = c.numbers("weight", integer=False, minimum=0.0, required=False)
    duration, no_duration = c.numbers("duration", integer=False, minimum=0.0, required=measured, above=True)
    m_gpus, no_m_gpus = c.numbers("measured_gpus", integer=True, minimum=1, required=False)
    if measured:
        count_col = "measured_gpus" if "measured_gpus" in cols else "gpus"
        raw_mg = c.raw(count_col)
        c.fail(count_col, no_m_gpus & no_gpus, raw_mg if raw_mg is not None else np.full(n, None, dtype=object),
               "the GPU count the run was measured on (measured_gpus, or gpus)")
    share, no_share = c.numbers("gpu_share", integer=False, minimum=0.0, required=False, above=True)
    raw_s = c.raw("gpu_share")
    if raw_s is not None:
        c.fail("gpu_share", ~no_share & (share > 1), raw_s, "a share of one GPU in (0, 1]")
    c.raise_first()

    raw_name = c.raw("name")
    name = _texts(raw_name, c.empty(raw_name), n) if raw_name is not None else [""] * n
    raw_mgpu = c.raw("measured_gpu")
    m_gpu = _texts(raw_mgpu, c.empty(raw_mgpu), n) if raw_mgpu is not None else [""] * n
    raw_models = c.raw("gpu_models")
    models = _texts(raw_models, c.empty(raw_models), n) if raw_models is not None else [""] * n
    model_sets: dict[str, frozenset[str] | None] = {"": None}
    specs = []
    for i in range(n):
        g = None if no_gpus[i] else int(gpus[i])
        meas = None
        it = 0 if no_iters[i] else int(iters[i])
        if not no_duration[i]:
            d = float(duration[i])
            meas = Measured(d, int(m_gpus[i]) if not no_m_gpus[i] else int(gpus[i]), m_gpu[i] or None)
            it = it or max(1, math.ceil(d))
        ms = models[i]
        if ms not in model_sets:
            model_sets[ms] = frozenset(p.strip() for p in ms.split("|") if p.strip())
        s = None if no_share[i] or share[i] >= 1 else float(share[i])
        specs.append(JobSpec(names["application"][i].strip(), names["framework"][i], it,
                             1 if no_batch[i] else int(batch[i]), name=name[i], gpus=g, measured=meas, gpu_share=s,
                             gpu_models=model_sets[ms]))
    return TraceRows(
        source, tuple(submit.tolist()), tuple(specs),
        tuple(None if e else float(v) for v, e in zip(deadline.tolist(), no_deadline)),
        tuple(None if e else float(v) for v, e in zip(weight.tolist(), no_weight)),
        tuple(1.0 if e else float(v) for v, e in zip(prio.tolist(), no_prio)),
        report=rows.attrs.get("report") if isinstance(rows.attrs.get("report"), TraceReport) else None,
        durations=tuple(None if e else float(v) for v, e in zip(duration.tolist(), no_duration)) if measured else (),
    )


def fit_to_cluster(rows: TraceRows, configs: Sequence[Config]) -> TraceRows:
    """A production trace's rows without the jobs no configuration of the cluster can hold, each group counted in
    the report: a job asking for more GPUs than the largest configuration, or only for GPU models the cluster lacks.
    Rows of other traces (no report) come back unchanged: their every job must fit (``trace_jobs`` says which not)."""
    if rows.report is None or not configs:
        return rows
    counts = {c.gpus for c in configs}
    largest = max(counts)
    models = {c.vm.gpu.name for c in configs}
    big = np.array([s.gpus is not None and s.gpus not in counts for s in rows.specs], dtype=bool)
    foreign = np.array([s.gpu_models is not None and not (s.gpu_models & models) for s in rows.specs], dtype=bool)
    foreign &= ~big
    if not (big.any() or foreign.any()):
        return rows
    report = rows.report
    kept = int((~(big | foreign)).sum())
    if big.any():
        over = [s.gpus for s, b in zip(rows.specs, big) if b]
        report = report.plus(Step(int(big.sum()), f"jobs asking for a GPU count no configuration of the cluster has "
                                                  f"(up to {max(v for v in over if v is not None):,} GPUs; the "
                                                  f"largest configuration has {largest:,})", "dropped"), kept)
    if foreign.any():
        report = report.plus(Step(int(foreign.sum()), f"jobs asking only for GPU models the cluster lacks (it has "
                                                      f"{', '.join(sorted(models))})", "dropped"), kept)
    out = rows.subset(~(big | foreign))
    if not len(out):
        raise CapsimError(f"{rows.source}: no job of the trace fits the cluster; " + "; ".join(
            s.text() for s in report.steps[-2:]))
    return replace(out, report=report)
