"""Running a single-job spot scenario: every case of its grid under every strategy, through ``sim.spot_ticks``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sim.spot_ticks import run_spot_job

if TYPE_CHECKING:
    from experiments.scenario.spot import LoadedSpotScenario

__all__ = ["run_scenario"]


def run_scenario(sc: LoadedSpotScenario) -> pd.DataFrame:
    """One row per case × strategy: the case's fields, then cost, finish, verdict, revocations, launches, billed
    hours; ``savings`` against ``on_demand`` in the same case (when it ran); ``optimum`` for a clairvoyant reference
    (the value of its plan, which its replay may undercut: ``docs/clouds.md``)."""
    rows: list[dict[str, Any]] = []
    for case in sc.cases:
        for spec in sc.strategies:
            strategy = spec.build()
            r = run_spot_job(strategy, case.job, case.series, case.market, start=case.start, billing=case.billing)
            rows.append({
                **case.fields,
                "strategy": spec.label,
                "kind": spec.kind,
                "component": strategy.describe(),
                "status": r.status,
                "cost": r.cost,
                "optimum": float(getattr(strategy, "plan_cost_", math.nan)),
                "finish_hours": r.finish / 3600,
                "deadline_met": r.deadline_met,
                "revocations": r.revocations,
                "launches": r.launches,
                "spot_launches": r.spot_launches,
                "on_demand_launches": r.on_demand_launches,
                "spot_hours": r.spot_seconds / 3600,
                "on_demand_hours": r.on_demand_seconds / 3600,
                "post_finish_ticks": r.post_finish_ticks,
            })
    df = pd.DataFrame(rows)
    case_cols = [c for c in df.columns if c in sc.cases[0].fields]
    od = df[df["kind"] == "on_demand"].drop_duplicates(case_cols).set_index(case_cols)["cost"]
    if len(od):
        base = df.set_index(case_cols).index.map(od.to_dict().get)
        value = df["optimum"].where(df["optimum"].notna(), df["cost"])
        df["savings"] = 1 - value / np.asarray(base, dtype=float)
    return df
