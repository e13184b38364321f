"""``capsim run``: run one scenario (every policy × seed), print a table, write summary.csv and Parquet tables."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from sim.model import CapsimError

from experiments.results import atomic_write_bytes, summary_frame, tidy, write_csv, write_parquet
from experiments.runner import TABLES, Outcome, Progress, Task, run_tasks
from experiments.scenario import PolicySpec, Scenario, load_scenario, parse_seeds
from experiments.tables import policy_means

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
    specs = sc.policy_specs()
    if not names:
        return specs
    import optim

    by_label = {s.label: s for s in specs}
    known = optim.registry()
    out = []
    for n in (x.strip() for x in names.split(",") if x.strip()):
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


def run(args: argparse.Namespace) -> int:
    sc = load_scenario(args.scenario)
    seeds = sc.seeds
    if args.seeds:
        try:
            seeds = parse_seeds(args.seeds)
        except ValueError as e:
            raise CapsimError(f"--seeds: {e}") from None
    policies = select_policies(sc, args.policies)
    out = Path(args.out) if args.out else Path("results") / sc.name
    tasks = [Task.make(sc, p, s) for p in policies for s in seeds]
    order = [p.label for p in policies]

    print(f"{sc.name}: {len(policies)} policies × {len(seeds)} seeds, {sc.n_jobs} jobs on "
          f"{sc.cluster.node_count} nodes (scenario {sc.file})", flush=True)
    outcomes: list[Outcome] = []
    progress = Progress(len(tasks), quiet=args.quiet)

    def collect(o: Outcome) -> None:
        outcomes.append(o)
        progress.update(o.ok)

    t0 = time.perf_counter()
    try:
        run_tasks(tasks, collect, workers=max(1, min(args.workers, os.cpu_count() or 1, len(tasks))))
    finally:
        write_outputs(out, outcomes, order)
    ok = [o for o in outcomes if o.ok]
    failed = [o for o in outcomes if not o.ok]
    summary = summary_frame([o.summary for o in ok], LABELS)
    print()
    print(policy_means(summary, order))
    print(f"\n{len(ok)} runs in {time.perf_counter() - t0:.1f} s; results in {out}/")
    for o in failed:
        last = o.error.strip().splitlines()[-1] if o.error else "?"
        print(f"capsim: run failed: policy {o.task.policy_label}, seed {o.task.seed}: {last}", file=sys.stderr)
    if failed:
        print(f"capsim: {len(failed)} of {len(tasks)} runs failed; tracebacks in {out}/failures.txt", file=sys.stderr)
        return 1
    return 0


def write_outputs(out: Path, outcomes: list[Outcome], order: list[str]) -> None:
    """Write summary.csv, the Parquet tables and failures.txt for the outcomes so far, sorted by policy order."""
    rank = {p: i for i, p in enumerate(order)}
    ok = sorted((o for o in outcomes if o.ok), key=lambda o: (rank.get(o.task.policy_label, 1e9), o.task.seed))
    out.mkdir(parents=True, exist_ok=True)
    if ok:
        summary = summary_frame([o.summary for o in ok], [])
        write_csv(summary, out / "summary.csv")
        for name in TABLES:
            write_parquet(tidy([o.tables[name] for o in ok], []), out / f"{name}.parquet")
    failed = [o for o in outcomes if not o.ok]
    fail_file = out / "failures.txt"
    if failed:
        text = "\n".join(f"== policy {o.task.policy_label}, seed {o.task.seed}, run {o.task.run_id}\n{o.error}"
                         for o in failed)
        atomic_write_bytes(fail_file, text.encode("utf-8"))
    elif fail_file.exists():
        fail_file.unlink()
