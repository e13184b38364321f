"""Figures of the per-run summaries: means and 95% intervals per policy and grid point.

Each value is a dot with its interval (not a bar), so a log scale is honest where values span orders of magnitude
and every policy keeps its marker as well as its colour (readable in greyscale). One panel per quantity: VM cost and
tardiness cost each get their own scale, so neither hides the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator
from matplotlib.transforms import ScaledTranslation

from experiments.plots.data import GridAxis, PlotData, label_of
from experiments.plots.layout import FigureSpec, Panel
from experiments.plots.style import set_scale
from experiments.results.labels import field_label, field_value
from experiments.results.tables import metric_label

__all__ = ["cost_breakdown", "tardiness_late", "metric_figure", "pareto", "pareto_front", "cost_vs",
           "cost_deadlines", "policy_handles", "swept_numbers"]

MARKER_SIZE = 4.0


def policy_handles(data: PlotData, lines: bool = False) -> list[tuple[Any, str]]:
    """Legend entries, one per policy in order: marker and colour (and dash pattern for line figures)."""
    out = []
    for p in data.policies:
        st = data.styles[p]
        out.append((Line2D([], [], color=st.colour, marker=st.marker, markersize=MARKER_SIZE,
                           linestyle=st.dashes if lines else "none", markeredgecolor="black",
                           markeredgewidth=0.3), p))
    return out


def _errors(mean: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.nan_to_num(np.vstack([mean - lo, hi - mean]), nan=0.0).clip(min=0.0)


def _separate(ax: Any, marks: Sequence[tuple[Any, float, float]], points: float = 1.6 * MARKER_SIZE + 1) -> None:
    """Set side by side, on the page, the mean markers of different policies that would print on top of each other
    (closer than ``points``): each cluster is spread horizontally about its centre, ``points`` apart, with what is
    attached to each marker (its intervals). ``marks``: (artists, x, y) per policy in data coordinates; called once
    the figure is laid out (``Panel.settle``)."""
    if len(marks) < 2:
        return
    to_pt = 72.0 / ax.figure.dpi
    xy = ax.transData.transform(np.array([[x, y] for _, x, y in marks], dtype=float)) * to_pt
    order = sorted(range(len(marks)), key=lambda i: (xy[i, 0], xy[i, 1]))
    clusters: list[list[int]] = []
    for i in order:
        for c in clusters:
            if any(np.hypot(*(xy[i] - xy[j])) < points for j in c):
                c.append(i)
                break
        else:
            clusters.append([i])
    for c in clusters:
        if len(c) < 2:
            continue
        c.sort(key=lambda i: (xy[i, 0], i))
        for k, i in enumerate(c):
            _shift(ax, marks[i][0], (k - (len(c) - 1) / 2) * points)


def _grid_lines(ax: Any, axis: str = "y") -> None:
    ax.grid(axis=axis, which="major", color="0.9", linewidth=0.4)
    ax.set_axisbelow(True)


def _dot_panel(data: PlotData, metric: str, gx: GridAxis) -> Panel:
    agg = data.agg([metric])

    def draw(ax: Any) -> None:
        n = len(data.policies)
        step = min(0.72 / n, 0.2) if gx.dodge else 0.0
        shown: list[float] = []
        ends: list[float] = []
        for i, pol in enumerate(data.policies):
            rows = agg[agg["policy"] == pol]
            if rows.empty:
                continue
            st = data.styles[pol]
            xs = [gx.position(r) + (i - (n - 1) / 2) * step for r in rows.to_dict("records")]
            mean = rows[f"{metric}_mean"].to_numpy(float)
            lo, hi = rows[f"{metric}_lo"].to_numpy(float), rows[f"{metric}_hi"].to_numpy(float)
            ax.errorbar(xs, mean, yerr=_errors(mean, lo, hi), fmt=st.marker, color=st.colour, ecolor=st.colour,
                        markersize=MARKER_SIZE, markeredgecolor="black", markeredgewidth=0.3, elinewidth=0.8,
                        capsize=0, zorder=3)
            shown += list(mean[np.isfinite(mean)])
            ends += list(lo) + list(hi)
        set_scale(ax, shown, bounds=ends)
        _grid_lines(ax)
        gx.decorate(ax)

    return Panel(draw, gx.xlabel, label_of(metric), key={"metric": metric})


def _summary_figure(name: str, data: PlotData, metrics: Sequence[str], width: str,
                    page_columns: int | None = None) -> FigureSpec | None:
    """One dot panel per metric some run has (None if none has): stacked at column width, side by side at page
    width."""
    metrics = data.applicable(name, metrics)
    if not metrics:
        return None
    cols = {"column": 1, "page": page_columns or len(metrics)}
    share = 1.0 / (cols[width] if width in cols else 1)
    gx = GridAxis(data, width, share)
    many = len(gx.x) * (len(data.policies) if gx.dodge else 1) > 24
    return FigureSpec(name, [_dot_panel(data, m, gx) for m in metrics], columns=cols,
                      row_height={"column": 1.35 if gx.outer else 1.2, "page": 2.1 if many else 1.9},
                      legend=policy_handles(data), legend_title=f"mean and {data.interval_name} over runs",
                      sharex=True)


def cost_breakdown(data: PlotData, width: str) -> FigureSpec | None:
    """Total cost and its two parts, VM cost and tardiness cost, each on its own scale."""
    return _summary_figure("cost_breakdown", data, ["total_cost", "vm_cost", "tardiness_cost"], width)


def tardiness_late(data: PlotData, width: str) -> FigureSpec | None:
    """Tardiness cost and the share of jobs that finish late."""
    metrics = ["tardiness_cost", "late_share" if "late_share" in data.summary.columns else "late_jobs"]
    return _summary_figure("tardiness_late", data, metrics, width)


def metric_figure(data: PlotData, metric: str, width: str) -> FigureSpec | None:
    """Any metric declared in ``sim.metrics``, per policy and grid point (None if no run has it)."""
    spec = _summary_figure(f"metric_{metric}", data, [metric], width)
    if spec is None:
        return None
    spec.row_height = {"column": 1.6, "page": 2.2}
    return spec


def pareto_front(points: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both coordinates (lower is better), sorted by x."""
    order = np.lexsort((points[:, 1], points[:, 0]))
    front, best = [], math.inf
    for i in order:
        if points[i, 1] < best:
            front.append(i)
            best = points[i, 1]
    return np.array(front, dtype=int)


