"""Figures of the per-job and per-decision records: distributions of completion time and lateness, decision time.

Times are shown in the unit that suits their range (s, min or h), converted only here, at the edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from experiments.plots.data import PlotData
from experiments.plots.layout import FigureSpec, Panel
from experiments.plots.style import log_ticks, set_scale, time_unit
from experiments.plots.summary_figs import MARKER_SIZE, policy_handles

__all__ = ["cdf", "decision_time"]


def _cdf_line(ax: Any, values: np.ndarray, st: Any) -> None:
    v = np.sort(values[np.isfinite(values)])
    if not len(v):
        return
    frac = np.arange(1, len(v) + 1) / len(v)
    ax.step(v, frac, where="post", color=st.colour, linestyle=st.dashes, linewidth=0.9)
    at = np.minimum(np.searchsorted(frac, np.linspace(0.1, 0.9, 5)), len(v) - 1)
    ax.plot(v[at], frac[at], linestyle="none", marker=st.marker, color=st.colour, markersize=MARKER_SIZE - 0.5,
            markeredgecolor="black", markeredgewidth=0.3)


def cdf(data: PlotData, width: str) -> FigureSpec:
    """Distribution of job completion time (end − submit) and of lateness (end − deadline; > 0 is late) per policy,
    every job of every run pooled (lateness only of jobs with a deadline, and not drawn if none has one)."""
    jobs = data.table("jobs")
    late = (jobs["end_time"] - jobs["deadline"]).to_numpy(float)
    jct = jobs["jct"].to_numpy(float)
    u_jct, n_jct = time_unit(float(np.nanmax(jct)) if len(jct) else 1.0)
    u_late, n_late = time_unit(float(np.nanmax(np.abs(late))) if np.isfinite(late).any() else 1.0)

    def draw_jct(ax: Any) -> None:
        for pol in data.policies:
            _cdf_line(ax, jct[(jobs["policy"] == pol).to_numpy()] / u_jct, data.styles[pol])
        set_scale(ax, jct / u_jct, "x", wide=50)
        ax.set_ylim(0, 1.02)

    def draw_late(ax: Any) -> None:
        ax.axvline(0, color="0.55", linewidth=0.6, linestyle=":")
        for pol in data.policies:
            _cdf_line(ax, late[(jobs["policy"] == pol).to_numpy()] / u_late, data.styles[pol])
        ax.set_ylim(0, 1.02)

    ylabel = "fraction of jobs"
    panels = [Panel(draw_jct, f"job completion time ({n_jct})", ylabel, key={"metric": "jct"})]
    if np.isfinite(late).any():
        panels.append(Panel(draw_late, f"end − deadline ({n_late}); > 0 is late", ylabel, key={"metric": "lateness"}))
    else:
        data.notes.append("cdf: drawn without lateness: no job has a deadline from its workload")
    for p in panels:
        p.draw = _with_grid(p.draw)
    return FigureSpec("cdf", panels, columns={"column": 1, "page": 2},
                      row_height={"column": 1.4, "page": 2.0}, legend=policy_handles(data, lines=True),
                      legend_title="all jobs of all runs pooled")


def _with_grid(draw: Any) -> Any:
    def wrapped(ax: Any) -> None:
        draw(ax)
        ax.grid(color="0.9", linewidth=0.4)
        ax.set_axisbelow(True)

    return wrapped


def _binned(x: np.ndarray, y: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Median and quartiles of ``y`` in bins of ``x`` (each distinct x when there are few, else about 14 bins)."""
    ux = np.unique(x)
    if len(ux) <= 20:
        centres, idx = ux, np.searchsorted(ux, x)
    else:
        lo, hi = ux[0], ux[-1]
        edges = np.geomspace(max(lo, 1.0), hi, 15) if log else np.linspace(lo, hi, 15)
        idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        centres = np.sqrt(edges[:-1] * edges[1:]) if log else (edges[:-1] + edges[1:]) / 2
    med, q1, q3, keep = [], [], [], []
    for i in range(len(centres)):
        v = y[idx == i]
        if len(v):
            keep.append(i)
            med.append(np.median(v))
            q1.append(np.percentile(v, 25))
            q3.append(np.percentile(v, 75))
    return centres[keep], np.array(med), np.array(q1), np.array(q3)


