"""``capsim report``: mean and 95% interval over seeds per policy and grid point of a result directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

HELP = "summarise a sweep (or run) directory: mean and 95% CI (t or bootstrap) over seeds per policy and grid point"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a result directory (capsim run or capsim sweep --out DIR)")
    p.add_argument("--format", choices=["table", "csv", "markdown", "latex"], default="table")
    p.add_argument("--interval", choices=["t", "bootstrap"], default="t",
                   help="t: Student-t 95%% interval clipped to each metric's domain (default); bootstrap: 95%% "
                        "percentile bootstrap, seeded (the output names the method)")
    p.add_argument("--metrics", metavar="NAMES",
                   help="comma-separated metrics declared in sim/metrics.py (default: the headline ones of the runs' "
                        "setting, e.g. total, VM and tardiness cost, late jobs, mean JCT; a Gavel or ElasticFlow "
                        "replay's own); `--metrics list` prints every declared metric")
    p.add_argument("--recompute", action="store_true",
                   help="compute the metrics afresh from the stored per-run tables instead of reading the stored "
                        "summaries (for a metric declared after the runs were made)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of printing")
    p.add_argument("--all", action="store_true", help="every finished run in DIR, not only the latest command's")


def metrics_table() -> str:
    """Every declared metric: name, label with unit, decimals, which way is better, what it measures."""
    from experiments.results.tables import format_table, metric_label
    from sim.metrics import METRICS

    rows = [[m.name, metric_label(m.name), str(m.digits), m.better or "-", m.description] for m in METRICS.values()]
    return format_table(["metric", "label", "digits", "better", "what it measures"], rows)


def choose_metrics(text: str | None, summary: pd.DataFrame, directory: str, recomputed: bool) -> list[str]:
    """The metrics named in ``--metrics`` (default: the headline ones of the runs' setting that apply to them), each
    declared or a numeric summary column."""
    from experiments.results.headline import headline
    from experiments.results.report import check_metric_names
    from sim.model import CapsimError

    if not text:
        return headline(summary)
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    check_metric_names(metrics, summary, "--metrics")
    missing = [m for m in metrics if m not in summary.columns]
    if missing and not recomputed:
        raise CapsimError(f"--metrics: {', '.join(missing)} is not in the stored summaries of {directory} (its runs "
                          f"were made before it was declared); add --recompute to compute it from the stored tables")
    return metrics


def run(args: argparse.Namespace) -> int:
    import sys

    from experiments.results.reading import read_results
    from experiments.results.report import aggregate, notes, render
    from sim.model import CapsimError

    if args.metrics and args.metrics.strip() == "list":
        print(metrics_table())
        return 0
    res = read_results(args.dir, args.all, recompute=args.recompute, tables=("summary",))
    summary = res.tables["summary"]
    metrics = choose_metrics(args.metrics, summary, args.dir, args.recompute)
    agg = aggregate(summary, res.fields, metrics, res.policies, method=args.interval)
    text = render(agg, res.fields, metrics, args.format)
    if args.format == "csv":
        for line in notes(agg, metrics)[1:]:
            print(f"capsim: {line}", file=sys.stderr)
    if args.output:
        from experiments.results.files import atomic_write_bytes

        target = Path(args.output)
        if target.is_dir():
            raise CapsimError(f"--output {target}: is a folder; give a file name, e.g. {target / 'table.tex'}")
        atomic_write_bytes(target, (text if text.endswith("\n") else text + "\n").encode("utf-8"))
    else:
        print(text.rstrip("\n"))
    failures = res.tables["failures"]
    if not failures.empty:
        print(f"capsim: {len(failures)} failed runs are not included; see {args.dir}/failures/", file=sys.stderr)
    return 0
