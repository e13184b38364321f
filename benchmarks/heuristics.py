"""Benchmark the heuristics against the MILP and the lower bound, and the MILP against its code before this work.

Per instance family and size: each policy's mean total cost relative to the MILP's and to the lower bound
(``optim.bound``), its decision time p50 / p95 / max over every decision of the runs, and its mean wall time per run.

Instance families (the measured predictor's J1–J6 runtimes on the paper's catalogue, unrestricted node slots):

- ``poisson``: capsim's setting scaled up, 10 jobs per node and a mean inter-arrival of 150/N s (30 s at 5 nodes,
  7.5 s at 20, 3 s at 50, 1.5 s at 100), so the load per node stays the paper's;
- ``paper``: the paper grid of ``experiments/paper.yaml`` (2, 5, 10 nodes × 30 s, 45 s; 10 jobs per node);
- ``high`` / ``low``: the published generator's load schemes (docs/heuristics.md §H8) over the same catalogue and jobs
  (``published_jobs``);
- ``decisions``: not whole runs but the decisions of MILP runs (poisson, 2–20 nodes), each heuristic's plan priced
  by the MILP's objective against the MILP's own plan.

``--before REF`` also runs the MILP of the code at git REF on the last poisson size in a subprocess, side by side
with today's MILP on the same instances, and prints the speed-up. REF defaults to where this branch left main; once
the branch is merged, name the commit before the faster MILP explicitly (``--before 4742e86``).

Usage: .venv/bin/python benchmarks/heuristics.py [--families decisions,poisson,paper,high,low]
           [--sizes 20x200,50x500,100x1000] [--seeds 1] [--paper-seeds 5] [--policies greedy,random_greedy,...]
           [--before REF | --no-before]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import optim  # noqa: E402
import predictors  # noqa: E402
from optim.bound import lower_bound  # noqa: E402
from sim.catalogue import job_types, vm_types  # noqa: E402
from sim.cluster import Cluster, NodeSlot  # noqa: E402
from sim.engine import Simulation  # noqa: E402
from sim.model import Config, Job  # noqa: E402
from sim.workload import WorkloadSpec, poisson_jobs  # noqa: E402

POLICIES = "greedy,random_greedy,local_search,path_relinking,insertion,milp"
PAPER_GRID = [(n, ia) for ia in (30.0, 45.0) for n in (2, 5, 10)]
SCHEMES = {"high": 1.3 / 3, "low": 1.3 / 12}


def published_jobs(n_nodes: int, scheme: str, seed: int, truth, configs: Sequence[Config]) -> list[Job]:
    """The published generator (docs/heuristics.md §H8) over J1–J6: 10·N+1 jobs drawn uniformly; each job's rate
    λ = N·G_max / t1 (G_max the largest VM's GPUs, t1 its fastest 1-GPU runtime); jobs in name order dealt round-robin
    into round(jobs/10) clusters; each cluster's rate the mean of 1.3·λ/3 ("high") or 1.3·λ/12 ("low") over its
    members ("mixed": high for even clusters, low for odd); clusters emitted one after another with exponential
    inter-arrival times of mean 1/rate, the first job at t=0; deadline s + U(t_min, 3·t_min), weight 2·U(0.0015,
    0.0075)."""
    rng = np.random.default_rng(seed)
    specs = list(job_types().values())
    table = np.asarray(truth.runtimes(specs, list(configs)), dtype=float)
    t_min = table.min(axis=1)
    t_one = table[:, [k for k, c in enumerate(configs) if c.gpus == 1]].min(axis=1)
    g_max = max(c.vm.gpus for c in configs)
    n_jobs = 10 * n_nodes + 1
    drawn = rng.integers(len(specs), size=n_jobs)
    order = sorted(range(n_jobs), key=lambda i: (specs[drawn[i]].name, i))
    n_clusters = max(1, round(n_jobs / 10))
    clusters: list[list[int]] = [[] for _ in range(n_clusters)]
    for pos, i in enumerate(order):
        clusters[pos % n_clusters].append(i)
    jobs, t = [], 0.0
    for c, members in enumerate(clusters):
        factor = SCHEMES[scheme] if scheme in SCHEMES else SCHEMES["high" if c % 2 == 0 else "low"]
        rate = float(np.mean([factor * n_nodes * g_max / t_one[drawn[i]] for i in members]))
        for i in members:
            if jobs:
                t += float(rng.exponential(1.0 / rate))
            s = int(drawn[i])
            deadline = t + float(rng.uniform(t_min[s], 3.0 * t_min[s]))
            jobs.append(Job(len(jobs), specs[s], t, deadline, 2.0 * float(rng.uniform(0.0015, 0.0075))))
    return jobs


def instance(family: str, n: int, n_jobs: int, ia: float | None, seed: int, truth) -> tuple[Cluster, list[Job]]:
    cluster = Cluster(tuple(vm_types().values()), tuple(NodeSlot() for _ in range(n)))
    if family in ("poisson", "paper"):
        return cluster, poisson_jobs(WorkloadSpec(n_jobs, ia or 150.0 / n), truth, cluster.configs, seed)
    return cluster, published_jobs(n, family, seed, truth, cluster.configs)


def bound(cluster: Cluster, jobs: list[Job], truth) -> float:
    specs = list(dict.fromkeys(j.spec for j in jobs))
    table = np.asarray(truth.runtimes(specs, cluster.configs))
    row = {s: i for i, s in enumerate(specs)}
    return lower_bound(jobs, cluster.configs, table[[row[j.spec] for j in jobs]], [s.allowed for s in cluster.slots])


def run_once(kind: str, cluster: Cluster, jobs: list[Job], truth, seed: int) -> dict:
    params = {"seed": seed} if "seed" in optim.registry()[kind].param_names() else {}
    t0 = time.perf_counter()
    r = Simulation(cluster, jobs, optim.build(kind, **params), truth).run()
    wall = time.perf_counter() - t0
    return {"cost": r.summary["total_cost"], "wall": wall, "decisions": r.decisions["wall_time"].to_numpy()}


def compare(title: str, runs: list[tuple[Cluster, list[Job], int]], policies: list[str], truth) -> None:
    """Run every policy on every instance and print the table."""
    bounds = [bound(c, j, truth) for c, j, _ in runs]
    rows = {}
    for kind in policies:
        out = [run_once(kind, c, j, truth, seed) for c, j, seed in runs]
        rows[kind] = out
        print(f"  ... {kind}: {np.mean([o['cost'] for o in out]):,.1f}", file=sys.stderr, flush=True)
    milp = np.mean([o["cost"] for o in rows["milp"]]) if "milp" in rows else np.nan
    lb = float(np.mean(bounds))
    print(f"\n{title}: {len(runs)} instance(s), mean lower bound {lb:,.2f}")
    print(f"{'policy':<16} {'total $':>10} {'/ milp':>7} {'/ bound':>8} {'dec p50 s':>10} {'p95 s':>7} "
          f"{'max s':>7} {'run s':>8}")
    for kind, out in rows.items():
        cost = float(np.mean([o["cost"] for o in out]))
        dec = np.concatenate([o["decisions"] for o in out])
        print(f"{kind:<16} {cost:>10,.1f} {cost / milp:>7.3f} {cost / lb:>8.2f} {np.percentile(dec, 50):>10.4f} "
              f"{np.percentile(dec, 95):>7.3f} {dec.max():>7.3f} {np.mean([o['wall'] for o in out]):>8.1f}",
              flush=True)


def decisions(policies: list[str], truth, seeds: int) -> None:
    """Every heuristic on the decisions a MILP run takes (the snapshots where jobs wait and some slot has room), each
    plan priced by the shared cost (the MILP's objective): the excess over the MILP's own plan, and how often."""
    from optim.heuristics import plan_cost
    from optim.heuristics.base import has_room
    from optim.milp import MILP

    class Recording(MILP):
        def decide(self, snapshot):
            plan = super().decide(snapshot)
            if snapshot.waiting and has_room(snapshot) and plan.info.objective is not None:
                self.kept.append((snapshot, plan.info.objective))
            return plan

    print(f"\ndecisions of MILP runs (poisson, seeds 0..{seeds - 1}): each policy's plan priced by the MILP's "
          "objective; excess = Σ(cost − MILP's) / Σ MILP's, worse = decisions more than 0.01% dearer")
    print(f"{'policy':<16}" + "".join(f" {f'{n} nodes':>22}" for n in (2, 5, 10, 20)) + f" {'decide s':>9}")
    corpus = {}
    for n in (2, 5, 10, 20):
        rec = Recording()
        rec.kept = []
        for seed in range(seeds):
            cluster, jobs = instance("poisson", n, 10 * n, None, seed, truth)
            Simulation(cluster, jobs, rec, truth).run()
        corpus[n] = rec.kept
    for kind in [p for p in policies if p != "milp"]:
        line, spent = f"{kind:<16}", 0.0
        for kept in corpus.values():
            params = {"seed": 0} if "seed" in optim.registry()[kind].param_names() else {}
            policy = optim.build(kind, **params)
            excess, total, worse = 0.0, 0.0, 0
            for snap, objective in kept:
                t0 = time.perf_counter()
                plan = policy.decide(snap)
                spent += time.perf_counter() - t0
                cost = plan_cost(snap, plan)
                excess += cost - objective
                total += objective
                worse += cost > objective * (1 + 1e-4)
            line += f" {f'{100 * excess / total:+.2f}% ({worse}/{len(kept)})':>22}"
        print(line + f" {spent:>9.2f}", flush=True)


_BEFORE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, optim, predictors
from sim.catalogue import vm_types
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.workload import WorkloadSpec, poisson_jobs
n, jobs, ia, seed = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
assert optim.__file__.startswith(sys.argv[1]), optim.__file__
truth = predictors.build("measured")
cluster = Cluster(tuple(vm_types().values()), tuple(NodeSlot() for _ in range(n)))
work = poisson_jobs(WorkloadSpec(jobs, ia), truth, cluster.configs, seed)
t0, c0 = time.perf_counter(), time.process_time()
r = Simulation(cluster, work, optim.build("milp"), truth).run()
w = r.decisions["wall_time"].to_numpy()
print(json.dumps({"cost": r.summary["total_cost"], "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "p50": float(np.percentile(w, 50)), "p95": float(np.percentile(w, 95)), "max": float(w.max())}))
"""


def _milp_now(n: int, n_jobs: int, seed: int) -> dict:
    truth = predictors.build("measured")
    cluster, jobs = instance("poisson", n, n_jobs, 150.0 / n, seed, truth)
    t0, c0 = time.perf_counter(), time.process_time()
    r = Simulation(cluster, jobs, optim.build("milp"), truth).run()
    w = r.decisions["wall_time"].to_numpy()
    return {"cost": r.summary["total_cost"], "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "p50": float(np.percentile(w, 50)), "p95": float(np.percentile(w, 95)), "max": float(w.max())}


def milp_before_after(ref: str, n: int, n_jobs: int, seeds: int) -> None:
    """Today's MILP and the MILP of the code at ``ref`` on the same poisson instances, one after the other."""
    ia = 150.0 / n
    print(f"\nMILP before ({ref[:12]}) and now, side by side: poisson {n} nodes x {n_jobs} jobs")
    print(f"{'seed':>4} {'code':<7} {'total $':>10} {'run s':>8} {'cpu s':>8} {'dec p50 s':>10} {'p95 s':>7} "
          f"{'max s':>7}")
    sums = {"before": np.zeros(3), "now": np.zeros(3)}
    with tempfile.TemporaryDirectory(prefix="capsim-before-") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": tmp}
        for seed in range(seeds):
            before = subprocess.run([sys.executable, "-c", _BEFORE, tmp, str(n), str(n_jobs), str(ia), str(seed)],
                                    check=True, capture_output=True, text=True, env=env, cwd=tmp)
            runs = {"before": json.loads(before.stdout.strip().splitlines()[-1]), "now": _milp_now(n, n_jobs, seed)}
            for name, o in runs.items():
                sums[name] += (o["cost"], o["wall"], o["cpu"])
                print(f"{seed:>4} {name:<7} {o['cost']:>10,.1f} {o['wall']:>8.1f} {o['cpu']:>8.1f} {o['p50']:>10.4f} "
                      f"{o['p95']:>7.3f} {o['max']:>7.3f}", flush=True)
    (c0, w0, p0), (c1, w1, p1) = sums["before"], sums["now"]
    print(f"over {seeds} seed(s): speed-up {w0 / w1:.1f}x wall, {p0 / p1:.1f}x cpu; total cost now / before "
          f"{c1 / c0:.4f}", flush=True)


def default_before() -> str:
    """Where this branch left main: the code before the heuristics and the faster MILP."""
    out = subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], capture_output=True, text=True)
    return out.stdout.strip() or "HEAD"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="decisions,poisson,paper,high,low", help="comma-separated families")
    ap.add_argument("--sizes", default="20x200,50x500,100x1000", help="NODESxJOBS for poisson (jobs ignored "
                    "by high/low, which draw 10·N+1)")
    ap.add_argument("--seeds", type=int, default=1, help="instances per size (seeds F..F+N-1, F = --first-seed)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed of every family")
    ap.add_argument("--paper-seeds", type=int, default=5, help="seeds per paper grid point (the sweep's 0-4)")
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--before", default=None, help="git ref of the MILP to compare with (default: merge-base)")
    ap.add_argument("--before-seeds", type=int, default=1, help="instances of the before/after comparison")
    ap.add_argument("--no-before", action="store_true", help="skip the MILP before/after comparison")
    args = ap.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    truth = predictors.build("measured")
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",") if s]
    families = [f for f in args.families.split(",") if f]
    print(f"policies: {', '.join(policies)}; times are wall seconds on this machine (load average "
          f"{os.getloadavg()[0]:.1f})")
    if not args.no_before and sizes:
        n, n_jobs = sizes[-1]
        milp_before_after(args.before or default_before(), n, n_jobs, args.before_seeds)
    for family in families:
        if family == "decisions":
            decisions(policies, truth, args.paper_seeds)
            continue
        if family == "paper":
            for n, ia in PAPER_GRID:
                seeds = range(args.first_seed, args.first_seed + args.paper_seeds)
                runs = [(*instance("paper", n, 10 * n, ia, s, truth), s) for s in seeds]
                compare(f"paper grid: {n} nodes, mean inter-arrival {ia:g} s", runs, policies, truth)
            continue
        for n, n_jobs in sizes:
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            runs = [(*instance(family, n, n_jobs, None, s, truth), s) for s in seeds]
            what = f"{n} nodes x {n_jobs} jobs" if family == "poisson" else f"{n} nodes x {10 * n + 1} jobs"
            compare(f"{family}: {what}", runs, policies, truth)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
