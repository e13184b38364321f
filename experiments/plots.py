"""Figures of a result directory, as PNG and PDF (TrueType fonts embedded), one colour per policy in every figure."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sim.metrics import METRICS  # noqa: E402

from experiments.report import aggregate  # noqa: E402
from experiments.results import atomic_write  # noqa: E402
from experiments.tables import metric_label  # noqa: E402

__all__ = ["policy_colours", "plot_all", "FIGURES"]

FIGURES = ("cost_breakdown", "tardiness_late", "pareto", "cdf", "cost_vs", "decision_time", "timeline")

_KNOWN = ["fifo", "edf", "priority", "ps", "milp", "greedy", "rgreedy", "local_search", "path_relinking"]
_PALETTE = list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("Dark2").colors)

plt.rcParams.update({
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "figure.dpi": 110,
    "savefig.bbox": "tight",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
})


def policy_colours(policies: Sequence[str]) -> dict[str, Any]:
    """A colour per policy: well-known kinds keep a fixed colour everywhere, others take free colours in order."""
    out: dict[str, Any] = {}
    used: set[int] = set()
    for p in policies:
        base = p.split("-")[0].split(":")[0]
        if base in _KNOWN and _KNOWN.index(base) not in used:
            out[p] = _PALETTE[_KNOWN.index(base)]
            used.add(_KNOWN.index(base))
    free = [i for i in range(len(_PALETTE)) if i not in used and i >= len(_KNOWN)] + \
        [i for i in range(len(_KNOWN)) if i not in used]
    for p in policies:
        if p not in out:
            out[p] = _PALETTE[free.pop(0) if free else hash(p) % len(_PALETTE)]
    return out


def _save(fig: plt.Figure, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    atomic_write(paths[0], lambda tmp: fig.savefig(tmp, dpi=130, format="png"))
    atomic_write(paths[1], lambda tmp: fig.savefig(tmp, format="pdf", metadata={"CreationDate": None}))
    plt.close(fig)
    return paths


def _point_label(row: pd.Series | dict, fields: Sequence[str]) -> str:
    return ", ".join(f"{f.split('.')[-1]}={row[f]}" for f in fields) or "all runs"


def _points(agg: pd.DataFrame, fields: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    if not fields:
        return [("all runs", agg)]
    out = []
    for key, g in agg.groupby(list(fields), sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        out.append((_point_label(dict(zip(fields, key)), fields), g))
    return out


def _grid_axes(n: int, width: float = 3.4, height: float = 2.8) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _nan0(x: Any) -> float:
    return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def fig_cost_breakdown(agg: pd.DataFrame, fields: Sequence[str], colours: dict) -> plt.Figure:
    """Total cost per policy, split into VM cost (solid) and tardiness cost (hatched), 95% CI on the total."""
    pts = _points(agg, fields)
    fig, axes = _grid_axes(len(pts))
    for ax, (label, g) in zip(axes, pts):
        x = np.arange(len(g))
        cols = [colours[p] for p in g["policy"]]
        ax.bar(x, g["vm_cost_mean"], color=cols, edgecolor="black", linewidth=0.5, label=METRICS["vm_cost"].label)
        ax.bar(x, g["tardiness_cost_mean"], bottom=g["vm_cost_mean"], color=cols, alpha=0.45, hatch="//",
               edgecolor="black", linewidth=0.5, label=METRICS["tardiness_cost"].label)
        ax.errorbar(x, g["total_cost_mean"], yerr=[_nan0(v) for v in g["total_cost_ci95"]], fmt="none",
                    ecolor="black", capsize=3, linewidth=1)
        ax.set_xticks(x, g["policy"], rotation=30, ha="right")
        ax.set_ylabel(metric_label("total_cost"))
        ax.set_title(label, fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor="0.6", edgecolor="black"),
               plt.Rectangle((0, 0), 1, 1, facecolor="0.85", hatch="//", edgecolor="black")]
    fig.legend(handles, [METRICS["vm_cost"].label, METRICS["tardiness_cost"].label], loc="upper center", ncol=2,
               frameon=False, bbox_to_anchor=(0.5, 1.04))
    fig.suptitle("Total cost per policy (mean over seeds, 95% CI)", y=1.09)
    fig.tight_layout()
    return fig


def _grouped_bars(ax: plt.Axes, agg: pd.DataFrame, fields: Sequence[str], metric: str, colours: dict,
                  policies: Sequence[str]) -> None:
    pts = _points(agg, fields)
    width = 0.8 / max(1, len(policies))
    for i, pol in enumerate(policies):
        xs, ys, es = [], [], []
        for k, (_, g) in enumerate(pts):
            r = g[g["policy"] == pol]
            if len(r):
                xs.append(k - 0.4 + width * (i + 0.5))
                ys.append(float(r[f"{metric}_mean"].iloc[0]))
                es.append(_nan0(r[f"{metric}_ci95"].iloc[0]))
        ax.bar(xs, ys, width, yerr=es, color=colours[pol], capsize=2, label=pol, edgecolor="black", linewidth=0.4)
    ax.set_xticks(range(len(pts)), [lbl for lbl, _ in pts], rotation=20 if len(pts) > 2 else 0, ha="right"
                  if len(pts) > 2 else "center")


def fig_tardiness_late(agg: pd.DataFrame, fields: Sequence[str], colours: dict, policies: Sequence[str]) -> plt.Figure:
    """Weighted tardiness (tardiness cost) and late jobs per policy and grid point."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.4))
    _grouped_bars(a, agg, fields, "tardiness_cost", colours, policies)
    a.set_ylabel(metric_label("tardiness_cost"))
    _grouped_bars(b, agg, fields, "late_jobs", colours, policies)
    b.set_ylabel(metric_label("late_jobs"))
    b.legend(frameon=False, fontsize=8)
    fig.suptitle("Weighted tardiness and late jobs (mean over seeds, 95% CI)")
    fig.tight_layout()
    return fig


