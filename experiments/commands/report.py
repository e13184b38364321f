"""``capsim report``: mean ± 95% confidence interval over seeds per policy and grid point of a sweep directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.model import CapsimError

from experiments.report import METRICS, aggregate, render
from experiments.store import load_results

HELP = "summarise a sweep directory: mean ± 95% CI over seeds per policy and grid point"

DEFAULT_METRICS = ["total_cost", "vm_cost", "tardiness_cost", "late_jobs", "mean_jct"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a sweep's result directory (capsim sweep --out DIR)")
    p.add_argument("--format", choices=["table", "csv", "markdown", "latex"], default="table")
    p.add_argument("--metrics", metavar="NAMES",
                   help=f"comma-separated summary columns (default {','.join(DEFAULT_METRICS)}; "
                        f"also {','.join(m for m in METRICS if m not in DEFAULT_METRICS)}, ...)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of printing")


def load_summary(directory: str) -> tuple:
    d = Path(directory)
    if not (d / "summary").is_dir():
        raise CapsimError(f"{d}: not a sweep result directory (no summary/ inside); run `capsim sweep FILE --out {d}`")
    tables = load_results(d)
    if tables["summary"].empty:
        raise CapsimError(f"{d}: no finished runs yet")
    from experiments.store import ResultStore

    manifest = ResultStore(d).manifest()
    return tables, manifest.get("grid_fields", []), manifest.get("policies", [])


def run(args: argparse.Namespace) -> int:
    tables, fields, order = load_summary(args.dir)
    summary = tables["summary"]
    metrics = DEFAULT_METRICS
    if args.metrics:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        bad = [m for m in metrics if m not in summary.columns]
        if bad:
            numeric = [c for c in summary.columns if summary[c].dtype.kind in "fi" and c != "seed"]
            raise CapsimError(f"--metrics: unknown column(s) {', '.join(bad)}; known: {', '.join(numeric)}")
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
