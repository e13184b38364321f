"""GPU priority assignment on MLPerf (Takayama et al.): their estimate by the model they describe, the choices that
model leaves open, the same question simulated, and a running cluster with Poisson arrivals (``docs/mlperf.md``).

``python -m studies.mlperf [--results results/mlperf] [--img docs/img]`` prints the tables of ``docs/mlperf.md`` and
draws its figures; ``--results`` reads the sweep of ``experiments/mlperf.yaml`` for the running-cluster part.

The model described: N jobs spread evenly over the nine benchmarks, one job at a time on a machine, P100 and V100
machines; "even" assigns jobs heterogeneity-agnostically, "priority" gives the V100s the jobs with the highest
V100/P100 speed-up; the result is the total execution time. Written as a fluid model (N/9 jobs of each benchmark, as
the published totals are linear in N), four things are left open (``Model`` and ``v100_share``):

1. the cluster: which share ``f`` of the machines are V100s (their number only scales every total);
2. how many jobs the V100s get under even: a share of jobs equal to their share of machines (every machine the same
   number of jobs, ``per_machine``), or half the jobs to each GPU type (``per_type``);
3. how many jobs the V100s get under priority: the same share as under even, only the highest speed-ups
   (``same``), or as many as make both GPU types finish together (``balanced``);
4. what "total execution time" is: when the last job ends (``makespan``) or the sum of every job's execution time
   (``busy``: the machine time the jobs take).
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["PUBLISHED", "Model", "MODELS", "job_times", "hms", "estimate", "reduction", "shapes_within",
           "published_check", "simulate_batch", "main"]

PUBLISHED = {200: ("74:30:00", "81:11:27", 8.241), 10_000: ("3724:42:00", "4509:32:33", 8.248)}
"""The published estimate (issue 26's appendix): jobs → (priority total, even total, reduction %)."""


def hms(text: str) -> int:
    """Seconds of ``h:min:s``."""
    h, m, s = (int(x) for x in text.split(":"))
    return 3600 * h + 60 * m + s


def as_hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def job_times() -> tuple[list[str], np.ndarray, np.ndarray]:
    """(benchmarks, P100 seconds, V100 seconds) of one run each, from the shipped ``mlperf`` table."""
    from predictors.throughput import mlperf_table

    t = mlperf_table()
    names = sorted({k[1] for k in t.rates}, key=lambda b: -t.rate("V100", b, 1) / t.rate("P100", b, 1))
    p100 = np.array([1 / t.rate("P100", b, 1) for b in names])
    return names, p100, np.array([1 / t.rate("V100", b, 1) for b in names])


@dataclass(frozen=True)
class Model:
    """One reading of the published description (module docstring, choices 2–4)."""

    even: str = "per_machine"
    priority: str = "same"
    total: str = "makespan"

    @property
    def label(self) -> str:
        return f"{self.total}, even {self.even.replace('_', ' ')}, priority {self.priority}"


MODELS = tuple(Model(e, p, t) for t, e, p in itertools.product(("makespan", "busy"), ("per_machine", "per_type"),
                                                                  ("same", "balanced")))


def _top(share: float, p: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Per job of the mix: (V100 work, P100 work) when the V100s take ``share`` of the jobs, highest speed-up first
    (the benchmarks are sorted so)."""
    rem, vw, pw = share * len(p), 0.0, 0.0
    for pb, vb in zip(p, v):
        take = min(max(rem, 0.0), 1.0)
        rem -= take
        vw += take * vb
        pw += (1.0 - take) * pb
    return vw / len(p), pw / len(p)


def estimate(model: Model, n_jobs: float, f: float, machines: float = 1.0) -> tuple[float, float]:
    """(even total, priority total) in seconds for ``n_jobs`` jobs on ``machines`` machines of which a share ``f``
    are V100s (fluid: every benchmark ``n_jobs / 9`` jobs)."""
    _, p, v = job_times()
    share = f if model.even == "per_machine" else 0.5
    even = (share * v.mean(), (1 - share) * p.mean())
    prio = _top(share, p, v)
    if model.priority == "balanced":
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            vw, pw = _top(mid, p, v)
            lo, hi = (mid, hi) if vw / f < pw / (1 - f) else (lo, mid)
        prio = _top(lo, p, v)

    def total(work: tuple[float, float]) -> float:
        if model.total == "busy":
            return n_jobs * (work[0] + work[1])
        return n_jobs * max(work[0] / (f * machines), work[1] / ((1 - f) * machines))

    return total(even), total(prio)


def reduction(model: Model, f: float) -> float:
    """Priority's cut of the total execution time against even, in %."""
    e, p = estimate(model, 1.0, f)
    return 100 * (1 - p / e)


def shapes_within(model: Model, target: float = 8.241, tol: float = 0.5, most: int = 8) -> list[tuple[int, int]]:
    """Clusters of 1..``most`` P100 and V100 machines whose reduction is within ``tol`` points of ``target``."""
    return [(mp, mv) for mp in range(1, most + 1) for mv in range(1, most + 1)
            if abs(reduction(model, mv / (mp + mv)) - target) <= tol]


def published_check() -> list[str]:
    """What the published figures say of themselves: their reductions recomputed from their totals."""
    out = []
    for n, (prio, even, pct) in PUBLISHED.items():
        got = 100 * (1 - hms(prio) / hms(even))
        out.append(f"{n:,} jobs: priority {prio}, even {even}: 1 − priority/even = {got:.3f} % (published {pct} %)")
    fixed = hms(PUBLISHED[200][1]) * 50
    out.append(f"81:11:27 × 50 = {as_hms(fixed)}; 1 − 3724:42:00 / 4059:32:33 = "
               f"{100 * (1 - hms('3724:42:00') / hms('4059:32:33')):.3f} %")
    return out


def simulate_batch(n_jobs: int, p100: int, v100: int) -> dict[str, dict[str, float]]:
    """The question simulated by capsim: ``n_jobs`` jobs (benchmarks in turn: equal counts, the first ones one more
    when nine do not divide it) all submitted at once to ``p100`` + ``v100`` fixed servers, list-scheduled by
    ``even`` and ``gpu_priority``: per rule, the makespan and the busy time (seconds)."""
    from optim.gpu_assignment import Even, GPUPriority
    from predictors import build
    from sim.catalogue import gpu
    from sim.cluster import Cluster, NodeSlot
    from sim.engine import Simulation
    from sim.model import Job, JobSpec, VMType

    names, _, _ = job_times()
    order = ["IC", "SSD", "OD", "RM", "SA", "RT", "TL", "SR", "RF"]
    assert sorted(order) == sorted(names)
    types = (VMType("p100", gpu("P100"), 1, 0.0, provider="fixed"), VMType("v100", gpu("V100"), 1, 0.0,
                                                                          provider="fixed"))
    slots = tuple(NodeSlot(frozenset({"p100"}), fixed=True) for _ in range(p100)) + tuple(
        NodeSlot(frozenset({"v100"}), fixed=True) for _ in range(v100))
    jobs = [Job(i, JobSpec(order[i % 9], "pytorch", 1, 1, name=order[i % 9]), 0.0, 1e12, 0.0)
            for i in range(n_jobs)]
    truth = build("throughput", table="mlperf")
    out = {}
    for rule in (Even(), GPUPriority()):
        r = Simulation(Cluster(types, slots), jobs, rule, truth).run()
        out[rule.name] = {"makespan": float(r.jobs["end_time"].max()),
                          "busy": float((r.jobs["end_time"] - r.jobs["start_time"]).sum())}
    return out


def models_table(n_jobs: int = 200, f: float = 0.5) -> str:
    """Markdown: every model's even and priority totals for ``n_jobs`` on a cluster with a V100 share ``f`` (busy:
    absolute; makespan: for the number of machines that makes its even total the published one), the reduction, and
    the clusters of up to 8 + 8 machines that reproduce 8.24 % within 0.5 points."""
    target = hms(PUBLISHED[200][1]) if n_jobs == 200 else None
    lines = ["| total | even | priority | even total | priority total | reduction | machines for 81:11:27 | "
             "clusters (P100 + V100) within 0.5 points of 8.24 % |", "|---|---|---|---|---|---|---|---|"]
    for m in MODELS:
        e, p = estimate(m, n_jobs, f)
        if m.total == "makespan" and target:
            machines = e / target
            e, p = e / machines, p / machines
            fit = f"{machines:.2f}"
        else:
            fit = "none (no machine count enters)"
        shapes = shapes_within(m)
        cl = ", ".join(f"{a}+{b}" for a, b in shapes[:5]) + (f" and {len(shapes) - 5} more" if len(shapes) > 5
                                                              else "") or "none"
        lines.append(f"| {m.total} | {m.even.replace('_', ' ')} | {m.priority} | {as_hms(e)} | {as_hms(p)} | "
                     f"{100 * (1 - p / e):.2f} % | {fit} | {cl} |")
    return "\n".join(lines)


def figure_models(path: Path) -> None:
    """The reduction against the V100 share of the machines, one line per reading, the published 8.24 % ± 0.5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.plots.style import WIDTHS, rc

    fs = np.linspace(0.05, 0.95, 181)
    with plt.rc_context(rc("page")):
        fig, ax = plt.subplots(figsize=(WIDTHS["page"], 2.6), layout="constrained")
        ax.axhspan(8.241 - 0.5, 8.241 + 0.5, color="#fdd49e", zorder=0, label="published 8.24 % ± 0.5")
        drawn = set()
        styles = {"makespan": "-", "busy": "--"}
        for m in MODELS:
            ys = np.array([reduction(m, f) for f in fs])
            key = (m.total, tuple(np.round(ys, 6)))
            if key in drawn:
                continue
            drawn.add(key)
            ax.plot(fs, ys, styles[m.total], linewidth=0.9, label=m.label)
        ax.set(xlabel="V100 share of the machines", ylabel="priority's cut of the total (%)", ylim=(0, 30))
        fig.legend(fontsize=6, loc="outside right center")
        fig.savefig(path, dpi=200, metadata={"Software": None})
        plt.close(fig)


def poisson_table(results: Path) -> pd.DataFrame:
    """Per load and policy: mean over seeds of the makespan, the busy time (sum of job times), the mean JCT and the
    total cost, from a result folder of ``experiments/mlperf.yaml``."""
    from experiments.api import read

    res = read(results)
    jobs = res.jobs.assign(busy=res.jobs["end_time"] - res.jobs["start_time"])
    keys = ["workload.mean_interarrival", "policy", "seed"]
    per_run = jobs.groupby(keys).agg(makespan=("end_time", "max"), first=("submit_time", "min"),
                                     busy=("busy", "sum"), mean_jct=("jct", "mean"),
                                     tardiness=("tardiness_cost", "sum"))
    per_run["makespan"] -= per_run.pop("first")
    return per_run.groupby(keys[:2]).mean().reset_index()


def figure_poisson(table: pd.DataFrame, path: Path) -> None:
    """Mean JCT and busy time against the load, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.plots.style import WIDTHS, rc

    capacity = 1930.0
    with plt.rc_context(rc("page")):
        fig, axes = plt.subplots(1, 3, figsize=(WIDTHS["page"], 2.2), layout="constrained")
        for policy, g in table.groupby("policy", sort=False):
            load = capacity / g["workload.mean_interarrival"]
            for ax, col, scale in zip(axes, ("mean_jct", "busy", "tardiness"), (3600, 3600, 1)):
                ax.plot(load, g[col] / scale, "o-", markersize=3, linewidth=0.9, label=str(policy))
        for ax, label in zip(axes, ("mean JCT (h)", "busy time, all jobs (h)", "tardiness cost ($)")):
            ax.set(xlabel="offered load", ylabel=label)
        axes[0].legend(fontsize=6)
        fig.savefig(path, dpi=200, metadata={"Software": None})
        plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m studies.mlperf", description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, help="a result folder of experiments/mlperf.yaml")
    ap.add_argument("--img", type=Path, default=Path("docs/img"), help="where the figures go (default: docs/img)")
    args = ap.parse_args(argv)
    names, p, v = job_times()
    print("benchmarks by V100/P100 speed-up:", ", ".join(f"{b} {pb / vb:.3f}" for b, pb, vb in zip(names, p, v)))
    print("\n".join(published_check()))
    print("\nEvery reading, 200 jobs, as many P100 as V100 machines:\n")
    print(models_table(200, 0.5))
    for n in (200, 2000):
        sim = simulate_batch(n, 4, 4)
        for what in ("makespan", "busy"):
            e, q = sim["even"][what], sim["gpu_priority"][what]
            print(f"simulated, {n} jobs at once on 4 P100 + 4 V100: {what} even {as_hms(e)}, priority {as_hms(q)}: "
                  f"{100 * (1 - q / e):.2f} %")
    args.img.mkdir(parents=True, exist_ok=True)
    figure_models(args.img / "mlperf_readings.png")
    if args.results is not None:
        table = poisson_table(args.results)
        print("\n" + table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
        figure_poisson(table, args.img / "mlperf_poisson.png")
    print(f"\nfigures in {args.img}")


if __name__ == "__main__":
    main()
