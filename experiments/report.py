"""Summaries over seeds: mean and 95% confidence interval per policy and grid point, in four output formats."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from sim.metrics import METRICS

from experiments.tables import format_table, metric_digits, metric_label

__all__ = ["aggregate", "render", "ci95"]


def ci95(values: np.ndarray) -> float:
    """Half-width of the Student-t 95% confidence interval of the mean (NaN with fewer than two values)."""
    n = len(values)
    if n < 2:
        return math.nan
    return float(stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / math.sqrt(n))


def aggregate(summary: pd.DataFrame, fields: Sequence[str], metrics: Sequence[str] | None = None,
              policy_order: Sequence[str] = ()) -> pd.DataFrame:
    """One row per grid point × policy: ``n`` seeds, then ``<metric>_mean`` and ``<metric>_ci95`` per metric
    (default: every metric of ``sim.metrics`` the summary has)."""
    metrics = [m for m in (metrics or METRICS) if m in summary.columns]
    keys = [f for f in fields if f in summary.columns] + ["policy"]
    rows = []
    for key, g in summary.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        row["n"] = len(g)
        for m in metrics:
            v = g[m].to_numpy(dtype=float)
            row[f"{m}_mean"] = float(v.mean())
            row[f"{m}_ci95"] = ci95(v)
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    rank = {p: i for i, p in enumerate(policy_order)}
    out["_p"] = out["policy"].map(lambda p: rank.get(p, len(rank)))
    out = out.sort_values(keys[:-1] + ["_p", "policy"], kind="mergesort").drop(columns="_p")
    return out.reset_index(drop=True)


def _pm(mean: float, ci: float, digits: int, sep: str) -> str:
    if math.isnan(ci):
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f}{sep}{ci:,.{digits}f}"


def render(agg: pd.DataFrame, fields: Sequence[str], metrics: Sequence[str], fmt: str = "table") -> str:
    """The aggregate as a terminal table, CSV, a Markdown table or a LaTeX tabular (booktabs)."""
    metrics = [m for m in metrics if f"{m}_mean" in agg.columns]
    fields = [f for f in fields if f in agg.columns]
    if fmt == "csv":
        cols = fields + ["policy", "n"] + [c for m in metrics for c in (f"{m}_mean", f"{m}_ci95")]
        return agg[cols].to_csv(index=False, float_format="%.6g", lineterminator="\n")
    sep = {"table": " ± ", "markdown": " ± ", "latex": r" $\pm$ "}[fmt]
    headers = fields + ["policy", "n"] + [metric_label(m) for m in metrics]
    rows = []
    for _, r in agg.iterrows():
        rows.append([str(r[f]) for f in fields] + [str(r["policy"]), str(int(r["n"]))]
                    + [_pm(r[f"{m}_mean"], r[f"{m}_ci95"], metric_digits(m), sep) for m in metrics])
    if fmt == "table":
        return format_table(headers, rows)
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---" if i < len(fields) + 1 else "---:" for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)

    def tex(s: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"), ("$", r"\$")):
            s = s.replace(a, b)
        return s

    spec = "l" * (len(fields) + 1) + "r" * (len(headers) - len(fields) - 1)
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(tex(h) for h in headers) + r" \\", r"\midrule"]
    lines += [" & ".join(c if r"$\pm$" in c else tex(c) for c in r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)
