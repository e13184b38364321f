"""The timeline of one run: each node slot's VMs over time, one row per GPU, and which job held which GPUs when.

The records say how many GPUs each stretch of a job held on a slot (the ``segments`` table), not which ones; the
figure gives each stretch a block of GPU rows, first fit, keeping a job on the same rows for the whole stretch, so
jobs that share a VM sit side by side instead of on top of each other. Idle GPUs show the VM's colour.

When a GPU row would print thinner than ``MIN_ROW_PT`` (many slots of many GPUs at column width: 200 jobs on 8-GPU
VMs gave rows of 2 points), the figure switches to a summary: one band per slot, its VMs' colours as background and
the share of its GPUs held by jobs on time and by late jobs stacked over time; job ids are then not shown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch, Rectangle

from experiments.plots.data import PlotData
from experiments.plots.layout import FigureSpec, Panel
from experiments.plots.style import FONT_SIZE, WIDTHS, stable_index, time_unit
from sim.model import CapsimError

__all__ = ["timeline", "default_run", "gpu_blocks"]

ON_TIME, LATE = "#2F5F98", "#C23B22"
_VM_COLOURS = ["#8DD3C7", "#E6AB02", "#E78AC3", "#B3DE69", "#F4A582", "#BEBADA", "#A6761D", "#1B9E77", "#FFFFB3",
               "#FFED6F"]
"""VM-type fills: pairwise at least 26 apart in CIELAB (ΔE) and at least 25 from the job colours and white, so each
type is told apart from the others, from jobs and from the page."""
EPS = 1e-6
MIN_ROW_PT = 4.0
"""The thinnest GPU row the per-GPU view draws; below it, the summary view."""
BAND = 0.82
"""Height of a slot's band in the summary view, of one row (the rest is the gap to the next)."""


def default_run(data: PlotData, point: dict[str, Any] | None = None) -> str:
    """The run a timeline shows unless told: at the first grid point (or ``point``), the first seed of the policy
    with the lowest mean total cost (the most interesting schedule to look at, and the same choice every time)."""
    s = data.summary
    first = data.select(s, data.points()[0] if point is None else point)
    if first.empty:
        raise CapsimError(f"no finished run at {data.point_title(point or {})}")
    best = first.groupby("policy", sort=False)["total_cost"].mean().idxmin()
    return str(first[first["policy"] == best]["run_id"].iloc[0])


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Sorted GPU indices as (first, count) runs of consecutive indices."""
    out: list[tuple[int, int]] = []
    for g in sorted(values):
        if out and out[-1][0] + out[-1][1] == g:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((g, 1))
    return out


def gpu_blocks(segments: pd.DataFrame, vms: pd.DataFrame) -> list[tuple[int, int, int]]:
    """For the stretches of one slot (``job_id``, ``gpus``, ``start_time``, ``end_time``) and its VM intervals
    (``start_time``, ``stop_time``, ``gpus``): GPU rows as (stretch row position, first GPU, count), first fit at each
    start, a contiguous block where one is free."""
    start, stop = segments["start_time"].to_numpy(dtype=float), segments["end_time"].to_numpy(dtype=float)
    gpus, job = segments["gpus"].to_numpy(dtype=np.int64), segments["job_id"].to_numpy()
    order = sorted(range(len(segments)), key=lambda i: (start[i], -gpus[i], job[i]))
    vm_list: list[tuple[float, float, int]] = list(zip(vms["start_time"].to_numpy(dtype=float).tolist(),
                                                       vms["stop_time"].to_numpy(dtype=float).tolist(),
                                                       vms["gpus"].to_numpy(dtype=np.int64).tolist()))
    free: dict[int, np.ndarray] = {}
    out: list[tuple[int, int, int]] = []
    for i in order:
        t0, t1 = float(start[i]), float(stop[i])
        k = int(gpus[i])
        mid = (t0 + t1) / 2  # a stretch starting the instant one VM stops and the next starts is the next one's
        host = next((v for v, (a, b, _) in enumerate(vm_list) if a - EPS <= mid < b + EPS), None)
        key = -1 if host is None else host
        size = max(k, vm_list[host][2] if host is not None else k)
        at = free.get(key, np.full(0, -np.inf))
        if len(at) < size:
            at = free[key] = np.concatenate([at, np.full(size - len(at), -np.inf)])
        idle = [g for g in range(len(at)) if at[g] <= t0 + EPS]
        pick = next((list(range(g, g + k)) for g in idle if all(h in idle for h in range(g, g + k))), None)
        if pick is None:
            pick = idle[:k] if len(idle) >= k else list(np.argsort(at, kind="stable")[:k])
        for g in pick:
            at[g] = t1
        out += [(i, a, n) for a, n in _runs([int(g) for g in pick])]
    return out


def _vm_colours(types: list[str]) -> dict[str, str]:
    """A pastel per VM type, chosen from its name (the same in every figure), distinct within the figure."""
    out: dict[str, str] = {}
    for t in sorted(types):
        j = stable_index(t, len(_VM_COLOURS))
        while _VM_COLOURS[j] in out.values() and len(out) < len(_VM_COLOURS):
            j = (j + 1) % len(_VM_COLOURS)
        out[t] = _VM_COLOURS[j]
    return out


def busy_steps(segs: pd.DataFrame, late: dict[Any, bool]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPUs held over time by the stretches ``segs`` of one slot: event times, then the GPUs held by jobs on time
    and by late jobs from each time to the next."""
    t0, t1 = segs["start_time"].to_numpy(float), segs["end_time"].to_numpy(float)
    g = segs["gpus"].to_numpy(float)
    is_late = np.array([bool(late.get(j)) for j in segs["job_id"]], dtype=bool)
    times = np.unique(np.concatenate([t0, t1]))
    on, lt = np.zeros(len(times)), np.zeros(len(times))
    for a, b, k, bad in zip(t0, t1, g, is_late):
        span = (times >= a - EPS) & (times < b - EPS)
        (lt if bad else on)[span] += k
    return times, on, lt


