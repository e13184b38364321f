"""ElasticFlow's cluster04 trace at full scale: jobs simulated per second with EDF and greedy.

    .venv/bin/python benchmarks/cloud.py [--setups a100,cloud] [--policies edf,greedy] [--limit N] [--profile]

Runs the scenarios ``experiments/elasticflow/a100_cluster04.yaml`` (80 fixed servers of 8 A100-40GB, gangs across
servers, EDF packing jobs onto free GPUs) and ``experiments/elasticflow/cloud_cluster04.yaml`` (up to 300 rented AWS
VMs of every GPU type, gangs of up to 64 GPUs), each policy of the file named in ``--policies``, one run each, and
prints for each the time to build the run (trace, runtime tables, jobs: CPU), the simulation's CPU and wall time, the
jobs simulated per second (jobs / simulation wall time), decisions, peak memory, and the headline metrics. The target
(issue 12): every run of 15,802 jobs under 60 s on this machine. Timing is printed, never asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import time
from pathlib import Path

from experiments.scenario import build_policy, load_scenario
from sim.engine import Simulation

ROOT = Path(__file__).resolve().parents[1]
SETUPS = {"a100": ROOT / "experiments/elasticflow/a100_cluster04.yaml",
          "cloud": ROOT / "experiments/elasticflow/cloud_cluster04.yaml"}


def run_one(path: Path, policy: str, limit: int | None, profile: bool) -> None:
    sc = load_scenario(path)
    specs = [p for p in sc.policy_specs() if p.kind == policy]
    if not specs:
        print(f"  {policy}: not among the policies of {path.name}")
        return
    if limit is not None:
        t = sc.workload.trace
        sc = sc.model_copy(update={"workload": sc.workload.model_copy(
            update={"trace": t.model_copy(update={"limit": limit})})})
        sc.located(path.parent)
    c0, w0 = time.process_time(), time.perf_counter()
    estimator, truth = sc.predictors()
    cluster = sc.build_cluster()
    jobs = sc.build_jobs(0, truth, cluster.configs)
    sim = Simulation(cluster, jobs, build_policy(specs[0]), estimator, truth, seed=0)
    setup_cpu, setup_wall = time.process_time() - c0, time.perf_counter() - w0
    prof = cProfile.Profile() if profile else None
    c0, w0 = time.process_time(), time.perf_counter()
    result = prof.runcall(sim.run) if prof is not None else sim.run()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    s = result.summary
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {specs[0].label:<8} {len(jobs):,} jobs, {len(cluster.configs):,} configurations: build {setup_cpu:.1f} s "
          f"CPU ({setup_wall:.1f} s wall); simulation {cpu:.1f} s CPU, {wall:.1f} s wall = "
          f"{len(jobs) / wall:,.0f} jobs/s; run {setup_wall + wall:.1f} s; {int(s['decisions']):,} decisions; "
          f"peak RSS {rss:,.0f} MB")
    print(f"           deadlines met {s['deadline_met']:.3f}, VM cost ${s['vm_cost']:,.0f}, mean JCT "
          f"{s['mean_jct'] / 3600:.2f} h, GPU utilisation {s['gpu_utilisation']:.3f}")
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", default="a100,cloud", help=f"comma-separated among {', '.join(SETUPS)}")
    ap.add_argument("--policies", default="edf,greedy")
    ap.add_argument("--limit", type=int, help="only the first N jobs of the trace (a quick look)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    for setup in args.setups.split(","):
        path = SETUPS[setup.strip()]
        print(f"{setup}: {path.relative_to(ROOT)}")
        for policy in args.policies.split(","):
            run_one(path, policy.strip(), args.limit, args.profile)


if __name__ == "__main__":
    main()
