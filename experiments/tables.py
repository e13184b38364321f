"""Plain-text tables for the terminal."""

from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

__all__ = ["format_table", "fmt", "policy_means"]


def fmt(x: Any, digits: int = 2) -> str:
    """A number for a table: fixed decimals, thousands separated, ``-`` for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return f"{x:,d}"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return str(x)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Align ``rows`` under ``headers``: the first column left, the others right."""
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


RUN_COLUMNS = [
    ("total_cost", "total $"),
    ("vm_cost", "VM $"),
    ("tardiness_cost", "tardiness $"),
    ("late_jobs", "late jobs"),
    ("mean_jct", "mean JCT s"),
]


def policy_means(summary: pd.DataFrame, order: Sequence[str] | None = None) -> str:
    """The ``capsim run`` table: per policy, the mean over seeds of costs, late jobs and mean JCT."""
    if summary.empty:
        return "(no finished runs)"
    g = summary.groupby("policy", sort=False)
    means = g[[c for c, _ in RUN_COLUMNS if c in summary.columns]].mean()
    counts = g.size()
    names = [p for p in (order or means.index) if p in means.index]
    rows = []
    for p in names:
        r = means.loc[p]
        rows.append([p, int(counts[p])] + [float(r[c]) if c in r else None for c, _ in RUN_COLUMNS])
    return format_table(["policy", "seeds"] + [h for _, h in RUN_COLUMNS], rows)
