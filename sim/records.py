"""The records of a run, declared once per table: one ``NamedTuple`` row type whose fields are the columns.

A field's annotation gives the column's dtype (``int`` → ``int64``, ``float`` → ``float64``, ``str`` and
``str | None`` → ``object``, ``float | None`` → ``float64`` with NaN, ``int | None`` → nullable ``Int64``), so the
names, their order and the Parquet dtypes live in one place. The engine builds rows by name, e.g.
``SegmentRecord(job_id=..., node=..., ...)``, and ``frame`` turns a list of rows into a DataFrame.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence, get_type_hints

import numpy as np
import pandas as pd

__all__ = ["JobRecord", "NodeRecord", "SegmentRecord", "DecisionRecord", "columns", "frame", "JOB_COLUMNS",
           "NODE_COLUMNS", "SEGMENT_COLUMNS", "DECISION_COLUMNS"]


class JobRecord(NamedTuple):
    """One row per job: what it was, when it ran, where it ended up, and what it cost."""

    job_id: int
    name: str
    application: str
    framework: str
    iterations: int
    batch_size: int
    submit_time: float
    start_time: float
    """First start (NaN for a job that never ran)."""
    end_time: float
    deadline: float
    weight: float
    vm_type: str
    """The configuration of its last run."""
    gpus: int
    node: int
    runs: int
    """Run segments (1, plus one per preemption or move)."""
    wait_time: float
    jct: float
    lateness: float
    tardiness_cost: float
    cost_share: float
    """Its share of the VM cost, by GPU-seconds on each interval it ran on."""
    est_runtime: float
    true_runtime: float


class NodeRecord(NamedTuple):
    """One row per VM interval on a node: from start to stop, with what it billed and whom it served."""

    node: int
    vm_type: str
    gpus: int
    price_per_hour: float
    start_time: float
    ready_time: float
    stop_time: float
    billed_seconds: float
    cost: float
    busy_gpu_seconds: float
    jobs: int
    """Jobs that ran on it (0: idle cost)."""


class SegmentRecord(NamedTuple):
    """One row per run segment of a job on a node (a job preempted or moved has several)."""

    job_id: int
    node: int
    vm_type: str
    gpus: int
    start_time: float
    end_time: float
    done: float
    """Fraction of the job's work completed at the end of the segment."""


class DecisionRecord(NamedTuple):
    """One row per decision: when, why, who decided, how the solver fared, and what the plan did."""

    decision: int
    time: float
    trigger: str
    policy: str
    status: str
    solver: str | None
    objective: float | None
    gap: float | None
    variables: int | None
    constraints: int | None
    fallback: str | None
    reason: str | None
    waiting: int
    running: int
    started: int
    preempted: int
    moved: int
    wall_time: float


_DTYPES = {int: "int64", float: "float64", str: "object", str | None: "object", float | None: "float64",
           int | None: "Int64"}


def columns(record: type[tuple]) -> dict[str, str]:
    """Column name → pandas dtype of a record type, in field order."""
    hints = get_type_hints(record)
    return {name: _DTYPES[hints[name]] for name in record._fields}  # type: ignore[attr-defined]


JOB_COLUMNS: Mapping[str, str] = columns(JobRecord)
NODE_COLUMNS: Mapping[str, str] = columns(NodeRecord)
SEGMENT_COLUMNS: Mapping[str, str] = columns(SegmentRecord)
DECISION_COLUMNS: Mapping[str, str] = columns(DecisionRecord)
_COLUMNS = {JobRecord: JOB_COLUMNS, NodeRecord: NODE_COLUMNS, SegmentRecord: SEGMENT_COLUMNS,
            DecisionRecord: DECISION_COLUMNS}


def frame(rows: Sequence[tuple], record: type[tuple]) -> pd.DataFrame:
    """The rows of one table as a DataFrame with its fixed column order and dtypes (identical Parquet every run)."""
    cols = _COLUMNS.get(record) or columns(record)
    values = list(zip(*rows)) if rows else [()] * len(cols)
    data = {}
    for (name, dtype), vals in zip(cols.items(), values):
        if dtype == "object" or dtype == "Int64":
            data[name] = pd.Series(vals, dtype=dtype)
        else:
            data[name] = pd.Series(np.array(vals, dtype=dtype))
    return pd.DataFrame(data, columns=list(cols))
