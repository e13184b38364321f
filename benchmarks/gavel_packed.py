"""Replaying a long-queue Gavel trace with Gavel's packing policies: simulation CPU per policy, against Gavel's own.

    .venv/bin/python benchmarks/gavel_packed.py [--jobs 300] [--lam 200] [--servers 4:4:4] [--seed 21]
                                                [--policies fifo_packed,...]

A trace of one-GPU jobs made by Gavel's generator (``sim.traces.gavel.generate``; Gavel packs one-GPU jobs only) is
replayed as ``studies.gavel_replay`` replays Gavel's traces (``experiments/gavel/replay.yaml``: one-GPU servers,
360-s rounds; a packing policy gets co-location with Gavel's measured pairs), with each policy. At the defaults
(300 jobs every 200 s on average, 12 GPUs) the queue reaches some 240 jobs, and Gavel's packing policies keep a
priority entry and an LP variable per type for every pair of them. The simulation alone (engine and policy, CPU
time; building the trace, scenario and jobs is printed apart) is compared with Gavel's simulation of the same trace
and policy (``GAVEL_CPU_S``), measured on this machine: Gavel's ``simulate`` path at ``c4fa400`` with its packing
policies (cvxpy 1.9.3, ECOS 2.0.14), CPU time of the ``simulate`` call alone, logging off (so Gavel's own runs,
which log every micro-task, take longer: the ratios are lower bounds). The target is at least 20x on every packing
policy.

Where Gavel's run did not finish, in the time it was given or at all (its ``finish_time_fairness_packed`` stops
with ECOS's ``SolverError``), ``GAVEL_PREFIX_S`` holds its CPU up to the allocation it computed at a simulated time;
capsim's run stops there too and the row compares the CPU both simulations used up to that time (capsim's up to the
end of its decision at that time), marked ``prefix``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the studies live beside the installed packages

Key = tuple[int, float, str, int]

GAVEL_CPU_S: dict[Key, dict[str, float]] = {
    (300, 200.0, "4:4:4", 21): {"fifo_perf": 2.27},
}
"""Gavel's simulation CPU seconds per (jobs, lam, servers, seed) and policy, measured on this machine as the module
docstring says (one run each, on a 2-core machine shared with other work)."""

GAVEL_PREFIX_S: dict[Key, dict[str, tuple[float, float]]] = {
    (300, 200.0, "4:4:4", 21): {"fifo_packed": (50398.0, 62.2), "gandiva": (48238.0, 100.40),
                                "max_min_fairness_packed": (63358.0, 238.37),
                                "min_total_duration_packed": (37439.0, 89.61),
                                "finish_time_fairness_packed": (41759.0, 57.96)},
}
"""Gavel's CPU seconds up to a simulated time, ``policy: (time, CPU)``, for runs that did not finish (module
docstring): the last allocation its run logged, the CPU counted from the policy's construction, at ``nice -n 10`` on
the shared machine. ``fifo_packed`` and ``gandiva``: the 25th and 24th recompute of runs stopped after 90-105 minutes
(load 15-38). ``max_min_fairness_packed``: the 31st recompute (240 jobs active, near the queue's peak) of a run
stopped after 74 minutes (its CPU at the 25th, t = 50,398 s, was 91.45 s); ``min_total_duration_packed``: the 19th
(176 jobs) of a run stopped after 36 minutes (load 14-27).
``finish_time_fairness_packed``: the 21st recompute (169 jobs); Gavel's run ends at its 22nd with ECOS's
``SolverError`` (cvxpy raises it, the simulator stops), so it has no whole run."""

POLICIES = ("fifo_perf", "fifo_packed", "gandiva", "max_min_fairness_packed", "min_total_duration_packed",
            "finish_time_fairness_packed", "finish_time_fairness_packed(interior)", "finish_time_fairness_packed(warm)")
"""The rows; ``NAME(VARIANT)`` is the policy with the parameters ``VARIANTS`` gives."""

VARIANTS: dict[str, dict[str, Any]] = {"interior": {"point": "interior"}, "warm": {"point": "interior", "warm": True}}
"""``finish_time_fairness_packed``'s root-finding paths: HiGHS's interior point after regula falsi on cold LPs, and
after Newton steps on one LP re-solved from its last basis."""


class _Prefix(Exception):
    """The run reached the prefix's time: ``cpu`` seconds since the simulation started."""

    def __init__(self, cpu: float):
        self.cpu = cpu


def _stop_at(policy: Any, when: float) -> None:
    """End the run after the policy's first decision at or after ``when`` (raising ``_Prefix``)."""
    start = time.process_time()
    decide = policy.decide

    def timed(snapshot: Any) -> Any:
        plan = decide(snapshot)
        if snapshot.time >= when - 1e-6:
            raise _Prefix(time.process_time() - start)
        return plan

    policy.decide = timed


def main() -> None:
    from sim.engine import Simulation
    from studies.gavel_replay import build, write_trace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--lam", type=float, default=200.0, help="mean inter-arrival time (s), Gavel's --lam")
    ap.add_argument("--servers", default="4:4:4")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--policies", default=",".join(POLICIES))
    args = ap.parse_args()

    from benchmarks.gavel import split_variant

    try:
        for label in args.policies.split(","):
            split_variant(label, VARIANTS)
    except ValueError as e:
        ap.error(f"--policies: {e}")
    key = (args.jobs, args.lam, args.servers, args.seed)
    gavel, prefix = GAVEL_CPU_S.get(key, {}), GAVEL_PREFIX_S.get(key, {})
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(Path(tmp) / "bench.trace", args.jobs, args.lam, args.seed)
        print(f"{args.jobs} one-GPU jobs (Gavel's generator, lam {args.lam:g} s, seed {args.seed}) on {args.servers} "
              f"one-GPU servers, 360-s rounds")
        print(f"{'policy':34} {'setup (s)':>9} {'capsim CPU (s)':>14} {'rounds':>7} {'most waiting':>12} "
              f"{'avg JCT (h)':>11} {'Gavel CPU (s)':>13} {'ratio':>7}")
        for label in args.policies.split(","):
            kind, params = split_variant(label, VARIANTS)
            c0 = time.process_time()
            cluster, jobs, policy, estimator, truth, told, true_pairs = build(
                trace, kind, args.seed, params or None, servers=args.servers)
            sim = Simulation(cluster, jobs, policy, estimator, truth, interference=told, true_interference=true_pairs)
            target = " (target >= 20x)" if kind != "fifo_perf" else ""
            if kind not in gavel and kind in prefix:
                when, ref = prefix[kind]
                _stop_at(policy, when)
                setup = time.process_time() - c0
                try:
                    sim.run()
                except _Prefix as p:
                    print(f"{label:34} {setup:9.2f} {p.cpu:14.2f}   prefix to t = {when:,.0f} s {ref:13.2f} "
                          f"{ref / p.cpu:6.1f}x{target}")
                    continue
                print(f"{label:34} the run ended before t = {when:,.0f} s")
                continue
            c1 = time.process_time()
            result = sim.run()
            cpu = time.process_time() - c1
            rounds = int((result.decisions.trigger == "round").sum())
            line = (f"{label:34} {c1 - c0:9.2f} {cpu:14.2f} {rounds:7d} {int(result.decisions.waiting.max()):12d} "
                    f"{result.summary['gavel_mean_jct'] / 3600:11.2f}")
            if kind in gavel:
                print(f"{line} {gavel[kind]:13.2f} {gavel[kind] / cpu:6.1f}x{target}")
            else:
                print(f"{line} {'-':>13} {'-':>7}")
    if not gavel and not prefix:
        print("(no Gavel reference for these arguments: GAVEL_CPU_S lists the measured ones)")


if __name__ == "__main__":
    main()
