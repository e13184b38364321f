"""``capsim plot``: the figures of a result directory as PNG and PDF, at a paper's column or page width."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "draw a sweep (or run) directory's figures (PNG + PDF, column or page width): costs, Pareto, CDFs, a timeline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a result directory (capsim run or capsim sweep --out DIR)")
    p.add_argument("--out", metavar="FIGDIR", help="where figures go (default: DIR/figures)")
    p.add_argument("--all", action="store_true", help="every finished run in DIR, not only the latest command's")
    p.add_argument("--run", metavar="RUN_ID", help="run shown in the timeline (default: at the first grid point, the "
                   "first seed of the policy with the lowest mean total cost)")
    p.add_argument("--only", metavar="NAMES", help="comma-separated figures to draw (default: all but those on "
                   "request): cost_breakdown, tardiness_late, pareto, cdf, cost_vs, decision_time, timeline; on "
                   "request: cost_deadlines (total cost against deadlines met)")
    p.add_argument("--metrics", metavar="NAMES", help="also draw, per metric of sim/metrics.py, its mean per policy "
                   "and grid point (metric_<name>.png)")
    p.add_argument("--width", choices=["column", "page"], default="column",
                   help="printed width: column (3.3 in, one column of a two-column paper; default) or page (6.9 in)")
    p.add_argument("--interval", choices=["t", "bootstrap"], default="t",
                   help="error bars: 95%% t-interval clipped to the metric's domain (default) or seeded percentile "
                        "bootstrap (as in capsim report)")
    p.add_argument("--dpi", type=int, default=200, metavar="N", help="PNG resolution at the printed size (default 200)")
    p.add_argument("--recompute", action="store_true",
                   help="compute the metrics afresh from the stored per-run tables (see capsim report --recompute)")


def run(args: argparse.Namespace) -> int:
    import sys

    import matplotlib

    matplotlib.use("Agg")

    from experiments.cli.report import choose_metrics
    from experiments.plots import FIGURES, ON_REQUEST, plot_all
    from experiments.results.reading import read_results
    from experiments.scenario.loading import did_you_mean
    from sim.model import CapsimError

    if args.dpi < 20:
        raise CapsimError(f"--dpi: expected a resolution of at least 20 dots per inch, found {args.dpi}")
    res = read_results(args.dir, args.all, recompute=args.recompute)
    summary = res.tables["summary"]
    if args.run and args.run not in set(summary["run_id"]):
        known = ", ".join(list(summary["run_id"])[:5])
        raise CapsimError(f"--run {args.run!r}: no finished run with that id in {args.dir} (e.g. {known})")
    only = None
    if args.only:
        only = [x.strip() for x in args.only.split(",") if x.strip()]
        for name in only:
            if name not in FIGURES + ON_REQUEST:
                raise CapsimError(f"--only: unknown figure {name!r}{did_you_mean(name, FIGURES + ON_REQUEST)}; "
                                  f"known: {', '.join(FIGURES + ON_REQUEST)}")
    metrics = choose_metrics(args.metrics, summary, args.dir, args.recompute) if args.metrics else []
    out = Path(args.out) if args.out else Path(args.dir) / "figures"
    written = plot_all(res.tables, res.fields, res.policies, out, args.run, only, metrics, width=args.width,
                       method=args.interval, dpi=args.dpi,
                       note=lambda line: print(f"capsim: {line}", file=sys.stderr, flush=True))
    for p in written:
        print(p)
    return 0
