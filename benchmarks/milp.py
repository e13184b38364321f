"""Benchmark the MILP decision: solve time and model size for growing instances, HiGHS, CBC and Gurobi side by side.

An instance is one decision snapshot with S node slots and J jobs in the system, built from the paper's VM catalogue
and the J1–J6 mix: about 40% of the jobs already run (pinned, non-preemptive) on half of the slots, the rest wait.
Runtimes come from the measured predictor on the shipped runs (tests/instances.py builds the snapshots). Each
solver gets a relative gap of 1% and a 10 s time limit; one thread.

Usage: .venv/bin/python benchmarks/milp.py [--sizes 2x5,5x15,...] [--reps 5] [--solvers highs,cbc,gurobi]
                                          [--preempt] [--dominance pareto|safe] [--time-limit 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optim.milp import build_model, solve  # noqa: E402
from sim.catalogue import configurations, vm_types  # noqa: E402
from tests.instances import instance, runtime_table  # noqa: E402

DEFAULT_SIZES = "2x5,5x15,8x24,10x30,20x60,30x90,50x150"
GUROBI_LIMIT = 2000


def has_gurobi() -> bool:
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return False
    return True


def has_full_gurobi() -> bool:
    """True when GRB_LICENSE_FILE points to a licence (then the size limit may not apply)."""
    return bool(os.environ.get("GRB_LICENSE_FILE"))


def simulated_decisions(node_counts: str) -> None:
    """Decision sizes and wall times inside real engine runs (paper setting: 10 x nodes jobs, 30 s inter-arrival)."""
    try:
        import optim
        import predictors
        from sim.cluster import Cluster, NodeSlot
        from sim.engine import Simulation
        from sim.workload import WorkloadSpec, poisson_jobs
        pred = predictors.build("measured")
    except Exception as e:  # noqa: BLE001
        print(f"simulated runs skipped: {e}")
        return
    print("decisions inside simulated runs (default milp policy, HiGHS, seeds 0-1, mean inter-arrival 30 s):")
    print(f"{'nodes':>6} {'decisions':>9} {'jobs med':>8} {'max':>4} {'vars med':>8} {'max':>6} "
          f"{'wall med':>8} {'p95':>6} {'max':>6} {'statuses'}")
    vms = tuple(vm_types().values())
    for n in (int(v) for v in node_counts.split(",") if v):
        cl = Cluster(vms, tuple(NodeSlot() for _ in range(n)))
        frames = []
        for seed in range(2):
            jobs = poisson_jobs(WorkloadSpec(10 * n, 30.0), pred, cl.configs, seed)
            frames.append(Simulation(cl, jobs, optim.build("milp"), pred).run().decisions)
        import pandas as pd

        d = pd.concat(frames)
        d = d[d["variables"].fillna(0) > 0]
        size = d["waiting"] + d["running"]
        statuses = ", ".join(f"{k} {v}" for k, v in d["status"].value_counts().items())
        print(f"{n:>6} {len(d):>9} {size.median():>8.0f} {size.max():>4} {d['variables'].median():>8.0f} "
              f"{d['variables'].max():>6} {d['wall_time'].median():>8.3f} {d['wall_time'].quantile(0.95):>6.3f} "
              f"{d['wall_time'].max():>6.3f} {statuses}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated SLOTSxJOBS list")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--solvers", default="highs,cbc,gurobi")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--dominance", default="safe", choices=["pareto", "safe"], help="config reduction")
    ap.add_argument("--runs", default="5,10", help="node counts of simulated runs to profile ('' to skip)")
    ap.add_argument("--preempt", action="store_true", help="running jobs may move (larger, harder models)")
    args = ap.parse_args(argv)

    vms = tuple(vm_types().values())
    table, source = runtime_table(configurations(vms))
    solvers = [s for s in args.solvers.split(",") if s != "gurobi" or has_gurobi()]
    print(f"runtimes: {source}")
    print(f"gap {args.gap:.0%}, time limit {args.time_limit:g} s, 1 thread, {args.reps} instances per size, "
          f"preempt={args.preempt}, dominance={args.dominance}; times are build + solve wall seconds (median / max)")
    header = f"{'slots x jobs':>12} {'vars':>6} {'cons':>6} {'build':>6}"
    for s in solvers:
        header += f" | {s + ' med':>11} {'max':>6} {'ok':>4}"
    print(header)
    every: dict[str, str] = {}
    median_ok: dict[str, str] = {}
    given_up: set[str] = set()
    for size in args.sizes.split(","):
        slots, jobs = (int(v) for v in size.lower().split("x"))
        if all(s in given_up for s in solvers):
            print(f"{size:>12}  skipped: every solver stopped at a smaller size (median over the time limit, "
                  "or over the licence)")
            continue
        snaps = [instance(slots, jobs, seed, table) for seed in range(args.reps)]
        sizes, builds = [], []
        times: dict[str, list[float]] = {s: [] for s in solvers}
        solved: dict[str, int] = {s: 0 for s in solvers}
        for snap in snaps:
            t0 = time.perf_counter()
            sizes.append(build_model(snap, preempt=args.preempt, dominance=args.dominance).size)
            builds.append(time.perf_counter() - t0)
            for s in solvers:
                if s in given_up or (s == "gurobi" and max(sizes[-1]) > GUROBI_LIMIT and not has_full_gurobi()):
                    continue
                t0 = time.perf_counter()
                model = build_model(snap, preempt=args.preempt, dominance=args.dominance)
                out = solve(model, s, time_limit=args.time_limit, gap=args.gap)
                times[s].append(time.perf_counter() - t0)
                solved[s] += out.status == "optimal" and (out.gap is None or out.gap <= args.gap + 1e-9)
        nv = int(statistics.median(v for v, _ in sizes))
        nc = int(statistics.median(c for _, c in sizes))
        line = f"{size:>12} {nv:>6} {nc:>6} {statistics.median(builds):>6.2f}"
        for s in solvers:
            ts = times[s]
            if not ts:
                why = "licence" if s == "gurobi" and max(nv, nc) > GUROBI_LIMIT else "skipped"
                line += f" | {why:>11} {'':>6} {'':>4}"
                continue
            line += f" | {statistics.median(ts):>11.3f} {max(ts):>6.2f} {solved[s]:>2}/{len(ts)}"
            if solved[s] == len(ts) and max(ts) <= args.time_limit:
                every[s] = size
            if solved[s] * 2 > len(ts) and statistics.median(ts) <= args.time_limit:
                median_ok[s] = size
            if statistics.median(ts) > args.time_limit:
                given_up.add(s)
        if "gurobi" in solvers and min(max(v, c) for v, c in sizes) > GUROBI_LIMIT and not has_full_gurobi():
            given_up.add("gurobi")
        print(line, flush=True)
    if args.runs:
        simulated_decisions(args.runs)
    for s in solvers:
        print(f"{s}: largest size solved to {args.gap:.0%} within {args.time_limit:g} s on every instance: "
              f"{every.get(s, 'none')}; on most instances (median within the limit): {median_ok.get(s, 'none')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
