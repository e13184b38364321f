"""A sweep's result directory: one Parquet dataset per table, one file per run, written atomically.

```
DIR/sweep.json                  what was swept (name, grid fields, policy order, seeds)
DIR/summary/<run_id>.parquet    one row (metrics + the run's configuration as JSON); written last, so its presence
                                means the run finished
DIR/jobs|nodes|decisions/<run_id>.parquet
DIR/failures/<run_id>.parquet   run id, grid values, policy, seed, config (JSON), traceback
```
Only the process that owns the sweep writes here (workers send their results back), so no shared file system is
needed. Readers keep only finished runs, so a run killed between its files leaves nothing visible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.results import atomic_write_bytes, clean_temp_files, read_dataset, write_parquet
from experiments.runner import TABLES, Outcome

__all__ = ["ResultStore", "load_results"]


class ResultStore:
    """Reads and writes a sweep directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def finished(self) -> set[str]:
        d = self.root / "summary"
        return {p.stem for p in d.glob("*.parquet") if not p.name.startswith(".")} if d.is_dir() else set()

    def failed(self) -> set[str]:
        d = self.root / "failures"
        return {p.stem for p in d.glob("*.parquet") if not p.name.startswith(".")} if d.is_dir() else set()

    def prepare(self) -> int:
        """Create the directory and remove temporary files a killed sweep left; return how many were removed."""
        self.root.mkdir(parents=True, exist_ok=True)
        return clean_temp_files(self.root)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Record what the latest sweep into this DIR covers (reports show those runs unless asked for all)."""
        path = self.root / "sweep.json"
        atomic_write_bytes(path, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())

    def manifest(self) -> dict[str, Any]:
        path = self.root / "sweep.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

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


def load_results(root: str | Path, all_runs: bool = False) -> dict[str, pd.DataFrame]:
    """The tables of a sweep directory (finished runs only), plus ``failures``; rows sorted by run labels.

    Only the runs of the latest sweep into the directory are read (a directory may also hold runs of an earlier,
    different grid or base scenario); ``all_runs`` reads every finished run.
    """
    store = ResultStore(root)
    done = store.finished()
    manifest = store.manifest()
    if not all_runs and "run_ids" in manifest:
        done &= set(manifest["run_ids"])
    order = {p: i for i, p in enumerate(manifest.get("policies", []))}
    fields = [f for f in manifest.get("grid_fields", [])]
    out: dict[str, pd.DataFrame] = {}
    for name in ("summary", *TABLES, "failures"):
        only = done if name != "failures" else (None if all_runs or "run_ids" not in manifest
                                                 else set(manifest["run_ids"]))
        df = read_dataset(store.root / name, only)
        if not df.empty:
            keys = [c for c in fields if c in df.columns]
            df = df.assign(_p=df["policy"].map(lambda p: order.get(p, len(order))))
            df = df.sort_values(keys + ["_p", "policy", "seed", "run_id"], kind="mergesort").drop(columns="_p")
            df = df.reset_index(drop=True)
        out[name] = df
    return out
