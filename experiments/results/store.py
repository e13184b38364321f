"""A result folder: what ``capsim run`` and ``capsim sweep`` write, and what ``report``, ``plot`` and notebooks read.

```
DIR/manifest.json                  what the latest command into DIR covered (kind: run or sweep, name, file, grid
                                   fields, policy order, seeds, run ids), written once when the command starts
DIR/runs.jsonl                     the journal (``results.journal``): appended to, never rewritten; one line per batch
                                   stored (its files' SHA-256, its runs and their scenario - the hash of a run's
                                   resolved configuration without policy and seed), per batch dropped, per spool
                                   segment started
DIR/<table>/part-<hash>.parquet    a batch: the rows of many runs, ``run_id`` a column (``results.batches``), for
                                   ``summary`` (one row per run: run id, grid values, policy, seed, every metric of
                                   ``sim.metrics``, the run's configuration as JSON), ``jobs``, ``nodes``,
                                   ``decisions``, ``segments`` (``running.tasks.TABLES``) and ``failures`` (run id,
                                   grid values, policy, seed, config, traceback)
DIR/.spool/<stamp>-<pid>.log       finished runs not yet in a batch (``results.spool``), one record each, appended the
                                   moment a run arrives
DIR/summary.csv                    the manifest's finished runs, one row each, without the configuration: a flat
                                   export for spreadsheets, rewritten at the end of every command
DIR/.capsim.lock                   held by the one process writing here (``results.folders.FolderLock``)
```
A run is appended to the spool the moment it arrives (a SIGKILL loses only runs still running), then compacted, in
the command's order, into batches of up to ``BATCH_RUNS`` runs or ``BATCH_BYTES``: the same command makes the same
batches however its workers finish. A run is stored in one place only (stored again, it leaves its old batch, which
is written again without it); runs of other commands stay (``report`` shows the latest command's, ``--all`` every
one). Only the lock holder writes. Readers keep runs whose batch matches its checksums and spooled runs up to the
last complete record, and name the others, which the next ``sweep`` runs again. Folders of one file per table and
run (the layout before batches) are read as they are. docs/experiments.md describes the layout in full.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from experiments.results import batches, spool
from experiments.results.files import atomic_write_bytes, clean_temp_files, release_free_memory, sha256
from experiments.results.folders import LEGACY_MANIFEST, MANIFEST, FolderLock, read_manifest
from experiments.results.journal import JOURNAL, Batch, Journal, Ledger
from experiments.running import interrupts
from experiments.running.records import FAILURES, decode_tables
from experiments.running.tasks import TABLES, Outcome, Task

__all__ = ["ResultStore", "new_manifest", "MANIFEST", "JOURNAL", "BATCH_RUNS", "BATCH_BYTES"]

FORMAT = 3
"""Version of the folder layout, recorded in the manifest (2: runs recorded with scenario and checksums; 3: batches
and the spool)."""
BATCH_RUNS = 1000
"""Runs per batch at most (a 100,000-run folder: a hundred files per table)."""
BATCH_BYTES = 32 << 20
"""Bytes of records (Arrow, uncompressed) per batch at most, so a batch of large runs stays a few tens of MB."""


def new_manifest(kind: str, name: str, file: str, fields: Sequence[str], policies: Sequence[str],
                 seeds: Sequence[int], run_ids: Sequence[str]) -> dict[str, Any]:
    """What one command into a folder covers: reports show these runs unless asked for every run there."""
    return {"format": FORMAT, "kind": kind, "name": name, "file": file, "grid_fields": list(fields),
            "policies": list(policies), "seeds": list(seeds), "run_ids": sorted(set(run_ids))}


class _Raced(Exception):
    """A spool segment went away while it was read (its runs were just compacted): read again."""


class ResultStore:
    """Reads and writes a result folder."""

    def __init__(self, root: str | Path, label_types: Mapping[str, pa.DataType] | None = None):
        self.root = Path(root)
        self.label_types = dict(label_types or {})
        self._manifest: dict[str, Any] | None = None
        self._ledger: Ledger | None = None
        self._spooled: dict[str, spool.Entry] | None = None
        self._checked: set[str] = set()
        self._journal: Journal | None = None
        self._spool: spool.Spool | None = None
        self._order: list[str] = []
        self._placed: set[str] = set()
        self._cursor = 0
        self._ready: list[str] = []
        self._ready_bytes = 0
        self._in_segment: dict[str, int] = {}

    # ----- what is here ---------------------------------------------------------------------------------------------
    def ledger(self) -> Ledger:
        """Where the folder's runs are: its journal replayed, with runs stored one file per table and recorded
        nowhere (the oldest folders) found by their files."""
        if self._ledger is None:
            ledger = Ledger.read(self.root, self.manifest().get("runs"))
            ledger.add_unrecorded(self.root, ("summary", *TABLES, FAILURES), batches.NEEDED)
            self._ledger = ledger
        return self._ledger

    def spooled(self) -> dict[str, spool.Entry]:
        """Runs in the spool and in no batch yet (the latest record of each)."""
        if self._spooled is None:
            found = [(seg, spool.scan(self.root, seg)) for seg in spool.segments(self.root)]  # before the journal
            ledger = self.ledger()
            out: dict[str, spool.Entry] = {}
            for seg, entries in found:
                start = ledger.spools.get(seg)
                for e in entries:
                    if start is None or ledger.seen.get(e.run, -1) < start:
                        out[e.run] = e
            self._spooled = out
        return self._spooled

    def _where(self) -> tuple[dict[str, str | spool.Entry], dict[str, str | spool.Entry]]:
        """Each finished and each failed run: the name of its batch, or its spool record."""
        ledger = self.ledger()
        done: dict[str, str | spool.Entry] = dict(ledger.done)
        failed: dict[str, str | spool.Entry] = dict(ledger.failed)
        for rid, e in self.spooled().items():
            if e.ok:
                done[rid] = e
                failed.pop(rid, None)
            else:
                failed[rid] = e
        return done, failed

    def runs_with(self, table: str) -> set[str]:
        """Run ids stored with a ``table`` (``summary``: finished runs; ``failures``: failed ones)."""
        where = self._where()[1 if table == FAILURES else 0]
        ledger = self.ledger()
        return {r for r, w in where.items()
                if (table in w.tables if isinstance(w, spool.Entry) else table in ledger.batches[w].files)}

    def finished(self) -> set[str]:
        return set(self._where()[0])

    def failed(self) -> set[str]:
        return set(self._where()[1])

    def is_store(self) -> bool:
        return any((self.root / m).exists() for m in ("summary", MANIFEST, LEGACY_MANIFEST, JOURNAL, spool.SPOOL))

    def manifest(self) -> dict[str, Any]:
        """The folder's manifest (empty for a folder without one); a damaged one is a clear error."""
        if self._manifest is None:
            self._manifest = read_manifest(self.root)
        return self._manifest

    # ----- writing (by the holder of the folder's lock) -------------------------------------------------------------
    def prepare(self) -> int:
        """Create the folder and remove temporary files of dead writers; return how many were removed (for a writer
        that manages the lock itself; commands use ``writing``)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return clean_temp_files(self.root)

    @contextlib.contextmanager
    def writing(self, command: dict[str, Any], log: Any = None) -> Iterator[ResultStore]:
        """Hold the folder's lock for one command: temporary files of dead writers removed, runs a stopped writer
        left in the spool stored, batches that lost runs written again, the manifest records ``command``
        (``new_manifest``) and keeps every run already here; at the end, the spooled runs are compacted, ``summary.csv``
        is written and the lock released, however the command ends."""
        lock = FolderLock(self.root).acquire()
        stopped = False
        try:
            if lock.stale is not None and log:
                log(f"{self.root}: took over the lock of pid {lock.stale}, which is no longer running")
            clean_temp_files(self.root)
            self._ledger = self._spooled = None
            older = self.manifest().get("runs")
            self._manifest = dict(command)
            self._journal = Journal(self.root)
            if older:  # an older folder's records move to the journal once
                for rid, rec in sorted(older.items()):
                    self._journal.append({"run": rid, **rec})
            self._recover(log)
            self._tidy(set(self.ledger().batches))
            self._remove_strays()
            self._spooled = {}
            self._spool = spool.Spool(self.root, self._started)
            self.flush()
            yield self
        except BaseException:
            stopped = True
            raise
        finally:
            try:
                stopped = stopped or interrupts.exit_code() is not None
                self.close(stopped, log)
                if stopped:  # a stop does no more work than it must; an older summary.csv would miss runs
                    (self.root / "summary.csv").unlink(missing_ok=True)
                else:
                    self.export_summary()
            finally:
                lock.release()

    def flush(self) -> None:
        """Write the manifest (the command's coverage; runs are in the journal)."""
        text = json.dumps(self._manifest, indent=1, sort_keys=True) + "\n"
        atomic_write_bytes(self.root / MANIFEST, text.encode())
        (self.root / LEGACY_MANIFEST).unlink(missing_ok=True)

    def _line(self, entry: dict[str, Any]) -> set[str]:
        assert self._journal is not None
        self._journal.append(entry)
        return self.ledger().apply(entry)

    def _started(self, segment: str) -> None:
        self._line({"spool": segment})
        self._in_segment[segment] = 0

    def expect(self, run_ids: Sequence[str]) -> None:
        """The order in which runs are batched (the command's plan order): a batch closes on runs that have all
        arrived, so its runs do not depend on which worker finished first."""
        for rid in run_ids:
            if rid not in self._placed:
                self._placed.add(rid)
                self._order.append(rid)

    def write(self, o: Outcome) -> None:
        """Store one outcome: its record appended to the spool at once, then compacted into a batch when its turn
        comes."""
        assert self._spool is not None and self._spooled is not None, "write() runs inside writing()"
        rec = o.encoded()
        assert rec.record is not None
        segment, offset = self._spool.append(rec.record)
        rid = o.task.run_id
        old = self._spooled.get(rid)
        if old is not None:
            self._in_segment[old.segment] -= 1
        self._spooled[rid] = spool.Entry(segment, offset, len(rec.record), rid, o.task.scenario_id, o.ok,
                                         ("summary", *TABLES) if o.ok else (FAILURES,))
        self._in_segment[segment] += 1
        self.expect([rid])
        self._advance()

    def _advance(self) -> None:
        spooled = self._spooled or {}
        while self._cursor < len(self._order) and self._order[self._cursor] in spooled:
            rid = self._order[self._cursor]
            self._ready.append(rid)
            self._ready_bytes += spooled[rid].length
            self._cursor += 1
            if len(self._ready) >= BATCH_RUNS or self._ready_bytes >= BATCH_BYTES:
                self._compact(self._ready)
                self._ready, self._ready_bytes = [], 0

    def _compact_all(self, rids: Sequence[str]) -> None:
        """Compact spooled runs in order, in batches of ``BATCH_RUNS`` runs or ``BATCH_BYTES`` at most."""
        spooled = self._spooled or {}
        chunk: list[str] = []
        size = 0
        for rid in rids:
            chunk.append(rid)
            size += spooled[rid].length
            if len(chunk) >= BATCH_RUNS or size >= BATCH_BYTES:
                self._compact(chunk)
                chunk, size = [], 0
        self._compact(chunk)

    def _compact(self, rids: Sequence[str]) -> None:
        """Store spooled runs as batches and take them out of the spool."""
        spooled = self._spooled or {}
        entries = [spooled[r] for r in rids if r in spooled]
        if not entries:
            return
        blobs = [spool.read(self.root, e) for e in entries]
        touched: set[str] = set()
        made = batches.make(self.root, blobs)  # a signal may stop it: the runs are still in the spool
        with interrupts.writing():
            for b in made:
                touched |= self._line(b.line())
                self._checked.add(b.name)
            assert self._journal is not None
            self._journal.sync()
            for e in entries:
                if spooled.get(e.run) is e:
                    del spooled[e.run]
                    self._in_segment[e.segment] -= 1
            self._drop_empty_segments()
        self._tidy(touched)
        release_free_memory()

    def _drop_empty_segments(self) -> None:
        assert self._spool is not None
        self._spool.rotate()
        for seg, n in list(self._in_segment.items()):
            if n <= 0:
                self._spool.remove(seg)
                del self._in_segment[seg]

    def _recover(self, log: Any) -> None:
        """Store the runs a stopped or killed writer left in the spool, then remove its segments."""
        segments = spool.segments(self.root)
        if not segments:
            return
        self._spooled = None
        left = dict(self.spooled())
        self._spool = spool.Spool(self.root, self._started)
        self._spooled = left
        for e in left.values():
            self._in_segment[e.segment] = self._in_segment.get(e.segment, 0) + 1
        order = list(left)
        self._compact_all(order)
        for seg in segments:
            self._spool.remove(seg)
        self._in_segment.clear()
        if order and log:
            log(f"{self.root}: stored {len(order)} finished runs that a stopped command left in {spool.SPOOL}/")

    def _tidy(self, names: set[str]) -> None:
        """Write again, without the runs that left them, the batches in ``names`` that lost runs; remove the files of
        batches left with none (a damaged batch is dropped: its runs run again)."""
        ledger = self.ledger()
        for name in sorted(names):
            b = ledger.batches.get(name)
            if b is None:
                continue
            runs, failed = ledger.live(b)
            if len(runs) == len(b.runs) and len(failed) == len(b.failed):
                continue
            new, why = batches.without(self.root, b, runs, failed) if runs or failed else (None, None)
            with interrupts.writing():  # the batch written again (or a signal stopped it: files no line records)
                if runs or failed:
                    if new is not None:
                        self._line(new.line(moved=True))
                        self._checked.add(new.name)
                    elif why is not None:
                        self._drop(b)
                else:
                    del ledger.batches[name]
                self._delete_files(b)

    def _drop(self, b: Batch) -> None:
        self._line({"run": b.name, "drop": True} if b.legacy else {"drop": b.name})
        self._delete_files(b)

    def _delete_files(self, b: Batch) -> None:
        ledger = self.ledger()
        now = ledger.batches.get(b.name)
        if now is not None and any(ledger.live(now)):  # the same runs were stored again under the same name
            return
        for table in (*batches.TABLE_ORDER, *b.files):
            b.path(self.root, table).unlink(missing_ok=True)

    def _remove_strays(self) -> None:
        """Remove files of no stored batch (a batch written again, a writer killed before recording a batch)."""
        ledger = self.ledger()
        live = {n for n, b in ledger.batches.items() if any(ledger.live(b))}
        for table in batches.TABLE_ORDER:
            d = self.root / table
            if d.is_dir():
                for p in d.glob("*.parquet"):
                    if not p.name.startswith(".") and p.stem not in live:
                        p.unlink(missing_ok=True)

    def close(self, stopped: bool = False, log: Any = None) -> None:
        """Compact what is still in the spool and flush the journal to disk; after a signal (``stopped``) neither:
        the command must end at once, and the spool and journal outlive the process as they are (the next command
        into the folder compacts the spool; readers read it meanwhile)."""
        if self._spool is not None and self._spooled is not None:
            rest = [r for r in self._order[self._cursor - len(self._ready):] if r in self._spooled]
            rest += [r for r in self._spooled if r not in self._placed]
            if rest and not stopped:
                self._compact_all(rest)
            elif rest and log:
                log(f"capsim: {len(rest)} finished runs stay in {self.root / spool.SPOOL}/ (read by report and "
                    f"plot); the next capsim run or sweep into the folder stores them as batches")
            self._spool.rotate()
            self._spool = None
        self._ready, self._ready_bytes, self._order, self._placed, self._cursor = [], 0, [], set(), 0
        if self._journal is not None:
            self._journal.close(sync=not stopped)
            self._journal = None

    def verify(self, tasks: Mapping[str, Task]) -> tuple[set[str], dict[str, str]]:
        """Which of ``tasks`` (by run id) finished intact, and why the others stored as finished are not; batches
        found damaged are dropped, their runs to be run again; intact runs written before checksums were recorded
        are recorded now."""
        done_at, _ = self._where()
        done: set[str] = set()
        bad: dict[str, str] = {}
        ledger = self.ledger()
        held: dict[str, list[str]] = {}
        for rid in tasks:
            w = done_at.get(rid)
            if isinstance(w, spool.Entry):
                done.add(rid)
            elif w is not None:
                held.setdefault(w, []).append(rid)
        for name in sorted(held):
            b = ledger.batches[name]
            why = None if name in self._checked else batches.check(self.root, b)
            if why is not None:
                bad.update({rid: why for rid in held[name]})
                with interrupts.writing():
                    self._drop(b)
                continue
            self._checked.add(name)
            done.update(held[name])
            if b.legacy and any(v is None for v in b.files.values()):
                files = {t: sha256(b.path(self.root, t).read_bytes()) for t in b.files}
                self._line({"run": name, "scenario": tasks[name].scenario_id, "files": files})
        return done, bad

    # ----- reading --------------------------------------------------------------------------------------------------
    def load_checked(self, all_runs: bool = False, tables: Sequence[str] | None = None, drop: Sequence[str] = ()
                     ) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
        """The tables of the folder's intact finished runs (those named in ``tables``, default every one; a run is
        intact when every file of its batch is), plus ``failures``, rows sorted by run labels, columns ``drop`` left
        out; and the runs left out, each with the reason (damaged or missing files).

        Only the runs of the latest command into the folder are read (a folder may also hold runs of an earlier,
        different grid or scenario); ``all_runs`` reads every finished run.
        """
        (parts, skipped), m = self._parts(all_runs, tables, drop), self.manifest()
        return {name: batches.frame(c, m.get("grid_fields", []), m.get("policies", [])) for name, c in parts.items()}, \
            skipped

    def _parts(self, all_runs: bool, tables: Sequence[str] | None, drop: Sequence[str]
               ) -> tuple[dict[str, list[pa.Table]], dict[str, str]]:
        """``load_checked``'s tables as the Arrow tables of each batch and spooled run (read again when a spool
        segment went away meanwhile: its runs were just compacted by the writer)."""
        for _ in range(3):
            try:
                return self._load(all_runs, tables, drop)
            except _Raced:
                if self._journal is not None:
                    raise
                self._ledger = self._spooled = None
        return self._load(all_runs, tables, drop)

    def _load(self, all_runs: bool, tables: Sequence[str] | None, drop: Sequence[str]
              ) -> tuple[dict[str, list[pa.Table]], dict[str, str]]:
        manifest = self.manifest()
        scope = None if all_runs or "run_ids" not in manifest else set(manifest["run_ids"])
        wanted = [n for n in ("summary", *TABLES) if tables is None or n in tables]
        done_at, failed_at = self._where()
        by_batch: dict[str, tuple[list[str], list[str]]] = {}
        spooled: list[spool.Entry] = []
        for at, ok in ((done_at, True), (failed_at, False)):
            for rid, w in at.items():
                if scope is not None and rid not in scope:
                    continue
                if isinstance(w, spool.Entry):
                    spooled.append(w)
                else:
                    by_batch.setdefault(w, ([], []))[0 if ok else 1].append(rid)
        skipped: dict[str, str] = {}
        parts: dict[str, list[pa.Table]] = {name: [] for name in (*wanted, FAILURES)}
        ledger = self.ledger()
        for name in sorted(by_batch):
            runs, failed = by_batch[name]
            b = ledger.batches[name]
            only = (*wanted, FAILURES) if failed else wanted
            read, why = batches.read_tables(self.root, b, only, runs, failed, drop, name in self._checked)
            if why is not None:
                skipped.update({rid: why for rid in runs + failed})
                continue
            for t, table in read.items():
                parts[t].append(table)
        for e in sorted(spooled, key=lambda e: (e.segment, e.offset)):
            try:
                blob = spool.read(self.root, e)
            except OSError:
                raise _Raced() from None
            for t, table in decode_tables(blob, [*wanted, FAILURES]).items():
                parts[t].append(table.drop_columns([c for c in drop if c in table.column_names]))
        return {name: parts[name] for name in (*wanted, FAILURES)}, skipped

    def load(self, all_runs: bool = False, tables: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
        """The tables of ``load_checked``, without the list of runs left out."""
        return self.load_checked(all_runs, tables)[0]

    def scenario_keys(self, summary: pd.DataFrame) -> list[str]:
        """Each summary row's scenario: the recorded hash of its resolved configuration without policy and seed, or,
        for a run recorded before scenarios were, the hash of its stored configuration without policy, seed and
        name."""
        ledger = self.ledger()
        done_at = self._where()[0]
        out = []
        for rid, config in zip(summary["run_id"], summary.get("config", pd.Series([""] * len(summary)))):
            w = done_at.get(rid)
            key = w.scenario if isinstance(w, spool.Entry) else ledger.batches[w].runs.get(rid) if w else None
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
        """Write ``summary.csv`` (``batches.write_summary``: the manifest's finished runs, a slice at a time); return
        its path (None, and no file, when no run finished)."""
        chunks, m = self._parts(False, ("summary",), ("config",))[0]["summary"], self.manifest()
        return batches.write_summary(chunks, m.get("grid_fields", []), m.get("policies", []), self.root / "summary.csv")
