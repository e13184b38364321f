"""How far a trace replay's figures rest on the runtime model's scaling law (``docs/traces.md``).

``python -m studies.traces_scaling --out results/philly_scaling --plot docs/img/philly_scaling.png`` runs
``experiments/traces/philly_scaling.yaml`` (finished runs in ``--out`` are kept), prints VM cost, mean JCT and the
share of deadlines met per scaling law and policy, each relative to the linear law, and draws them side by side.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from experiments.api import read, run

__all__ = ["SWEEP", "METRICS", "table", "plot", "main"]

SWEEP = Path(__file__).resolve().parents[1] / "experiments" / "traces" / "philly_scaling.yaml"
METRICS = {"vm_cost": "VM cost ($)", "mean_jct": "mean JCT (h)", "deadline_met": "deadlines met"}


def _law(scaling: str, serial: float) -> str:
    """A grid point's name: the law, with its serial share where it has one."""
    return "linear" if scaling == "linear" else (f"amdahl {serial:g}" if scaling == "amdahl"
                                                 else f"measured (else amdahl {serial:g})")


def table(folder: str | Path) -> pd.DataFrame:
    """One row per (law, policy): the metrics and each one's ratio to the same policy under the linear law."""
    s = read(folder).summary
    out = pd.DataFrame({"law": [_law(a, float(b)) for a, b in zip(s["predictor.scaling"], s["predictor.serial"])],
                        "policy": s["policy"], "vm_cost": s["vm_cost"], "mean_jct": s["mean_jct"] / 3600.0,
                        "deadline_met": s["deadline_met"]})
    out = out.groupby(["law", "policy"], sort=False, as_index=False).mean(numeric_only=True)
    base = out[out["law"] == "linear"].set_index("policy")
    for m in ("vm_cost", "mean_jct"):
        out[f"{m}_vs_linear"] = out[m] / out["policy"].map(base[m])
    order = {k: i for i, k in enumerate(sorted(out["law"].unique(), key=_rank))}
    return out.sort_values(["law", "policy"], key=lambda c: c.map(order) if c.name == "law" else c,
                           ignore_index=True)


def _rank(law: str) -> tuple[int, str]:
    """Linear first, then Amdahl by serial share, then the measured scaling."""
    return (0 if law == "linear" else 1 if law.startswith("amdahl") else 2, law)


def plot(t: pd.DataFrame, path: str | Path) -> None:
    """Three panels (VM cost, mean JCT, deadlines met), the laws along x, one marker per policy, a shared x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    laws = list(dict.fromkeys(t["law"]))
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharex=True)
    for ax, (m, label) in zip(axes, METRICS.items()):
        for (policy, g), marker in zip(t.groupby("policy", sort=True), ("o", "D", "s", "^")):
            x = [laws.index(v) for v in g["law"]]
            ax.plot(x, g[m], marker=marker, linestyle="none", label=policy, markersize=7, alpha=0.85)
        ax.set_title(label)
        ax.set_xticks(range(len(laws)), [v.replace(" (", "\n(") for v in laws], rotation=30, ha="right",
                      fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0].legend(frameon=False)
    fig.suptitle("Philly VC 103959 (876 jobs) replayed elastic on GCP A100 VMs: the runtime model's scaling law",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m studies.traces_scaling", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/philly_scaling", help="results folder (finished runs are kept)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--plot", help="draw the figure to this file")
    a = ap.parse_args(argv)
    run(SWEEP, out=a.out, workers=a.workers)
    t = table(a.out)
    with pd.option_context("display.width", 160, "display.float_format", "{:,.3f}".format):
        print(t.to_string(index=False))
    if a.plot:
        plot(t, a.plot)
        print(f"figure: {a.plot}")


if __name__ == "__main__":
    main()
