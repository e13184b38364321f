"""The journal of a result folder, ``runs.jsonl``: appended to, never rewritten; replayed in order, it says where
every run of the folder is stored (``Ledger``).

One JSON object per line:

- ``{"batch": NAME, "files": {table: sha256}, "runs": {run: scenario}, "failed": {run: scenario}}``: a batch of runs
  was stored, one Parquet file per table (``<table>/NAME.parquet``); its finished runs (``runs``) and failed ones
  (``failed``, in the ``failures`` table) are there from now on. A run stored again (``--force``, a failure run
  again) leaves the batch it was in; ``"moved": true`` marks a batch written again without the runs that left it
  (a failure elsewhere stays recorded then).
- ``{"drop": NAME}``: a damaged batch was removed; its runs run again.
- ``{"spool": SEGMENT}``: a writer started a spool segment (``results.spool``); a run of that segment was compacted
  if a batch line after this one holds it.
- ``{"run": RUN, "scenario": ..., "files": {table: sha256}}`` and ``{"run": RUN, "drop": true}``: one run in files of
  its own (``<table>/RUN.parquet``), the layout before batches (read as a batch of one named by its run).

A line cut short by a killed writer is left out (the next writer starts its lines on a line of their own); a
finished run it recorded is still in the spool and compacted again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.running import interrupts

__all__ = ["JOURNAL", "Batch", "Ledger", "Journal"]

JOURNAL = "runs.jsonl"


@dataclass
class Batch:
    """Runs stored together: one file per table in ``files`` (table -> SHA-256; None: written before checksums
    were recorded, checked by parsing), finished ``runs`` and ``failed`` ones (run -> scenario). ``legacy``: one
    run in files named by its run id."""

    name: str
    files: dict[str, str | None]
    runs: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    legacy: bool = False

    def path(self, root: Path, table: str) -> Path:
        return root / table / f"{self.name}.parquet"

    def line(self, moved: bool = False) -> dict[str, Any]:
        entry: dict[str, Any] = {"batch": self.name, "files": self.files, "runs": self.runs, "failed": self.failed}
        return {**entry, "moved": True} if moved else entry


class Ledger:
    """Where each run is, from the journal's lines in order: ``done`` and ``failed`` map a run to the name of the
    batch holding it; ``seen`` to the index of the last line that stored it; ``spools`` a spool segment to the
    index of its start line."""

    def __init__(self) -> None:
        self.batches: dict[str, Batch] = {}
        self.done: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self.seen: dict[str, int] = {}
        self.spools: dict[str, int] = {}
        self.lines = 0

    @classmethod
    def read(cls, root: Path, older: dict[str, Any] | None = None) -> Ledger:
        """The ledger of a folder: runs an older manifest recorded (``older``), then the journal's lines."""
        ledger = cls()
        for rid, rec in sorted((older or {}).items()):
            if isinstance(rec, dict):
                ledger.apply({"run": rid, **rec})
        path = root / JOURNAL
        if path.is_file():
            for line in path.read_bytes().split(b"\n"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # empty, or cut short by a killed writer
                if isinstance(entry, dict):
                    ledger.apply(entry)
        return ledger

    def add_unrecorded(self, root: Path, tables: Sequence[str], needed: Sequence[str]) -> None:
        """Add the runs stored one file per table and recorded nowhere (the oldest folders), found by their files
        (``tables``: every table, ``summary`` and ``failures`` among them; ``needed``: the files a finished run
        must have)."""
        for table, where in (("summary", self.done), ("failures", self.failed)):
            d = root / table
            if not d.is_dir():
                continue
            for p in d.glob("*.parquet"):
                rid = p.stem
                if rid.startswith((".", "part-")) or rid in where or rid in self.batches:
                    continue
                names = [t for t in tables if (root / t / p.name).is_file()]
                files: dict[str, str | None] = {t: None for t in [*(needed if table == "summary" else ()), *names]}
                b = Batch(rid, files, {rid: ""} if "summary" in files else {},
                          {rid: ""} if "failures" in files else {}, legacy=True)
                self.batches[rid] = b
                self.done.update({r: rid for r in b.runs})
                self.failed.update({r: rid for r in b.failed if r not in self.done})

    def live(self, b: Batch) -> tuple[set[str], set[str]]:
        """The finished and failed runs of ``b`` still stored there."""
        return ({r for r in b.runs if self.done.get(r) == b.name},
                {r for r in b.failed if self.failed.get(r) == b.name})

    def apply(self, e: dict[str, Any]) -> set[str]:
        """Apply one journal line; return the batches some of whose runs left them (to be written again)."""
        index = self.lines
        self.lines += 1
        try:
            if "spool" in e:
                self.spools[str(e["spool"])] = index
            elif "batch" in e:
                return self._batch(Batch(str(e["batch"]), dict(e.get("files") or {}), dict(e.get("runs") or {}),
                                         dict(e.get("failed") or {})), index, bool(e.get("moved")))
            elif "run" in e:
                rid = str(e["run"])
                if e.get("drop"):
                    self._remove(rid)
                else:
                    files = dict(e.get("files") or {})
                    sc = str(e.get("scenario") or "")
                    done = {rid: sc} if "summary" in files or "failures" not in files else {}
                    self._batch(Batch(rid, files, done, {rid: sc} if "failures" in files else {}, legacy=True),
                                index, moved=True)
            elif "drop" in e:
                self._remove(str(e["drop"]))
        except (TypeError, ValueError, AttributeError):
            pass  # a line of an unknown shape: left out
        return set()

    def _batch(self, b: Batch, index: int, moved: bool) -> set[str]:
        touched: set[str] = set()
        old = self.batches.get(b.name)
        if old is not None:  # the same batch written again: its runs that are not in it any more lose their place
            for r in old.runs:
                if self.done.get(r) == b.name and r not in b.runs:
                    del self.done[r]
            for r in old.failed:
                if self.failed.get(r) == b.name and r not in b.failed:
                    del self.failed[r]
        self.batches[b.name] = b
        self._place(b.runs, self.done, b.name, index, touched)
        if not moved:  # a run that finished leaves the failures
            for r in b.runs:
                gone = self.failed.pop(r, None)
                if gone is not None and gone != b.name:
                    touched.add(gone)
        self._place(b.failed, self.failed, b.name, index, touched)
        return touched

    def _place(self, runs: dict[str, str], where: dict[str, str], name: str, index: int, touched: set[str]) -> None:
        """Record ``runs`` as stored in batch ``name`` (journal line ``index``); the batches they leave go to
        ``touched``."""
        for r in runs:
            prev = where.get(r)
            if prev is not None and prev != name:
                touched.add(prev)
            where[r] = name
            self.seen[r] = index

    def _remove(self, name: str) -> None:
        b = self.batches.pop(name, None)
        if b is None:
            return
        for r in b.runs:
            if self.done.get(r) == name:
                del self.done[r]
        for r in b.failed:
            if self.failed.get(r) == name:
                del self.failed[r]


class Journal:
    """Appends lines to a folder's journal (the lock holder only), each flushed to the OS at once; ``sync``
    flushes it to disk."""

    def __init__(self, root: Path):
        self.path = root / JOURNAL
        self._file: Any = None

    def append(self, entry: dict[str, Any]) -> None:
        if self._file is None:
            torn = self.path.is_file() and self.path.stat().st_size > 0 and not self._ends_with_newline()
            self._file = open(self.path, "ab")  # noqa: SIM115 (kept open while the command writes)
            if torn:  # a killed writer's last line: the next starts on a line of its own
                self._file.write(b"\n")
        with interrupts.writing():
            self._file.write(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode() + b"\n")
            self._file.flush()

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def sync(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self, sync: bool = True) -> None:
        """Close the journal, flushed to disk unless ``sync`` is False (its lines are with the OS already, which
        is enough when only the process stops, not the machine)."""
        if self._file is not None:
            if sync:
                self.sync()
            self._file.close()
            self._file = None
