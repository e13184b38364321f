"""Replaying ElasticFlow's simulator: each development run's time against ElasticFlow's own.

    .venv/bin/python benchmarks/elasticflow.py [--repeat 3]

For every run of the development set (``experiments/elasticflow/reference/results.csv``: cluster10 on 32 x 8 A100,
the Fig. 8a testbed trace on 16 x 4 T4; every policy ElasticFlow's simulator ran there), the replay as ``capsim run``
does it (the scenario, the trace and the predictor built once; the simulation timed, best of ``--repeat``) is
compared with the wall time of ElasticFlow's simulator on the same run (``wall_time_s``, measured on a 2-vCPU
container like this machine, usually two or three runs at once, so indicative): the speed-up is their ratio.

    .venv/bin/python benchmarks/elasticflow.py --hand-out [--trace FILE --servers 64x8 --jobs 300]

times ElasticFlow's policy (CPU seconds, one run each, the same process) with the hand-out's trials worked out on
lists (``optim.elasticflow.trial``, what capsim does), the same without reusing the value of a trial whose region of
the free-GPU timeline is unchanged (``reuse``: the ratio), and every trial laid by ``plan`` as coded (``all``), on the
development runs or on the first ``--jobs`` jobs of ``--trace`` on ``--servers`` A100 servers; the job tables must
be equal.
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


def hand_out(trace: Path | None, servers: str, jobs: int) -> None:
    """Trials on lists against every trial laid by ``plan``: CPU seconds of each and their ratio."""
    import tempfile

    import optim.elasticflow.elasticflow as ef

    if trace is None:
        cases = [(row[0], row[1], row[2]) for row in SETTINGS.values()]
    else:
        head = Path(tempfile.mkdtemp()) / trace.name
        with open(trace, encoding="utf-8") as f:
            head.write_text("".join(line for _, line in zip(range(jobs + 1), f)), encoding="utf-8")
        cases = [(head, servers, "A100-40GB")]
    fast, region = ef.marginal, ef._region
    variants = {"lists": (fast, region), "no reuse": (fast, lambda *a: (object(),)),  # every region new
                "plan": (lambda *a: None, region)}  # None: the trial is laid by plan
    print(f"{'trace':18s} {'servers':8s} {'lists (s)':>10s} {'no reuse (s)':>13s} {'plan (s)':>9s} "
          f"{'reuse':>6s} {'all':>6s}")
    for path, srv, gpu in cases:
        c, js, pol, estimator, truth = build(path, srv, gpu, "elasticflow")
        times, tables = [], []
        for marginal, regions in variants.values():
            ef.marginal, ef._region = marginal, regions
            t0 = time.process_time()
            tables.append(Simulation(c, js, pol, estimator, truth).run().jobs)
            times.append(time.process_time() - t0)
        ef.marginal, ef._region = fast, region
        assert all(t.equals(tables[0]) for t in tables), f"{path}: the hand-outs decided differently"
        print(f"{Path(path).stem:18s} {srv:8s} {times[0]:10.2f} {times[1]:13.2f} {times[2]:9.2f} "
              f"{times[1] / times[0]:5.2f}x {times[2] / times[0]:5.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the best time counts")
    ap.add_argument("--hand-out", action="store_true", help="ElasticFlow's trials on lists against plan's")
    ap.add_argument("--trace", type=Path, help="with --hand-out: this trace instead of the development runs")
    ap.add_argument("--servers", default="64x8", help="with --trace: N servers x 8 A100s")
    ap.add_argument("--jobs", type=int, default=300, help="with --trace: its first jobs")
    a = ap.parse_args()
    if a.hand_out:
        hand_out(a.trace, a.servers, a.jobs)
        return
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
