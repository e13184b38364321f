"""Replaying large Gavel-style traces with each of Gavel's policies: simulation CPU per policy, against Gavel's own.

    .venv/bin/python benchmarks/gavel.py [--setting queue] [--all] [--policies max_min_fairness_perf,NAME(VARIANT),...]
                                         [--jobs 600 --lam 100 --servers 36:36:36 --seed 0] [--profile]
                                         [--gavel "GAVEL_PYTHON HARNESS"]

A trace made by Gavel's generator (``sim.traces.gavel.generate``, ``-m``: multi-GPU jobs) is replayed as
``experiments/gavel/replay.yaml`` does, on one-GPU servers in 360-s rounds, with each policy. The simulation alone
(CPU time; building the trace table and jobs is printed apart) is compared with Gavel's simulation of the same trace
with the same policy (``GAVEL``), measured on this machine: Gavel's ``simulate`` path at ``c4fa400`` run with
cvxpy 1.9.3 and ECOS 2.0.14 (the versions of Gavel's reference runs), CPU time of the ``simulate`` call only (no
imports, no trace parsing), with its logging switched off (so Gavel's own runs, which log every micro-task, take
longer: the ratios are lower bounds). Those runs reproduce every reference run of ``experiments/gavel/reference/``
to the printed digit. The target is at least 20x on every LP policy at 500+ jobs.

CPU times on this shared machine swing with its load (both simulators' alike), so a ratio is best taken from two
runs made at the same time: ``--gavel CMD`` runs Gavel's simulation of the same trace right after capsim's run of
each policy, as ``CMD TRACE POLICY SERVERS SEED`` (a harness around Gavel's ``Scheduler.simulate``, in Gavel's own
environment, that prints as its last line ``trace,policy,servers,avg_jct_s,makespan_s,utilisation,jobs,done,cpu_s``,
the CPU of the ``simulate`` call alone; docs/gavel.md, "Speed"), and the ratio uses that CPU instead of ``GAVEL``.

Each row also splits capsim's CPU: the policy's ``allocate`` (the LP or cone program at each recompute), the rest of
the policy (Gavel's round mechanism: credits, priority lists, placement) and the engine (rounds, plan checks,
records); ``ceiling`` is Gavel's CPU over the engine's alone, the ratio a free policy would reach; ``ms/round`` is
capsim's CPU per round and ``Gavel`` Gavel's CPU over the same number of rounds (a ratio of 20 leaves capsim a
twentieth of the latter per round).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import math
import os
import pstats
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import optim
import predictors
from predictors.throughput import gavel_table
from sim.engine import Simulation
from sim.traces import read_trace
from sim.traces.gavel import generate
from sim.workload import trace_jobs

nan = math.nan

LP_POLICIES = ("max_min_fairness_perf", "max_min_fairness", "min_total_duration_perf", "min_total_duration",
               "finish_time_fairness_perf", "finish_time_fairness")
"""Gavel's policies that solve an LP (or, for finish-time fairness, a cone program) at every recompute."""

VARIANTS: dict[str, dict[str, Any]] = {"centre": {"point": "centre"}}
"""``--policies NAME(VARIANT)``: the policy with these parameters (the finish-time policies' older point: the least
ratio by root finding on HiGHS LPs and the analytic centre just above it)."""



