"""What a production-trace reader did with the rows it could not use as they were, counted under the rule applied.

Production traces are messy: rows repeated, jobs that never ran, times missing or negative, rows out of order. A
reader cleans its table through ``Cleaning``, whose every step (drop, sort, select) records how many rows it touched
and why; ``finish`` leaves the resulting ``TraceReport`` in the table's ``attrs["report"]``, so that no row is
dropped or changed silently and the report can be printed once, where the scenario is loaded. The options every
production reader shares (a time window, a sample of N jobs with a seed, keeping or dropping failed jobs) are
checked and applied here, the same way for every format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.model import CapsimError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Step", "TraceReport", "Cleaning", "check_common", "FAILED"]

FAILED = ("keep", "drop")
"""What a reader may do with jobs that failed or were killed (the ``failed`` option)."""


@dataclass(frozen=True)
class Step:
    """``rows`` rows matched ``rule`` and were ``action`` (``dropped``, ``sorted``, ``kept``, ...)."""

    rows: int
    rule: str
    action: str

    def text(self) -> str:
        return f"{self.rows:,} {self.rule}: {self.action}"


@dataclass(frozen=True)
class TraceReport:
    """What became of a trace file's rows: ``read`` rows, ``kept`` jobs, and every step between them."""

    source: str
    read: int
    kept: int
    steps: tuple[Step, ...] = ()

    @property
    def dropped(self) -> int:
        return sum(s.rows for s in self.steps if s.action.startswith("dropped"))

    def lines(self) -> list[str]:
        """One line for the totals, then one per step."""
        head = f"{self.source}: {self.read:,} rows read, {self.kept:,} jobs kept"
        return [head] + ["  " + s.text() for s in self.steps]

    def text(self) -> str:
        return "\n".join(self.lines())

    def plus(self, step: Step, kept: int) -> TraceReport:
        """This report with one more step, after which ``kept`` jobs are left."""
        return replace(self, steps=self.steps + (step,), kept=kept)


def check_common(fmt: str, start: Any, end: Any, sample: Any, seed: Any, failed: Any) -> None:
    """The shared options of production readers, or a ``CapsimError`` naming the format, the option and the value."""
    for name, v in (("start", start), ("end", end)):
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if v is not None and not (number and math.isfinite(v) and v >= 0):
            raise CapsimError(f"trace format {fmt!r}: {name} must be a number of seconds >= 0 after the trace's "
                              f"first arrival (or omitted), got {v!r}")
    if start is not None and end is not None and not start < end:
        raise CapsimError(f"trace format {fmt!r}: the window must have start < end, got start {start!r}, end {end!r}")
    if sample is not None and not (isinstance(sample, (int, np.integer)) and not isinstance(sample, bool)
                                   and sample >= 1):
        raise CapsimError(f"trace format {fmt!r}: sample must be a whole number of jobs >= 1 (or omitted), got "
                          f"{sample!r}")
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0):
        raise CapsimError(f"trace format {fmt!r}: seed must be a whole number >= 0, got {seed!r}")
    if failed not in FAILED:
        raise CapsimError(f"trace format {fmt!r}: failed must be 'keep' or 'drop' (jobs that failed or were "
                          f"killed), got {failed!r}")


class Cleaning:
    """A trace table on its way to the simulator: each step drops, orders or selects rows and records it."""

    def __init__(self, table: pd.DataFrame, source: str):
        self.table = table.reset_index(drop=True)
        self.source = source
        self.read = len(table)
        self.steps: list[Step] = []

    def note(self, rows: int, rule: str, action: str) -> None:
        """Record a step that touched ``rows`` rows without dropping them (nothing when ``rows`` is 0)."""
        if rows:
            self.steps.append(Step(int(rows), rule, action))

    def drop(self, mask: Any, rule: str, action: str = "dropped") -> None:
        """Drop the rows where ``mask`` is true (a boolean array over the current table), counted under ``rule``."""
        mask = np.asarray(mask, dtype=bool)
        n = int(mask.sum())
        if n:
            self.table = self.table[~mask].reset_index(drop=True)
            self.steps.append(Step(n, rule, action))

    def keep_only(self, mask: Any, rule: str) -> None:
        """Keep the rows where ``mask`` is true; the others are dropped under ``rule``."""
        self.drop(~np.asarray(mask, dtype=bool), rule)

    def duplicates(self, columns: Sequence[str] | None = None) -> None:
        """Drop rows equal in every column (or in ``columns``) to an earlier row."""
        dup = self.table.duplicated(subset=list(columns) if columns else None, keep="first").to_numpy()
        what = "every column" if not columns else ", ".join(columns)
        self.drop(dup, f"rows equal in {what} to an earlier row (duplicates)")

    def sort(self, column: str = "submit_time") -> None:
        """Order rows by ``column``, ties in file order; the rows that came before an earlier one are counted."""
        values = self.table[column].to_numpy(dtype=float)
        if len(values) < 2:
            return
        late = int((values < np.maximum.accumulate(values)).sum())
        if late:
            order = np.argsort(values, kind="stable")
            self.table = self.table.iloc[order].reset_index(drop=True)
            self.steps.append(Step(late, f"rows arriving before a row above them (the file is not sorted by "
                                         f"{column})", f"kept, the table sorted by {column} (ties in file order)"))

    def window(self, start: float | None, end: float | None, column: str = "submit_time") -> None:
        """Keep the rows whose ``column`` lies in [start, end) seconds."""
        if start is None and end is None:
            return
        t = self.table[column].to_numpy(dtype=float)
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        self.keep_only((t >= lo) & (t < hi), f"rows submitted outside the window [{_secs(start)}, {_secs(end)}) s "
                                             f"after the trace's first arrival")

    def sample(self, n: int | None, seed: int) -> None:
        """Keep ``n`` rows drawn uniformly without replacement from a generator of ``seed``, in their order."""
        if n is None:
            return
        total = len(self.table)
        if n >= total:
            self.note(total, f"rows left for a sample of {n:,} jobs (no more than that)", "all kept")
            return
        pick = np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))
        mask = np.zeros(total, dtype=bool)
        mask[pick] = True
        self.drop(~mask, f"rows not drawn in the sample of {n:,} jobs (seed {seed})", "dropped (sampled out)")

    def finish(self) -> pd.DataFrame:
        """The cleaned table with its ``TraceReport`` in ``attrs["report"]``."""
        if len(self.table) == 0:
            why = "; ".join(s.text() for s in self.steps) or "the file has no job rows"
            raise CapsimError(f"{self.source}: no job left to replay ({why}); widen the options")
        out = self.table
        out.attrs["report"] = TraceReport(self.source, self.read, len(out), tuple(self.steps))
        return out


def _secs(v: float | None) -> str:
    return "…" if v is None else f"{v:g}"
