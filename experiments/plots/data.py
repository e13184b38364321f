"""What the figures read: a result folder's tables with its grid fields, policy order, policy looks and intervals.

``PlotData`` aggregates the summary per grid point and policy (``experiments.results.report.aggregate``: mean and 95%
interval) and adds the one derived quantity the figures show, late jobs as a share of the run's jobs, so grid points
with different job counts compare. ``GridAxis`` places grid points along an x axis: the last grid field's values as
ticks, grouped under the earlier fields' values.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from experiments.plots.style import WIDTHS, Style, policy_styles, text_width
from experiments.results.intervals import SHORT
from experiments.results.labels import MISSING, field_equals, field_label, field_value, is_missing, same_value
from experiments.results.report import aggregate
from experiments.results.tables import metric_label
from sim.model import CapsimError

__all__ = ["PlotData", "GridAxis", "DERIVED", "label_of"]

DERIVED: dict[str, tuple[str, float, float]] = {"late_share": ("late jobs (% of jobs)", 0.0, 100.0)}
"""Quantities the figures derive from declared metrics: name -> (axis label, domain low, domain high)."""


EMPTY_WHY = "e.g. a deadline metric when no job has a deadline from its workload; `capsim report --metrics list`"
"""Why a metric can be empty for every run, in the figures' notes."""


def label_of(metric: str) -> str:
    """Axis label of a declared metric (``sim.metrics``) or a derived one."""
    return DERIVED[metric][0] if metric in DERIVED else metric_label(metric)


def _kinds(summary: pd.DataFrame) -> dict[str, str]:
    """Policy label -> registered kind, read from the runs' stored configuration (the label where unknown)."""
    out: dict[str, str] = {}
    if "config" not in summary.columns:
        return out
    for label, cfg in zip(summary["policy"], summary["config"]):
        if label in out or not isinstance(cfg, str):
            continue
        try:
            out[label] = json.loads(cfg)["policy"]["kind"]
        except (ValueError, KeyError, TypeError):
            pass
    return out


