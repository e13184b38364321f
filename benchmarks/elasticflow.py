"""Replaying ElasticFlow's simulator: each development run's time against ElasticFlow's own.

    .venv/bin/python benchmarks/elasticflow.py [--repeat 3]

For every run of the development set (``experiments/elasticflow/reference/results.csv``: cluster10 on 32 x 8 A100,
the Fig. 8a testbed trace on 16 x 4 T4; every policy ElasticFlow's simulator ran there), the replay as ``capsim run``
does it (the scenario, the trace and the predictor built once; the simulation timed, best of ``--repeat``) is
compared with the wall time of ElasticFlow's simulator on the same run (``wall_time_s``, measured on a 2-vCPU
container like this machine, usually two or three runs at once, so indicative): the speed-up is their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the studies live beside the installed packages

from sim.engine import Simulation  # noqa: E402
from studies.elasticflow_replay import EF_DIR, LABELS, REFERENCE_NAMES, SETTINGS, build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the best time counts")
    a = ap.parse_args()
    ref = pd.read_csv(EF_DIR / "reference" / "results.csv")
    names = {v: k for k, v in REFERENCE_NAMES.items()}
    print(f"{'trace':18s} {'policy':12s} {'ElasticFlow (s)':>16s} {'capsim (s)':>11s} {'speed-up':>9s}")
    total_ref = total_ours = 0.0
    for _, row in ref.iterrows():
        policy = names[row["policy"]]
        trace, servers, gpu, _ = SETTINGS[row["trace"]]
        c, jobs, pol, estimator, truth = build(trace, servers, gpu, policy)
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            Simulation(c, jobs, pol, estimator, truth).run()
            best = min(best, time.perf_counter() - t0)
        total_ref += row["wall_time_s"]
        total_ours += best
        print(f"{row['trace']:18s} {LABELS[policy]:12s} {row['wall_time_s']:16.1f} {best:11.2f} "
              f"{row['wall_time_s'] / best:8.0f}x")
    print(f"{'all':18s} {'':12s} {total_ref:16.1f} {total_ours:11.2f} {total_ref / total_ours:8.0f}x")


if __name__ == "__main__":
    main()
