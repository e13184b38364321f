"""Comparing single-job spot runs with Can't Be Late's recorded ones: per run, per strategy, as Markdown."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sim.model import CapsimError

__all__ = ["REFERENCE_NAMES", "read_reference", "agreement", "agreement_summary", "agreement_markdown",
           "markdown"]

REFERENCE_NAMES = {
    "on_demand": ("on_demand",),
    "only_spot": ("only_spot",),
    "spot_greedy": ("greedy_2d_local",),
    "spot_greedy(variant='strawman')": ("strawman",),
    "uniform_progress": ("uniform_progress_local",),
    "time_sliced": ("pair_amortize",),
    "omniscient": ("omniscient_dp", "ideal_ilp_overhead"),
}
"""capsim's strategy (its ``describe()``) → the names of the same strategy in Can't Be Late's recorded runs
(``omniscient_dp`` is the exact optimum of its ILP, ``ideal_ilp_overhead`` that ILP solved by CBC where it was run)."""

KEYS = ["trace", "start_hours", "deadline_hours", "restart_overhead_hours", "task_hours"]


def read_reference(path: Path) -> pd.DataFrame:
    """Can't Be Late's recorded runs (the layout of ``results_runs.csv``), with capsim's key column names."""
    try:
        ref = pd.read_csv(path)
    except Exception as e:  # noqa: BLE001 (any parsing failure is the user's file)
        raise CapsimError(f"{path}: cannot read the reference runs: {e}") from None
    need = ["trace", "start_h", "deadline_h", "overhead_h", "task_h", "strategy", "cost", "finish_h", "deadline_met"]
    missing = [c for c in need if c not in ref.columns]
    if missing:
        raise CapsimError(f"{path}: missing column(s) {missing}; expected Can't Be Late's run table "
                          f"({', '.join(need)}, ...)")
    if "status" not in ref.columns:
        ref = ref.assign(status="ok")
    return ref.rename(columns={"status": "reference_status", "start_h": "start_hours", "deadline_h": "deadline_hours",
                               "overhead_h": "restart_overhead_hours", "task_h": "task_hours",
                               "strategy": "reference_strategy", "cost": "reference_cost",
                               "finish_h": "reference_finish_hours", "deadline_met": "reference_deadline_met"})


def agreement(runs: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Every run that has a reference run: both costs (the optimum for a clairvoyant reference), the relative cost
    error, both finish times and whether the deadline verdicts agree. A reference run without a finish time (the
    exact DP) is compared on cost only; one that ran past the end of its trace (no cost, status ``error:...``)
    agrees when capsim's run stopped there too (status ``trace_ended``)."""
    names = [(label, ref_name) for label, refs in REFERENCE_NAMES.items() for ref_name in refs]
    pairs = pd.DataFrame(names, columns=["component", "reference_strategy"])
    mine = runs.merge(pairs, on="component")
    mine[KEYS[1:]] = mine[KEYS[1:]].astype(float)
    cols = KEYS + ["reference_strategy", "reference_status", "reference_cost", "reference_finish_hours",
                   "reference_deadline_met"]
    both = mine.merge(ref[cols], on=KEYS + ["reference_strategy"])
    if both.empty:
        raise CapsimError("the reference has no run of these cases and strategies (traces, starts, deadlines, "
                          "overheads and task must match exactly)")
    value = both["optimum"].where(both["optimum"].notna(), both["cost"])
    both = both.assign(value=value, cost_error=(value - both["reference_cost"]).abs() / both["reference_cost"])
    has_finish = both["reference_finish_hours"].notna()
    both["finish_error_hours"] = (both["finish_hours"] - both["reference_finish_hours"]).abs().where(has_finish)
    ended = both["reference_status"].astype(str).str.startswith("error") & both["reference_cost"].isna()
    met = both["reference_deadline_met"].map({True: True, False: False, "True": True, "False": False})
    both["verdict_same"] = ((both["deadline_met"] == met) & ~ended) | (ended & (both["status"] == "trace_ended"))
    return both[KEYS + ["strategy", "reference_strategy", "status", "reference_status", "value", "reference_cost",
                        "cost_error", "finish_hours", "reference_finish_hours", "finish_error_hours", "deadline_met",
                        "reference_deadline_met", "verdict_same"]]


def agreement_summary(agree: pd.DataFrame) -> pd.DataFrame:
    """Per strategy and reference name: cases, the largest relative cost error, the largest finish-time difference
    and how many deadline verdicts agree."""
    g = agree.groupby(["strategy", "reference_strategy"], sort=False)
    return pd.DataFrame({
        "cases": g.size(),
        "max_cost_error": g["cost_error"].max(),
        "max_finish_error_hours": g["finish_error_hours"].max(),
        "verdicts_same": g["verdict_same"].sum(),
    }).reset_index()


def agreement_markdown(agree: pd.DataFrame) -> str:
    """The agreement as two GitHub tables: per strategy over every case, then cost and finish time per trace,
    setting and strategy at the first start offset."""
    s = agreement_summary(agree)
    s["max_cost_error"] = s["max_cost_error"].map(lambda v: f"{v:.1e}")
    s["verdicts_same"] = s["verdicts_same"].astype(int).astype(str) + " / " + s["cases"].astype(str)
    first = agree[agree["start_hours"] == agree["start_hours"].min()].copy()
    first["setting"] = ("R0 " + first["deadline_hours"].map("{:g} h".format) + ", d "
                        + first["restart_overhead_hours"].map("{:g} h".format))
    first = first[first["reference_strategy"] != "ideal_ilp_overhead"]
    table = first[["trace", "setting", "strategy", "value", "reference_cost", "finish_hours",
                   "reference_finish_hours", "deadline_met"]].rename(columns={
                       "value": "cost $", "reference_cost": "reference $", "finish_hours": "finish h",
                       "reference_finish_hours": "reference finish h", "deadline_met": "met"})
    return (markdown(s.drop(columns="cases"), [("max_finish_error_hours", "{:.2g}")]) + "\n"
            + markdown(table, [("cost $", "{:.2f}"), ("reference $", "{:.2f}"), ("finish h", "{:.2f}"),
                               ("reference finish h", "{:.2f}")]))


def markdown(df: pd.DataFrame, digits: Sequence[tuple[str, str]] = ()) -> str:
    """A GitHub table of ``df`` (``digits``: column → format, e.g. ``("cost", "{:.2f}")``)."""
    fmt = dict(digits)
    head = "| " + " | ".join(map(str, df.columns)) + " |\n|" + "---|" * len(df.columns) + "\n"
    body = "".join("| " + " | ".join(fmt.get(str(c), "{}").format(v) if not (isinstance(v, float) and math.isnan(v))
                                     else "–" for c, v in row.items()) + " |\n"
                   for _, row in df.iterrows())
    return head + body