def _staircase(ax: Any, front: np.ndarray) -> None:
    """The boundary of what the front's points dominate, from the top of the axes to its right edge, so even a
    front of one point shows."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    xs, ys = [front[0, 0], front[0, 0]], [y1, front[0, 1]]
    for i in range(1, len(front)):
        xs += [front[i, 0], front[i, 0]]
        ys += [front[i - 1, 1], front[i, 1]]
    xs.append(x1)
    ys.append(front[-1, 1])
    ax.plot(xs, ys, color="black", linestyle="--", linewidth=0.7, zorder=3, scalex=False, scaley=False)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)


def _scatter_row(panels: Sequence[Panel]) -> float:
    """Row height (in) of a scatter figure at column width: one panel gets the whole width and more height, so the
    legend of many policies does not take a third of the figure."""
    return 2.2 if len(panels) == 1 else 1.5


def pareto(data: PlotData, width: str) -> FigureSpec | None:
    """VM cost against tardiness cost, one panel per grid point (each a different problem): every run small, the
    mean per policy large, the Pareto front of the means dashed (None if no run has a tardiness cost)."""
    if not data.applicable("pareto", ["vm_cost", "tardiness_cost"], every=True):
        return None
    agg = data.agg(["vm_cost", "tardiness_cost"])
    summary = data.summary
    all_x = list(summary["vm_cost"]) + list(agg["vm_cost_mean"])
    all_y = list(summary["tardiness_cost"]) + list(agg["tardiness_cost_mean"])
    panels = []
    marked: dict[int, list[tuple[Any, float, float]]] = {}
    for pt in data.points():

        def draw(ax: Any, pt: dict = pt) -> None:
            runs, means = data.select(summary, pt), data.select(agg, pt)
            marks: list[tuple[Any, float, float]] = []
            for pol in data.policies:
                st = data.styles[pol]
                r = runs[runs["policy"] == pol]
                ax.scatter(r["vm_cost"], r["tardiness_cost"], s=5, marker=st.marker, color=st.colour, alpha=0.35,
                           linewidths=0, zorder=2)
                m = means[means["policy"] == pol]
                if len(m):
                    dot = ax.scatter(m["vm_cost_mean"], m["tardiness_cost_mean"], s=22, marker=st.marker,
                                     color=st.colour, edgecolor="black", linewidths=0.4, zorder=4)
                    marks.append(([dot], float(m["vm_cost_mean"].iloc[0]), float(m["tardiness_cost_mean"].iloc[0])))
            xs, ys = list(runs["vm_cost"]) + list(means["vm_cost_mean"]), \
                list(runs["tardiness_cost"]) + list(means["tardiness_cost_mean"])
            set_scale(ax, xs, "x", wide=10, decide=all_x)
            set_scale(ax, ys, "y", wide=30, decide=all_y)
            pts = means[["vm_cost_mean", "tardiness_cost_mean"]].to_numpy(float)
            if len(pts):
                _staircase(ax, pts[pareto_front(pts)])
            marked[id(ax)] = marks
            _grid_lines(ax, "both")

        panels.append(Panel(draw, metric_label("vm_cost"), metric_label("tardiness_cost"),
                            data.point_title(pt), key=dict(pt), settle=lambda ax: _separate(ax, marked.pop(id(ax)))))
    legend = policy_handles(data) + [(Line2D([], [], color="black", linestyle="--", linewidth=0.7),
                                      "Pareto front")]
    return FigureSpec("pareto", panels, columns={"column": 2, "page": 3},
                      row_height={"column": _scatter_row(panels), "page": 1.8}, legend=legend,
                      legend_title="large: mean over runs; small: one run")


def cost_deadlines(data: PlotData, width: str, cost: str = "total_cost",
                   met: str = "deadline_met") -> FigureSpec | None:
    """Total cost against the share of deadlines met, one panel per grid point: every run small, the mean per policy
    large with its intervals both ways; the policies no other beats on both (cheaper and more deadlines met) joined by
    a dashed line (None if no run has deadlines)."""
    if not data.applicable("cost_deadlines", [cost, met], every=True):
        return None
    agg = data.agg([cost, met])
    summary = data.summary
    all_y = list(summary[cost]) + list(agg[f"{cost}_mean"])
    panels = []
    marked: dict[int, list[tuple[Any, float, float]]] = {}
    fronts = {}
    for i, pt in enumerate(data.points()):
        means = data.select(agg, pt)
        pts = np.column_stack([-means[f"{met}_mean"].to_numpy(float), means[f"{cost}_mean"].to_numpy(float)])
        pts = pts[np.isfinite(pts).all(axis=1)]
        fronts[i] = pts[pareto_front(pts)] if len(pts) else pts
    for i, pt in enumerate(data.points()):

        def draw(ax: Any, pt: dict = pt, front: np.ndarray = fronts[i]) -> None:
            runs, means = data.select(summary, pt), data.select(agg, pt)
            marks: list[tuple[Any, float, float]] = []
            for pol in data.policies:
                st = data.styles[pol]
                r = runs[runs["policy"] == pol]
                ax.scatter(r[met], r[cost], s=5, marker=st.marker, color=st.colour, alpha=0.35, linewidths=0,
                           zorder=2)
                m = means[means["policy"] == pol]
                if len(m):
                    x, y = m[f"{met}_mean"].to_numpy(float), m[f"{cost}_mean"].to_numpy(float)
                    bars = ax.errorbar(
                        x, y, xerr=_errors(x, m[f"{met}_lo"].to_numpy(float), m[f"{met}_hi"].to_numpy(float)),
                        yerr=_errors(y, m[f"{cost}_lo"].to_numpy(float), m[f"{cost}_hi"].to_numpy(float)),
                        fmt=st.marker, color=st.colour, ecolor=st.colour, markersize=MARKER_SIZE + 1,
                        markeredgecolor="black", markeredgewidth=0.4, elinewidth=0.7, capsize=0, zorder=4)
                    marks.append((bars, float(x[0]), float(y[0])))
            ys = list(runs[cost]) + list(means[f"{cost}_mean"])
            ends = list(means[f"{cost}_lo"]) + list(means[f"{cost}_hi"])
            set_scale(ax, ys, "y", wide=30, bounds=ends, decide=all_y)
            if len(front) > 1:
                ax.plot(-front[:, 0], front[:, 1], color="black", linestyle="--", linewidth=0.7, zorder=3)
            marked[id(ax)] = marks
            _grid_lines(ax, "both")

        panels.append(Panel(draw, label_of(met), label_of(cost), data.point_title(pt), key=dict(pt),
                            settle=lambda ax: _separate(ax, marked.pop(id(ax)))))
    legend = policy_handles(data)
    if any(len(f) > 1 for f in fronts.values()):  # a front of one policy (it beats all others) draws no line
        legend.append((Line2D([], [], color="black", linestyle="--", linewidth=0.7), "Pareto front"))
    return FigureSpec("cost_deadlines", panels, columns={"column": 2, "page": 3},
                      row_height={"column": _scatter_row(panels), "page": 1.8}, legend=legend,
                      legend_title=f"large: mean and {data.interval_name} over runs; small: one run")


def _shift(ax: Any, artists: Any, points: float) -> None:
    """Move drawn artists ``points`` to the right on the page (after autoscaling saw their true data), so lines of
    several policies at the same x do not hide each other's intervals."""
    shift = ax.transData + ScaledTranslation(points / 72, 0, ax.figure.dpi_scale_trans)
    for a in artists.get_children() if hasattr(artists, "get_children") else artists:
        if isinstance(a, PathCollection):  # scatter markers: placed by their offsets, drawn in points
            a.set_offset_transform(shift)
        else:
            a.set_transform(shift)


