"""Replaying Gavel's traces (``experiments/gavel/replay.yaml``) and measuring the agreement with Gavel's own results.

``python -m studies.gavel_replay [--plot docs/img/gavel_scatter.png] [--effects]`` prints, for the shipped
traces and policies, capsim's average JCT and makespan against Gavel's (``reference/results.csv``) and the per-job
relative JCT errors against Gavel's per-job files, and draws the per-job scatter plot of ``docs/gavel.md``;
``--effects`` adds how much the rounds and the recompute throttle make of each result. ``--generate FILE --jobs N
--lam L --seed S [--multi-gpu]`` writes a trace with Gavel's generator instead (held-out traces).
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.scenario import build_policy, validate_scenario
from experiments.scenario.loading import raise_problems, read_yaml

__all__ = ["GAVEL_DIR", "REPLAY", "POLICIES", "PACKED", "CASES", "PLOTTED", "VARIANTS", "build", "replay",
           "write_trace", "reference", "agreement", "agreement_table", "effects_table", "scatter", "main"]

GAVEL_DIR = Path(__file__).resolve().parents[1] / "experiments" / "gavel"
REPLAY = GAVEL_DIR / "replay.yaml"
POLICIES = ("fifo_perf", "max_min_fairness_perf", "max_min_fairness", "finish_time_fairness_perf",
            "finish_time_fairness", "min_total_duration_perf", "min_total_duration", "isolated", "allox", "gandiva")
"""Gavel's policies with reference runs, in the order of the tables."""
PACKED = ("fifo_packed", "max_min_fairness_packed", "finish_time_fairness_packed", "min_total_duration_packed")
"""Gavel's packing policies with reference runs (``gandiva`` packs too)."""
CASES = tuple((t, p) for t in ("d.trace", "e.trace") for p in POLICIES + PACKED
              if (t, p) != ("e.trace", "allox") and (t == "d.trace" or p not in PACKED[1:]))
"""The traces and policies Gavel's reference results cover (on 4:4:4; Gavel's AlloX fails on e.trace's multi-GPU
jobs, and its LP packing policies crash on e.trace's mix of GPU counts)."""
PLOTTED = ("fifo_perf", "max_min_fairness_perf")
"""The policies of the per-job scatter plot."""


def build(trace: str | Path, policy: str, seed: int = 0, policy_params: dict[str, Any] | None = None,
          **cluster: Any) -> tuple[Any, list[Any], Any, Any, Any, Any, Any]:
    """(cluster, jobs, policy, estimator, truth, interference told, true interference) of replaying ``trace`` (a
    Gavel trace; relative paths from ``experiments/gavel``) with ``policy`` (and ``policy_params``) on the replay
    scenario, its cluster fields overridden by ``cluster`` (e.g. ``rounds={"length": 360, "effects": False}``);
    a packing policy gets co-location (``Scenario.for_policy``)."""
    src = read_yaml(REPLAY, "scenario file")
    data = copy.deepcopy(src.data)
    data["workload"]["trace"]["path"] = str(trace)
    data["cluster"].update(cluster)
    data["cluster"] = {k: v for k, v in data["cluster"].items() if v is not None}
    data["policies"] = [{"kind": policy, **(policy_params or {})}]
    sc, problems = validate_scenario(data, str(REPLAY), GAVEL_DIR)
    raise_problems(src, problems)
    assert sc is not None and sc.policies is not None
    sc = sc.for_policy(policy)
    estimator, truth = sc.predictors()
    c = sc.build_cluster()
    policy = build_policy(sc.policies[0])
    if "seed" in policy.param_names() and "seed" not in (policy_params or {}):  # as the runner does
        policy = type(policy)(**{**policy.get_params(), "seed": seed})
    told, true_pairs = sc.interference()
    return c, sc.build_jobs(seed, truth, c.configs), policy, estimator, truth, told, true_pairs


def replay(trace: str | Path, policy: str, seed: int = 0, policy_params: dict[str, Any] | None = None,
           **cluster: Any) -> Any:
    """The ``sim.engine.RunResult`` of the replay ``build`` describes."""
    from sim.engine import Simulation

    c, jobs, pol, estimator, truth, told, true_pairs = build(trace, policy, seed, policy_params, **cluster)
    return Simulation(c, jobs, pol, estimator, truth, interference=told, true_interference=true_pairs).run()


def write_trace(path: str | Path, jobs: int, lam: float, seed: int, multi_gpu: bool = False) -> Path:
    """Write a trace made by Gavel's generator (``sim.traces.gavel.generate``) with Gavel's throughputs."""
    from predictors.throughput import gavel_table
    from sim.traces.gavel import generate

    out = Path(path)
    out.write_text(generate(jobs, lam, seed, gavel_table().by_gpu("V100"), multi_gpu=multi_gpu), encoding="utf-8")
    return out


def reference(trace: str, policy: str) -> tuple[pd.Series, pd.DataFrame]:
    """Gavel's summary row and per-job table (job id, arrival, JCT; NaN where Gavel dropped the job)."""
    ref = pd.read_csv(GAVEL_DIR / "reference" / "results.csv")
    row = ref[(ref.trace == trace) & (ref.policy == policy)].iloc[0]
    per = pd.read_csv(GAVEL_DIR / "reference" / f"per_job_{Path(trace).stem}_{policy}_4-4-4.csv")
    return row, per


