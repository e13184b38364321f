"""The MIG study of docs/sharing.md: with MIG slices against whole GPUs, per policy, on the paper grid and on
ElasticFlow's cluster01 trace, on A100 VMs.

``python -m studies.mig --paper results/mig_paper --elasticflow results/mig_elasticflow --alibaba results/mig_alibaba
[--plot docs/img/mig_study.png]`` reads the sweeps of ``experiments/mig/paper.yaml`` and ``elasticflow.yaml`` and the
run of ``alibaba.yaml``.
In each, a base policy (``greedy``, ``insertion``) never cuts a GPU, so its runs are the runs without MIG, and
``mig-<base>`` (the ``mig`` layer before it) the runs with MIG, on the same instances. It prints per study and policy
the mean total and VM cost, the share of jobs that met their deadline, mean JCT, makespan, GPU utilisation (busy
GPU-time, a slice counting its compute share) and the share of the jobs' GPU-time run on slices, each with MIG against
without (relative change of the means), and draws the changes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

__all__ = ["METRICS", "summary", "table", "plot", "main"]

METRICS = ("total_cost", "vm_cost", "deadline_met", "mean_jct", "makespan", "gpu_utilisation", "sliced_share")
CHANGED = ("total_cost", "deadline_met", "mean_jct", "makespan", "gpu_utilisation")


def summary(folder: str | Path) -> pd.DataFrame:
    """A sweep's summary with, per run, the share of its jobs' GPU-time run on MIG slices (from its segments)."""
    folder = Path(folder)
    s = pd.read_csv(folder / "summary.csv")
    seg = pd.read_parquet(folder / "segments", columns=["run_id", "gpus", "start_time", "end_time", "slice"])
    span = (seg["end_time"] - seg["start_time"]).clip(lower=0) * seg["gpus"]
    compute = seg["slice"].map(lambda x: int(x.split("/")[1][0]) / 7 if isinstance(x, str) else 1.0)
    gpu_time = (span * compute).groupby(seg["run_id"]).sum()
    sliced = (span * compute).where(seg["slice"].notna(), 0.0).groupby(seg["run_id"]).sum()
    s["sliced_share"] = s["run_id"].map(sliced / gpu_time).fillna(0.0)
    return s


def table(s: pd.DataFrame, name: str) -> pd.DataFrame:
    """Means per policy over the instances (the grid's points and seeds), ``mig-<base>`` against ``<base>``."""
    keys = [c for c in s.columns if "." in c] + ["seed"]  # the grid's axes and the seed
    means = s.groupby("policy", sort=False)[list(METRICS)].mean()
    rows = []
    for policy in means.index:
        if policy.startswith("mig-"):
            continue
        row = {"study": name, "policy": policy, "mig": "off", **means.loc[policy].to_dict()}
        rows.append(row)
        on = f"mig-{policy}"
        if on in means.index:
            both = s[s["policy"].isin([policy, on])]
            assert both.groupby(keys or ["seed"]).size().eq(2).all(), "with and without MIG on the same instances"
            row_on = {"study": name, "policy": policy, "mig": "on", **means.loc[on].to_dict()}
            for m in CHANGED:
                base = means.loc[policy, m]
                row_on[f"{m}_change"] = means.loc[on, m] / base - 1.0 if base else float("nan")
            rows.append(row_on)
    return pd.DataFrame(rows)


def plot(t: pd.DataFrame, path: str | Path) -> None:
    """Relative change of total cost, mean JCT, makespan and GPU utilisation with MIG, per study and policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    on = t[t["mig"] == "on"].reset_index(drop=True)
    labels = [f"{r.study}\n{r.policy}" for r in on.itertuples()]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(on)), 3.6))
    width = 0.2
    for i, (m, label) in enumerate((("total_cost_change", "total cost"), ("mean_jct_change", "mean JCT"),
                                    ("makespan_change", "makespan"), ("gpu_utilisation_change", "GPU utilisation"))):
        ax.bar([x + (i - 1.5) * width for x in range(len(on))], 100 * on[m], width, label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(on)), labels, fontsize=8)
    ax.set_ylabel("change with MIG slices (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paper", required=True, help="result folder of experiments/mig/paper.yaml")
    p.add_argument("--elasticflow", help="result folder of experiments/mig/elasticflow.yaml")
    p.add_argument("--alibaba", help="result folder of experiments/mig/alibaba.yaml")
    p.add_argument("--plot", help="write the figure here")
    args = p.parse_args(argv)
    parts = [table(summary(args.paper), "paper grid")]
    if args.elasticflow:
        parts.append(table(summary(args.elasticflow), "ElasticFlow cluster01"))
    if args.alibaba:
        parts.append(table(summary(args.alibaba), "Alibaba PAI 2023"))
    t = pd.concat(parts, ignore_index=True)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(t.round(4).to_string(index=False))
    if args.plot:
        plot(t, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
