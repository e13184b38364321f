"""A figure as a list of panels: laid out at a printed width, or one panel drawn onto an axes the caller owns.

Each figure builder returns a ``FigureSpec``: panels (each draws its data onto one axes and names its axis labels),
how many columns they take at each width, a row height and a shared legend. ``render`` makes the matplotlib figure
(constrained layout, so labels and legend never overlap and the figure is exactly the printed width); ``draw_on``
draws one panel, chosen by its key, onto a given axes, for notebooks and composite figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from experiments.plots.style import DPI, FONT_SIZE, WIDTHS, rc, text_width
from experiments.results.files import atomic_write
from experiments.results.labels import same_value
from sim.model import CapsimError

__all__ = ["Panel", "FigureSpec", "render", "draw_on", "save", "same_value"]


@dataclass
class Panel:
    """One axes of a figure: ``draw(ax)`` plots the data and sets scales; labels and title are set by the layout.
    ``key`` says what the panel shows (a metric, a grid point) so a caller can pick it."""

    draw: Callable[[Any], None]
    xlabel: str = ""
    ylabel: str = ""
    title: str = ""
    key: dict[str, Any] = field(default_factory=dict)
    settle: Callable[[Any], None] | None = None
    """Run once the figure is laid out (the axes' final size known): what depends on distances on the page."""


@dataclass
class FigureSpec:
    """A figure: its panels in reading order, columns per width, row height (inches) per width, a legend shared by
    every panel (handles and labels, with an optional title), and whether panels share the x axis of their column."""

    name: str
    panels: list[Panel]
    columns: Mapping[str, int] = field(default_factory=lambda: {"column": 1, "page": 2})
    row_height: Mapping[str, float] = field(default_factory=lambda: {"column": 1.5, "page": 1.9})
    legend: list[tuple[Any, str]] = field(default_factory=list)
    legend_title: str = ""
    legend_below: bool = False
    sharex: bool = False
    fixed_height: Mapping[str, float] | None = None


def _legend_columns(labels: list[str], width: str, title: str = "") -> int:
    """The most legend columns whose estimated width fits the figure (matplotlib fills a legend column by column;
    each column is as wide as its longest label)."""
    em = FONT_SIZE[width] / 72.0
    room = WIDTHS[width] * 0.97
    sizes = [text_width(s, width) for s in labels]
    for ncol in range(len(labels), 1, -1):
        rows = math.ceil(len(labels) / ncol)
        cols = [sizes[i:i + rows] for i in range(0, len(sizes), rows)]
        if len(cols) != ncol:
            continue
        need = sum(max(c) + 2.4 * em for c in cols) + (ncol - 1) * em
        if need <= room:
            return ncol
    return 1


def _shared_labels(spec: FigureSpec, grid: list[list[int | None]]) -> tuple[set[int], set[int]]:
    """Panels whose x label is left to the panel below (same label) and whose y label is left to the panel on the
    left (same label): one label per column and per row where they agree."""
    skip_x, skip_y = set(), set()
    for r, row in enumerate(grid):
        for c, i in enumerate(row):
            if i is None:
                continue
            below = grid[r + 1][c] if r + 1 < len(grid) else None
            if below is not None and spec.panels[below].xlabel == spec.panels[i].xlabel and spec.sharex:
                skip_x.add(i)
            left = row[c - 1] if c > 0 else None
            if left is not None and spec.panels[left].ylabel == spec.panels[i].ylabel:
                skip_y.add(i)
    return skip_x, skip_y


def _fit_title(title: str, room: float, width: str) -> str:
    """A panel title in lines of at most ``room`` inches: its comma-separated parts packed onto as few lines as fit,
    a part wider than ``room`` on its own wrapped between words."""
    if text_width(title, width) <= room:
        return title
    parts = title.split(", ")
    parts = [p + ("," if k < len(parts) - 1 else "") for k, p in enumerate(parts)]
    lines: list[str] = []
    for part in parts:
        joined = f"{lines[-1]} {part}" if lines else part
        if lines and text_width(joined, width) <= room:
            lines[-1] = joined
            continue
        line = ""
        for word in part.split(" "):
            trial = f"{line} {word}" if line else word
            if line and text_width(trial, width) > room:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
    return "\n".join(lines)


def render(spec: FigureSpec, width: str = "column") -> Figure:
    """The matplotlib Figure of ``spec``, exactly ``WIDTHS[width]`` inches wide (not registered with pyplot: nothing
    to close, no display needed)."""
    if width not in WIDTHS:
        raise CapsimError(f"--width {width!r}: expected one of {', '.join(WIDTHS)}")
    n = len(spec.panels)
    ncols = max(1, min(spec.columns[width], n))
    nrows = math.ceil(n / ncols)
    with rc_context(rc(width)):
        labels = [lbl for _, lbl in spec.legend]
        leg_cols = _legend_columns(labels, width) if labels else 1
        leg_rows = math.ceil(len(labels) / leg_cols) if labels else 0
        legend_h = (leg_rows + bool(spec.legend_title)) * FONT_SIZE[width] * 1.35 / 72 + (0.08 if labels else 0)
        height = spec.fixed_height[width] if spec.fixed_height else spec.row_height[width] * nrows + legend_h + 0.1
        engine = ConstrainedLayoutEngine(w_pad=0.04, h_pad=0.03, hspace=0.04, wspace=0.03)
        fig = Figure(figsize=(WIDTHS[width], height), layout=engine)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharex="col" if spec.sharex else False)
        grid = [[r * ncols + c if r * ncols + c < n else None for c in range(ncols)] for r in range(nrows)]
        skip_x, skip_y = _shared_labels(spec, grid)
        one_x = ncols > 1 and spec.sharex and len({p.xlabel for p in spec.panels}) == 1
        if one_x:
            fig.supxlabel(spec.panels[0].xlabel)
            skip_x = set(range(n))
        for i, panel in enumerate(spec.panels):
            ax = axes[i // ncols][i % ncols]
            panel.draw(ax)
            ax.set_xlabel("" if i in skip_x else panel.xlabel)
            ax.set_ylabel("" if i in skip_y else panel.ylabel)
            if panel.title:
                ax.set_title(_fit_title(panel.title, WIDTHS[width] / ncols - 0.3, width))
            if i in skip_x and not one_x:
                ax.tick_params(labelbottom=False)
        for j in range(n, nrows * ncols):
            axes[j // ncols][j % ncols].set_visible(False)
        if labels:
            loc: Literal["outside lower center", "outside upper center"] = (
                "outside lower center" if spec.legend_below else "outside upper center")
            fig.legend([h for h, _ in spec.legend], labels, loc=loc, ncol=leg_cols,
                       title=spec.legend_title or None, title_fontsize=FONT_SIZE[width])
        _keep_titles_inside(fig, [(axes[i // ncols][i % ncols], p.title) for i, p in enumerate(spec.panels)
                                  if p.title], width)
        if any(p.settle for p in spec.panels):
            fig.draw_without_rendering()
            for i, p in enumerate(spec.panels):
                if p.settle:
                    p.settle(axes[i // ncols][i % ncols])
    return fig


def _keep_titles_inside(fig: Figure, titled: Sequence[tuple[Any, str]], width: str) -> None:
    """Wrap again, narrower, any panel title that the laid-out figure shows past its left or right edge (a title is
    centred over its axes, so on an outer column it may only be as wide as the axes and the margin allow)."""
    if not titled:
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    for ax, title in titled:
        box = ax.title.get_window_extent(renderer)
        over = max(0.0, fig.bbox.x0 - box.x0, box.x1 - fig.bbox.x1)
        if over > 0:
            room = max(0.5, (box.width - 2 * over) / fig.dpi - 0.05)
            ax.set_title(_fit_title(title, room, width))


def draw_on(spec: FigureSpec, ax: Any, select: Mapping[str, Any] | None = None, legend: bool = True) -> Any:
    """Draw the one panel of ``spec`` whose key matches ``select`` onto ``ax`` (labels, title and, if ``legend``,
    the legend inside it); a clear error when none or several match."""
    select = dict(select or {})
    unknown = [k for k in select if not any(k in p.key for p in spec.panels)]
    if unknown:
        keys = sorted({k for p in spec.panels for k in p.key})
        raise CapsimError(f"figure {spec.name!r}: its panels have no {unknown[0]!r}; they are chosen by "
                          f"{', '.join(keys) or '(nothing: it has one panel)'}")
    hits = [p for p in spec.panels if all(k in p.key and same_value(p.key[k], v) for k, v in select.items())]
    if len(hits) != 1:
        choices = "; ".join(", ".join(f"{k}={v!r}" for k, v in p.key.items()) for p in spec.panels)
        what = "no panel matches" if not hits else f"{len(hits)} panels match"
        raise CapsimError(f"figure {spec.name!r}: {what} {select or '(no selection)'}; pick one with "
                          f"where= among: {choices}")
    panel = hits[0]
    panel.draw(ax)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    if panel.title:
        ax.set_title(panel.title)
    if legend and spec.legend:
        ax.legend([h for h, _ in spec.legend], [lbl for _, lbl in spec.legend], title=spec.legend_title or None,
                  fontsize="small", title_fontsize="small")
    if panel.settle:
        panel.settle(ax)
    return ax


def save(fig: Figure, out: Path, name: str, width: str, dpi: int = DPI,
         formats: tuple[str, ...] = ("png", "pdf")) -> list[Path]:
    """Write ``fig`` as ``out/name.png`` and ``out/name.pdf`` (fonts embedded as TrueType, no creation date, so the
    same figure gives the same PDF)."""
    out.mkdir(parents=True, exist_ok=True)
    meta = {"png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None}}
    paths = []
    with rc_context(rc(width)):
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            atomic_write(path, lambda tmp, fmt=fmt: fig.savefig(tmp, dpi=dpi, format=fmt, metadata=meta[fmt]))
            paths.append(path)
    return paths
