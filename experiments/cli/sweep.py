"""``capsim sweep``: expand a sweep file into runs, run the missing ones in parallel or on Dask, store results."""

from __future__ import annotations

import argparse

HELP = "run a sweep file (grid × policies × seeds); finished runs are never redone (unless --force)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from experiments.cli.run import add_run_options

    p.add_argument("file", metavar="SWEEP.yaml", help="sweep file")
    p.add_argument("--out", metavar="DIR", help="result directory (default: results/<sweep name>/)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on a Dask cluster: tcp://host:8786, or local:N "
                   "(N local workers; local:N:PORT adds Dask's dashboard on PORT)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the runs, run nothing")
    add_run_options(p)


def run(args: argparse.Namespace) -> int:
    import sys

    from experiments.cli.run import check_workers, report_failures
    from experiments.results.folders import output_dir
    from experiments.results.store import ResultStore
    from experiments.runs import plan, run_plan
    from experiments.scenario.sweep import load_sweep

    check_workers(args.workers)
    sweep = load_sweep(args.file)
    p = plan(sweep)
    out = output_dir(args.out, sweep.name)
    if args.dry_run:
        done = ResultStore(out).finished()
        for t in p.tasks:
            grid = ", ".join(f"{k}={v}" for k, v in t.labels)
            print(f"{t.run_id}  {'done' if t.run_id in done else 'todo'}  {t.policy_label:<12} seed {t.seed:<4} {grid}")
        return 0
    ran = run_plan(p, out, workers=args.workers, dask=args.dask, force=args.force, quiet=args.quiet)
    print(f"sweep {sweep.name}: {ran.finished} runs finished in {ran.wall:.1f} s, {ran.already} were already done; "
          f"results in {out}/", file=sys.stderr)
    if not args.quiet and (ran.finished or ran.already):
        print(f"next: capsim report {out}   and   capsim plot {out}", file=sys.stderr)
    print(out)
    if ran.failures:
        report_failures(ran)
        return 1
    return 0
