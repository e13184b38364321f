"""``capsim plot``: the paper figures of a sweep directory as PNG and PDF."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.model import CapsimError

from experiments.commands.report import load_summary

HELP = "draw a sweep (or run) directory's figures (PNG + PDF): costs, tardiness, Pareto, CDFs, decision time, a timeline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a sweep's result directory (capsim sweep --out DIR)")
    p.add_argument("--out", metavar="FIGDIR", help="where figures go (default: DIR/figures)")
    p.add_argument("--all", action="store_true", help="every finished run in DIR, not only the latest sweep's")
    p.add_argument("--run", metavar="RUN_ID", help="run shown in the timeline (default: the first run)")
    p.add_argument("--only", metavar="NAMES", help="comma-separated figures to draw (default: all): "
                   "cost_breakdown, tardiness_late, pareto, cdf, cost_vs, decision_time, timeline")


def run(args: argparse.Namespace) -> int:
    from experiments.plots import plot_all

    tables, fields, order = load_summary(args.dir, args.all)
    if args.run and args.run not in set(tables["summary"]["run_id"]):
        known = ", ".join(list(tables["summary"]["run_id"])[:5])
        raise CapsimError(f"--run {args.run!r}: no finished run with that id in {args.dir} (e.g. {known})")
    from experiments.loading import did_you_mean
    from experiments.plots import FIGURES

    only = None
    if args.only:
        only = [x.strip() for x in args.only.split(",") if x.strip()]
        for name in only:
            if name not in FIGURES:
                raise CapsimError(f"--only: unknown figure {name!r}{did_you_mean(name, FIGURES)}; "
                                  f"known: {', '.join(FIGURES)}")
    out = Path(args.out) if args.out else Path(args.dir) / "figures"
    written = plot_all(tables, fields, order, out, args.run, only)
    for p in written:
        print(p)
    return 0