def decision_time(data: PlotData, width: str) -> FigureSpec:
    """Wall time of the decisions that had waiting jobs: per policy (median, interquartile range and 95th percentile,
    one row each, so policies whose decisions all take microseconds do not pile onto each other); then, over the
    decisions that started a job (those that placed something), the median against the jobs in the system and (for
    policies that build a model) the median and quartiles against its variables."""
    d = data.table("decisions")
    d = d.assign(jobs_in=(d["waiting"] + d["running"]).astype(float), ms=np.maximum(d["wall_time"] * 1000, 1e-3))
    d = d[d["waiting"] > 0]
    has_vars = "variables" in d.columns and (d["variables"].fillna(0) > 0).any()
    pols = [p for p in data.policies if (d["policy"] == p).any()]

    def per_policy(ax: Any) -> None:
        for row, pol in enumerate(pols):
            v = d.loc[d["policy"] == pol, "ms"].to_numpy(float)
            st = data.styles[pol]
            q1, med, q3, p95 = np.percentile(v, [25, 50, 75, 95])
            ax.plot([q3, p95], [row, row], color=st.colour, linewidth=0.6)
            ax.plot([q1, q3], [row, row], color=st.colour, linewidth=2.2, solid_capstyle="butt")
            ax.plot([med], [row], marker=st.marker, color=st.colour, markersize=MARKER_SIZE, markeredgecolor="black",
                    markeredgewidth=0.3, linestyle="none")
        ax.set_yticks(range(len(pols)), pols)
        ax.set_ylim(len(pols) - 0.5, -0.5)
        ax.set_xscale("log")
        log_ticks(ax.xaxis)
        ax.grid(axis="x", color="0.9", linewidth=0.4)
        ax.set_axisbelow(True)

    def panel_draw(xcol: str, log_x: bool, spread: bool) -> Any:
        def draw(ax: Any) -> None:
            placed = d[d["started"] > 0]
            for pol in pols:
                g = placed[(placed["policy"] == pol) & placed[xcol].notna() & (placed[xcol] > 0 if log_x else True)]
                if g.empty:
                    continue
                st = data.styles[pol]
                x, med, q1, q3 = _binned(g[xcol].to_numpy(float), g["ms"].to_numpy(float), log_x)
                ax.errorbar(x, med, yerr=[med - q1, q3 - med] if spread else None, color=st.colour,
                            marker=st.marker, markersize=MARKER_SIZE - 1, markeredgecolor="black",
                            markeredgewidth=0.3, linestyle=st.dashes, linewidth=0.8, elinewidth=0.6, capsize=0)
            ax.set_yscale("log")
            log_ticks(ax.yaxis)
            if log_x:
                ax.set_xscale("log")
                log_ticks(ax.xaxis)
            ax.grid(color="0.9", linewidth=0.4)
            ax.set_axisbelow(True)

        return draw

    label = "decision time (ms)"
    panels = [Panel(per_policy, label, "policy", key={"x": "policy"}),
              Panel(panel_draw("jobs_in", False, False), "jobs waiting + running", "median " + label,
                    key={"x": "jobs"})]
    if has_vars:
        panels.append(Panel(panel_draw("variables", True, True), "model variables", label, key={"x": "variables"}))
    rows = {"column": max(1.5, 0.5 + 0.12 * len(pols)), "page": 2.1}
    return FigureSpec("decision_time", panels, columns={"column": 1, "page": len(panels)}, row_height=rows,
                      legend=policy_handles(data, lines=True),
                      legend_title="decisions with jobs waiting: median, quartiles (thick), p95")
