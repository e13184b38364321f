"""A result folder: what ``capsim run`` and ``capsim sweep`` write, and what ``report``, ``plot`` and notebooks read.

```
DIR/manifest.json                 what the latest command into DIR covered (kind: run or sweep, name, file, grid
                                  fields, policy order, seeds, run ids), written once when the command starts
DIR/runs.jsonl                    the journal, appended to as runs are stored, never rewritten: one line per run
                                  stored (its scenario - the hash of its resolved configuration without policy and
                                  seed - and the SHA-256 of each of its files) or dropped (damaged, run again); the
                                  last line about a run is its state
DIR/summary/<run_id>.parquet      one row: run id, grid values, policy, seed, every metric of ``sim.metrics``, the
                                  run's configuration as JSON; written last, so its presence means the run finished
DIR/jobs|nodes|decisions|segments/<run_id>.parquet    the run's records (``running.tasks.TABLES``)
DIR/failures/<run_id>.parquet     run id, grid values, policy, seed, config (JSON), traceback
DIR/summary.csv                   the manifest's finished runs, one row each, without the configuration: a flat
                                  export for spreadsheets, rewritten at the end of every command
DIR/.capsim.lock                  held by the one process writing here (``results.folders.FolderLock``)
```
Runs live side by side by run id: a later command into the folder adds its runs and keeps every earlier one (a run
of the same configuration is the same file again), so no command destroys earlier results; ``report`` and ``plot``
show the latest command's runs, ``--all`` every run. Only the process holding the lock writes here (workers send
their results back), so no shared file system is needed. Every file is written to a temporary name and renamed;
readers keep only finished runs whose files match their checksums (or, for runs written before checksums, parse),
and name the others, which the next ``sweep`` runs again. Every table has one schema across its files (``write``),
so ``pandas.read_parquet("DIR/jobs")`` reads a whole sweep. Folders written before runs and sweeps shared this store
(a ``sweep.json`` manifest, no segments, no checksums) are read as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from experiments.results.files import (
    atomic_write_bytes,
    clean_temp_files,
    read_parquet_bytes,
    sha256,
    summary_frame,
    write_csv,
    write_parquet,
)
from experiments.results.folders import FolderLock
from experiments.running import interrupts
from experiments.running.tasks import TABLES, Outcome, Task
from sim.model import CapsimError

__all__ = ["ResultStore", "new_manifest", "MANIFEST", "JOURNAL"]

MANIFEST = "manifest.json"
_LEGACY_MANIFEST = "sweep.json"
FORMAT = 2
"""Version of the folder layout, recorded in the manifest (2: runs recorded with scenario and checksums)."""
_NEEDED = ("summary", "jobs", "nodes", "decisions")
"""The files a run written before checksums must have (``segments`` came later)."""
JOURNAL = "runs.jsonl"
"""The append-only record of the runs stored in a folder (before it, ``manifest.json`` held them, rewritten as runs
arrived: I/O quadratic in the runs of a sweep)."""


def new_manifest(kind: str, name: str, file: str, fields: Sequence[str], policies: Sequence[str],
                 seeds: Sequence[int], run_ids: Sequence[str]) -> dict[str, Any]:
    """What one command into a folder covers: reports show these runs unless asked for every run there."""
    return {"format": FORMAT, "kind": kind, "name": name, "file": file, "grid_fields": list(fields),
            "policies": list(policies), "seeds": list(seeds), "run_ids": sorted(set(run_ids))}


class ResultStore:
    """Reads and writes a result folder."""

    def __init__(self, root: str | Path, label_types: Mapping[str, pa.DataType] | None = None):
        self.root = Path(root)
        self.label_types = dict(label_types or {})
        self._manifest: dict[str, Any] | None = None
        self._runs: dict[str, dict[str, Any]] | None = None
        self._journal: Any = None

    # ----- what is here ---------------------------------------------------------------------------------------------
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

    def manifest(self) -> dict[str, Any]:
        """The folder's manifest (empty for a folder without one); a damaged one is a clear error."""
        if self._manifest is not None:
            return self._manifest
        for name in (MANIFEST, _LEGACY_MANIFEST):
            path = self.root / name
            if path.is_file():
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError) as e:
                    raise CapsimError(f"{path}: damaged manifest ({e}); a result folder's manifest is JSON written "
                                      f"by capsim: restore it, or delete it and run the sweep again") from None
                if not isinstance(data, dict) or not isinstance(data.get("runs", {}), dict) \
                        or not isinstance(data.get("run_ids", []), list):
                    raise CapsimError(f"{path}: damaged manifest (expected a JSON object with `run_ids` and `runs`); "
                                      f"delete it and run the sweep again")
                self._manifest = data
                return data
        self._manifest = {}
        return self._manifest

    def _records(self) -> dict[str, dict[str, Any]]:
        """Every run recorded here: those of an older manifest, then the journal's lines in order (the last about a
        run wins; a line cut short by a killed writer is left out: its run, if intact, is recorded again by the next
        ``verify``)."""
        if self._runs is None:
            runs = dict(self.manifest().get("runs", {}))
            path = self.root / JOURNAL
            if path.is_file():
                for line in path.read_bytes().split(b"\n"):
                    try:
                        entry = json.loads(line)
                        rid = entry["run"]
                    except (ValueError, KeyError, TypeError):
                        continue  # empty, or cut short by a killed writer
                    if entry.get("drop"):
                        runs.pop(rid, None)
                    else:
                        runs[rid] = {k2: v for k2, v in entry.items() if k2 != "run"}
            self._runs = runs
        return self._runs

    def _record(self, rid: str, rec: dict[str, Any] | None) -> None:
        """Append a run's new state to the journal (None: dropped)."""
        runs = self._records()
        if rec is None:
            runs.pop(rid, None)
            entry: dict[str, Any] = {"run": rid, "drop": True}
        else:
            runs[rid] = rec
            entry = {"run": rid, **rec}
        if self._journal is None:
            path = self.root / JOURNAL
            torn = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
            self._journal = open(path, "ab")  # noqa: SIM115 (kept open while the command writes)
            if torn:  # a killed writer's last line: the next starts on a line of its own
                self._journal.write(b"\n")
        with interrupts.writing():
            self._journal.write(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode() + b"\n")
            self._journal.flush()

    # ----- writing (by the holder of the folder's lock) -------------------------------------------------------------
    def prepare(self) -> int:
        """Create the folder and remove temporary files of dead writers; return how many were removed (for a writer
        that manages the lock itself; commands use ``writing``)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return clean_temp_files(self.root)

    @contextlib.contextmanager
    def writing(self, command: dict[str, Any], log: Any = None) -> Iterator[ResultStore]:
        """Hold the folder's lock for one command: temporary files of dead writers removed, the manifest records
        ``command`` (``new_manifest``) and keeps every run already here; at the end, the manifest and ``summary.csv``
        are written and the lock released, however the command ends."""
        lock = FolderLock(self.root).acquire()
        try:
            if lock.stale is not None and log:
                log(f"{self.root}: took over the lock of pid {lock.stale}, which is no longer running")
            clean_temp_files(self.root)
            older = self.manifest().get("runs")
            self._manifest = dict(command)
            if older:  # an older folder's records move to the journal once
                for rid, rec in sorted(older.items()):
                    self._record(rid, rec)
            self.flush()
            yield self
        finally:
            try:
                self.close()
                self.export_summary()
            finally:
                lock.release()

    def flush(self) -> None:
        """Write the manifest (the command's coverage; runs are in the journal)."""
        text = json.dumps(self._manifest, indent=1, sort_keys=True) + "\n"
        atomic_write_bytes(self.root / MANIFEST, text.encode())
        (self.root / _LEGACY_MANIFEST).unlink(missing_ok=True)

    def close(self) -> None:
        """Flush the journal to disk and close it."""
        if self._journal is not None:
            self._journal.flush()
            os.fsync(self._journal.fileno())
            self._journal.close()
            self._journal = None

    def write(self, o: Outcome) -> None:
        """Store one outcome: tables first and the summary row last for a success, a failure record otherwise; the
        journal records each file's checksum and the run's scenario."""
        rid = o.task.run_id
        old = self._records().get(rid, {})
        files = dict(old.get("files", {}))
        if o.ok:
            assert o.summary is not None  # a run that succeeded has its summary row
            for name in TABLES:
                files[name] = self._put(o.tables[name], name, rid)
            files["summary"] = self._put(pd.DataFrame([{**o.summary, "config": o.task.config_json()}]), "summary", rid)
            (self.root / "failures" / f"{rid}.parquet").unlink(missing_ok=True)
            files.pop("failures", None)
        else:
            row = {"run_id": rid, **dict(o.task.labels), "policy": o.task.policy_label, "seed": o.task.seed,
                   "config": o.task.config_json(), "traceback": o.error or ""}
            files["failures"] = self._put(pd.DataFrame([row]), "failures", rid)
        self._record(rid, {"scenario": o.task.scenario_id, "files": files})

    def _put(self, df: pd.DataFrame, table: str, rid: str) -> str:
        return write_parquet(df, self.root / table / f"{rid}.parquet", self.label_types)

    def verify(self, tasks: Mapping[str, Task]) -> tuple[set[str], dict[str, str]]:
        """Which of ``tasks`` (by run id) finished intact, and why the others that left a summary are not; the
        damaged ones are removed, to be run again, and intact runs written before their checksum was recorded (the
        writer was killed in between) are recorded now."""
        done: set[str] = set()
        bad: dict[str, str] = {}
        records = self._records()
        for rid in sorted(self.finished() & set(tasks)):
            _, why = self._read_run(rid, parse=rid not in records)
            if why:
                bad[rid] = why
                self._discard(rid)
                continue
            done.add(rid)
            if "summary" not in records.get(rid, {}).get("files", {}):
                files = {n: sha256(p.read_bytes()) for n in ("summary", *TABLES)
                         if (p := self.root / n / f"{rid}.parquet").is_file()}
                self._record(rid, {"scenario": tasks[rid].scenario_id, "files": files})
        for rid in set(tasks) - done - bad.keys():
            if "summary" in records.get(rid, {}).get("files", {}):
                bad[rid] = f"summary/{rid}.parquet is missing"
                self._discard(rid)
        return done, bad

    def _discard(self, rid: str) -> None:
        for name in ("summary", *TABLES):
            (self.root / name / f"{rid}.parquet").unlink(missing_ok=True)
        if rid in self._records():
            self._record(rid, None)

    # ----- reading --------------------------------------------------------------------------------------------------
    def _read_run(self, rid: str, parse: bool = True, only: Sequence[str] | None = None
                  ) -> tuple[dict[str, pa.Table], str | None]:
        """The tables of a finished run (parsed when ``parse``; only those in ``only`` if given, every file checked
        all the same), or the reason it cannot be trusted: a file missing, not matching its recorded checksum, or
        (without one) not a readable Parquet file."""
        recorded = self._records().get(rid, {}).get("files")
        out: dict[str, pa.Table] = {}
        for name in ("summary", *TABLES):
            path = self.root / name / f"{rid}.parquet"
            want = recorded.get(name) if isinstance(recorded, dict) else None
            if not path.is_file():
                if want is not None or (recorded is None and name in _NEEDED):
                    return {}, f"{name}/{rid}.parquet is missing"
                continue
            data = path.read_bytes()
            if want is not None and sha256(data) != want:
                return {}, f"{name}/{rid}.parquet does not match its recorded checksum (damaged)"
            if parse or want is None:
                try:
                    table = read_parquet_bytes(data)
                    if only is None or name in only:
                        out[name] = table
                except (pa.ArrowException, OSError) as e:
                    return {}, f"{name}/{rid}.parquet is not a readable Parquet file ({str(e).splitlines()[0]})"
        return out, None

    def load_checked(self, all_runs: bool = False, tables: Sequence[str] | None = None
                     ) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
        """The tables of the folder's intact finished runs (those named in ``tables``, default every one; a run is
        intact when every file of it is), plus ``failures``, rows sorted by run labels; and the runs left out, each
        with the reason (damaged or missing files).

        Only the runs of the latest command into the folder are read (a folder may also hold runs of an earlier,
        different grid or scenario); ``all_runs`` reads every finished run.
        """
        manifest = self.manifest()
        scope = None if all_runs or "run_ids" not in manifest else set(manifest["run_ids"])
        done = self.finished() if scope is None else self.finished() & scope
        skipped: dict[str, str] = {}
        parts: dict[str, list[pa.Table]] = {name: [] for name in ("summary", *TABLES)}
        for rid in sorted(done):
            read, why = self._read_run(rid, parse=tables is None or any(t != "summary" for t in tables),
                                       only=tables)
            if why:
                skipped[rid] = why
                continue
            if tables is not None and "summary" in tables and "summary" not in read:
                read["summary"] = read_parquet_bytes((self.root / "summary" / f"{rid}.parquet").read_bytes())
            for name, t in read.items():
                parts[name].append(t)
        for rid, rec in self._records().items():
            if (scope is None or rid in scope) and rid not in done and "summary" in rec.get("files", {}):
                skipped[rid] = f"summary/{rid}.parquet is missing"
        for rid in sorted(self.failed() if scope is None else self.failed() & scope):
            try:
                parts.setdefault("failures", []).append(read_parquet_bytes(
                    (self.root / "failures" / f"{rid}.parquet").read_bytes()))
            except (pa.ArrowException, OSError) as e:
                skipped[rid] = f"failures/{rid}.parquet is not a readable Parquet file ({str(e).splitlines()[0]})"
        order = {p: i for i, p in enumerate(manifest.get("policies", []))}
        fields = list(manifest.get("grid_fields", []))
        out: dict[str, pd.DataFrame] = {}
        for name in [n for n in ("summary", *TABLES) if tables is None or n in tables] + ["failures"]:
            chunks = parts.get(name, [])
            df = pa.concat_tables(chunks, promote_options="permissive").to_pandas() if chunks else pd.DataFrame()
            if not df.empty:
                keys = [c for c in fields if c in df.columns]
                df = df.assign(_p=df["policy"].map(lambda p: order.get(p, len(order))))
                df = df.sort_values(keys + ["_p", "policy", "seed", "run_id"], kind="mergesort").drop(columns="_p")
                df = df.reset_index(drop=True)
            out[name] = df
        return out, skipped

    def load(self, all_runs: bool = False, tables: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
        """The tables of ``load_checked``, without the list of runs left out."""
        return self.load_checked(all_runs, tables)[0]

    def scenario_keys(self, summary: pd.DataFrame) -> list[str]:
        """Each summary row's scenario: the recorded hash of its resolved configuration without policy and seed, or,
        for a run recorded before scenarios were, the hash of its stored configuration without policy, seed and
        name."""
        records = self._records()
        out = []
        for rid, config in zip(summary["run_id"], summary.get("config", pd.Series([""] * len(summary)))):
            key = records.get(rid, {}).get("scenario")
            if not key:
                try:
                    sc = dict(json.loads(config).get("scenario", {}))
                except (ValueError, TypeError, AttributeError):
                    sc = {}
                sc.pop("name", None)
                key = "c" + hashlib.sha256(json.dumps(sc, sort_keys=True).encode()).hexdigest()[:15]
            out.append(key)
        return out

    def export_summary(self) -> Path | None:
        """Write ``summary.csv``: the manifest's finished runs, label columns and headline metrics first; return its
        path (None, and no file, when no run finished)."""
        path = self.root / "summary.csv"
        summary = self.load(tables=("summary",))["summary"]
        if summary.empty:
            path.unlink(missing_ok=True)
            return None
        fields = [f for f in self.manifest().get("grid_fields", []) if f in summary.columns]
        flat = summary_frame(summary.drop(columns="config", errors="ignore"), fields)
        write_csv(flat, path)
        return path
