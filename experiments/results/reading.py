"""Reading a result folder: ``read_results`` gives its checked tables as ``Results`` (what ``report``, ``plot`` and
``experiments.api`` read), with metrics recomputed from the stored per-run tables on request
(``recompute_summary``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.results.store import ResultStore
from experiments.running.tasks import TABLES
from sim.model import CapsimError

__all__ = ["Results", "read_results", "recompute_summary"]


@dataclass
class Results:
    """A result folder's finished runs: every stored table as one DataFrame (``summary``, ``jobs``, ``nodes``,
    ``decisions``, ``segments``, ``failures``), the grid fields (a leading ``scenario`` when the runs shown hold
    several scenarios at one grid point), the policy order, and the runs left out with the reason."""

    root: Path
    tables: dict[str, pd.DataFrame]
    fields: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def summary(self) -> pd.DataFrame:
        return self.tables["summary"]

    @property
    def jobs(self) -> pd.DataFrame:
        return self.tables["jobs"]

    @property
    def nodes(self) -> pd.DataFrame:
        return self.tables["nodes"]

    @property
    def decisions(self) -> pd.DataFrame:
        return self.tables["decisions"]

    @property
    def segments(self) -> pd.DataFrame:
        return self.tables["segments"]

    @property
    def failures(self) -> pd.DataFrame:
        return self.tables.get("failures", pd.DataFrame())

    def totals(self) -> pd.DataFrame:
        """Per grid point and policy: the number of seeds and the mean over seeds of each headline metric (the
        numbers ``capsim run`` prints)."""
        from experiments.results.headline import headline

        keys = self.fields + ["policy"]
        cols = headline(self.summary)
        g = self.summary.groupby(keys, sort=False)
        out = g[cols].mean()
        out.insert(0, "seeds", g.size())
        return out.reset_index()

    def report(self, metrics: Sequence[str] | None = None, interval: str = "t") -> pd.DataFrame:
        """What ``capsim report`` tabulates: per grid point and policy, runs ``n`` and per metric the mean and its
        95% interval (``<metric>_mean``, ``_lo``, ``_hi``; ``interval``: ``t`` or ``bootstrap``)."""
        from experiments.results.headline import headline
        from experiments.results.report import aggregate, check_metric_names

        if metrics:
            check_metric_names(list(metrics), self.summary)
        return aggregate(self.summary, self.fields, list(metrics or headline(self.summary)), self.policies,
                         method=interval)

    def tidy(self) -> pd.DataFrame:
        """One row per run and metric: run id, grid fields, policy, seed, ``metric``, ``value`` and its ``label``
        (long form, for seaborn-style plotting and group-bys)."""
        from experiments.results.tables import metric_label
        from sim.metrics import METRICS

        s = self.summary
        ids = ["run_id", *self.fields, "policy", "seed"]
        metrics = [m for m in METRICS if m in s.columns]
        long = s[ids + metrics].melt(id_vars=ids, value_vars=metrics, var_name="metric", value_name="value")
        long["label"] = long["metric"].map(metric_label)
        return long


def _stderr(line: str) -> None:
    print(f"capsim: {line}", file=sys.stderr)


def read_results(root: str | Path, all_runs: bool = False, recompute: bool = False, warn: Any = None,
                 empty_ok: bool = False, tables: Sequence[str] | None = None) -> Results:
    """Read a result folder: the finished runs of the latest command into it (every finished run with
    ``all_runs``), rows sorted like the reports; a clear error when it is not a result folder or (unless
    ``empty_ok``) holds no intact finished run. Runs left out (damaged or missing files) are named through ``warn``.
    ``recompute`` recomputes every metric of the summary from the stored per-run tables (``recompute_summary``).
    ``tables``: read only these tables (and ``failures``), every file of a run still checked.

    Runs of different scenarios are never pooled: when one grid point holds several (``--all`` over commands with
    different scenarios), the summary gets a ``scenario`` column (the scenario's name, with its hash when names do
    not tell them apart), which becomes the first grid field."""
    d = Path(root)
    store = ResultStore(d)
    if not d.is_dir():
        what = "is a file, not a result folder" if d.exists() else "no such folder"
        raise CapsimError(f"{d}: {what}; write one with `capsim run SCENARIO --out {d}` or `capsim sweep FILE --out "
                          f"{d}`")
    if not store.is_store():
        legacy = " (it holds the flat files of an older `capsim run`: run it again)" if (d / "jobs.parquet").is_file() \
            else ""
        raise CapsimError(f"{d}: not a result directory{legacy}; write one with `capsim run SCENARIO --out {d}` or "
                          f"`capsim sweep FILE --out {d}`")
    if recompute and tables is not None:
        tables = None  # recomputing reads every table of every run
    frames, skipped = store.load_checked(all_runs, tables)
    warn = warn or _stderr
    for rid, why in sorted(skipped.items()):
        warn(f"{d}: left out run {rid}: {why}")
    if skipped:
        warn(f"{d}: {len(skipped)} runs left out; `capsim sweep` with the same file and --out runs them again")
    manifest = store.manifest()
    fields = list(manifest.get("grid_fields", []))
    order = list(manifest.get("policies", []))
    if frames["summary"].empty:
        if empty_ok:
            return Results(d, frames, fields, order, skipped)
        raise CapsimError(f"{d}: no finished runs yet" + (" (every finished run is damaged, see above)" if skipped
                                                          else ""))
    if recompute:
        frames["summary"] = recompute_summary(frames, with_segments=store.runs_with("segments"))
    summary, fields = _split_scenarios(store, frames["summary"], fields)
    frames["summary"] = summary
    order += [p for p in dict.fromkeys(summary["policy"]) if p not in order]
    return Results(d, frames, fields, order, skipped)


def _split_scenarios(store: ResultStore, summary: pd.DataFrame, fields: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """``summary`` with a leading ``scenario`` field when some grid point holds runs of several scenarios."""
    keys = store.scenario_keys(summary)
    point = [tuple(r) for r in summary[[f for f in fields if f in summary.columns]].astype(str).itertuples(index=False)]
    if len(set(zip(point, keys))) == len(set(point)):
        return summary, fields
    names = []
    for config in summary.get("config", pd.Series([""] * len(summary))):
        try:
            names.append(str(json.loads(config)["scenario"]["name"]))
        except (ValueError, TypeError, KeyError):
            names.append("?")
    named = len(set(zip(names, keys))) == len(set(keys)) == len(set(names))
    label = names if named else [f"{n}#{k[:8]}" for n, k in zip(names, keys)]
    return summary.assign(scenario=label), ["scenario", *fields]


def recompute_summary(tables: dict[str, pd.DataFrame], metrics: Sequence[str] | None = None,
              with_segments: set[str] | None = None) -> pd.DataFrame:
    """The summary table with every metric of ``sim.metrics`` (or those in ``metrics``) computed afresh from each
    run's stored tables, so a metric declared after the runs were made can be reported on them.

    ``with_segments`` names the runs whose segment table was stored (``ResultStore.runs_with("segments")``); the
    others are computed without one (``RunTables.segments`` is None), as folders written before segments were stored.
    """
    from sim.metrics import METRICS, RunTables

    names = [m for m in (metrics if metrics is not None else METRICS) if METRICS[m].compute is not None]
    by_run = {name: _by_run(tables.get(name)) for name in TABLES}
    seg_runs = set() if with_segments is None else with_segments
    values: dict[str, list[float]] = {m: [] for m in names}
    for rid in tables["summary"]["run_id"]:
        parts = {name: by_run[name](rid) for name in TABLES}
        run = RunTables(parts["jobs"], parts["nodes"], parts["decisions"],
                        parts["segments"] if rid in seg_runs else None)
        for m in names:
            compute = METRICS[m].compute
            assert compute is not None
            values[m].append(float(compute(run)))
    out = tables["summary"].copy()
    for m in names:
        if m in out.columns:
            out[m] = values[m]
        else:
            out.insert(len(out.columns) - ("config" in out.columns), m, values[m])
    return out


def _by_run(df: pd.DataFrame | None) -> Any:
    """A function run id -> that run's rows of ``df`` (an empty frame with the same columns for a run with none)."""
    if df is None or df.empty:
        empty = pd.DataFrame() if df is None else df
        return lambda rid: empty
    groups = {rid: g.reset_index(drop=True) for rid, g in df.groupby("run_id", sort=False)}
    empty = df.iloc[0:0]
    return lambda rid: groups.get(rid, empty)