def fig_metric(agg: pd.DataFrame, fields: Sequence[str], metric: str, colours: dict,
               policies: Sequence[str]) -> plt.Figure:
    """One metric of ``sim.metrics`` per policy and grid point (mean over seeds, 95% CI), labelled by its declaration."""
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    _grouped_bars(ax, agg, fields, metric, colours, policies)
    ax.set_ylabel(metric_label(metric))
    ax.legend(frameon=False, fontsize=8)
    ax.set_title(f"{METRICS[metric].label if metric in METRICS else metric} (mean over seeds, 95% CI)")
    fig.tight_layout()
    return fig


def pareto_front(points: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both coordinates (lower is better), sorted by x."""
    order = np.lexsort((points[:, 1], points[:, 0]))
    front, best = [], math.inf
    for i in order:
        if points[i, 1] < best:
            front.append(i)
            best = points[i, 1]
    return np.array(front, dtype=int)


def fig_pareto(agg: pd.DataFrame, fields: Sequence[str], colours: dict) -> plt.Figure:
    """VM cost against weighted tardiness for every policy × grid point; the Pareto front is marked."""
    fig, ax = plt.subplots(figsize=(5.2, 4))
    pts = agg[["vm_cost_mean", "tardiness_cost_mean"]].to_numpy(dtype=float)
    front = pareto_front(pts)
    for pol, g in agg.groupby("policy", sort=False):
        ax.scatter(g["vm_cost_mean"], g["tardiness_cost_mean"], color=colours[pol], label=pol, s=28, zorder=3,
                   edgecolor="black", linewidth=0.4)
    ax.plot(pts[front, 0], pts[front, 1], color="black", linestyle="--", linewidth=1, zorder=2,
            drawstyle="steps-post", label="Pareto front")
    ax.scatter(pts[front, 0], pts[front, 1], s=110, facecolor="none", edgecolor="black", linewidth=1, zorder=4)
    ax.set_xlabel(metric_label("vm_cost"))
    ax.set_ylabel(metric_label("tardiness_cost"))
    ax.set_title("Cost vs tardiness (means per policy and grid point)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def _cdf(ax: plt.Axes, values: np.ndarray, colour: Any, label: str) -> None:
    v = np.sort(values[np.isfinite(values)])
    if len(v):
        ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color=colour, label=label)


def fig_cdf(jobs: pd.DataFrame, colours: dict, policies: Sequence[str]) -> plt.Figure:
    """CDFs of job completion time and of lateness (end − deadline; negative = early), all runs pooled."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.4))
    for pol in policies:
        g = jobs[jobs["policy"] == pol]
        if len(g):
            _cdf(a, g["jct"].to_numpy(float), colours[pol], pol)
            _cdf(b, (g["end_time"] - g["deadline"]).to_numpy(float), colours[pol], pol)
    a.set_xlabel("job completion time (s)")
    a.set_xscale("log")
    b.set_xlabel("end − deadline (s); > 0 is late")
    b.axvline(0, color="0.5", linewidth=0.8, linestyle=":")
    for ax in (a, b):
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1.01)
    a.legend(frameon=False, fontsize=8)
    fig.suptitle("Distribution of job completion time and lateness (all seeds and grid points)")
    fig.tight_layout()
    return fig