def _summary_draw(vm_rows: list, segs: pd.DataFrame, slots: list[int], band: dict[int, int], late: dict[Any, bool],
                  colours: dict[str, str], unit: float, end: float) -> Any:
    """Draw one band per slot: VM colours as background, the shares of its GPUs held by jobs on time and late."""
    def draw(ax: Any) -> None:
        row = {n: i + (1 - BAND) / 2 for i, n in enumerate(slots)}  # each band with a gap to the next
        for node, vm_type, _gpus, t0, ready, t1 in vm_rows:
            ax.add_patch(Rectangle((t0 / unit, row[node]), (t1 - t0) / unit, BAND, facecolor=colours[vm_type],
                                   edgecolor="none", zorder=1))
            if ready > t0 + EPS:
                ax.add_patch(Rectangle((t0 / unit, row[node]), (ready - t0) / unit, BAND, facecolor="white",
                                       edgecolor="0.45", hatch="////", linewidth=0.3, zorder=2))
        for n in slots:
            g = segs[segs["node"] == n]
            if g.empty:
                continue
            times, on, lt = busy_steps(g, late)
            base, scale = row[n] + BAND, BAND / band[n]
            x = times / unit
            ax.fill_between(x, base, base - on * scale, step="post", color=ON_TIME, linewidth=0, zorder=3)
            ax.fill_between(x, base - on * scale, base - (on + lt) * scale, step="post", color=LATE, linewidth=0,
                            zorder=3)
        ax.set_xlim(0, end / unit * 1.01)
        ax.set_ylim(len(slots) + 0.1, -0.1)
        step = max(1, len(slots) // 12)
        ax.set_yticks([row[n] + BAND / 2 for n in slots[::step]], [f"slot {n}" for n in slots[::step]])
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)

    return draw


def _job_keys(deadlines: pd.Series, summary: bool) -> list[tuple[Any, str]]:
    """The legend of the jobs' colours: on time and late, or plain jobs when none has a deadline (a job without one
    is drawn as on time)."""
    if len(deadlines) and deadlines.isna().all():
        return [(Patch(facecolor=ON_TIME), "GPUs of jobs" if summary else "job (no deadline)")]
    on_time = "GPUs of jobs on time" if summary else "job on time"
    return [(Patch(facecolor=ON_TIME), on_time + (" or without deadline" if deadlines.isna().any() else "")),
            (Patch(facecolor=LATE), "GPUs of late jobs" if summary else "job late")]


