"""What estimates that sharpen as a job runs buy: the sweeps ``experiments/online.yaml`` (the paper's grid) and
``experiments/online_spot.yaml`` (spot VMs) summarised for ``docs/online.md``.

``python -m studies.online results/online results/online_spot [--img docs/img]`` prints, per sweep, policy and
estimator MAPE, the mean total cost with the base estimate alone (online window 0) and with the online estimator
(window 100), and the paired change (same grid point and seed) with its 95 % t-interval; it draws the figure.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["paired", "markdown", "figure", "main"]

MAPE, WINDOW = "estimator.base.mape", "estimator.window"


def paired(results: Path, metric: str = "total_cost") -> pd.DataFrame:
    """Per policy and MAPE: mean ``metric`` off and online, and the mean paired difference (online − off, same grid
    point and seed) relative to the mean off, with its 95 % t-interval, and the number of pairs. (A mean of ratios
    would let the runs that cost least weigh most.)"""
    from experiments.api import read

    s = read(results).summary
    others = [c for c in s.columns if "." in c and c not in (MAPE, WINDOW)]
    keys = ["policy", MAPE, *others, "seed"]
    off = s[s[WINDOW] == 0].set_index(keys)[metric]
    on = s[s[WINDOW] > 0].set_index(keys)[metric]
    both = pd.DataFrame({"off": off, "on": on}).dropna()
    both["diff"] = both["on"] - both["off"]
    rows = []
    for (policy, mape), g in both.groupby(level=["policy", MAPE], sort=False):
        n, base = len(g), g["off"].mean()
        half = float(stats.t.ppf(0.975, n - 1) * g["diff"].std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
        rows.append({"policy": policy, "mape": mape, "off": base, "online": g["on"].mean(),
                     "change": g["diff"].mean() / base, "half": half / base, "pairs": n})
    out = pd.DataFrame(rows)
    order = {p: i for i, p in enumerate(dict.fromkeys(out["policy"]))}
    return out.sort_values(["policy", "mape"], key=lambda c: c.map(order) if c.name == "policy" else c,
                           kind="stable", ignore_index=True)


def markdown(table: pd.DataFrame) -> str:
    """The table as Markdown: total cost off and online, the paired change with its interval."""
    lines = ["| policy | estimator MAPE | total cost, base alone ($) | total cost, online ($) | change (95 % interval "
             "of the paired difference) | pairs |", "|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        lines.append(f"| `{r['policy']}` | {100 * r['mape']:.0f} % | {r['off']:,.2f} | {r['online']:,.2f} | "
                     f"{100 * r['change']:+.1f} % [{100 * (r['change'] - r['half']):+.1f}, "
                     f"{100 * (r['change'] + r['half']):+.1f}] | {r['pairs']} |")
    return "\n".join(lines)


def figure(tables: dict[str, pd.DataFrame], path: Path) -> None:
    """Mean total cost against the estimator's MAPE, one panel per sweep: each policy with the base estimate alone
    (dashed) and online (solid)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.plots.style import WIDTHS, policy_styles, rc

    policies = list(dict.fromkeys(p for t in tables.values() for p in t["policy"]))
    styles = policy_styles(policies)
    with plt.rc_context(rc("page")):
        fig, axes = plt.subplots(1, len(tables), figsize=(WIDTHS["page"], 2.3), layout="constrained", squeeze=False)
        for ax, (title, t) in zip(axes[0], tables.items()):
            for policy, g in t.groupby("policy", sort=False):
                st = styles[str(policy)]
                x = 100 * g["mape"].to_numpy(float)
                ax.plot(x, g["off"], linestyle="--", marker=st.marker, color=st.colour, markersize=3,
                        linewidth=0.9, label=f"{policy}, base alone")
                ax.plot(x, g["online"], linestyle="-", marker=st.marker, color=st.colour, markersize=3,
                        linewidth=0.9, label=f"{policy}, online")
            ax.set(title=title, xlabel="estimator MAPE (%)", ylabel="mean total cost ($)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right center", fontsize=6)
        fig.savefig(path, dpi=200, metadata={"Software": None})
        plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m studies.online", description=__doc__.splitlines()[0])
    ap.add_argument("paper", type=Path, help="result folder of experiments/online.yaml")
    ap.add_argument("spot", type=Path, nargs="?", help="result folder of experiments/online_spot.yaml")
    ap.add_argument("--img", type=Path, default=Path("docs/img"), help="where the figure goes (default: docs/img)")
    args = ap.parse_args(argv)
    tables = {"paper grid (6 settings × 5 seeds)": paired(args.paper)}
    if args.spot is not None:
        tables["spot VMs on AWS (5 seeds)"] = paired(args.spot)
    for title, t in tables.items():
        print(f"\n{title}\n\n{markdown(t)}")
    args.img.mkdir(parents=True, exist_ok=True)
    figure(tables, args.img / "online_sweep.png")
    print(f"\nfigure: {args.img / 'online_sweep.png'}")


if __name__ == "__main__":
    main()