def agreement(trace: str, policy: str, result: Any = None) -> dict[str, Any]:
    """capsim's replay against Gavel's figures: ratios of average JCT and makespan, and per-job relative JCT errors
    over the jobs both complete (``per_job``: job id, Gavel's JCT, capsim's JCT)."""
    r = result if result is not None else replay(trace, policy)
    row, per = reference(trace, policy)
    s = r.summary
    both = per.dropna(subset=["jct"])
    ours = r.jobs.set_index("job_id").jct.loc[both.job_id].to_numpy()
    err = ours / both.jct.to_numpy() - 1.0
    return {
        "trace": trace, "policy": policy,
        "avg_jct": s["gavel_mean_jct"], "gavel_avg_jct": float(row.avg_jct_s),
        "makespan": s["gavel_makespan"], "gavel_makespan": float(row.makespan_s),
        "utilisation": s["gavel_utilisation"], "gavel_utilisation": float(row.utilization),
        "dropped": int(s["gavel_dropped"]), "gavel_dropped": int(row.n_jobs - row.n_completed),
        "median_error": float(np.median(np.abs(err))), "p90_error": float(np.percentile(np.abs(err), 90)),
        "per_job": pd.DataFrame({"job_id": both.job_id.to_numpy(), "gavel_jct": both.jct.to_numpy(), "jct": ours}),
    }


def agreement_table(cases: tuple[tuple[str, str], ...] = CASES) -> list[dict[str, Any]]:
    return [agreement(t, p) for t, p in cases]


VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "Gavel (rounds, T = 1920 s)": ({}, {}),
    "no round effects": ({"rounds": {"length": 360, "effects": False}}, {}),
    "no round effects, no throttle": ({"rounds": {"length": 360, "effects": False}}, {"recompute_interval": 0}),
}
"""Cluster and policy overrides: Gavel's model, then without the round effects, then also without the recompute
throttle (the event-driven variant with a decision every 360 s)."""


def effects_table(cases: tuple[tuple[str, str], ...] = CASES) -> pd.DataFrame:
    """Average JCT and makespan (h) of each case under each of ``VARIANTS``."""
    rows = []
    for trace, policy in cases:
        for name, (cluster, params) in VARIANTS.items():
            r = replay(trace, policy, policy_params=params, **cluster)
            rows.append({"trace": trace, "policy": policy, "model": name,
                         "avg_jct_h": r.summary["gavel_mean_jct"] / 3600,
                         "makespan_h": r.summary["gavel_makespan"] / 3600})
    return pd.DataFrame(rows)


def scatter(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Per-job JCT, capsim against Gavel, one panel per trace, both policies (log-log, the diagonal is agreement)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = sorted({r["trace"] for r in rows})
    fig, axes = plt.subplots(1, len(traces), figsize=(5.2 * len(traces), 4.6), squeeze=False)
    marks = {"fifo_perf": ("o", "tab:blue"), "max_min_fairness_perf": ("^", "tab:orange")}
    for ax, trace in zip(axes[0], traces):
        lo, hi = np.inf, 0.0
        for r in (r for r in rows if r["trace"] == trace):
            pj = r["per_job"]
            m, c = marks.get(r["policy"], ("s", "tab:green"))
            ax.scatter(pj.gavel_jct / 3600, pj.jct / 3600, s=16, marker=m, color=c, alpha=0.7,
                       label=f"{r['policy']} (median error {100 * r['median_error']:.1f} %)")
            lo, hi = min(lo, pj.gavel_jct.min(), pj.jct.min()), max(hi, pj.gavel_jct.max(), pj.jct.max())
        ax.plot([lo / 3600, hi / 3600], [lo / 3600, hi / 3600], color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("Gavel's JCT (h)")
        ax.set_ylabel("capsim's JCT (h)")
        ax.set_title(f"{trace} on 4:4:4, per job")
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _print(rows: list[dict[str, Any]]) -> None:
    head = (f"{'trace':8} {'policy':26} {'avg JCT (s) capsim/Gavel':>28} {'makespan (s) capsim/Gavel':>30} "
            f"{'util.':>11} {'dropped':>7} {'median err':>10} {'p90 err':>8}")
    print(head)
    for r in rows:
        print(f"{r['trace']:8} {r['policy']:26} {r['avg_jct']:>10,.0f}/{r['gavel_avg_jct']:<10,.0f} "
              f"({r['avg_jct'] / r['gavel_avg_jct'] - 1:+.1%}) {r['makespan']:>11,.0f}/{r['gavel_makespan']:<11,.0f}"
              f"({r['makespan'] / r['gavel_makespan'] - 1:+.1%}) {r['utilisation']:.3f}/{r['gavel_utilisation']:.3f} "
              f"{r['dropped']:>3}/{r['gavel_dropped']:<3} {r['median_error']:>10.1%} {r['p90_error']:>8.1%}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", help="write the per-job scatter plot to this PNG")
    ap.add_argument("--effects", action="store_true", help="also show what the rounds and the throttle make")
    ap.add_argument("--generate", metavar="FILE", help="write a trace with Gavel's generator and stop")
    ap.add_argument("--jobs", type=int, default=80)
    ap.add_argument("--lam", type=float, default=400.0, help="mean inter-arrival time (s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--multi-gpu", action="store_true", help="Gavel's -m: jobs of 2 and 4 GPUs")
    args = ap.parse_args(argv)
    if args.generate:
        print(write_trace(args.generate, args.jobs, args.lam, args.seed, args.multi_gpu))
        return
    rows = agreement_table()
    _print(rows)
    if args.plot:
        scatter([r for r in rows if r["policy"] in PLOTTED], args.plot)
    if args.effects:
        table = effects_table().pivot_table(index=["trace", "policy"], columns="model", values="avg_jct_h",
                                            sort=False)
        print("\naverage JCT (h) by model")
        print(table.round(2).to_string())


if __name__ == "__main__":
    main()
