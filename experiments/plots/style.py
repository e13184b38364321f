"""How every figure looks: printed widths and font sizes, one colour and marker per policy, scales and time units.

Figures are drawn at the width they are printed at (a paper's column or its full text width), so one font size
serves every label and nothing is scaled down later. Each policy kind keeps its colour and marker in every figure
and every run, whatever else is plotted next to it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType, RcKeyType

__all__ = ["WIDTHS", "FONT_SIZE", "DPI", "rc", "Style", "policy_styles", "set_scale", "time_unit", "short_number",
           "text_width"]

WIDTHS = {"column": 3.3, "page": 6.9}
"""Figure widths in inches: one column of a two-column paper, and the full text width."""

FONT_SIZE = {"column": 7.0, "page": 8.0}
"""One font size for every text of a figure (labels, ticks, legends, titles), in points."""

DPI = 200
"""PNG resolution (dots per inch at the printed size)."""


def rc(width: str) -> dict[RcKeyType, Any]:
    """Matplotlib settings for a figure printed ``width`` wide: TrueType (Type 42) fonts embedded in PDF, one font
    size, thin lines, no top and right spines."""
    fs = FONT_SIZE[width]
    return {
        "pdf.fonttype": 42,
        "ps.fonttype": 42,
        "font.family": "DejaVu Sans",
        "font.size": fs,
        "axes.titlesize": fs,
        "axes.labelsize": fs,
        "xtick.labelsize": fs,
        "ytick.labelsize": fs,
        "legend.fontsize": fs,
        "figure.titlesize": fs,
        "figure.labelsize": fs,
        "axes.linewidth": 0.6,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "xtick.minor.width": 0.4,
        "ytick.minor.width": 0.4,
        "xtick.major.size": 2.5,
        "ytick.major.size": 2.5,
        "xtick.minor.size": 1.5,
        "ytick.minor.size": 1.5,
        "lines.linewidth": 1.0,
        "lines.markersize": 4.0,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlepad": 3.0,
        "axes.labelpad": 2.0,
        "legend.frameon": False,
        "legend.handlelength": 1.6,
        "legend.handletextpad": 0.4,
        "legend.columnspacing": 1.0,
        "legend.labelspacing": 0.35,
        "legend.borderaxespad": 0.2,
        "savefig.bbox": None,
        "figure.dpi": 100,
        "hatch.linewidth": 0.5,
    }


@dataclass(frozen=True)
class Style:
    """A policy's look: colour and marker (plus a dash pattern, so lines differ in greyscale too)."""

    colour: str
    marker: str
    dashes: LineStyleType = "-"


# Fixed looks of the registered policy kinds and those planned (colour-blind-safe Okabe-Ito colours first).
KINDS: dict[str, Style] = {
    "fifo": Style("#0072B2", "s", "-"),
    "edf": Style("#E69F00", "^", "--"),
    "priority": Style("#009E73", "v", "-."),
    "ps": Style("#56B4E9", "<", ":"),
    "greedy": Style("#CC79A7", "D", "--"),
    "milp": Style("#D55E00", "o", "-"),
    "random_greedy": Style("#8C564B", "P", "-."),
    "local_search": Style("#4D4D4D", "X", ":"),
    "path_relinking": Style("#17BECF", "*", "--"),
    "fifo_perf": Style("#1F3A93", ">", "-."),
    "max_min_fairness_perf": Style("#9A9A00", "p", ":"),
}

_SPARE_COLOURS = ["#7F3C8D", "#11A579", "#3969AC", "#F2B701", "#E73F74", "#80BA5A", "#E68310", "#008695",
                  "#CF1C90", "#A5AA99", "#4B4B8F", "#B5651D"]
_SPARE_MARKERS = ["h", "d", "8", "H", "o", "s", "^", "D"]
_SPARE_DASHES: list[LineStyleType] = ["-", "--", "-.", ":"]