def split_variant(label: str, variants: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A ``--policies`` entry: ``NAME`` -> (NAME, {}), ``NAME(VARIANT)`` -> (NAME, the variant's parameters); an
    unknown variant is a ValueError naming it and the known ones."""
    kind, _, variant = label.removesuffix(")").partition("(")
    if variant and variant not in variants:
        raise ValueError(f"unknown variant {variant!r} in {label!r}; known: {', '.join(variants)}")
    return kind, dict(variants[variant]) if variant else {}


SETTINGS: dict[str, tuple[int, float, str, int]] = {
    "light": (600, 200.0, "36:36:36", 0),
    "busy": (600, 150.0, "36:36:36", 0),
    "queue": (600, 100.0, "36:36:36", 0),
    "long-queue": (600, 60.0, "36:36:36", 0),
    "small": (600, 900.0, "4:4:4", 0),
}
"""Named settings (jobs, Gavel's ``--lam`` in s, servers V100:P100:K80, seed). On 36:36:36 (Gavel's 108-GPU
simulated cluster) with ``max_min_fairness_perf``, a recompute's LP holds on average 43 jobs at lam 200 (at most
61), 127 at lam 100 (at most 253) and 179 at lam 60 (at most 392); on 4:4:4 at lam 900, 66 (at most 121) over
2,305 rounds and 324 recomputes."""

GAVEL: dict[tuple[int, float, str, int], dict[str, tuple[float, float]]] = {
    (600, 200.0, "36:36:36", 0): {"max_min_fairness_perf": (1.60, nan), "max_min_fairness": (1.89, nan),
                                  "min_total_duration_perf": (4.47, nan), "min_total_duration": (4.85, nan),
                                  "finish_time_fairness_perf": (7.56, nan), "finish_time_fairness": (9.61, nan)},
    (600, 150.0, "36:36:36", 0): {"max_min_fairness_perf": (1.76, nan), "max_min_fairness": (2.02, nan),
                                  "min_total_duration_perf": (5.41, nan), "min_total_duration": (5.82, nan)},
    (600, 100.0, "36:36:36", 0): {"max_min_fairness_perf": (2.06, 21895.669), "max_min_fairness": (2.11, 23276.099),
                                  "min_total_duration_perf": (5.20, 62169.377),
                                  "min_total_duration": (7.09, 77047.705),
                                  "finish_time_fairness_perf": (16.64, 23818.395),
                                  "finish_time_fairness": (19.89, 28089.764)},
    (600, 60.0, "36:36:36", 0): {"max_min_fairness_perf": (2.15, 30078.489), "max_min_fairness": (2.54, 33133.320),
                                 "min_total_duration_perf": (4.43, 73438.652), "min_total_duration": (6.20, 88721.473),
                                 "finish_time_fairness_perf": (25.30, 35931.475),
                                 "finish_time_fairness": (28.24, 39157.623)},
    (600, 900.0, "4:4:4", 0): {"max_min_fairness_perf": (5.16, 89727.224), "max_min_fairness": (5.76, 116513.016),
                               "min_total_duration_perf": (32.27, 533140.328),
                               "min_total_duration": (40.44, 675997.685),
                               "finish_time_fairness_perf": (92.21, 130922.820),
                               "finish_time_fairness": (94.32, 168955.056)},
}
"""Gavel's simulation CPU seconds and average JCT (s; NaN where not recorded) per (jobs, lam, servers, seed) and
policy, measured on this machine as the module docstring says (one run each, on the 2-core machine shared with other
work: CPU times under load are a few tens of percent above an idle machine's). On 4:4:4 at lam 900 Gavel's
``max_min_fairness_perf`` left one job unfinished (599 of 600 completed), so its average JCT there covers 599 jobs."""


def trace_text(jobs: int, lam: float, seed: int) -> str:
    """The benchmark's trace in Gavel's format (Gavel's generator with ``-m``: multi-GPU jobs)."""
    return generate(jobs, lam, seed, gavel_table().by_gpu("V100"), multi_gpu=True)


def build(jobs: int, lam: float, servers: str, seed: int):
    from experiments.scenario.servers import server_types
    from sim.cluster import Cluster, NodeSlot
    from sim.model import ClusterRules

    text = trace_text(jobs, lam, seed)
    types = server_types(servers, 1, 0.0)
    cluster = Cluster(tuple(v for v, _, _ in types),
                      tuple(NodeSlot(frozenset({v.name}), fixed=True) for v, n, _ in types for _ in range(n)),
                      rules=ClusterRules(gang=True, round_length=360.0, unplaceable_gangs=True))
    predictor = predictors.build("throughput")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.trace"
        path.write_text(text, encoding="utf-8")
        rows = read_trace(path, "gavel")
    return cluster, trace_jobs(rows, predictor, cluster.configs, seed, "bench.trace"), predictor


class _Timed:
    """CPU seconds spent in a policy's ``decide`` and in its ``allocate`` (instance attributes wrapping the class's
    methods; the policy's results are untouched)."""

    def __init__(self, policy: Any):
        self.decide = self.allocate = 0.0
        decide, allocate = policy.decide, policy.allocate

        def timed_decide(s: Any) -> Any:
            c = time.process_time()
            try:
                return decide(s)
            finally:
                self.decide += time.process_time() - c

        def timed_allocate(*args: Any) -> Any:
            c = time.process_time()
            try:
                return allocate(*args)
            finally:
                self.allocate += time.process_time() - c

        policy.decide, policy.allocate = timed_decide, timed_allocate


def gavel_now(command: str, trace: Path, policy: str, servers: str, seed: int) -> tuple[float, float]:
    """(Gavel's simulation CPU s, its average JCT s) for one policy, from the harness ``command`` run now (module
    docstring); NaNs, with the harness's last words printed, where it fails."""
    from experiments.running.pool import die_with_parent

    try:  # the harness dies with this process, however it ends
        done = subprocess.run([*shlex.split(command), str(trace), policy, servers, str(seed)], capture_output=True,
                              text=True, timeout=7200, check=False,
                              preexec_fn=functools.partial(die_with_parent, os.getpid()))
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"  (Gavel's harness did not run for {policy}: {e})")
        return math.nan, math.nan
    lines = done.stdout.strip().splitlines()
    try:
        fields = lines[-1].split(",")
        return float(fields[-1]), float(fields[3])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"  (Gavel's harness failed for {policy}, exit {done.returncode}: {tail})")
        return math.nan, math.nan


def run_setting(jobs: int, lam: float, servers: str, seed: int, policies: list[str], profile: bool,
                gavel_cmd: str | None = None) -> None:
    """Print one table: every policy on one trace, capsim's CPU split, Gavel's CPU and the ratio."""
    c0 = time.process_time()
    cluster, built, predictor = build(jobs, lam, servers, seed)
    setup = time.process_time() - c0
    gavel = GAVEL.get((jobs, lam, servers, seed), {})
    print(f"\n{jobs} jobs (Gavel's generator, lam {lam:g} s, multi-GPU, seed {seed}) on {servers} one-GPU servers, "
          f"360-s rounds; trace, predictor and jobs: {setup:.2f} s CPU; Gavel's CPU "
          + ("measured now, after each capsim run" if gavel_cmd else "from the GAVEL table"))
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / f"bench_{jobs}_{lam:g}_{seed}.trace"
        trace.write_text(trace_text(jobs, lam, seed), encoding="utf-8")
        _rows(cluster, built, predictor, servers, seed, policies, profile, gavel, gavel_cmd, trace)
    if not gavel and not gavel_cmd:
        print("(no Gavel reference for these arguments: GAVEL lists the measured ones)")


def _rows(cluster: Any, built: Any, predictor: Any, servers: str, seed: int, policies: list[str], profile: bool,
          gavel: dict[str, tuple[float, float]], gavel_cmd: str | None, trace: Path) -> None:
    """The table's rows: each policy run by capsim, then (``gavel_cmd``) by Gavel on the same ``trace``."""
    print(f"{'policy':34} {'CPU (s)':>8} {'alloc':>6} {'mech':>6} {'engine':>6} {'rounds':>6} {'JCT (h)':>8} "
          f"{'Gavel JCT':>9} {'Gavel CPU':>9} {'ratio':>7} {'ceiling':>7} {'ms/round':>8} {'Gavel':>6}")
    for label in policies:
        kind, params = split_variant(label, VARIANTS)
        policy = optim.build(kind, seed=seed, **params)
        timed = _Timed(policy)
        sim = Simulation(cluster, built, policy, predictor)
        prof = cProfile.Profile() if profile else None
        c0 = time.process_time()
        if prof is not None:
            prof.enable()
        result = sim.run()
        if prof is not None:
            prof.disable()
        cpu = time.process_time() - c0
        rounds = int((result.decisions.trigger == "round").sum())
        ref_cpu, ref_jct = gavel.get(kind, (math.nan, math.nan))
        if gavel_cmd is not None:
            ref_cpu, ref_jct = gavel_now(gavel_cmd, trace, kind, servers, seed)
        engine = cpu - timed.decide
        ratio = f"{ref_cpu / cpu:6.1f}x" if math.isfinite(ref_cpu) else "      -"
        ceiling = f"{ref_cpu / engine:6.1f}x" if math.isfinite(ref_cpu) else "      -"
        print(f"{label:34} {cpu:8.2f} {timed.allocate:6.2f} {timed.decide - timed.allocate:6.2f} {engine:6.2f} "
              f"{rounds:6d} {result.summary['gavel_mean_jct'] / 3600:8.2f} {ref_jct / 3600:9.2f} {ref_cpu:9.2f} "
              f"{ratio} {ceiling} {1e3 * cpu / max(rounds, 1):8.2f} {1e3 * ref_cpu / max(rounds, 1):6.2f}")
        if prof is not None:
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(20)
            print(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", choices=sorted(SETTINGS), help="a named setting (SETTINGS); default: the numbers")
    ap.add_argument("--all", action="store_true", help="every named setting in turn")
    ap.add_argument("--jobs", type=int, default=600)
    ap.add_argument("--lam", type=float, default=100.0, help="mean inter-arrival time (s), Gavel's --lam")
    ap.add_argument("--servers", default="36:36:36")
    ap.add_argument("--policies", default=",".join(LP_POLICIES + ("fifo_perf", "isolated")))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also print each run's profile (slows the runs)")
    ap.add_argument("--gavel", metavar="CMD", help="measure Gavel's CPU now with this harness command, run as CMD "
                    "TRACE POLICY SERVERS SEED after each capsim run (module docstring); default: the GAVEL table")
    args = ap.parse_args()
    policies = args.policies.split(",")
    try:
        for label in policies:
            split_variant(label, VARIANTS)
    except ValueError as e:
        ap.error(f"--policies: {e}")
    if args.all:
        chosen = list(SETTINGS.values())
    elif args.setting:
        chosen = [SETTINGS[args.setting]]
    else:
        chosen = [(args.jobs, args.lam, args.servers, args.seed)]
    for jobs, lam, servers, seed in chosen:
        run_setting(jobs, lam, servers, seed, policies, args.profile, args.gavel)


if __name__ == "__main__":
    main()
