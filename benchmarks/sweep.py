"""Sweep throughput: runs per second with 1 and 2 worker processes and their ratio, and Dask's overhead per run.

    .venv/bin/python benchmarks/sweep.py [--seeds 4] [--jobs 200] [--nodes 10] [--policies fifo,edf,milp] [--no-dask]

Each mode runs the same sweep (FIFO, EDF and the MILP on the measured predictor, one grid axis, several seeds) into a
fresh directory, through the same code as ``capsim sweep`` (validation, expansion, execution, atomic Parquet writes),
and the wall time includes starting the workers. Imports and predictor fits are warmed up once in this process first;
forked workers inherit them, Dask's workers pay for them (that is part of Dask's overhead). Dask runs on a local
cluster of as many single-threaded workers as the process pool; its overhead per run is (Dask wall − pool wall) / runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.results.store import ResultStore  # noqa: E402
from experiments.running.dispatch import run_tasks  # noqa: E402
from experiments.runs import plan  # noqa: E402
from experiments.scenario.sweep import load_sweep  # noqa: E402


def sweep_file(d: Path, seeds: int, jobs: int, nodes: int, policies: list[str]) -> Path:
    data = {
        "name": "bench",
        "scenario": {"cluster": {"nodes": nodes}, "workload": {"jobs": jobs}, "predictor": {"kind": "measured"}},
        "policies": [{"kind": k} for k in policies],
        "seeds": list(range(seeds)),
        "grid": {"workload.mean_interarrival": [30, 60]},
    }
    p = d / "bench.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def timed(file: Path, out: Path, workers: int = 1, dask: str | None = None) -> tuple[float, int, float]:
    """Wall seconds, number of runs and steady-state runs/s for one complete sweep into the empty ``out``.

    The steady-state rate counts the runs that finished after every worker had delivered its first one, over the
    time from then to the end, so worker start-up (imports, predictor fits) is left out.
    """
    t0 = time.perf_counter()
    sweep = load_sweep(file)
    store = ResultStore(out)
    store.prepare()
    tasks = plan(sweep).tasks
    failed = []
    stamps: list[float] = []

    def on_outcome(o) -> None:
        store.write(o)
        stamps.append(time.perf_counter())
        if not o.ok:
            failed.append(o)

    run_tasks(tasks, on_outcome, workers=workers, dask=dask, dask_tmp=str(out / ".dask-tmp") if dask else None)
    wall = time.perf_counter() - t0
    if failed:
        raise SystemExit(f"{len(failed)} runs failed, e.g.:\n{failed[0].error}")
    k = min(max(workers, 2 if dask else 1), len(stamps) - 1)
    steady = (len(stamps) - 1 - k + 1) / (stamps[-1] - stamps[k - 1]) if stamps[-1] > stamps[k - 1] else float("nan")
    return wall, len(tasks), steady


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--policies", default="fifo,edf,milp", help="comma-separated policy kinds")
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="capsim-bench-") as tmp:
        d = Path(tmp)
        os.environ.setdefault("DASK_TEMPORARY_DIRECTORY", str(d / "dask"))
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        f = sweep_file(d, args.seeds, args.jobs, args.nodes, policies)
        print(f"sweep: 2 grid points x {len(policies)} policies ({', '.join(policies)}) x {args.seeds} seeds, "
              f"{args.jobs} jobs on {args.nodes} nodes, measured predictor; {os.cpu_count()} cores")
        warm = load_sweep(f)  # imports and predictor fits happen once, before any timing
        warm.points[0].scenario.predictors()
        w1, n, s1 = timed(f, d / "w1", workers=1)
        print(f"1 worker  (in process): {n} runs in {w1:6.2f} s = {n / w1:6.2f} runs/s; steady state {s1:6.2f} runs/s")
        w2, _, s2 = timed(f, d / "w2", workers=2)
        print(f"2 workers (processes) : {n} runs in {w2:6.2f} s = {n / w2:6.2f} runs/s; steady state {s2:6.2f} runs/s")
        print(f"speed-up 2 vs 1 workers: {w1 / w2:.2f}x end to end, {s2 / s1:.2f}x steady state")
        if not args.no_dask:
            wd, _, sd = timed(f, d / "dask", dask="local:2")
            print(f"Dask local:2          : {n} runs in {wd:6.2f} s = {n / wd:6.2f} runs/s; "
                  f"steady state {sd:6.2f} runs/s")
            print(f"Dask overhead vs process pool: {(wd - w2) / n * 1000:+.1f} ms per run end to end "
                  f"(cluster start-up included, {wd / w2:.2f}x the pool's wall time); "
                  f"{(1 / sd - 1 / s2) * 1000:+.1f} ms per run in steady state")


if __name__ == "__main__":
    main()