@dataclass
class PlotData:
    """A result folder's tables (``summary``, ``jobs``, ``nodes``, ``decisions``, ``segments``), its grid fields and
    policy order, and the interval ``method`` of every error bar. ``notes`` collects what the figures left out
    (metrics empty for every run), for the caller to tell."""

    tables: Mapping[str, pd.DataFrame]
    fields: Sequence[str] = ()
    policies: Sequence[str] = ()
    method: str = "t"
    notes: list[str] = field(default_factory=list)
    _agg: dict[tuple[str, ...], pd.DataFrame] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        s = self.tables["summary"]
        if s.empty:
            raise CapsimError("no finished runs to plot")
        self.fields = [f for f in self.fields if f in s.columns]
        seen = list(dict.fromkeys(s["policy"]))
        self.policies = [p for p in self.policies if p in seen] + [p for p in seen if p not in self.policies]

    @cached_property
    def summary(self) -> pd.DataFrame:
        s = self.tables["summary"].copy()
        if {"late_jobs", "jobs"} <= set(s.columns):
            s["late_share"] = 100.0 * s["late_jobs"] / s["jobs"].where(s["jobs"] > 0)
        return s

    @cached_property
    def styles(self) -> dict[str, Style]:
        return policy_styles(self.policies, _kinds(self.tables["summary"]))

    def table(self, name: str) -> pd.DataFrame:
        t = self.tables.get(name)
        return t if t is not None else pd.DataFrame()

    def applicable(self, figure: str, metrics: Sequence[str], every: bool = False) -> list[str]:
        """Those of ``metrics`` some run has a value of (none unless all have, with ``every``: a figure that needs
        them all); a note names ``figure`` and the others, which apply to no run here (a deadline metric of runs
        without deadlines) and are left out rather than drawn as zeros."""
        s = self.summary
        shown = [m for m in metrics if m not in s.columns or s[m].notna().any()]
        empty = [m for m in metrics if m not in shown]
        if empty and every:
            shown = []
        if empty:
            what = "not drawn" if not shown else "drawn without it" if len(empty) == 1 else "drawn without them"
            self.notes.append(f"{figure}: {what}: {', '.join(empty)} empty for every run ({EMPTY_WHY})")
        return shown

    def agg(self, metrics: Sequence[str]) -> pd.DataFrame:
        """Mean and interval per grid point and policy of ``metrics`` (cached)."""
        key = tuple(metrics)
        if key not in self._agg:
            domains = {m: (lo, hi) for m, (_, lo, hi) in DERIVED.items()}
            self._agg[key] = aggregate(self.summary, self.fields, list(metrics), self.policies, self.method, domains)
        return self._agg[key]

    @property
    def interval_name(self) -> str:
        return SHORT[self.method]

    def points(self, fields: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The distinct values of ``fields`` (default: every grid field) in the order of the summary."""
        fields = list(self.fields if fields is None else fields)
        if not fields:
            return [{}]
        combos = self.summary[fields].drop_duplicates()
        return [dict(zip(fields, row)) for row in combos.itertuples(index=False)]

    def point_title(self, point: Mapping[str, Any]) -> str:
        return ", ".join(field_equals(k, v) for k, v in point.items())

    def select(self, frame: pd.DataFrame, point: Mapping[str, Any]) -> pd.DataFrame:
        """The rows of ``frame`` at a grid point."""
        mask = np.ones(len(frame), dtype=bool)
        for k, v in point.items():
            col = frame[k]
            mask &= (col.isna() if is_missing(v) else (col == v)).to_numpy()
        return frame[mask]


class GridAxis:
    """Grid points along x: the last grid field's values as ticks, grouped (a gap, a group label over the top panel)
    by the values of the earlier fields; with no grid, the policies themselves are the ticks. ``share`` is the
    fraction of the figure's width one panel takes, to decide whether group labels fit in full (``node slots = 5``)
    or shortened (``5``, the field then named in the axis label) and whether tick labels must tilt."""

    def __init__(self, data: PlotData, width: str, share: float = 1.0):
        self.fields = list(data.fields)
        self.inner = self.fields[-1] if self.fields else None
        self.outer = self.fields[:-1]
        self.points = data.points() if self.fields else [{"policy": p} for p in data.policies]
        self.width = width
        self.x: list[float] = []
        self.groups: list[tuple[Any, ...]] = []
        pos = 0.0
        for pt in self.points:
            g = tuple(MISSING if is_missing(pt[f]) else pt[f] for f in self.outer)  # NaN == NaN for grouping
            if self.groups and g != self.groups[-1]:
                pos += 0.6
            self.groups.append(g)
            self.x.append(pos)
            pos += 1.0
        self.starts = [i for i, g in enumerate(self.groups) if i == 0 or g != self.groups[i - 1]]
        ends = self.starts[1:] + [len(self.groups)]
        self.centres = [(self.x[a] + self.x[b - 1]) / 2 for a, b in zip(self.starts, ends)]
        full = [", ".join(field_equals(f, v) for f, v in zip(self.outer, self.groups[a])) for a in self.starts]
        span = share * 0.85 * WIDTHS[width] * min(b - a + 0.4 for a, b in zip(self.starts, ends)) / (self.x[-1] + 1.2)
        self.spacing = share * 0.8 * WIDTHS[width] / (self.x[-1] + 1.2)
        """Inches between neighbouring ticks (estimated)."""
        self.fits = not self.outer or max(text_width(t, width) for t in full) < span
        self.group_texts = full if self.fits else [
            ", ".join(field_value(f, v) for f, v in zip(self.outer, self.groups[a])) for a in self.starts]

    @property
    def dodge(self) -> bool:
        """Whether policies sit side by side at each tick (not when the ticks are the policies)."""
        return bool(self.fields)

    def position(self, row: Mapping[Hashable, Any]) -> float:
        keys = self.fields or ["policy"]
        for x, pt in zip(self.x, self.points):
            if all(same_value(row[k], pt[k]) for k in keys):
                return x
        raise KeyError(dict(row))

    @property
    def xlabel(self) -> str:
        """The tick field's label, and the group fields' when the group labels (over the top panel) are shortened."""
        label = field_label(self.inner) if self.inner else "policy"
        if self.outer and not self.fits:
            label += "; groups: " + ", ".join(field_label(f) for f in self.outer)
        return label

    def decorate(self, ax: Any) -> None:
        """Ticks, tick labels, group separators and group labels."""
        if self.inner:
            labels = [field_value(self.inner, pt[self.inner], unit=False) for pt in self.points]
        else:
            labels = [str(pt["policy"]) for pt in self.points]
        tilt = max(text_width(t, self.width) for t in labels) > 0.85 * self.spacing
        ax.set_xticks(self.x, labels, rotation=40 if tilt else 0, ha="right" if tilt else "center",
                      rotation_mode="anchor")
        ax.set_xlim(self.x[0] - 0.6, self.x[-1] + 0.6)
        ax.tick_params(axis="x", length=0)
        if not self.outer:
            return
        for a in self.starts[1:]:
            ax.axvline(self.x[a] - 0.8, color="0.8", linewidth=0.5, zorder=0)
        spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
        if spec is None or spec.is_first_row():
            for x, text in zip(self.centres, self.group_texts):
                ax.text(x, 1.0, text, transform=ax.get_xaxis_transform(), ha="center", va="bottom")