def swept_numbers(data: PlotData) -> list[str]:
    """The numeric grid fields with more than one value (those a line against them makes sense for)."""
    s = data.summary
    return [f for f in data.fields if pd.api.types.is_numeric_dtype(s[f]) and s[f].nunique() > 1]


def cost_vs(data: PlotData, field: str, width: str, metric: str = "total_cost") -> FigureSpec:
    """Mean total cost against one numeric swept field, a line per policy with its intervals (dodged, not
    overlaid), one panel per value of the other grid fields."""
    agg = data.agg([metric])
    others = [f for f in data.fields if f != field]
    n = len(data.policies)
    panels = []
    for pt in data.points(others):

        def draw(ax: Any, pt: dict = pt) -> None:
            rows = data.select(agg, pt)
            xs_all: list[float] = []
            ys_all: list[float] = []
            ends: list[float] = []
            for i, pol in enumerate(data.policies):
                g = rows[rows["policy"] == pol].sort_values(field)
                if g.empty:
                    continue
                st = data.styles[pol]
                x = g[field].to_numpy(float)
                y = g[f"{metric}_mean"].to_numpy(float)
                lo, hi = g[f"{metric}_lo"].to_numpy(float), g[f"{metric}_hi"].to_numpy(float)
                bars = ax.errorbar(x, y, yerr=_errors(y, lo, hi), color=st.colour, marker=st.marker,
                                   markersize=MARKER_SIZE, markeredgecolor="black", markeredgewidth=0.3,
                                   linestyle=st.dashes, linewidth=0.9, elinewidth=0.7, capsize=0, zorder=3)
                _shift(ax, bars, (i - (n - 1) / 2) * 2.2)
                xs_all += list(x)
                ys_all += list(y[np.isfinite(y)])
                ends += list(lo) + list(hi)
            values = sorted(set(xs_all))
            ax.margins(x=0.1)
            set_scale(ax, values, "x", wide=20)
            set_scale(ax, ys_all, "y", bounds=ends, decide=agg[f"{metric}_mean"])
            ax.set_xticks(values, [field_value(field, v, unit=False) for v in values])
            if ax.get_xscale() != "linear":
                ax.xaxis.set_minor_locator(NullLocator())
            _grid_lines(ax)

        panels.append(Panel(draw, field_label(field), metric_label(metric), data.point_title(pt),
                            key={"field": field, **pt}))
    return FigureSpec(f"cost_vs_{field.split('.')[-1]}", panels, columns={"column": 2 if len(panels) > 1 else 1,
                                                                           "page": 3},
                      row_height={"column": 1.5, "page": 1.8}, legend=policy_handles(data, lines=True),
                      legend_title=f"mean and {data.interval_name} over runs")
