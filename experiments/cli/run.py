"""``capsim run``: run one scenario (every policy × seed), print a table, store the results (``results.store``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from experiments.scenario import PolicySpec, Scenario

HELP = "run a scenario (the embedded default if none is given) for every policy and seed"

LABELS = ["policy", "seed"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?", metavar="SCENARIO.yaml", help="scenario file (default: the embedded one)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<scenario name>/)")
    p.add_argument("--seeds", metavar="SEEDS", help="seeds to run instead of the scenario's: '0-4' or '0,3,7'")
    p.add_argument("--policies", metavar="NAMES", help="comma-separated policy names or registered kinds to run")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="worker processes (default: the core count; 1 runs in this process)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def select_policies(sc: Scenario, names: str | None) -> list[PolicySpec]:
    """The scenario's policies, or those named (a scenario policy's name or any registered kind)."""
    from experiments.scenario import PolicySpec
    from sim.model import CapsimError

    specs = sc.policy_specs()
    if not names:
        return specs
    import optim

    by_label = {s.label: s for s in specs}
    known = optim.registry()
    out: list[PolicySpec] = []
    for n in (x.strip() for x in names.split(",") if x.strip()):
        if any(p.label == n for p in out):
            raise CapsimError(f"--policies: {n!r} is named twice; each policy runs once per seed (a second would "
                              f"count twice in every mean)")
        if n in by_label:
            out.append(by_label[n])
        elif n in known:
            out.append(PolicySpec(kind=n))
        else:
            raise CapsimError(
                f"--policies: unknown policy {n!r}; the scenario has {', '.join(by_label)}"
                f" and the registered kinds are {', '.join(sorted(known))}"
            )
    return out


def check_workers(n: int) -> int:
    """``--workers``: a number ≥ 1."""
    from sim.model import CapsimError

    if n < 1:
        raise CapsimError(f"--workers: expected a number ≥ 1 (1 runs in this process), found {n}")
    return n


def run(args: argparse.Namespace) -> int:
    from experiments.results.files import summary_frame
    from experiments.results.folders import output_dir
    from experiments.results.store import ResultStore, new_manifest
    from experiments.results.tables import policy_means
    from experiments.running.pool import run_tasks
    from experiments.running.progress import Progress
    from experiments.running.tasks import Outcome, Task
    from experiments.scenario import load_scenario, parse_seeds
    from sim.model import CapsimError

    check_workers(args.workers)
    sc = load_scenario(args.scenario)
    seeds = sc.seeds
    if args.seeds:
        try:
            seeds = parse_seeds(args.seeds)
        except ValueError as e:
            raise CapsimError(f"--seeds: {e}") from None
    policies = select_policies(sc, args.policies)
    out = output_dir(args.out, sc.name)
    tasks = [Task.make(sc, p, s) for p in policies for s in seeds]
    order = [p.label for p in policies]

    print(f"{sc.name}: {len(policies)} policies × {len(seeds)} seeds, {sc.n_jobs} jobs on "
          f"{sc.cluster.node_count} nodes (scenario {sc.file})", flush=True)
    store = ResultStore(out)
    outcomes: list[Outcome] = []
    progress = Progress(len(tasks), quiet=args.quiet)

    def collect(o: Outcome) -> None:
        store.write(o)
        outcomes.append(o)
        progress.update(o.ok)

    t0 = time.perf_counter()
    manifest = new_manifest("run", sc.name, sc.file, [], order, seeds, [t.run_id for t in tasks])
    with store.writing(manifest, log=lambda line: print(f"capsim: {line}", file=sys.stderr)):
        run_tasks(tasks, collect, workers=max(1, min(args.workers, os.cpu_count() or 1, len(tasks))))
    ok = [o for o in outcomes if o.ok]
    failed = [o for o in outcomes if not o.ok]
    summary = summary_frame([o.summary for o in ok if o.summary is not None], LABELS)
    print()
    print(policy_means(summary, order))
    print(f"\n{len(ok)} runs in {time.perf_counter() - t0:.1f} s; results in {out}/")
    for o in failed:
        last = o.error.strip().splitlines()[-1] if o.error else "?"
        print(f"capsim: run failed: policy {o.task.policy_label}, seed {o.task.seed}: {last}", file=sys.stderr)
    if failed:
        print(f"capsim: {len(failed)} of {len(tasks)} runs failed; tracebacks in {out}/failures/", file=sys.stderr)
        return 1
    return 0
