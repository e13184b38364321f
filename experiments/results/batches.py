"""Batches: runs stored together, one Parquet file per table with ``run_id`` as a column, checked by one SHA-256
per file.

A batch is made from runs' records (``running.records``) in the order given, its rows in that order; its name is a
hash of its runs and their outcome, so the same runs give the same file names. A batch that lost some of its runs
(stored again elsewhere) is written again without them. Runs whose tables cannot share one schema (a column typed
differently) go to separate batches. Making one may be stopped at any point by a signal (``interrupts.check()``
between tables and while gathering): until its journal line is written, a batch's runs are in the spool, and files no
line records are removed by the next command.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from experiments.results.files import atomic_write_bytes, sha256, summary_columns, write_csv_rows
from experiments.results.journal import Batch
from experiments.running import interrupts
from experiments.running.records import FAILURES, decode_meta, decode_tables

__all__ = ["make", "check", "read_tables", "without", "frame", "order", "write_summary", "batch_name", "TABLE_ORDER",
           "NEEDED"]

TABLE_ORDER = ("summary", "jobs", "nodes", "decisions", "segments", FAILURES)
"""Tables in the order their files are written and checked (``summary`` first)."""
NEEDED = ("summary", "jobs", "nodes", "decisions")
"""The files a finished run written before checksums must have (``segments`` came later)."""


def batch_name(runs: Collection[str], failed: Collection[str]) -> str:
    key = "\n".join(sorted([f"{r} ok" for r in runs] + [f"{r} failed" for r in failed]))
    return "part-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def _write(root: Path, tables: Mapping[str, list[pa.Table]], runs: dict[str, str], failed: dict[str, str]
           ) -> Batch:
    b = Batch(batch_name(runs, failed), {})
    b.runs, b.failed = runs, failed
    for name in sorted(tables, key=lambda t: (TABLE_ORDER + (t,)).index(t)):
        interrupts.check()
        data = _parquet(pa.concat_tables(tables[name], promote_options="permissive").combine_chunks())
        atomic_write_bytes(b.path(root, name), data)
        b.files[name] = sha256(data)
    return b


_FOLD = 64
"""Runs decoded before their small tables are folded into one per table (thousands of one-row Arrow tables took
eight times their bytes in memory)."""


def _gather(blobs: Sequence[bytes]) -> tuple[dict[str, list[pa.Table]], dict[str, str], dict[str, str]] | None:
    """The tables of ``blobs`` per table name, folded as they are read, with the finished and failed runs; None
    when some table's runs cannot share one schema."""
    tables: dict[str, list[pa.Table]] = {}
    runs: dict[str, str] = {}
    failed: dict[str, str] = {}
    for i, blob in enumerate(blobs, 1):
        meta = decode_meta(blob)
        (runs if meta["ok"] else failed)[str(meta["run"])] = str(meta.get("scenario") or "")
        for name, t in decode_tables(blob).items():
            tables.setdefault(name, []).append(t)
        if i % _FOLD == 0 or i == len(blobs):
            interrupts.check()
            try:
                for name, parts in tables.items():
                    if len(parts) > 1:
                        tables[name] = [pa.concat_tables(parts, promote_options="permissive").combine_chunks()]
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                return None
    return tables, runs, failed


def make(root: Path, blobs: Sequence[bytes]) -> list[Batch]:
    """Write the runs of ``blobs`` (records) as batches, in order: one, unless some tables cannot share a schema
    (then the runs are split until each part can)."""
    if not blobs:
        return []
    gathered = _gather(blobs)
    if gathered is None:
        if len(blobs) == 1:
            raise ValueError("a run's tables cannot be read as one table each")  # a record always can
        half = len(blobs) // 2
        return make(root, blobs[:half]) + make(root, blobs[half:])
    return [_write(root, *gathered)]


def check(root: Path, b: Batch) -> str | None:
    """Why batch ``b`` cannot be trusted (a file missing, not matching its checksum, or, without one, not a
    readable Parquet file), or None."""
    for name in _names(b):
        try:
            _bytes(root, b, name)
        except _Damaged as e:
            return str(e)
    return None


class _Damaged(Exception):
    pass


def _names(b: Batch) -> list[str]:
    return sorted(b.files, key=lambda t: (TABLE_ORDER + (t,)).index(t))