def fig_cost_vs(summary: pd.DataFrame, field: str, colours: dict, policies: Sequence[str]) -> plt.Figure:
    """Mean total cost against one swept variable, one line per policy with its 95% CI band."""
    agg = aggregate(summary, [field], ["total_cost"], policies)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for pol in policies:
        g = agg[agg["policy"] == pol].sort_values(field)
        if g.empty:
            continue
        x = g[field].to_numpy(float)
        y = g["total_cost_mean"].to_numpy(float)
        e = np.nan_to_num(g["total_cost_ci95"].to_numpy(float))
        ax.plot(x, y, marker="o", color=colours[pol], label=pol)
        ax.fill_between(x, y - e, y + e, color=colours[pol], alpha=0.18, linewidth=0)
    ax.set_xlabel(field)
    ax.set_ylabel(metric_label("total_cost"))
    ax.set_title(f"Total cost against {field.split('.')[-1]} (mean, 95% CI)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def fig_decision_time(decisions: pd.DataFrame, colours: dict, policies: Sequence[str]) -> plt.Figure:
    """Wall time of each decision against the problem size: jobs in the system, and model variables where reported."""
    d = decisions.assign(jobs_in=decisions["waiting"] + decisions["running"], ms=decisions["wall_time"] * 1000)
    has_vars = "variables" in d and d["variables"].notna().any()
    fig, axes = plt.subplots(1, 2 if has_vars else 1, figsize=(10 if has_vars else 5.2, 3.6), squeeze=False)
    axes = list(axes.flat)
    for pol in policies:
        g = d[d["policy"] == pol]
        if g.empty:
            continue
        axes[0].scatter(g["jobs_in"], np.maximum(g["ms"], 1e-3), s=6, alpha=0.5, color=colours[pol], label=pol)
        if has_vars:
            v = g[g["variables"].notna()]
            if len(v):
                axes[1].scatter(v["variables"].astype(float), np.maximum(v["ms"], 1e-3), s=6, alpha=0.5,
                                color=colours[pol], label=pol)
    axes[0].set_xlabel("jobs in the system (waiting + running)")
    if has_vars:
        axes[1].set_xlabel("model variables (policies that build a model)")
        axes[1].set_xscale("symlog", linthresh=10)
    for ax in axes:
        ax.set_yscale("log")
        ax.set_ylabel("decision wall time (ms)")
    axes[0].legend(frameon=False, fontsize=8, markerscale=2)
    fig.suptitle("Decision time against problem size")
    fig.tight_layout()
    return fig


def fig_timeline(nodes: pd.DataFrame, jobs: pd.DataFrame, run_id: str, title: str) -> plt.Figure:
    """One run: each node slot's VMs over time (coloured by VM type) with the jobs that ran on them."""
    n = nodes[nodes["run_id"] == run_id]
    j = jobs[jobs["run_id"] == run_id]
    slots = sorted(set(n["node"]) | set(j["node"]))
    types = list(dict.fromkeys(n["vm_type"]))
    tcol = {t: plt.get_cmap("Pastel1" if len(types) <= 9 else "tab20")(i % 20) for i, t in enumerate(types)}
    fig, ax = plt.subplots(figsize=(10, max(2.6, 0.5 * len(slots) + 1.4)))
    for _, r in n.iterrows():
        ax.barh(r["node"], r["stop_time"] - r["start_time"], left=r["start_time"], height=0.8,
                color=tcol[r["vm_type"]], edgecolor="0.4", linewidth=0.5)
        if r["ready_time"] > r["start_time"]:
            ax.barh(r["node"], r["ready_time"] - r["start_time"], left=r["start_time"], height=0.8,
                    color="0.85", edgecolor="0.4", linewidth=0.5, hatch="..")
    for _, r in j.iterrows():
        late = r["end_time"] > r["deadline"]
        ax.barh(r["node"], r["end_time"] - r["start_time"], left=r["start_time"], height=0.36,
                color="#c0392b" if late else "#2c3e50", alpha=0.85)
        if r["end_time"] - r["start_time"] > 0.04 * max(1.0, float(n["stop_time"].max() if len(n) else 1)):
            ax.text((r["start_time"] + r["end_time"]) / 2, r["node"], str(r.get("name") or r["job_id"]),
                    ha="center", va="center", fontsize=6, color="white")
    handles = [plt.Rectangle((0, 0), 1, 1, color=tcol[t]) for t in types]
    handles += [plt.Rectangle((0, 0), 1, 1, color="#2c3e50"), plt.Rectangle((0, 0), 1, 1, color="#c0392b")]
    ax.legend(handles, types + ["job on time", "job late"], frameon=False, fontsize=7, loc="center left",
              bbox_to_anchor=(1.01, 0.5))
    ax.set_yticks(slots, [f"slot {s}" for s in slots])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_all(tables: dict[str, pd.DataFrame], fields: Sequence[str], policies: Sequence[str], out: Path,
             run_id: str | None = None, only: Sequence[str] | None = None,
             metrics: Sequence[str] = ()) -> list[Path]:
    """The figures of a result directory (all, or those in ``only``; see FIGURES) into ``out``, plus one
    ``metric_<name>`` figure per metric in ``metrics``; returns the files."""
    want = set(only or FIGURES)
    summary = tables["summary"]
    policies = [p for p in policies if p in set(summary["policy"])] + \
        [p for p in dict.fromkeys(summary["policy"]) if p not in policies]
    colours = policy_colours(policies)
    fields = [f for f in fields if f in summary.columns]
    agg = aggregate(summary, fields, ["total_cost", "vm_cost", "tardiness_cost", "late_jobs"], policies)
    written: list[Path] = []
    if "cost_breakdown" in want:
        written += _save(fig_cost_breakdown(agg, fields, colours), out, "cost_breakdown")
    if "tardiness_late" in want:
        written += _save(fig_tardiness_late(agg, fields, colours, policies), out, "tardiness_late")
    if "pareto" in want:
        written += _save(fig_pareto(agg, fields, colours), out, "pareto")
    if "cdf" in want and not tables["jobs"].empty:
        written += _save(fig_cdf(tables["jobs"], colours, policies), out, "cdf_jct_lateness")
    for f in fields if "cost_vs" in want else []:
        if pd.api.types.is_numeric_dtype(summary[f]) and summary[f].nunique() > 1:
            written += _save(fig_cost_vs(summary, f, colours, policies), out, f"cost_vs_{f.split('.')[-1]}")
    if metrics:
        per_metric = aggregate(summary, fields, list(metrics), policies)
        for m in metrics:
            written += _save(fig_metric(per_metric, fields, m, colours, policies), out, f"metric_{m}")
    if "decision_time" in want and not tables["decisions"].empty:
        written += _save(fig_decision_time(tables["decisions"], colours, policies), out, "decision_time")
    if "timeline" not in want:
        return written
    if run_id is None:
        run_id = str(summary["run_id"].iloc[0])
    row = summary[summary["run_id"] == run_id]
    if len(row):
        r = row.iloc[0]
        title = f"Run {run_id}: {r['policy']}, seed {r['seed']}" + (f", {_point_label(r, fields)}" if fields else "")
        written += _save(fig_timeline(tables["nodes"], tables["jobs"], run_id, title), out, "timeline")
    return written
