"""``capsim plot``: the paper figures of a sweep directory as PNG and PDF."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.model import CapsimError

from experiments.commands.report import load_summary

HELP = "draw a sweep directory's figures (PNG + PDF): costs, tardiness, Pareto, CDFs, decision time, a timeline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a sweep's result directory (capsim sweep --out DIR)")
    p.add_argument("--out", metavar="FIGDIR", help="where figures go (default: DIR/figures)")
    p.add_argument("--run", metavar="RUN_ID", help="run shown in the timeline (default: the first run)")


def run(args: argparse.Namespace) -> int:
    from experiments.plots import plot_all

    tables, fields, order = load_summary(args.dir)
    if args.run and args.run not in set(tables["summary"]["run_id"]):
        known = ", ".join(list(tables["summary"]["run_id"])[:5])
        raise CapsimError(f"--run {args.run!r}: no finished run with that id in {args.dir} (e.g. {known})")
    out = Path(args.out) if args.out else Path(args.dir) / "figures"
    written = plot_all(tables, fields, order, out, args.run)
    for p in written:
        print(p)
    return 0
