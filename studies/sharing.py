"""The co-location study of docs/sharing.md: with co-location against without, per policy, on the paper grid and on
Gavel's trace d with measured interference.

``python -m studies.sharing --paper results/sharing_paper --gavel results/sharing_gavel [--plot
docs/img/sharing_study.png]`` reads the summaries of ``capsim sweep experiments/sharing/paper.yaml`` and
``experiments/sharing/gavel.yaml``, prints per setting and policy the mean total and VM cost, the share of jobs that
met their deadline, mean JCT, makespan, GPU utilisation (busy GPU-time) and the share of GPU-time run shared, and
each with co-location against the same runs without (relative change of the means over the same instances), and
draws them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

__all__ = ["METRICS", "summary", "table", "plot", "main"]

METRICS = ("total_cost", "vm_cost", "deadline_met", "mean_jct", "makespan", "gpu_utilisation", "colocated_share")


def summary(folder: str | Path) -> pd.DataFrame:
    """A sweep's summary with ``colocation`` spelled out (``off`` where the option was not set)."""
    s = pd.read_csv(Path(folder) / "summary.csv")
    s["colocation"] = s["colocation"].fillna("off") if "colocation" in s else "off"
    return s


def table(s: pd.DataFrame, name: str) -> pd.DataFrame:
    """Means per (co-location setting, policy) over the instances, and the relative change against ``off``."""
    means = s.groupby(["colocation", "policy"], sort=False)[list(METRICS)].mean().reset_index()
    off = means[means["colocation"] == "off"].set_index("policy")
    for m in ("total_cost", "mean_jct", "makespan", "gpu_utilisation", "deadline_met"):
        means[f"{m}_change"] = [row[m] / off.loc[row["policy"], m] - 1.0 if off.loc[row["policy"], m] else float("nan")
                                for _, row in means.iterrows()]
    means.insert(0, "study", name)
    return means


def plot(t: pd.DataFrame, path: str | Path) -> None:
    """Relative change of mean JCT, makespan and GPU utilisation with co-location, per study, setting and policy
    (cost is left out: Gavel's trace has no deadlines, only placeholders that steer the policies)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    on = t[t["colocation"] != "off"].reset_index(drop=True)
    labels = [f"{r.study}\n{r.policy}\n{_short(r.colocation)}" for r in on.itertuples()]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(on)), 3.6))
    width = 0.27
    for i, (m, label) in enumerate((("mean_jct_change", "mean JCT"), ("makespan_change", "makespan"),
                                    ("gpu_utilisation_change", "GPU utilisation"))):
        ax.bar([x + (i - 1) * width for x in range(len(on))], 100 * on[m], width, label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(on)), labels, fontsize=7)
    ax.set_ylabel("change with co-location (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def _short(setting: str) -> str:
    return {"{\"interference\":\"learned\"}": "learned", "{\"interference\":\"table\"}": "measured",
            "{\"estimator\":\"learned\",\"interference\":\"table\"}": "told learned"}.get(setting, setting)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paper", required=True, help="result folder of experiments/sharing/paper.yaml")
    p.add_argument("--gavel", required=True, help="result folder of experiments/sharing/gavel.yaml")
    p.add_argument("--plot", help="write the figure here")
    args = p.parse_args(argv)
    t = pd.concat([table(summary(args.paper), "paper grid"), table(summary(args.gavel), "Gavel d, 4:4:4")])
    t["colocation"] = t["colocation"].map(_short)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(t.round(3).to_string(index=False))
    if args.plot:
        plot(t, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
