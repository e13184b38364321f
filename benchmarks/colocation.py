"""Decision time of the co-locating policies at trace scale: the CPU seconds ``greedy`` and ``insertion`` spend in
their decisions with co-location on and off, over a sweep file's runs (default: ElasticFlow's cluster01,
``experiments/sharing/elasticflow.yaml``, docs/sharing.md "Decision time").

    .venv/bin/python benchmarks/colocation.py [SWEEP.yaml] [--policies greedy,insertion] [--against REV]

Per run it prints the decisions' CPU seconds (``time.process_time`` around each ``decide``), the run's total cost and
a digest of its jobs' start and end times, and per policy the ratio on / off. ``--against REV`` also runs this script
on the code of git revision REV (a temporary git worktree on ``sys.path`` first) in a subprocess, checks that every
run decided the same (same digest) and prints the ratio of decision CPU time old / new per run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "experiments" / "sharing" / "elasticflow.yaml"


def measure(path: Path, policies: list[str]) -> list[dict[str, Any]]:
    """One run per task of the sweep (its own seeds): label, decisions' CPU seconds, total cost and jobs' digest."""
    from experiments.api import load
    from experiments.runs import plan
    from experiments.scenario.components import build_policy
    from experiments.scenario.spec import PolicySpec
    from sim.engine import Simulation

    out = []
    for task in plan(load(path), policies).tasks:
        sc = task.scenario_obj()
        estimator, truth = sc.predictors()
        cluster = sc.build_cluster()
        jobs = sc.build_jobs(task.seed, truth, cluster.configs)
        policy = build_policy(PolicySpec.model_validate(task.policy))
        told, true_pairs = sc.interference()
        cpu = [0.0]
        decide = policy.decide

        def timed(snapshot: Any, decide: Any = decide, cpu: list[float] = cpu) -> Any:
            t0 = time.process_time()
            try:
                return decide(snapshot)
            finally:
                cpu[0] += time.process_time() - t0

        policy.decide = timed
        result = Simulation(cluster, jobs, policy, estimator, truth, seed=task.seed, interference=told,
                            true_interference=true_pairs).run()
        times = result.jobs.sort_values("job_id")[["job_id", "start_time", "end_time"]].to_numpy()
        label = ", ".join([f"{k}={v}" for k, v in task.labels] + [task.policy_label])
        out.append({"run": label, "cpu": cpu[0], "cost": float(result.summary["total_cost"]),
                    "digest": hashlib.sha256(times.tobytes()).hexdigest()[:16]})
        print(f"  {label:<55} decisions {cpu[0]:8.2f} s CPU   cost {out[-1]['cost']:12.2f}   "
              f"jobs {out[-1]['digest']}", file=sys.stderr, flush=True)
    return out


def _on_off(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if "colocation=None" in r["run"]:
            on = [o for o in rows if o["run"] != r["run"] and o["run"].split(", ")[-1] == r["run"].split(", ")[-1]]
            for o in on:
                print(f"{o['run']}: on / off {o['cpu'] / max(r['cpu'], 1e-9):.1f}x ({o['cpu']:.2f} / {r['cpu']:.2f} s)")


def _against(rev: str, path: Path, policies: list[str]) -> list[dict[str, Any]]:
    from engine import checked_out

    with checked_out(rev) as tree:
        p = subprocess.run([sys.executable, __file__, str(path), "--policies", ",".join(policies), "--json"],
                           env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, stdout=subprocess.PIPE, text=True)
        if p.returncode:
            raise SystemExit(f"benchmark on {rev} failed (exit {p.returncode})")
        return list(json.loads(p.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--policies", default="greedy,insertion")
    ap.add_argument("--against", metavar="REV", help="also run on git revision REV; print old / new per run")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    old = None
    if args.against:
        print(f"old ({args.against}):", file=sys.stderr)
        old = _against(args.against, args.sweep.resolve(), policies)
    if not args.json:
        print("new (working tree):", file=sys.stderr)
    new = measure(args.sweep.resolve(), policies)
    if args.json:
        import sim

        if not Path(sim.__file__).resolve().is_relative_to(Path.cwd().resolve()):
            raise SystemExit(f"benchmark: sim imported from {sim.__file__}, not from {Path.cwd()}")
        print(json.dumps(new))
        return 0
    _on_off(new)
    if old is not None:
        for o, n in zip(old, new, strict=True):
            same = "same decisions" if o["digest"] == n["digest"] and o["cost"] == n["cost"] else "DECISIONS DIFFER"
            print(f"{n['run']}: old / new {o['cpu'] / max(n['cpu'], 1e-9):.2f}x ({o['cpu']:.2f} -> "
                  f"{n['cpu']:.2f} s CPU), {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
