"""``capsim run``: run one scenario (every policy × seed) into its result folder and print the table of means."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from experiments.runs import Ran

HELP = "run a scenario (the embedded default if none is given) for every policy and seed; finished runs are kept"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?", metavar="SCENARIO.yaml", help="scenario file (default: the embedded one)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<scenario name>/)")
    p.add_argument("--seeds", metavar="SEEDS", help="seeds to run instead of the scenario's: '0-4' or '0,3,7'")
    p.add_argument("--policies", metavar="NAMES", help="comma-separated policy names or registered kinds to run")
    add_run_options(p)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``sweep`` share: workers, force, quiet."""
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes (default: the core count; 1 runs in this process)")
    p.add_argument("--force", action="store_true", help="run every run again, even those already finished in DIR")
    p.add_argument("--quiet", action="store_true", help="no header and no progress line on stderr")


def check_workers(n: int) -> int:
    """``--workers``: a number ≥ 1."""
    from sim.model import CapsimError

    if n < 1:
        raise CapsimError(f"--workers: expected a number ≥ 1 (1 runs in this process), found {n}")
    return n


def report_failures(ran: Ran, limit: int = 5) -> None:
    """The failed runs of a command on stderr: the last line of each traceback (the first ``limit``) and where the
    tracebacks are."""
    import sys

    for o in ran.failures[:limit]:
        last = (o.error or "").strip().splitlines()[-1:] or ["?"]
        grid = ", ".join(f"{k}={v}" for k, v in o.task.labels)
        print(f"capsim: run {o.task.run_id} failed ({o.task.policy_label}, seed {o.task.seed}"
              f"{', ' + grid if grid else ''}): {last[0]}", file=sys.stderr)
    print(f"capsim: {len(ran.failures)} of {ran.attempted} runs failed; tracebacks in {ran.out}/failures/ "
          f"(run the command again to retry them)", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    import sys

    from experiments.results.folders import output_dir
    from experiments.results.reading import read_results
    from experiments.results.tables import policy_means
    from experiments.runs import plan, run_plan
    from experiments.scenario import load_scenario

    check_workers(args.workers)
    sc = load_scenario(args.scenario)
    p = plan(sc, args.policies, args.seeds, flags=True)
    out = output_dir(args.out, sc.name)
    ran = run_plan(p, out, workers=args.workers, force=args.force, quiet=args.quiet)
    res = read_results(out, empty_ok=True)
    if not res.summary.empty:
        print(policy_means(res.summary, p.policies))
    print(f"{sc.name}: {ran.finished} runs finished in {ran.wall:.1f} s, {ran.already} were already done; results in "
          f"{out}/", file=sys.stderr)
    if ran.failures:
        report_failures(ran)
        return 1
    return 0
