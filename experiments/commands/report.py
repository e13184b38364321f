"""``capsim report``: mean ± 95% confidence interval over seeds per policy and grid point of a sweep directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.model import CapsimError

from experiments.report import METRICS, aggregate, render
from experiments.store import load_results

HELP = "summarise a sweep (or run) directory: mean ± 95% CI over seeds per policy and grid point"

DEFAULT_METRICS = ["total_cost", "vm_cost", "tardiness_cost", "late_jobs", "mean_jct"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a sweep's result directory (capsim sweep --out DIR)")
    p.add_argument("--format", choices=["table", "csv", "markdown", "latex"], default="table")
    p.add_argument("--metrics", metavar="NAMES",
                   help=f"comma-separated summary columns (default {','.join(DEFAULT_METRICS)}; "
                        f"also {','.join(m for m in METRICS if m not in DEFAULT_METRICS)}, ...)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of printing")
    p.add_argument("--all", action="store_true", help="every finished run in DIR, not only the latest sweep's")


def load_summary(directory: str, all_runs: bool = False) -> tuple[dict, list[str], list[str]]:
    """Tables, grid fields and policy order of a sweep directory, or of a ``capsim run`` output directory."""
    import pandas as pd

    from experiments.store import ResultStore

    d = Path(directory)
    if (d / "summary").is_dir():
        tables = load_results(d, all_runs=all_runs)
        manifest = ResultStore(d).manifest()
        fields, order = manifest.get("grid_fields", []), manifest.get("policies", [])
    elif (d / "summary.csv").is_file():
        tables = {"summary": pd.read_csv(d / "summary.csv"), "failures": pd.DataFrame()}
        for name in ("jobs", "nodes", "decisions"):
            f = d / f"{name}.parquet"
            tables[name] = pd.read_parquet(f) if f.is_file() else pd.DataFrame()
        fields, order = [], list(dict.fromkeys(tables["summary"]["policy"]))
    else:
        raise CapsimError(f"{d}: not a result directory (no summary/ from `capsim sweep` nor summary.csv from "
                          f"`capsim run`); run `capsim sweep FILE --out {d}` first")
    if tables["summary"].empty:
        raise CapsimError(f"{d}: no finished runs yet")
    return tables, fields, order


def run(args: argparse.Namespace) -> int:
    tables, fields, order = load_summary(args.dir, args.all)
    summary = tables["summary"]
    metrics = DEFAULT_METRICS
    if args.metrics:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        bad = [m for m in metrics if m not in summary.columns or summary[m].dtype.kind not in "fiub"]
        if bad:
            numeric = [c for c in summary.columns if summary[c].dtype.kind in "fi" and c != "seed"]
            raise CapsimError(f"--metrics: not a numeric summary column: {', '.join(bad)}; known: {', '.join(numeric)}")
    agg = aggregate(summary, fields, metrics, order)
    text = render(agg, fields, metrics, args.format)
    if args.output:
        Path(args.output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    else:
        print(text.rstrip("\n"))
    failures = tables["failures"]
    if not failures.empty:
        print(f"\n({len(failures)} failed runs are not included; see {args.dir}/failures/)")
    return 0