def stable_index(text: str, n: int) -> int:
    """An index in ``range(n)`` from ``text`` alone, the same in every process (unlike ``hash``)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % n


def policy_styles(labels: Sequence[str], kinds: Mapping[str, str] | None = None) -> dict[str, Style]:
    """A look per policy label. The first label of a known kind (``kinds[label]``, else the label itself) takes that
    kind's fixed look; other labels (a second parametrisation of a kind, a new policy) take a spare look chosen from
    the label's text, so it is the same in every figure and run; a clash inside one figure moves to the next spare."""
    kinds = kinds or {}
    out: dict[str, Style] = {}
    taken: set[tuple[str, str]] = set()
    for label in labels:
        kind = kinds.get(label, label)
        if kind in KINDS and (KINDS[kind].colour, KINDS[kind].marker) not in taken:
            out[label] = KINDS[kind]
            taken.add((KINDS[kind].colour, KINDS[kind].marker))
    n = len(_SPARE_COLOURS) * len(_SPARE_MARKERS)
    for label in labels:
        if label in out:
            continue
        kind = kinds.get(label, label)
        i = stable_index(label, n)
        for step in range(n):
            j = (i + step) % n
            colour, marker = _SPARE_COLOURS[j % len(_SPARE_COLOURS)], _SPARE_MARKERS[j // len(_SPARE_COLOURS)]
            if kind in KINDS:
                marker = KINDS[kind].marker  # a variant of a known kind keeps its marker
            if (colour, marker) not in taken:
                break
        taken.add((colour, marker))
        out[label] = Style(colour, marker, _SPARE_DASHES[stable_index(label + "/", len(_SPARE_DASHES))])
    return out


def text_width(text: str, width: str) -> float:
    """Width in inches of ``text`` set in the figure font at the size used for ``width``."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    if not text:
        return 0.0
    size = FONT_SIZE[width]
    return float(TextPath((0, 0), text, size=size, prop=FontProperties(family="DejaVu Sans")).get_extents().width) / 72


def short_number(v: float, _pos: Any = None) -> str:
    """A tick label: ``0.5``, ``20``, ``300``, ``4k``, ``25k``, ``1.5M``."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4 or (a >= 1e3 and v / 1e3 == int(v / 1e3)):
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def set_scale(ax: Any, values: Iterable[float], axis: str = "y", wide: float = 30.0,
              bounds: Iterable[float] = (), decide: Iterable[float] | None = None) -> str:
    """A log scale on ``axis`` when the positive values (``decide``, e.g. those of every panel of a figure, so its
    panels agree; else ``values``) span more than ``wide`` times (symlog if some are 0 or less), linear otherwise;
    on a log scale the limits take in ``values`` and the positive ``bounds`` (interval ends) with a margin, and ticks
    at 1, 2, 5 × 10^k when few decades are shown, labelled as plain short numbers; symlog from 0 when some value
    or interval end is 0 or less. Returns the scale chosen."""
    from matplotlib.ticker import LogLocator, SymmetricalLogLocator

    v = _finite(values)
    d = v if decide is None else _finite(decide)
    b = _finite(bounds)
    pos = v[v > 0]
    dpos = d[d > 0]
    target = ax.yaxis if axis == "y" else ax.xaxis
    set_lim = ax.set_ylim if axis == "y" else ax.set_xlim
    scale = "linear"
    if len(pos) and len(dpos) and dpos.max() / dpos.min() > wide:
        every = np.concatenate([pos, b[b > 0]])
        lo, hi = every.min(), every.max()
        decades = math.log10(hi / lo)
        subs = (1.0, 2.0, 5.0) if decades <= 2.2 else (1.0,)
        # symlog when a value or an interval end is 0 or less: a log axis cannot show it, and a bar to 0 would run
        # off its bottom
        if (v <= 0).any() or (d <= 0).any() or (b <= 0).any():
            thresh = 10.0 ** math.floor(math.log10(pos.min()))
            (ax.set_yscale if axis == "y" else ax.set_xscale)("symlog", linthresh=thresh, linscale=0.4)
            # decades only: 1, 2, 5 x 10^k crowd where the linear part meets the logarithmic one
            target.set_major_locator(SymmetricalLogLocator(linthresh=thresh, base=10, subs=(1.0,)))
            set_lim(0, hi * 1.5)
            scale = "symlog"
        else:
            (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
            target.set_major_locator(LogLocator(base=10, subs=subs))
            set_lim(lo / 1.5, hi * 1.5)
            scale = "log"
    if scale != "linear":
        log_ticks(target)
    return scale


def log_ticks(axis: Any) -> None:
    """Plain tick labels on a log axis (``0.01``, ``1``, ``100``, ``10k``), none on minor ticks."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(short_number))
    axis.set_minor_formatter(NullFormatter())


def _finite(values: Iterable[float]) -> np.ndarray:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    return v[np.isfinite(v)]


def time_unit(seconds: float) -> tuple[float, str]:
    """A readable unit for times up to ``seconds``: (seconds per unit, name): s, min or h."""
    if seconds < 300:
        return 1.0, "s"
    if seconds < 2 * 3600:
        return 60.0, "min"
    return 3600.0, "h"
