"""Replaying a large Gavel-style trace with each of Gavel's policies: simulation CPU per policy, against Gavel's own.

    .venv/bin/python benchmarks/gavel.py [--jobs 600] [--lam 150] [--servers 36:36:36] [--seed 0]
                                         [--policies max_min_fairness_perf,...] [--profile]

A trace made by Gavel's generator (``sim.traces.gavel.generate``, ``-m``: multi-GPU jobs) is replayed as
``experiments/gavel/replay.yaml`` does, on one-GPU servers in 360-s rounds, with each policy. The simulation alone
(engine and policy, CPU time; building the trace table and jobs is printed apart) is compared with Gavel's
simulation of the same trace with the same policy (``GAVEL_CPU_S``), where it was measured: Gavel's ``simulate``
path at ``c4fa400`` run on this machine with cvxpy 1.9.3 and ECOS 2.0.14 (the versions of Gavel's reference runs),
CPU time of the ``simulate`` call only (no imports, no trace parsing), with its logging switched off (so Gavel's
own runs, which log every micro-task, take longer: the ratios are lower bounds). Those runs reproduce every reference
run of ``experiments/gavel/reference/`` to the printed digit. The target is at least 20x on every LP policy at 500+
jobs. At ``--lam 150`` the 108 GPUs are about 96 % busy, at 200 about 65 %.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import optim
import predictors
from predictors.throughput import gavel_table
from sim.engine import Simulation
from sim.traces import read_trace
from sim.traces.gavel import generate
from sim.workload import trace_jobs

LP_POLICIES = ("max_min_fairness_perf", "max_min_fairness", "min_total_duration_perf", "min_total_duration",
               "finish_time_fairness_perf", "finish_time_fairness")
"""Gavel's policies that solve an LP (or, for finish-time fairness, a cone program) at every recompute."""

GAVEL_CPU_S: dict[tuple[int, float, str, int], dict[str, float]] = {
    (600, 150.0, "36:36:36", 0): {"max_min_fairness_perf": 1.76, "max_min_fairness": 2.02,
                                  "min_total_duration_perf": 5.41, "min_total_duration": 5.82},
    (600, 200.0, "36:36:36", 0): {"max_min_fairness_perf": 1.60, "min_total_duration_perf": 4.47,
                                  "finish_time_fairness_perf": 7.56, "max_min_fairness": 1.89,
                                  "min_total_duration": 4.85, "finish_time_fairness": 9.61},
}
"""Gavel's simulation CPU seconds per (jobs, lam, servers, seed) and policy, measured on this machine as the module
docstring says (one run each, 2-core machine shared with other work)."""


def build(jobs: int, lam: float, servers: str, seed: int):
    from experiments.scenario.servers import server_types
    from sim.cluster import Cluster, NodeSlot
    from sim.model import ClusterRules

    text = generate(jobs, lam, seed, gavel_table().by_gpu("V100"), multi_gpu=True)
    types = server_types(servers, 1, 0.0)
    cluster = Cluster(tuple(v for v, _, _ in types),
                      tuple(NodeSlot(frozenset({v.name}), fixed=True) for v, n, _ in types for _ in range(n)),
                      rules=ClusterRules(gang=True, round_length=360.0, unplaceable_gangs=True))
    predictor = predictors.build("throughput")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.trace"
        path.write_text(text, encoding="utf-8")
        rows = read_trace(path, "gavel")
    return cluster, trace_jobs(rows, predictor, cluster.configs, seed, "bench.trace"), predictor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=600)
    ap.add_argument("--lam", type=float, default=150.0, help="mean inter-arrival time (s), Gavel's --lam")
    ap.add_argument("--servers", default="36:36:36")
    ap.add_argument("--policies", default=",".join(LP_POLICIES + ("fifo_perf", "isolated")))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    c0 = time.process_time()
    cluster, jobs, predictor = build(args.jobs, args.lam, args.servers, args.seed)
    setup = time.process_time() - c0
    gavel = GAVEL_CPU_S.get((args.jobs, args.lam, args.servers, args.seed), {})
    print(f"{args.jobs} jobs (Gavel's generator, lam {args.lam:g} s, multi-GPU, seed {args.seed}) on {args.servers} "
          f"one-GPU servers, 360-s rounds; trace, predictor and jobs: {setup:.2f} s CPU")
    print(f"{'policy':28} {'capsim CPU (s)':>14} {'wall (s)':>9} {'rounds':>7} {'avg JCT (h)':>11} "
          f"{'Gavel CPU (s)':>13} {'ratio':>7}")
    for kind in args.policies.split(","):
        sim = Simulation(cluster, jobs, optim.build(kind, seed=args.seed), predictor)
        prof = cProfile.Profile() if args.profile else None
        w0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        result = sim.run()
        if prof is not None:
            prof.disable()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        rounds = int((result.decisions.trigger == "round").sum())
        ref = gavel.get(kind)
        ratio = f"{ref / cpu:6.1f}x" if ref is not None else "      -"
        target = " (target >= 20x)" if ref is not None and kind in LP_POLICIES else ""
        print(f"{kind:28} {cpu:14.2f} {wall:9.2f} {rounds:7d} {result.summary['gavel_mean_jct'] / 3600:11.2f} "
              f"{ref if ref is not None else float('nan'):13.2f} {ratio}{target}")
        if prof is not None:
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(20)
            print(out.getvalue())
    if not gavel:
        print("(no Gavel reference for these arguments: GAVEL_CPU_S lists the measured ones)")


if __name__ == "__main__":
    main()
