"""Engine throughput: simulate many jobs on many nodes with FIFO and print jobs/s, SimPy events/s and peak memory.

    .venv/bin/python benchmarks/engine.py --jobs 100000 --nodes 200 [--profile]
    .venv/bin/python benchmarks/engine.py --jobs 50000 --nodes 200 --against e0205b0 [--repeat 3]

``--against REV`` runs the same benchmark on the code of git revision REV (checked out into a temporary git worktree)
and on the working tree, each in a subprocess of this Python with its tree first on ``sys.path``, alternating the
order over ``--repeat`` repetitions, and prints both throughputs and their ratio (new / old, on CPU time: the machine
is shared, and CPU time is the fairer clock).

The load is set so the nodes keep up: the mean inter-arrival time is the mean runtime of the job mix on its
cheapest configuration divided by (nodes x --load). Targets (issue 25): >= 25,000 jobs per CPU second on 100,000 jobs x
200 nodes, and a 1,000,000-job run within 2 GiB (issue 2 asked 10,000 jobs/s and 1 GiB).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import optim
import predictors
from optim.base import Policy
from sim.catalogue import job_types, vm_types
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, Plan, Snapshot
from sim.workload import WorkloadSpec, poisson_jobs


class CheapestOnEmpty(Policy):
    """A minimal list scheduler (queue order, each job's cheapest configuration on an empty node) that costs
    almost nothing per decision, to measure the engine without a real policy's overhead."""

    name = "cheapest-on-empty"

    def __init__(self) -> None:
        self._best: dict[int, int] = {}

    def decide(self, s: Snapshot) -> Plan:
        if not s.waiting or not s.empty_nodes:
            return Plan()
        price = [c.vm.price_per_second for c in s.configs]
        vms, start = {}, []
        for jv, n in zip(s.waiting, s.empty_nodes):
            k = self._best.get(id(jv.estimates))
            if k is None:
                k = self._best[id(jv.estimates)] = int(np.argmin(np.asarray(price) * jv.estimates))
            vms[n] = s.configs[k].vm.name
            start.append(Assignment(jv.id, n, s.configs[k].gpus))
        return Plan(vms=vms, start=tuple(start))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--load", type=float, default=0.6, help="target fraction of nodes busy (default 0.6)")
    ap.add_argument("--policy", default="fifo", help="a registered policy, or 'local' for the engine alone")
    ap.add_argument("--predictor", default="measured")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="print the top of a cProfile of the run")
    ap.add_argument("--against", metavar="REV", help="also run on git revision REV and print the ratio new / old")
    ap.add_argument("--repeat", type=int, default=3, help="alternating repetitions with --against (default 3)")
    args = ap.parse_args(argv)
    if args.against:
        return against(args.against, args.repeat, args.jobs, _passed_on(sys.argv[1:] if argv is None else argv))

    vts = tuple(vm_types().values())
    cluster = Cluster(vts, tuple(NodeSlot() for _ in range(args.nodes)))
    pred = predictors.build(args.predictor)
    specs = list(job_types().values())
    table = pred.runtimes(specs, cluster.configs)
    price = np.array([c.vm.price_per_second for c in cluster.configs])
    cheapest = np.nanmin(np.where(np.isfinite(table), table * price, np.inf), axis=1)
    slow = np.array([table[i][np.flatnonzero(table[i] * price == cheapest[i])[0]] for i in range(len(specs))])
    gap = float(slow.mean()) / (args.nodes * args.load)

    t0 = time.perf_counter()
    jobs = poisson_jobs(WorkloadSpec(args.jobs, gap, tuple((s, 1.0) for s in specs)), pred, cluster.configs, args.seed)
    t_gen = time.perf_counter() - t0
    policy = CheapestOnEmpty() if args.policy == "local" else optim.build(args.policy)
    sim = Simulation(cluster, jobs, policy, pred)
    prof = cProfile.Profile() if args.profile else None
    t1, c1 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    result = sim.run()
    if prof:
        prof.disable()
    t_run, c_run = time.perf_counter() - t1, time.process_time() - c1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux

    s = result.summary
    print(f"{args.jobs} jobs, {args.nodes} nodes, policy {args.policy}, predictor {args.predictor}, "
          f"mean inter-arrival {gap:.2f} s (target load {args.load})")
    print(f"workload generation   {t_gen:8.2f} s")
    print(f"simulation + records  {t_run:8.2f} s wall, {c_run:.2f} s CPU (the machine is shared: CPU is the fairer)")
    print(f"jobs simulated / s    {args.jobs / t_run:10.0f} wall  {args.jobs / c_run:10.0f} CPU   "
          f"(issue 25: >= 25,000 CPU)")
    print(f"SimPy events / s      {sim.events / t_run:10.0f} wall  {sim.events / c_run:10.0f} CPU   "
          f"({sim.events} events)")
    print(f"decisions / s         {s['decisions'] / t_run:10.0f}   ({s['decisions']:.0f} decisions, "
          f"policy share {s['decision_wall_sum'] / t_run:.0%})")
    print(f"peak memory (maxrss)  {peak:10.0f} MiB (issue 25: < 2 GiB at 1,000,000 jobs)")
    print(f"GPU utilisation {s['gpu_utilisation']:.2f}, mean wait {s['mean_wait']:.1f} s, "
          f"late jobs {s['late_jobs']:.0f}, VM cost ${s['vm_cost']:.2f}")
    if prof:
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 0


