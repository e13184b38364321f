"""The records of a run, declared once per table: a ``Table`` subclass whose annotated fields are the columns.

A field ``name: list[T]`` is one column, in declaration order; ``T`` gives its dtype (``int`` → ``int64``, ``float``
→ ``float64``, ``str`` and ``str | None`` → ``object``, ``float | None`` → ``float64`` with NaN, ``int | None`` →
nullable ``Int64``), so names, order and Parquet dtypes live in one place. The engine fills a table column by
column, by name (``decisions.time.append(now)``), which costs less than building a row object per event, and
``frame()`` checks that every column has the same length and returns the DataFrame.
"""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import numpy as np
import pandas as pd

__all__ = ["Table", "Jobs", "Nodes", "Segments", "Decisions", "JOB_COLUMNS", "NODE_COLUMNS", "SEGMENT_COLUMNS",
           "DECISION_COLUMNS"]

_DTYPES: dict[Any, str] = {int: "int64", float: "float64", str: "object", str | None: "object",
                           float | None: "float64", int | None: "Int64"}


class Table:
    """One table of a run's records: a subclass declares the columns; an instance holds one list per column."""

    dtypes: dict[str, str] = {}
    """Column name → pandas dtype, in column order (derived from the subclass's annotations)."""

    def __init_subclass__(cls) -> None:
        hints = get_type_hints(cls)
        cls.dtypes = {name: _DTYPES[get_args(hints[name])[0]] for name in cls.__dict__.get("__annotations__", {})}

    def __init__(self) -> None:
        for name in self.dtypes:
            setattr(self, name, [])

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame with its fixed column order and dtypes (identical Parquet every run)."""
        cols = {name: getattr(self, name) for name in self.dtypes}
        lengths = {name: len(v) for name, v in cols.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{type(self).__name__}: columns of unequal length {lengths}")
        data = {}
        for name, dtype in self.dtypes.items():
            if dtype == "object" or dtype == "Int64":
                data[name] = pd.Series(cols[name], dtype=dtype)
            else:
                data[name] = pd.Series(np.asarray(cols[name], dtype=dtype))
        return pd.DataFrame(data, columns=list(self.dtypes))


class Jobs(Table):
    """One row per job: what it was, when it ran, where it ended up, and what it cost."""

    job_id: list[int]
    name: list[str]
    application: list[str]
    framework: list[str]
    iterations: list[int]
    batch_size: list[int]
    submit_time: list[float]
    start_time: list[float]
    """First start."""
    end_time: list[float]
    deadline: list[float]
    weight: list[float]
    vm_type: list[str]
    """The configuration of its last run (as ``gpus`` and ``node``)."""
    gpus: list[int]
    node: list[int]
    runs: list[int]
    """Run segments: 1, plus one per preemption or move."""
    wait_time: list[float]
    jct: list[float]
    lateness: list[float]
    tardiness_cost: list[float]
    cost_share: list[float]
    """Its share of the VM cost, by GPU-seconds on each interval it ran on."""
    est_runtime: list[float]
    true_runtime: list[float]


class Nodes(Table):
    """One row per VM interval on a node: from start to stop, what it billed and how many jobs it served."""

    node: list[int]
    vm_type: list[str]
    gpus: list[int]
    price_per_hour: list[float]
    start_time: list[float]
    ready_time: list[float]
    stop_time: list[float]
    billed_seconds: list[float]
    cost: list[float]
    busy_gpu_seconds: list[float]
    jobs: list[int]
    """Jobs that ran on it (0: its cost is idle cost)."""


class Segments(Table):
    """One row per run segment of a job on a node (a job preempted or moved has several)."""

    job_id: list[int]
    node: list[int]
    vm_type: list[str]
    gpus: list[int]
    start_time: list[float]
    end_time: list[float]
    done: list[float]
    """Fraction of the job's work completed at the end of the segment."""


class Decisions(Table):
    """One row per decision: when, why, who decided, how the solver fared, and what the plan did."""

    decision: list[int]
    time: list[float]
    trigger: list[str]
    policy: list[str]
    status: list[str]
    solver: list[str | None]
    objective: list[float | None]
    gap: list[float | None]
    variables: list[int | None]
    constraints: list[int | None]
    fallback: list[str | None]
    reason: list[str | None]
    waiting: list[int]
    running: list[int]
    started: list[int]
    preempted: list[int]
    moved: list[int]
    wall_time: list[float]


JOB_COLUMNS: dict[str, str] = dict(Jobs.dtypes)
NODE_COLUMNS: dict[str, str] = dict(Nodes.dtypes)
SEGMENT_COLUMNS: dict[str, str] = dict(Segments.dtypes)
DECISION_COLUMNS: dict[str, str] = dict(Decisions.dtypes)
