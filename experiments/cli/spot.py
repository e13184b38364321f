"""``capsim spot``: one job on a spot availability trace under several strategies (Can't Be Late's setting)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

HELP = ("replay one job on a spot availability trace under spot strategies (on demand, greedy, uniform progress, "
        "time sliced, omniscient); compare with Can't Be Late's runs")

MARKER = "spot_job.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO.yaml", help="a spot scenario (e.g. experiments/spot/cantbelate.yaml)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<scenario name>/)")
    p.add_argument("--reference", metavar="RUNS.csv", help="Can't Be Late's recorded runs to compare with (overrides "
                   "the scenario's `reference`)")
    p.add_argument("--figure", metavar="FILE.png", help="also draw the savings against deadline slack per strategy "
                   "(PNG and PDF)")
    p.add_argument("--width", choices=["column", "page"], default="column", help="the figure's printed width")
    p.add_argument("--markdown", action="store_true", help="print the agreement as Markdown tables")


def _out_dir(out: str | None, name: str) -> Path:
    from experiments.scenario.names import RESULTS_ROOT, name_problem
    from sim.model import CapsimError

    if out is None and name_problem(name):
        raise CapsimError(f"name: {name_problem(name)}")
    d = Path(out) if out else RESULTS_ROOT / name
    if d.exists() and (not d.is_dir() or (any(d.iterdir()) and not (d / MARKER).exists())):
        raise CapsimError(f"{d}: exists and is not a spot result folder (no {MARKER}); choose a new or empty folder")
    return d


def run(args: argparse.Namespace) -> int:
    import json

    from experiments.results.folders import FolderLock
    from experiments.results.spot import agreement, agreement_summary, read_reference
    from experiments.running.spot import run_scenario
    from experiments.scenario.spot import load_spot_scenario

    sc = load_spot_scenario(args.scenario)
    reference = Path(args.reference) if args.reference else sc.reference
    ref = read_reference(reference) if reference is not None else None
    out = _out_dir(args.out, sc.spec.name)
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, "capsim spot"):
        runs = run_scenario(sc)
        (out / MARKER).write_text(json.dumps({"kind": "spot_job", "name": sc.spec.name, "scenario": str(args.scenario),
                                              "reference": None if reference is None else str(reference)},
                                             indent=1), encoding="utf-8")
        runs.to_csv(out / "spot_runs.csv", index=False)
        _print_runs(runs, [k for k in sc.cases[0].fields if k not in ("spot_price", "on_demand_price")])
        if ref is not None:
            agree = agreement(runs, ref)
            agree.to_csv(out / "agreement.csv", index=False)
            summary = agreement_summary(agree)
            print(f"\nagreement with {reference} ({len(agree)} runs):")
            print(summary.to_string(index=False, float_format=lambda v: f"{v:.2e}"))
            if args.markdown:
                from experiments.results.spot import agreement_markdown

                print("\n" + agreement_markdown(agree))
        if args.figure:
            from experiments.plots.spot import savings_vs_slack

            for p in savings_vs_slack(runs, Path(args.figure), args.width):
                print(p)
    print(f"\nresults in {out}/")
    return 0


def _print_runs(runs: pd.DataFrame, fields: list[str]) -> None:
    varying = [f for f in fields if runs[f].nunique() > 1]
    cols = ["strategy", "cost", "savings", "finish_hours", "deadline_met", "revocations", "launches"]
    cols = [c for c in cols if c in runs.columns]
    if not varying:
        print(runs[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        return
    g = runs.groupby([f for f in varying if f != "start_hours"] + ["strategy"], sort=False)
    table = g.agg(runs=("cost", "size"), mean_cost=("cost", "mean"),
                  **({"mean_savings": ("savings", "mean")} if "savings" in runs else {}),
                  late=("deadline_met", lambda s: int((~s.astype(bool)).sum()))).reset_index()
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
