"""Summaries over seeds: mean and 95% interval per policy and grid point, in four output formats.

Every cell is a mean over runs with its interval (``results.intervals``: a t-interval clipped to the metric's domain,
or a seeded percentile bootstrap), the method named in the output, the runs behind each row counted, and a warning
when they are too few to say much.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from experiments.results.intervals import few_runs_warning, interval, method_note, metric_domain
from experiments.results.labels import field_label, field_value
from experiments.results.tables import format_table, metric_digits, metric_label
from sim.metrics import METRICS
from sim.model import CapsimError
from sim.registry import did_you_mean

__all__ = ["aggregate", "render", "notes", "FORMATS", "check_metric_names"]

FORMATS = ("table", "csv", "markdown", "latex")


def check_metric_names(metrics: Sequence[str], summary: pd.DataFrame, option: str = "metrics") -> None:
    """Each name is a declared metric or a numeric column of ``summary``; else a CapsimError naming ``option``, each
    unknown name with a did-you-mean and the declared metrics."""
    numeric = [c for c in summary.columns if summary[c].dtype.kind in "fiub" and c != "seed"]
    unknown = [m for m in metrics if m not in METRICS and m not in numeric]
    if unknown:
        named = ", ".join(f"{m!r}{did_you_mean(m, [*METRICS, *numeric])}" for m in unknown)
        raise CapsimError(f"{option}: unknown metric {named} (declared metrics: {', '.join(METRICS)}; "
                          f"`capsim report DIR --metrics list` describes them)")


def aggregate(summary: pd.DataFrame, fields: Sequence[str], metrics: Sequence[str] | None = None,
              policy_order: Sequence[str] = (), method: str = "t",
              domains: Mapping[str, tuple[float | None, float | None]] | None = None) -> pd.DataFrame:
    """One row per grid point × policy: ``n`` runs, ``jobs`` per run (mean) when known, then per metric
    ``<metric>_mean``, ``<metric>_lo``, ``<metric>_hi`` (the 95% interval by ``method``, clipped to the metric's
    domain or to ``domains[metric]``) and ``<metric>_n`` (runs with a value); default metrics: every metric of
    ``sim.metrics`` the summary has."""
    metrics = [m for m in (metrics or METRICS) if m in summary.columns]
    keys = [f for f in fields if f in summary.columns] + ["policy"]
    rows = []
    for key, g in summary.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        row["n"] = len(g)
        if "jobs" in g.columns:
            row["jobs"] = float(g["jobs"].mean())
        if "deterministic" in g.columns:  # runs a wall-clock limit stopped (0) and runs it did not (1)
            flags = g["deterministic"].to_numpy(dtype=float)
            row["clock_runs"], row["exact_runs"] = int((flags == 0).sum()), int((flags == 1).sum())
        for m in metrics:
            v = g[m].to_numpy(dtype=float)
            v = v[~pd.isna(v)]
            lower, upper = (domains or {}).get(m) or metric_domain(m)
            row[f"{m}_mean"] = float(v.mean()) if len(v) else math.nan
            row[f"{m}_lo"], row[f"{m}_hi"] = interval(v, method, lower, upper)
            row[f"{m}_n"] = len(v)
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out.attrs["interval"] = method
    rank = {p: i for i, p in enumerate(policy_order)}
    out["_p"] = out["policy"].map(lambda p: rank.get(p, len(rank)))
    out = out.sort_values(keys[:-1] + ["_p", "policy"], kind="mergesort").drop(columns="_p")
    return out.reset_index(drop=True)


def _cell(r: pd.Series, m: str) -> str:
    d = metric_digits(m)
    mean, lo, hi = r[f"{m}_mean"], r[f"{m}_lo"], r[f"{m}_hi"]
    if math.isnan(mean):
        return "-"
    text = f"{mean:,.{d}f}" if math.isnan(lo) else f"{mean:,.{d}f} [{lo:,.{d}f}, {hi:,.{d}f}]"
    n = int(r[f"{m}_n"])
    return text if n == int(r["n"]) else f"{text} (n={n})"


def _jobs_constant(agg: pd.DataFrame) -> float | None:
    """The job count of every run when it is the same in all rows, else None."""
    if "jobs" not in agg.columns or agg["jobs"].isna().any() or agg["jobs"].nunique() != 1:
        return None
    return float(agg["jobs"].iloc[0])


def _count(x: float) -> str:
    return f"{int(x):,d}" if float(x).is_integer() else f"{x:,.1f}"


def _headers(agg: pd.DataFrame, fields: Sequence[str], metrics: Sequence[str]) -> tuple[list[str], bool]:
    """Column headers (grid fields by their declared labels, metrics by theirs; late jobs with their denominator)
    and whether a per-row job count column ``N`` is shown."""
    jobs = _jobs_constant(agg)
    per_row = jobs is None and "jobs" in agg.columns and "late_jobs" in metrics
    heads = [field_label(f) for f in fields] + ["policy", "runs"] + (["N"] if per_row else [])
    for m in metrics:
        label = metric_label(m)
        if m == "late_jobs" and "jobs" in agg.columns:
            label += f" (of {_count(jobs)})" if jobs is not None else " (of N)"
        heads.append(label)
    return heads, per_row


def notes(agg: pd.DataFrame, metrics: Sequence[str] = ()) -> list[str]:
    """What the cells show (the interval method), the metrics that apply to none of the runs, and, when too few
    runs stand behind some cell, a warning."""
    method = agg.attrs.get("interval", "t")
    out = [method_note(method)]
    empty = [m for m in metrics if f"{m}_mean" in agg.columns and agg[f"{m}_mean"].isna().all() and len(agg)]
    if empty:
        out.append(f"empty (-): {', '.join(empty)}: no run here has what they measure (e.g. no job with a deadline "
                   f"from its workload); `capsim report --metrics list` says when each metric is empty")
    ns = [int(agg[f"{m}_n"].min()) for m in metrics if f"{m}_n" in agg.columns] or [int(agg["n"].min())]
    warning = few_runs_warning(min(ns), method)
    if warning:
        out.append("warning: " + warning)
    clock = _clock_rows(agg)
    if clock:
        out.append("warning: a wall-clock time limit stopped decisions in some runs of " + "; ".join(clock)
                   + ": their results depend on the machine's speed and load and may not repeat; without "
                     "`time_limit` (the default node_limit) they would (docs/milp.md, 'Limits and reproducibility')")
    return out


def _clock_rows(agg: pd.DataFrame) -> list[str]:
    """Rows some of whose runs a wall-clock limit stopped (summary ``deterministic`` 0): 'row (k of n runs)', the
    rows mixing such runs with deterministic ones marked as mixed."""
    if "clock_runs" not in agg.columns:
        return []
    fields = list(agg.columns[:list(agg.columns).index("policy")])
    out = []
    for _, r in agg[agg["clock_runs"] > 0].iterrows():
        name = ", ".join([*(field_value(f, r[f], unit=False) for f in fields), str(r["policy"])])
        mixed = " mixed with deterministic ones" if r["exact_runs"] > 0 else ""
        out.append(f"{name} ({int(r['clock_runs'])} of {int(r['n'])} runs{mixed})")
    return out


def _tex(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"), ("$", r"\$")):
        s = s.replace(a, b)
    return s


def render(agg: pd.DataFrame, fields: Sequence[str], metrics: Sequence[str], fmt: str = "table") -> str:
    """The aggregate as a terminal table, CSV, a Markdown table or a LaTeX tabular (booktabs), the interval method
    named (a CSV column ``interval``; a note under the other formats, a comment in LaTeX)."""
    metrics = [m for m in metrics if f"{m}_mean" in agg.columns]
    fields = [f for f in fields if f in agg.columns]
    if fmt == "csv":
        cols = fields + ["policy", "n"] + (["jobs"] if "jobs" in agg.columns else [])
        for m in metrics:
            cols += [f"{m}_mean", f"{m}_lo", f"{m}_hi"] + ([f"{m}_n"] if (agg[f"{m}_n"] != agg["n"]).any() else [])
        return agg[cols].assign(interval=agg.attrs.get("interval", "t")).to_csv(
            index=False, float_format="%.6g", lineterminator="\n")
    headers, per_row = _headers(agg, fields, metrics)
    rows = []
    for _, r in agg.iterrows():
        rows.append([field_value(f, r[f], unit=False) for f in fields] + [str(r["policy"]), str(int(r["n"]))]
                    + ([_count(r["jobs"])] if per_row else []) + [_cell(r, m) for m in metrics])
    told = notes(agg, metrics)
    if per_row:
        told.insert(1, "N: jobs per run")
    if fmt == "table":
        return format_table(headers, rows) + "\n\n" + "\n".join(told)
    n_left = len(fields) + 1
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---" if i < n_left else "---:" for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n\n" + "\n".join(f"*{t}*" if i == 0 else t for i, t in enumerate(told))
    spec = "l" * n_left + "r" * (len(headers) - n_left)
    lines = [r"% capsim report: needs \usepackage{booktabs} in the preamble (for \toprule, \midrule, \bottomrule)"]
    lines += [f"% {t}" for t in told]
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(_tex(h) for h in headers) + r" \\",
              r"\midrule"]
    lines += [" & ".join(_tex(c) for c in r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)
