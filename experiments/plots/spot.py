"""The figure of the single-job spot mode: cost saved against deadline slack, one line per strategy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from experiments.plots.style import Style

__all__ = ["savings_vs_slack", "STYLES"]

STYLES = {
    "only_spot": Style("#8C564B", "X", ":"),
    "spot_greedy": Style("#CC79A7", "D", "--"),
    "spot_greedy(variant='strawman')": Style("#E69F00", "d", "--"),
    "uniform_progress": Style("#0072B2", "s", "-"),
    "time_sliced": Style("#009E73", "v", "-."),
    "omniscient": Style("#4D4D4D", "o", "-"),
}
"""Colour, marker and dashes of each spot strategy (by its ``describe()``); others take the project's spare looks."""


def savings_vs_slack(runs: pd.DataFrame, out: Path, width: str = "column") -> list[Path]:
    """Mean saving against always on demand (over start offsets and traces) against the slack, deadline minus the
    job's work, one panel per restart overhead; a hollow marker where some run of that point missed its deadline.
    Written as ``out`` (PNG) and its PDF twin."""
    import matplotlib.pyplot as plt
    from matplotlib import rc_context

    from experiments.plots.layout import save
    from experiments.plots.style import WIDTHS, policy_styles, rc

    if "savings" not in runs:
        raise ValueError("the runs have no savings column: include the on_demand strategy")
    df = runs.assign(slack=runs["deadline_hours"] - runs["task_hours"])
    overheads = sorted(df["restart_overhead_hours"].unique())
    labels = [s for s in dict.fromkeys(df["strategy"]) if s != "on_demand"]
    described = dict(zip(df["strategy"], df["component"]))
    spare = policy_styles(labels, dict(zip(df["strategy"], df["kind"])))
    styles = {s: STYLES.get(described[s], spare[s]) for s in labels}
    with rc_context(rc(width)):
        fig, axes = plt.subplots(1, len(overheads), figsize=(WIDTHS[width], WIDTHS[width] * 0.62), sharey=True,
                                 squeeze=False, layout="constrained")
        for ax, d in zip(axes[0], overheads):
            part = df[df["restart_overhead_hours"] == d]
            for label in labels:
                g = part[part["strategy"] == label].groupby("slack")
                mean = g["savings"].mean() * 100
                late = g["deadline_met"].apply(lambda s: not s.astype(bool).all())
                st = styles[label]
                ax.plot(mean.index, mean.to_numpy(), linestyle=st.dashes, color=st.colour, label=label)
                x, y = mean.index.to_numpy(), mean.to_numpy()
                ok = ~late.to_numpy()
                ax.plot(x[ok], y[ok], linestyle="none", marker=st.marker, color=st.colour)
                ax.plot(x[~ok], y[~ok], linestyle="none", marker=st.marker, markerfacecolor="white", color=st.colour)
            ax.set_title(f"restart overhead {d:g} h")
            ax.set_xlabel("deadline slack (h)")
            ax.axhline(0, color="0.6", linewidth=0.5)
            ax.grid(axis="y", linewidth=0.3, color="0.85")
        axes[0][0].set_ylabel("saved vs on demand (%)")
        top = np.nanmax(df.loc[df["strategy"] != "only_spot", "savings"]) * 100
        axes[0][0].set_ylim(min(-5.0, float(np.nanmin(df["savings"])) * 100), max(10.0, top + 5))
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=3,
                   title="hollow marker: some run of that point missed its deadline")
        paths = save(fig, out.parent, out.stem, width)
        plt.close(fig)
    return paths
