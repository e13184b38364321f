"""Which configuration to rent for one training job: every configuration's predicted time and cost, each with the
interval its expected error gives, the deadline met or not, and the time/cost Pareto front (``capsim predict
pareto``).

A configuration is ``gpus`` GPUs of one VM type; the whole VM is rented. Its time is the VM's boot time plus the
predicted runtime; its cost is that time billed by the VM type's provider rule (``Billing``: per-second, per-minute,
a minimum) at its hourly price. The interval is the predictor's: the runtimes within the expected error of its kind
of answer (``Predictor.source``), so the cost interval is the two ends billed. A configuration is on the Pareto front
when no other is both faster and cheaper (point estimates). With a deadline, a configuration meets it (``yes``: even
the slow end of its interval finishes in time), is ``at risk`` (the estimate finishes in time, the slow end does not)
or misses it (``no``); where the error was never measured only the estimate is judged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim.contracts import Predictor
from sim.model import CapsimError, JobSpec, VMType

__all__ = ["COLUMNS", "configurations", "pareto_table", "format_table", "figure"]

COLUMNS = ["vm_type", "provider", "gpu", "gpus", "vm_gpus", "source", "error", "time_s", "time_lo_s", "time_hi_s",
           "cost", "cost_lo", "cost_hi", "price_per_hour", "deadline_met", "pareto"]
"""One row per configuration: what it is, the kind of answer and its expected error, time and cost with their
intervals, the deadline verdict (empty without a deadline) and whether it is on the Pareto front."""


@dataclass(frozen=True)
class Job:
    """The job asked about: its spec and deadline (seconds from submission; inf: none)."""

    spec: JobSpec
    deadline: float = math.inf


def configurations(types: Sequence[VMType]) -> list[tuple[VMType, int]]:
    """Every (VM type, GPU count) with 1..n GPUs of each type, in catalogue order."""
    return [(v, g) for v in types for g in range(1, v.gpus + 1)]


def _cost(vm: VMType, seconds: float) -> float:
    return vm.billing.billed_seconds(seconds) * vm.price_per_hour / 3600.0 if math.isfinite(seconds) else math.inf


def pareto_table(job: Job, types: Sequence[VMType], predictor: Predictor) -> pd.DataFrame:
    """One row per configuration the predictor answers (``COLUMNS``), fastest first; unsupported ones are left out."""
    from experiments.plots import pareto_front

    rows = []
    for vm, g in configurations(types):
        t = predictor.runtime(job.spec, vm, g)
        if not math.isfinite(t):
            continue
        src = predictor.source(job.spec, vm, g)
        lo, hi = src.interval(t)
        total = vm.boot_time + t
        lo_t, hi_t = vm.boot_time + lo, vm.boot_time + hi
        verdict = ""
        if math.isfinite(job.deadline):
            slow = hi_t if math.isfinite(src.error) else total
            verdict = "yes" if slow <= job.deadline else "at risk" if total <= job.deadline else "no"
        rows.append({"vm_type": vm.name, "provider": vm.provider, "gpu": vm.gpu.name, "gpus": g, "vm_gpus": vm.gpus,
                     "source": src.kind, "error": src.error, "time_s": total, "time_lo_s": lo_t, "time_hi_s": hi_t,
                     "cost": _cost(vm, total), "cost_lo": _cost(vm, lo_t), "cost_hi": _cost(vm, hi_t),
                     "price_per_hour": vm.price_per_hour, "deadline_met": verdict, "pareto": False})
    if not rows:
        raise CapsimError(f"predictor {predictor.describe()!r} answers none of the {len(types)} VM types selected for "
                          f"{job.spec.app_key} at batch {job.spec.batch_size}; select other VM types or another "
                          f"predictor")
    df = pd.DataFrame(rows, columns=COLUMNS)
    front = pareto_front(df[["time_s", "cost"]].to_numpy(float))
    df.loc[front, "pareto"] = True
    return df.sort_values(["time_s", "cost", "vm_type", "gpus"], kind="stable", ignore_index=True)


def _h(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds / 3600:.2f}"


def format_table(df: pd.DataFrame, job: Job) -> str:
    """The table as text: Pareto configurations marked ``*``; time in hours and cost in dollars with their
    intervals; the deadline verdict when there is one."""
    has_deadline = math.isfinite(job.deadline)
    head = (f"{'':1} {'VM type':<22} {'GPUs':>4}  {'time h':>7} {'interval h':>13}  {'cost $':>9} "
            f"{'interval $':>17}  {'answer (error)':<28}" + ("  deadline" if has_deadline else ""))
    lines = [head]
    for r in df.to_dict("records"):
        known = math.isfinite(r["error"])
        err = f"{100 * r['error']:.1f} %" if known else "not measured"
        interval = f"{_h(r['time_lo_s'])}–{_h(r['time_hi_s'])}" if known else "-"
        cost_iv = "-" if not known else f"{r['cost_lo']:.2f}–" + (
            f"{r['cost_hi']:.2f}" if math.isfinite(r["cost_hi"]) else "inf")
        answer = f"{r['source']} ({err})"
        lines.append(f"{'*' if r['pareto'] else ' '} {r['vm_type']:<22} {r['gpus']:>4}  {_h(r['time_s']):>7} "
                     f"{interval:>13}  {r['cost']:>9.2f} {cost_iv:>17}  {answer:<28}"
                     + (f"  {r['deadline_met']}" if has_deadline else ""))
    return "\n".join(lines)


def figure(df: pd.DataFrame, job: Job, title: str, path: Path) -> None:
    """Cost against time, one point per configuration with its interval in both, the Pareto front joined, the
    deadline as a vertical line; PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.plots.style import WIDTHS, rc

    with plt.rc_context(rc("column")):
        fig, ax = plt.subplots(figsize=(WIDTHS["column"], 2.6), layout="constrained")
        known = df[np.isfinite(df["error"])]
        unknown = df[~np.isfinite(df["error"])]
        for part, marker in ((known, "o"), (unknown, "x")):
            if part.empty:
                continue
            hi = np.where(np.isfinite(part["time_hi_s"]), part["time_hi_s"], part["time_s"])
            xerr = np.vstack([part["time_s"] - part["time_lo_s"], hi - part["time_s"]]) / 3600
            cost_hi = np.where(np.isfinite(part["cost_hi"]), part["cost_hi"], part["cost"])
            yerr = np.vstack([part["cost"] - part["cost_lo"], cost_hi - part["cost"]])
            ok = np.isfinite(xerr).all(axis=0)
            ax.errorbar(part["time_s"] / 3600, part["cost"], xerr=np.where(ok, xerr, 0), yerr=np.where(ok, yerr, 0),
                        fmt=marker, markersize=3, color="0.55", ecolor="0.8", elinewidth=0.6, linewidth=0,
                        label="configuration" if marker == "o" else "error not measured")
        front = df[df["pareto"]].sort_values("time_s")
        ax.plot(front["time_s"] / 3600, front["cost"], "o-", color="#1f4e99", markersize=3.5, linewidth=0.9,
                label="Pareto front")
        for i, r in enumerate(front.to_dict("records")):  # labels alternate above and below the front
            ax.annotate(f"{r['vm_type']}×{r['gpus']}", (r["time_s"] / 3600, r["cost"]), fontsize=5,
                        xytext=(3, 3 if i % 2 == 0 else -7), textcoords="offset points")
        if math.isfinite(job.deadline):
            ax.axvline(job.deadline / 3600, color="#b2182b", linestyle="--", linewidth=0.8, label="deadline")
        ax.set(xscale="log", yscale="log", xlabel="time to finish (h)", ylabel="cost ($)", title=title)
        ax.legend(fontsize=5.5, loc="upper right")
        fig.savefig(path, dpi=200, metadata={"Software": None})
        plt.close(fig)