def _bytes(root: Path, b: Batch, name: str) -> bytes:
    """A file of ``b`` read and checked."""
    path = b.path(root, name)
    rel = f"{name}/{path.name}"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise _Damaged(f"{rel} is missing") from None
    want = b.files.get(name)
    if want is not None:
        if sha256(data) != want:
            raise _Damaged(f"{rel} does not match its recorded checksum (damaged)")
    else:
        try:
            pq.read_metadata(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as e:
            raise _Damaged(f"{rel} is not a readable Parquet file ({str(e).splitlines()[0]})") from None
    return data


def read_tables(root: Path, b: Batch, tables: Collection[str], runs: Collection[str] | None = None,
                failed: Collection[str] | None = None, drop: Sequence[str] = (), checked: bool = False
                ) -> tuple[dict[str, pa.Table], str | None]:
    """The rows of ``runs`` (finished runs; default every one of the batch) in the tables named in ``tables``, and
    of ``failed`` in ``failures`` when named; every file of the batch checked all the same, unless ``checked`` (this
    process checked them already); columns ``drop`` left out. Or the reason the batch cannot be trusted."""
    out: dict[str, pa.Table] = {}
    for name in _names(b):
        if checked and name not in tables:
            continue
        try:
            data = _bytes(root, b, name)
            if name not in tables:
                continue
            keep = (b.failed if failed is None else failed) if name == FAILURES else \
                (b.runs if runs is None else runs)
            f = pq.ParquetFile(pa.BufferReader(data))
            t = f.read(columns=[c for c in f.schema_arrow.names if c not in drop] if drop else None)
        except _Damaged as e:
            return {}, str(e)
        except (pa.ArrowException, OSError) as e:
            return {}, f"{name}/{b.name}.parquet is not a readable Parquet file ({str(e).splitlines()[0]})"
        if not keep:
            continue
        if not b.legacy and set(keep) != set(b.failed if name == FAILURES else b.runs):
            t = t.filter(pc.is_in(t.column("run_id"), value_set=pa.array(sorted(keep), t.schema.field("run_id").type)))
        out[name] = t
    return out, None


def without(root: Path, b: Batch, runs: Collection[str], failed: Collection[str]) -> tuple[Batch | None, str | None]:
    """Batch ``b`` written again with only ``runs`` and ``failed`` of it (None when nothing is left), or the reason
    ``b`` cannot be trusted (then nothing is written)."""
    tables = [n for n in b.files if (n == FAILURES and failed) or (n != FAILURES and runs)]
    read, why = read_tables(root, b, tables, runs, failed)
    if why is not None:
        return None, why
    if not runs and not failed:
        return None, None
    keep_runs = {r: b.runs[r] for r in b.runs if r in runs}
    keep_failed = {r: b.failed[r] for r in b.failed if r in failed}
    return _write(root, {n: [t] for n, t in read.items()}, keep_runs, keep_failed), None


def order(table: pa.Table, fields: Sequence[str], policies: Sequence[str]) -> pa.Array:
    """The row order of ``table`` by its labels: grid ``fields``, the command's ``policies`` order (others after),
    seed, run id; sorted in Arrow, as pandas sorts the same columns (missing values last and equal, NaN counted as
    missing; text by code point), without converting them (at 20,000 runs the pandas sort took 10 MB)."""
    arrays = []
    for k in [c for c in fields if c in table.column_names]:
        c = table.column(k)
        arrays.append(pc.if_else(pc.is_nan(c), pa.scalar(None, c.type), c) if pa.types.is_floating(c.type) else c)
    rank = pc.index_in(table.column("policy"), value_set=pa.array(list(policies), table.schema.field("policy").type))
    arrays += [pc.fill_null(rank, len(policies)), *(table.column(k) for k in ("policy", "seed", "run_id"))]
    labels = pa.table({f"k{i}": a for i, a in enumerate(arrays)})
    return pc.sort_indices(labels, sort_keys=[(n, "ascending") for n in labels.column_names])  # missing: at the end


def frame(chunks: Sequence[pa.Table], fields: Sequence[str], policies: Sequence[str]) -> pd.DataFrame:
    """Rows of many runs as one frame sorted by their labels (``order``)."""
    if not chunks:
        return pd.DataFrame()
    table = pa.concat_tables(chunks, promote_options="permissive")
    if table.num_rows == 0:
        return table.to_pandas()
    return table.take(order(table, fields, policies)).to_pandas()


def write_summary(chunks: Sequence[pa.Table], fields: Sequence[str], policies: Sequence[str], path: Path
                  ) -> Path | None:
    """Write the summary rows ``chunks`` as ``summary.csv`` at ``path``: label columns and headline metrics first,
    rows in ``order``, kept as Arrow and written a slice at a time (``files.write_csv_rows``), so memory does not
    grow with runs; return the path (None, and no file, when there is no row)."""
    table = pa.concat_tables(chunks, promote_options="permissive") if chunks else None
    if table is None or table.num_rows == 0:
        path.unlink(missing_ok=True)
        return None
    by = [f for f in fields if f in table.column_names]
    write_csv_rows(table, order(table, by, policies), summary_columns(table.column_names, by), path)
    return path
