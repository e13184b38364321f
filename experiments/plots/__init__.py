"""Figures of a result folder, fit to print: PNG and PDF (TrueType fonts embedded) at a paper's column or page width.

Every figure is built as panels (``experiments.plots.layout``) from ``PlotData`` (a folder's tables, grid fields,
policy order, interval method), so it can be written whole (``plot_all``, ``capsim plot``) or one panel drawn onto
an axes the caller owns (``draw``, ``experiments.api``). Each policy keeps one colour and marker everywhere
(``experiments.plots.style``); axis labels come from the metric and grid-field declarations.

| name | what it shows |
|---|---|
| cost_breakdown | total, VM and tardiness cost per policy and grid point (mean and interval), each on its own scale |
| tardiness_late | tardiness cost and the share of jobs finishing late |
| pareto | VM cost against tardiness cost, one panel per grid point, with the Pareto front of the means |
| cdf | distributions of job completion time and of lateness per policy |
| cost_vs | total cost against each numeric swept field, one line per policy |
| decision_time | wall time of the decisions per policy and against the problem size |
| timeline | one run: each slot's VMs, one row per GPU (a band per slot if rows get too thin), and the jobs |
| metric | any declared metric per policy and grid point (``--metrics``) |
| cost_deadlines | total cost against the share of deadlines met, one panel per grid point (on request: ``--only``) |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.plots.data import PlotData
from experiments.plots.job_figs import cdf, decision_time
from experiments.plots.layout import FigureSpec, draw_on, render, save
from experiments.plots.style import DPI, WIDTHS, policy_styles
from experiments.plots.summary_figs import (
    cost_breakdown,
    cost_deadlines,
    cost_vs,
    metric_figure,
    pareto,
    pareto_front,
    swept_numbers,
    tardiness_late,
)
from experiments.plots.timeline import default_run, gpu_blocks, timeline
from sim.model import CapsimError

__all__ = ["FIGURES", "ON_REQUEST", "WIDTHS", "PlotData", "specs", "figures", "render", "draw", "plot_all",
           "policy_styles", "pareto_front", "gpu_blocks", "default_run"]

FIGURES = ("cost_breakdown", "tardiness_late", "pareto", "cdf", "cost_vs", "decision_time", "timeline")
"""The figures ``capsim plot`` draws by default (``metric`` is drawn per metric asked for)."""
ON_REQUEST = ("cost_deadlines",)
"""Figures drawn only when named (``capsim plot --only``): those meant for one kind of experiment."""

def _drawn(*found: FigureSpec | None) -> list[FigureSpec]:
    """The figures built (one whose metrics apply to no run is None, and noted in ``PlotData.notes``)."""
    return [f for f in found if f is not None]


_BUILD: dict[str, Callable[..., list[FigureSpec]]] = {
    "cost_breakdown": lambda d, w, **_: _drawn(cost_breakdown(d, w)),
    "tardiness_late": lambda d, w, **_: _drawn(tardiness_late(d, w)),
    "pareto": lambda d, w, **_: _drawn(pareto(d, w)),
    "cdf": lambda d, w, **_: [cdf(d, w)] if not d.table("jobs").empty else [],
    "cost_vs": lambda d, w, **_: [cost_vs(d, f, w) for f in swept_numbers(d)],
    "decision_time": lambda d, w, **_: [decision_time(d, w)] if not d.table("decisions").empty else [],
    "timeline": lambda d, w, run_id=None, **_: [timeline(d, w, run_id)],
    "cost_deadlines": lambda d, w, **_: _drawn(cost_deadlines(d, w)),
    "metric": lambda d, w, metrics=(), **_: _drawn(*(metric_figure(d, m, w) for m in metrics)),
}


def specs(name: str, data: PlotData, width: str = "column", run_id: str | None = None,
          metrics: Sequence[str] = ()) -> list[FigureSpec]:
    """The figure(s) called ``name`` (``cost_vs`` gives one per numeric swept field, ``metric`` one per metric)."""
    if name not in _BUILD:
        from sim.registry import did_you_mean

        raise CapsimError(f"unknown figure {name!r}{did_you_mean(name, _BUILD)}; known: {', '.join(_BUILD)}")
    if metrics:
        from experiments.results.report import check_metric_names

        check_metric_names(metrics, data.table("summary"))
    if width not in WIDTHS:
        sizes = ", ".join(f"{k} ({v} in)" for k, v in WIDTHS.items())
        raise CapsimError(f"width {width!r}: expected one of {sizes}")
    return _BUILD[name](data, width, run_id=run_id, metrics=metrics)


def figures(name: str, data: PlotData, width: str = "column", **options: Any) -> list[Any]:
    """The matplotlib Figures of ``name`` (see ``specs``), each exactly ``WIDTHS[width]`` inches wide."""
    return [render(s, width) for s in specs(name, data, width, **options)]


def draw(name: str, data: PlotData, ax: Any, where: Mapping[str, Any] | None = None, width: str = "column",
         legend: bool = True, **options: Any) -> Any:
    """Draw one panel of figure ``name`` onto ``ax``: ``where`` picks it by its key (a grid point's fields, or
    ``metric``/``field``/``x``) when the figure has several; returns ``ax``."""
    found = specs(name, data, width, **options)
    if not found:
        why = "; ".join(dict.fromkeys(data.notes)) or "nothing to draw from these results"
        raise CapsimError(f"figure {name!r}: {why}")
    merged = FigureSpec(name, [p for s in found for p in s.panels], legend=found[0].legend,
                        legend_title=found[0].legend_title)
    return draw_on(merged, ax, where, legend)


def plot_all(tables: Mapping[str, pd.DataFrame], fields: Sequence[str], policies: Sequence[str], out: Path,
             run_id: str | None = None, only: Sequence[str] | None = None, metrics: Sequence[str] = (),
             width: str = "column", method: str = "t", dpi: int = DPI,
             note: Callable[[str], None] | None = None) -> list[Path]:
    """Write the figures of a result folder (all of ``FIGURES``, or those in ``only``) into ``out`` as PNG and PDF,
    plus one ``metric_<name>`` figure per metric in ``metrics``; returns the files written. ``note`` is told what
    was left out (metrics empty for every run)."""
    data = PlotData(tables, fields, policies, method)
    written: list[Path] = []
    names = [n for n in FIGURES + ON_REQUEST if n in set(only or FIGURES)] + (["metric"] if metrics else [])
    for name in names:
        for spec in specs(name, data, width, run_id=run_id, metrics=metrics):
            written += save(render(spec, width), out, spec.name, width, dpi)
    if note is not None:
        for line in dict.fromkeys(data.notes):
            note(line)
    return written