def timeline(data: PlotData, width: str, run_id: str | None = None) -> FigureSpec:
    """One run: per node slot a band of GPU rows; VMs as coloured backgrounds (boot time hatched), each stretch of a
    job as a block over the GPUs it held, blue if the job finished on time, red if late; job ids where they fit."""
    s = data.summary
    run_id = run_id or default_run(data)
    if run_id not in set(s["run_id"]):
        raise CapsimError(f"no finished run {run_id!r} to draw a timeline of")
    row = s[s["run_id"] == run_id].iloc[0]
    nodes = data.table("nodes")
    nodes = nodes[nodes["run_id"] == run_id]
    jobs = data.table("jobs")
    jobs = jobs[jobs["run_id"] == run_id]
    segs = data.table("segments")
    segs = segs[segs["run_id"] == run_id] if not segs.empty else jobs[["job_id", "node", "vm_type", "gpus",
                                                                       "start_time", "end_time"]].assign(done=1.0)
    late = dict(zip(jobs["job_id"], jobs["end_time"] > jobs["deadline"] + EPS))
    slots = sorted(set(nodes["node"]) | set(segs["node"]))
    band = {n: max([1] + list(nodes[nodes["node"] == n]["gpus"]) + list(segs[segs["node"] == n]["gpus"]))
            for n in slots}
    gap = 0.9
    top, y = {}, 0.0
    for n in slots:
        top[n] = y
        y += band[n] + gap
    rows_total = y - gap
    end = float(max(nodes["stop_time"].max() if len(nodes) else 0, segs["end_time"].max() if len(segs) else 0, 1))
    unit, uname = time_unit(end)
    colours = _vm_colours(list(dict.fromkeys(nodes["vm_type"])))
    fs = FONT_SIZE[width]
    plot_h = float(np.clip(rows_total * (0.045 if width == "column" else 0.05), 1.0, 5.5))
    summary = plot_h * 72 / (rows_total + 0.4) < MIN_ROW_PT
    if summary:
        plot_h = float(np.clip(len(slots) * 0.14, 1.0, 5.5))
    # the VM intervals as plain Python values, typed once: (node, VM type, GPUs, start, ready, stop)
    ints = {c: nodes[c].to_numpy(dtype=np.int64).tolist() for c in ("node", "gpus")}
    floats = {c: nodes[c].to_numpy(dtype=float).tolist() for c in ("start_time", "ready_time", "stop_time")}
    vm_rows: list[tuple[int, str, int, float, float, float]] = list(zip(
        ints["node"], nodes["vm_type"].astype(str).tolist(), ints["gpus"], floats["start_time"], floats["ready_time"],
        floats["stop_time"]))

    def draw(ax: Any) -> None:
        for node, vm_type, gpus, t0, ready, t1 in vm_rows:
            y0 = top[node]
            ax.add_patch(Rectangle((t0 / unit, y0), (t1 - t0) / unit, gpus,
                                   facecolor=colours[vm_type], edgecolor="0.45", linewidth=0.4, zorder=1))
            if ready > t0 + EPS:
                ax.add_patch(Rectangle((t0 / unit, y0), (ready - t0) / unit, gpus,
                                       facecolor="white", edgecolor="0.45", hatch="////", linewidth=0.4, zorder=2))
        axes_w_pt = WIDTHS[width] * 0.8 * 72
        axes_h_pt = plot_h * 72
        for n in slots:
            g = segs[segs["node"] == n].reset_index(drop=True)
            for i, first, count in gpu_blocks(g, nodes[nodes["node"] == n]):
                seg = g.iloc[i]
                x0, w = seg["start_time"] / unit, (seg["end_time"] - seg["start_time"]) / unit
                done = bool(seg.get("done", 1.0))
                ax.add_patch(Rectangle((x0, top[n] + first), w, count, facecolor=LATE if late.get(seg["job_id"])
                                       else ON_TIME, edgecolor="white", linewidth=0.5, zorder=3,
                                       hatch=None if done else "xxxx", alpha=1.0 if done else 0.75))
                text = str(seg["job_id"])
                if (w / (end / unit) * axes_w_pt > len(text) * 0.62 * fs + 2
                        and count / rows_total * axes_h_pt > fs * 1.05):
                    ax.text(x0 + w / 2, top[n] + first + count / 2, text, ha="center", va="center",
                            color="white", zorder=4)
        ax.set_xlim(0, end / unit * 1.01)
        ax.set_ylim(rows_total + 0.2, -0.2)
        ax.set_yticks([top[n] + band[n] / 2 for n in slots], [f"slot {n}" for n in slots])
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)

    legend: list[tuple[Any, str]] = [(Patch(facecolor=c, edgecolor="0.45", linewidth=0.4), t)
                                     for t, c in colours.items()]
    legend += [(Patch(facecolor="white", edgecolor="0.45", hatch="////", linewidth=0.4), "booting"),
               *_job_keys(jobs["deadline"], summary)]
    if "done" in segs.columns and (segs["done"] == 0).any():
        legend.append((Patch(facecolor=ON_TIME, hatch="xxxx", edgecolor="white"), "stretch cut short"))
    point = {f: row[f] for f in data.fields}
    title = f"{row['policy']}, seed {row['seed']}" + (f", {data.point_title(point)}" if point else "")
    n_legend_rows = 1 + len(legend) // (4 if width == "column" else 8)
    height = plot_h + 0.55 + n_legend_rows * fs * 1.45 / 72
    if summary:
        panel = Panel(_summary_draw(vm_rows, segs, slots, band, late, colours, unit, end), f"time ({uname})",
                      "node slot", title, key={"run_id": run_id})
        caption = "per slot: share of its GPUs busy (too many GPUs for one row each)"
    else:
        panel = Panel(draw, f"time ({uname})", "node slot", title, key={"run_id": run_id})
        caption = "one row per GPU"
    return FigureSpec("timeline", [panel], columns={"column": 1, "page": 1}, legend=legend, legend_below=True,
                      legend_title=caption, fixed_height={"column": height + fs * 1.45 / 72,
                                                           "page": height + fs * 1.45 / 72})
