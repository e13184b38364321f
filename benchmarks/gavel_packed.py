"""Replaying a long-queue Gavel trace with Gavel's packing policies: simulation CPU per policy, against Gavel's own.

    .venv/bin/python benchmarks/gavel_packed.py [--jobs 300] [--lam 200] [--servers 4:4:4] [--seed 21]
                                                [--policies fifo_packed,...]

A trace of one-GPU jobs made by Gavel's generator (``sim.traces.gavel.generate``; Gavel packs one-GPU jobs only) is
replayed as ``studies.gavel_replay`` replays Gavel's traces (``experiments/gavel/replay.yaml``: one-GPU servers,
360-s rounds; a packing policy gets co-location with Gavel's measured pairs), with each policy. At the defaults
(300 jobs every 200 s on average, 12 GPUs) the queue reaches some 240 jobs, and Gavel's packing policies keep a
priority entry and an LP variable per type for every pair of them. The simulation alone (engine and policy, CPU
time; building the trace, scenario and jobs is printed apart) is compared with Gavel's simulation of the same trace
and policy (``GAVEL_CPU_S``), measured on this machine: Gavel's ``simulate`` path at ``c4fa400`` with its packing
policies (cvxpy 1.9.3, ECOS 2.0.14), CPU time of the ``simulate`` call alone, logging switched off (so Gavel's own
runs, which log every micro-task, take longer: the ratios are lower bounds). The target is at least 20x on every
packing policy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the studies live beside the installed packages

GAVEL_CPU_S: dict[tuple[int, float, str, int], dict[str, float]] = {
    (300, 200.0, "4:4:4", 21): {"fifo_perf": 2.27},
}
"""Gavel's simulation CPU seconds per (jobs, lam, servers, seed) and policy, measured on this machine as the module
docstring says (one run each, on a 2-core machine shared with other work)."""

POLICIES = ("fifo_perf", "fifo_packed", "gandiva", "max_min_fairness_packed", "min_total_duration_packed",
            "finish_time_fairness_packed")


def main() -> None:
    from sim.engine import Simulation
    from studies.gavel_replay import build, write_trace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--lam", type=float, default=200.0, help="mean inter-arrival time (s), Gavel's --lam")
    ap.add_argument("--servers", default="4:4:4")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--policies", default=",".join(POLICIES))
    args = ap.parse_args()

    gavel = GAVEL_CPU_S.get((args.jobs, args.lam, args.servers, args.seed), {})
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(Path(tmp) / "bench.trace", args.jobs, args.lam, args.seed)
        print(f"{args.jobs} one-GPU jobs (Gavel's generator, lam {args.lam:g} s, seed {args.seed}) on {args.servers} "
              f"one-GPU servers, 360-s rounds")
        print(f"{'policy':28} {'setup (s)':>9} {'capsim CPU (s)':>14} {'rounds':>7} {'most waiting':>12} "
              f"{'avg JCT (h)':>11} {'Gavel CPU (s)':>13} {'ratio':>7}")
        for kind in args.policies.split(","):
            c0 = time.process_time()
            cluster, jobs, policy, estimator, truth, told, true_pairs = build(trace, kind, args.seed,
                                                                              servers=args.servers)
            sim = Simulation(cluster, jobs, policy, estimator, truth, interference=told, true_interference=true_pairs)
            c1 = time.process_time()
            result = sim.run()
            cpu = time.process_time() - c1
            rounds = int((result.decisions.trigger == "round").sum())
            ref = gavel.get(kind)
            ratio = f"{ref / cpu:6.1f}x" if ref is not None else "      -"
            target = " (target >= 20x)" if ref is not None and kind != "fifo_perf" else ""
            print(f"{kind:28} {c1 - c0:9.2f} {cpu:14.2f} {rounds:7d} {int(result.decisions.waiting.max()):12d} "
                  f"{result.summary['gavel_mean_jct'] / 3600:11.2f} {ref if ref is not None else float('nan'):13.2f} "
                  f"{ratio}{target}")
    if not gavel:
        print("(no Gavel reference for these arguments: GAVEL_CPU_S lists the measured ones)")


if __name__ == "__main__":
    main()
