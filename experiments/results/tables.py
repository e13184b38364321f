"""Plain-text tables for the terminal."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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


def metric_label(name: str) -> str:
    """A column or axis label from the metric's declaration in ``sim.metrics``: ``total cost ($)``; a count whose
    label already names its unit stays bare (``late jobs``); an undeclared column keeps its name."""
    from sim.metrics import METRICS

    m = METRICS.get(name)
    return name if m is None else m.axis_label()


def metric_digits(name: str) -> int:
    """Decimals of a metric in tables (its declaration's ``digits``; 2 for an undeclared column)."""
    from sim.metrics import METRICS

    m = METRICS.get(name)
    return m.digits if m is not None else 2


def policy_means(summary: pd.DataFrame, order: Sequence[str] | None = None) -> str:
    """The ``capsim run`` table: per policy, the number of seeds and the mean over seeds of each headline metric
    (``experiments.results.headline``: the setting's own, those that apply)."""
    from experiments.results.headline import headline

    if summary.empty:
        return "(no finished runs)"
    columns = headline(summary)
    g = summary.groupby("policy", sort=False)
    means = g[columns].mean()
    counts = g.size()
    names = [p for p in (order or means.index) if p in means.index]
    rows = [[p, int(counts[p])] + [fmt(float(means[m].loc[p]), metric_digits(m)) for m in columns] for p in names]
    return format_table(["policy", "seeds"] + [metric_label(m) for m in columns], rows)
