"""Production traces at full scale: each example scenario's whole trace replayed with each of its policies, timed.

    .venv/bin/python benchmarks/traces.py [--traces philly,alibaba_pai_2023] [--policies fifo,edf,greedy]

Each replay runs in its own process (so that its peak memory is its own) and prints the CPU seconds of its three
phases - reading (the scenario loaded and checked, which reads the trace file and checks every cell), building (the
cluster, the predictors, the jobs and the simulation's runtime tables) and simulating (the engine and the policy to
the last job's end, with the records) - the jobs simulated per CPU second over all three, and the peak resident
memory. CPU time, because the machine is shared: wall time swings with the load of others. Target (issue 25): every
replay under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {"philly": "experiments/traces/philly.yaml", "alibaba_pai_2023": "experiments/traces/alibaba_pai_2023.yaml",
             "acme_kalos": "experiments/traces/acme_kalos.yaml"}


def one(trace: str, policy: str) -> dict[str, object]:
    """Replay ``trace``'s scenario with its policy ``policy`` in this process; the phases' CPU seconds and more."""
    from experiments.scenario import load_scenario
    from experiments.scenario.components import build_policy
    from sim.engine import Simulation

    c0 = time.process_time()
    sc = load_scenario(ROOT / SCENARIOS[trace])  # checking the scenario reads and checks its trace (then cached)
    specs = {p.label: p for p in sc.policy_specs()}
    rows = sc.trace_rows()
    c1 = time.process_time()
    cluster = sc.build_cluster()
    est, truth = sc.predictors()
    jobs = sc.build_jobs(0, truth, cluster.configs)
    sim = Simulation(cluster, jobs, build_policy(specs[policy]), est, truth)
    c2 = time.process_time()
    w2 = time.perf_counter()
    result = sim.run()
    c3, w3 = time.process_time(), time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = result.summary
    return {"trace": trace, "policy": policy, "rows": len(rows), "jobs": len(jobs), "nodes": len(cluster.slots),
            "configs": len(cluster.configs), "read": c1 - c0, "build": c2 - c1, "simulate": c3 - c2,
            "simulate_wall": w3 - w2, "peak_mib": peak, "decisions": s["decisions"], "mean_wait": s["mean_wait"],
            "mean_jct": s["mean_jct"], "utilisation": s["gpu_utilisation"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="philly,alibaba_pai_2023", help=f"comma-separated, of {', '.join(SCENARIOS)}")
    ap.add_argument("--policies", default="fifo,edf,greedy", help="comma-separated policy labels of the scenarios")
    ap.add_argument("--one", nargs=2, metavar=("TRACE", "POLICY"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    print(f"{'trace':<17} {'policy':<7} {'jobs':>7} {'nodes':>6} {'read':>6} {'build':>6} {'simulate':>9} "
          f"{'total':>7} {'jobs/s':>7} {'peak MiB':>9}   (CPU seconds)")
    worst = 0.0
    for trace in args.traces.split(","):
        for policy in args.policies.split(","):
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            p = subprocess.run([sys.executable, __file__, "--one", trace, policy], capture_output=True, text=True,
                               env=env, cwd=ROOT)
            if p.returncode:
                print(f"{trace} {policy}: failed\n{p.stdout}{p.stderr}", file=sys.stderr)
                return 1
            r = json.loads(p.stdout.strip().splitlines()[-1])
            total = r["read"] + r["build"] + r["simulate"]
            worst = max(worst, total)
            print(f"{trace:<17} {policy:<7} {r['jobs']:>7,} {r['nodes']:>6,} {r['read']:>6.2f} {r['build']:>6.2f} "
                  f"{r['simulate']:>9.2f} {total:>7.2f} {r['jobs'] / total:>7,.0f} {r['peak_mib']:>9,.0f}   "
                  f"({r['decisions']:,.0f} decisions, {r['configs']} configurations, mean wait "
                  f"{r['mean_wait']:,.0f} s, simulate wall {r['simulate_wall']:.1f} s)", flush=True)
    print(f"slowest replay: {worst:.1f} CPU s (target: under 60 s each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