ROOT = Path(__file__).resolve().parents[1]
_CPU = re.compile(r"^simulation \+ records\s+([\d.]+) s wall, ([\d.]+) s CPU", re.M)


def _passed_on(argv: list[str]) -> list[str]:
    """The benchmark's own arguments, without --against/--repeat/--profile (which concern this process)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--against", "--repeat"):
            skip = True
        elif not (a.startswith(("--against=", "--repeat=")) or a == "--profile"):
            out.append(a)
    return out


def _run_tree(tree: Path, args: list[str]) -> tuple[float, str]:
    """CPU seconds of one run of ``tree``'s benchmark (its code first on sys.path), and its output."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = subprocess.run([sys.executable, "-c", "import sim; print(sim.__file__)"], env=env, cwd=tree,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"benchmark: {tree} imports sim from {where}, not from its own tree")
    p = subprocess.run([sys.executable, str(tree / "benchmarks" / "engine.py"), *args], env=env, cwd=tree,
                       capture_output=True, text=True)
    m = _CPU.search(p.stdout)
    if p.returncode or not m:
        raise SystemExit(f"benchmark in {tree} failed (exit {p.returncode}):\n{p.stdout}{p.stderr}")
    return float(m.group(2)), p.stdout


@contextmanager
def checked_out(rev: str) -> Iterator[Path]:
    """A temporary git worktree of revision ``rev`` of this repository, removed on leaving."""
    tmp = Path(tempfile.mkdtemp(prefix="capsim-bench-"))
    tree = tmp / "tree"
    added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(tree), rev],
                           capture_output=True, text=True)
    if added.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(f"benchmark: cannot check out {rev!r}: {added.stderr.strip()}")
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def against(rev: str, repeat: int, jobs: int, args: list[str]) -> int:
    """Run the benchmark on revision ``rev`` and on the working tree, alternating; print throughputs and ratio."""
    with checked_out(rev) as old_tree:
        cpu: dict[str, list[float]] = {"old": [], "new": []}
        trees = {"old": old_tree, "new": ROOT}
        for i in range(repeat):
            for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
                secs, out = _run_tree(trees[which], args)
                cpu[which].append(secs)
                print(f"  run {i + 1} {which}: {secs:7.2f} s CPU  {jobs / secs:8.0f} jobs/s", flush=True)
        print(out.splitlines()[0])
        old, new = statistics.median(cpu["old"]), statistics.median(cpu["new"])
        print(f"old ({rev}): {jobs / old:8.0f} jobs/s CPU (median of {repeat}: {old:.2f} s)")
        print(f"new (working tree): {jobs / new:8.0f} jobs/s CPU (median of {repeat}: {new:.2f} s)")
        print(f"ratio new / old: {old / new:.3f} (> 1: the working tree is faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
