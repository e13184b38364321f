"""Predictor throughput: predictions per second through the vectorised ``runtimes`` path.

    .venv/bin/python benchmarks/predictors.py [--jobs 10000] [--configs 30] [--predictors measured,regression,...]

Two tables of ``--jobs`` specs × the first ``--configs`` configurations of the paper's catalogue:
- ``catalogue``: jobs drawn from J1–J6 with their iteration counts scaled by a random factor (what a simulation asks:
  few distinct shapes, many jobs);
- ``distinct``: every job a distinct (application, batch size, iterations) from the measured ranges (worst case).
Each predictor is built fresh, fitted once outside the timing (``fit`` column: seconds of the first, fitting call on
a small table), then timed on a cold cache (``first``) and a warm one (``again``). Target (issue 4): measured and
regression answer 10,000 × 30 in under a second.
"""

from __future__ import annotations

import argparse
import time

import numpy as np  # noqa: E402

from predictors import build  # noqa: E402
from sim.catalogue import configurations, job_types, vm_types  # noqa: E402
from sim.model import JobSpec  # noqa: E402

KINDS = {
    "measured": {"kind": "measured"},
    "regression": {"kind": "regression"},
    "analytical": {"kind": "analytical"},
    "wave": {"kind": "wave"},
    "noisy(measured)": {"kind": "noisy", "base": {"kind": "measured"}, "mape": 0.2, "seed": 0},
}
APPS = [("alexnet", "pytorch"), ("alexnet", "tensorflow"), ("vgg19", "pytorch"), ("vgg19", "tensorflow"),
        ("resnet50", "pytorch"), ("resnet50", "tensorflow"), ("deepspeech", "tensorflow")]


def tables(n: int, seed: int) -> dict[str, list[JobSpec]]:
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    types = list(job_types().values())
    cat = [types[i] for i in rng.integers(len(types), size=n)]
    scale = rng.choice([0.5, 1.0, 2.0], size=n)
    catalogue = [JobSpec(s.application, s.framework, max(1, int(s.iterations * f)), s.batch_size, name=s.name)
                 for s, f in zip(cat, scale)]
    distinct = [JobSpec(*APPS[i % len(APPS)], 1000 + i, int(rng.choice([8, 16, 32, 64]))) for i in range(n)]
    return {"catalogue": catalogue, "distinct": distinct}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--configs", type=int, default=30)
    ap.add_argument("--predictors", default=",".join(KINDS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    configs = configurations(vm_types().values())[: args.configs]
    specs = tables(args.jobs, args.seed)
    cells = args.jobs * len(configs)
    print(f"{args.jobs} jobs x {len(configs)} configs = {cells} predictions per table")
    print(f"{'predictor':<17}{'fit s':>7}  {'table':<10}{'first s':>9}{'again s':>9}{'pred/s (first)':>16}"
          f"{'finite':>8}")
    for name in args.predictors.split(","):
        p = build(**KINDS[name])
        t0 = time.perf_counter()
        p.runtimes([JobSpec(a, f, 1000, 32) for a, f in APPS], configs[:1])
        fit = time.perf_counter() - t0
        for label, table in specs.items():
            t0 = time.perf_counter()
            out = p.runtimes(table, configs)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            p.runtimes(table, configs)
            again = time.perf_counter() - t0
            print(f"{name:<17}{fit:7.2f}  {label:<10}{first:9.3f}{again:9.3f}{cells / first:16,.0f}"
                  f"{np.isfinite(out).mean():8.0%}")


if __name__ == "__main__":
    main()
