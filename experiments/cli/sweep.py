"""``capsim sweep``: expand a sweep file into runs, run the missing ones in parallel or on Dask, store results."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

HELP = "run a sweep file (grid × policies × seeds); finished runs are never redone"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="SWEEP.yaml", help="sweep file")
    p.add_argument("--out", metavar="DIR", help="result directory (default: results/<sweep name>/)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes (default: the core count; 1 runs in this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on a Dask cluster: tcp://host:8786, or local:N")
    p.add_argument("--quiet", action="store_true", help="no progress bar, only the final line")
    p.add_argument("--dry-run", action="store_true", help="validate and list the runs, run nothing")


def run(args: argparse.Namespace) -> int:
    from experiments.cli.run import check_workers
    from experiments.results.files import DASK_TMP
    from experiments.results.folders import output_dir
    from experiments.results.store import ResultStore, grid_label_types, sweep_manifest
    from experiments.running.pool import run_tasks
    from experiments.running.progress import Progress
    from experiments.running.tasks import Outcome, sweep_tasks
    from experiments.scenario.sweep import load_sweep

    check_workers(args.workers)
    sweep = load_sweep(args.file)
    out = output_dir(args.out, sweep.name)
    tasks = sweep_tasks(sweep)
    store = ResultStore(out, label_types=grid_label_types(sweep))
    if args.dry_run:
        done = store.finished()
        for t in tasks:
            grid = ", ".join(f"{k}={v}" for k, v in t.labels)
            print(f"{t.run_id}  {'done' if t.run_id in done else 'todo'}  {t.policy_label:<12} seed {t.seed:<4} {grid}")
        return 0
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    failures: list[Outcome] = []
    t0 = time.perf_counter()
    with store.writing(sweep_manifest(sweep, tasks), log=lambda line: print(f"capsim: {line}", file=sys.stderr)):
        done, damaged = store.verify({t.run_id: t for t in tasks})
        for rid, why in sorted(damaged.items())[:5]:
            print(f"capsim: run {rid} will run again: {why}", file=sys.stderr)
        if len(damaged) > 5:
            print(f"capsim: ... and {len(damaged) - 5} more damaged runs will run again", file=sys.stderr)
        todo = [t for t in tasks if t.run_id not in done]
        log(f"sweep {sweep.name}: {len(sweep.points)} grid points × {len(sweep.policies)} policies × "
            f"{len(sweep.seeds)} seeds = {len(tasks)} runs; {len(tasks) - len(todo)} already done, {len(todo)} to run")
        progress = Progress(len(todo), quiet=args.quiet)

        def on_outcome(o: Outcome) -> None:
            store.write(o)
            if not o.ok:
                failures.append(o)
            progress.update(o.ok)

        dask_tmp = str(out / f"{DASK_TMP}-{os.getpid()}") if args.dask else None
        if dask_tmp:
            os.environ.setdefault("DASK_TEMPORARY_DIRECTORY", dask_tmp)
        try:
            run_tasks(todo, on_outcome, workers=min(args.workers, max(1, len(todo))), dask=args.dask,
                      dask_tmp=dask_tmp)
        finally:
            if dask_tmp:
                shutil.rmtree(dask_tmp, ignore_errors=True)
    wall = time.perf_counter() - t0
    ran = len(todo) - len(failures)
    print(f"sweep {sweep.name}: {ran} runs finished in {wall:.1f} s, {len(tasks) - len(todo)} were already done; "
          f"results in {out}/")
    if not args.quiet and (ran or len(tasks) > len(todo)):
        print(f"next: capsim report {out}   and   capsim plot {out}")
    if failures:
        for o in failures[:5]:
            last = (o.error or "").strip().splitlines()[-1:] or ["?"]
            grid = ", ".join(f"{k}={v}" for k, v in o.task.labels)
            print(f"capsim: run {o.task.run_id} failed ({o.task.policy_label}, seed {o.task.seed}"
                  f"{', ' + grid if grid else ''}): {last[0]}", file=sys.stderr)
        print(f"capsim: {len(failures)} of {len(todo)} runs failed; tracebacks in {out}/failures/ "
              f"(run the sweep again to retry them)", file=sys.stderr)
        return 1
    return 0
