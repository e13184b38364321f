"""A result folder: what ``capsim run`` and ``capsim sweep`` write, and what ``report``, ``plot`` and notebooks read.

```
DIR/manifest.json                 what the latest command into DIR covered: kind (run or sweep), name, file, grid
                                  fields, policy order, seeds, run ids
DIR/summary/<run_id>.parquet      one row: run id, grid values, policy, seed, every metric of ``sim.metrics``, the
                                  run's configuration as JSON; written last, so its presence means the run finished
DIR/jobs|nodes|decisions|segments/<run_id>.parquet    the run's records (``experiments.runner.TABLES``)
DIR/failures/<run_id>.parquet     run id, grid values, policy, seed, config (JSON), traceback
DIR/summary.csv                   the manifest's finished runs, one row each, without the configuration: a flat
                                  export for spreadsheets, rewritten at the end of every command
```
Only the process that owns the folder writes here (workers send their results back), so no shared file system is
needed. Every file is written to a temporary name and renamed; readers keep only finished runs, so a run killed
between its files leaves nothing visible. Folders written before runs and sweeps shared this store (a ``sweep.json``
manifest, no segments) are read as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from sim.model import CapsimError

from experiments.results import (
    atomic_write_bytes,
    clean_temp_files,
    read_dataset,
    summary_frame,
    write_csv,
    write_parquet,
)
from experiments.runner import TABLES, Outcome

__all__ = ["ResultStore", "Results", "load_results", "open_results", "new_manifest", "recompute", "MANIFEST"]

MANIFEST = "manifest.json"
_LEGACY_MANIFEST = "sweep.json"
FORMAT = 1
"""Version of the folder layout, recorded in the manifest."""


def new_manifest(kind: str, name: str, file: str, fields: Sequence[str], policies: Sequence[str],
                 seeds: Sequence[int], run_ids: Sequence[str]) -> dict[str, Any]:
    """What one command into a folder covers: reports show these runs unless asked for every run there."""
    return {"format": FORMAT, "kind": kind, "name": name, "file": file, "grid_fields": list(fields),
            "policies": list(policies), "seeds": list(seeds), "run_ids": sorted(set(run_ids))}


class ResultStore:
    """Reads and writes a result folder."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def runs_with(self, table: str) -> set[str]:
        """Run ids that have a file in ``table`` (``summary``: finished runs; ``failures``: failed ones)."""
        d = self.root / table
        return {p.stem for p in d.glob("*.parquet") if not p.name.startswith(".")} if d.is_dir() else set()

    def finished(self) -> set[str]:
        return self.runs_with("summary")

    def failed(self) -> set[str]:
        return self.runs_with("failures")

    def is_store(self) -> bool:
        return (self.root / "summary").is_dir() or any((self.root / m).is_file() for m in (MANIFEST, _LEGACY_MANIFEST))

    def prepare(self) -> int:
        """Create the folder and remove temporary files a killed writer left; return how many were removed."""
        self.root.mkdir(parents=True, exist_ok=True)
        return clean_temp_files(self.root)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Record what the latest command into this folder covers (see ``new_manifest``)."""
        atomic_write_bytes(self.root / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
        (self.root / _LEGACY_MANIFEST).unlink(missing_ok=True)

    def manifest(self) -> dict[str, Any]:
        for name in (MANIFEST, _LEGACY_MANIFEST):
            path = self.root / name
            if path.is_file():
                return json.loads(path.read_text(encoding="utf-8"))
        return {}

    def write(self, o: Outcome) -> None:
        """Store one outcome: tables first and the summary row last for a success; a failure record otherwise."""
        rid = o.task.run_id
        if o.ok:
            for name in TABLES:
                write_parquet(o.tables[name], self.root / name / f"{rid}.parquet")
            write_parquet(pd.DataFrame([{**o.summary, "config": o.task.config_json()}]),
                          self.root / "summary" / f"{rid}.parquet")
            (self.root / "failures" / f"{rid}.parquet").unlink(missing_ok=True)
        else:
            row = {"run_id": rid, **dict(o.task.labels), "policy": o.task.policy_label, "seed": o.task.seed,
                   "config": o.task.config_json(),
                   "traceback": o.error or ""}
            write_parquet(pd.DataFrame([row]), self.root / "failures" / f"{rid}.parquet")

    def load(self, all_runs: bool = False) -> dict[str, pd.DataFrame]:
        """The tables of the folder (finished runs only), plus ``failures``; rows sorted by run labels.

        Only the runs of the latest command into the folder are read (a folder may also hold runs of an earlier,
        different grid or scenario); ``all_runs`` reads every finished run.
        """
        done = self.finished()
        manifest = self.manifest()
        if not all_runs and "run_ids" in manifest:
            done &= set(manifest["run_ids"])
        order = {p: i for i, p in enumerate(manifest.get("policies", []))}
        fields = list(manifest.get("grid_fields", []))
        out: dict[str, pd.DataFrame] = {}
        for name in ("summary", *TABLES, "failures"):
            only = done if name != "failures" else (None if all_runs or "run_ids" not in manifest
                                                     else set(manifest["run_ids"]))
            df = read_dataset(self.root / name, only)
            if not df.empty:
                keys = [c for c in fields if c in df.columns]
                df = df.assign(_p=df["policy"].map(lambda p: order.get(p, len(order))))
                df = df.sort_values(keys + ["_p", "policy", "seed", "run_id"], kind="mergesort").drop(columns="_p")
                df = df.reset_index(drop=True)
            out[name] = df
        return out

    def export_summary(self) -> Path | None:
        """Write ``summary.csv``: the manifest's finished runs, label columns and headline metrics first; return its
        path (None, and no file, when no run finished)."""
        path = self.root / "summary.csv"
        summary = self.load()["summary"]
        if summary.empty:
            path.unlink(missing_ok=True)
            return None
        fields = [f for f in self.manifest().get("grid_fields", []) if f in summary.columns]
        flat = summary_frame(summary.drop(columns="config", errors="ignore"), fields)
        write_csv(flat, path)
        return path


def load_results(root: str | Path, all_runs: bool = False, recompute_metrics: bool = False) -> dict[str, pd.DataFrame]:
    """The tables of a result folder (see ``ResultStore.load``); ``recompute_metrics`` recomputes every metric of
    the summary from the stored per-run tables (``recompute``)."""
    store = ResultStore(root)
    tables = store.load(all_runs)
    if recompute_metrics and not tables["summary"].empty:
        tables["summary"] = recompute(tables, with_segments=store.runs_with("segments"))
    return tables


@dataclass
class Results:
    """A result folder read for reporting: its tables, grid fields and policy order."""

    root: Path
    tables: dict[str, pd.DataFrame]
    fields: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)


def open_results(root: str | Path, all_runs: bool = False, recompute_metrics: bool = False) -> Results:
    """Read a result folder for ``report`` and ``plot``; a clear error when it is not one or holds no finished run."""
    d = Path(root)
    store = ResultStore(d)
    if not store.is_store():
        legacy = " (it holds the flat files of an older `capsim run`: run it again)" if (d / "jobs.parquet").is_file() \
            else ""
        raise CapsimError(f"{d}: not a result directory{legacy}; write one with `capsim run SCENARIO --out {d}` or "
                          f"`capsim sweep FILE --out {d}`")
    tables = load_results(d, all_runs, recompute_metrics)
    if tables["summary"].empty:
        raise CapsimError(f"{d}: no finished runs yet")
    manifest = store.manifest()
    summary = tables["summary"]
    order = list(manifest.get("policies", []))
    order += [p for p in dict.fromkeys(summary["policy"]) if p not in order]
    return Results(d, tables, list(manifest.get("grid_fields", [])), order)


def recompute(tables: dict[str, pd.DataFrame], metrics: Sequence[str] | None = None,
              with_segments: set[str] | None = None) -> pd.DataFrame:
    """The summary table with every metric of ``sim.metrics`` (or those in ``metrics``) computed afresh from each
    run's stored tables, so a metric declared after the runs were made can be reported on them.

    ``with_segments`` names the runs whose segment table was stored (``ResultStore.runs_with("segments")``); the
    others are computed without one (``RunTables.segments`` is None), as folders written before segments were stored.
    """
    from sim.metrics import METRICS, RunTables

    names = list(metrics) if metrics is not None else list(METRICS)
    by_run = {name: _by_run(tables.get(name)) for name in TABLES}
    seg_runs = set() if with_segments is None else with_segments
    values: dict[str, list[float]] = {m: [] for m in names}
    for rid in tables["summary"]["run_id"]:
        parts = {name: by_run[name](rid) for name in TABLES}
        run = RunTables(parts["jobs"], parts["nodes"], parts["decisions"],
                        parts["segments"] if rid in seg_runs else None)
        for m in names:
            values[m].append(float(METRICS[m].compute(run)))
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
