"""Writing and reading results: deterministic tables, atomic writes, Parquet datasets of a result folder.

Same scenario and seed give byte-identical files: rows are sorted by their labels in a stable way, columns keep a
fixed order and dtypes, Parquet is written by pyarrow with zstd and no pandas index. Every file is written to a
temporary name in the same directory and renamed into place, so a killed process never leaves a half-written file;
the temporary name carries the writer's pid, so only its owner (or a later writer, once the owner is dead) removes
it. Files get the mode the umask allows (``mkstemp`` alone would make them private).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from experiments.running.interrupts import pid_alive
from experiments.running.records import to_arrow
from sim.metrics import HEADLINE, METRICS

__all__ = [
    "atomic_write",
    "atomic_write_bytes",
    "parquet_bytes",
    "write_parquet",
    "read_parquet_bytes",
    "write_csv",
    "write_csv_rows",
    "summary_columns",
    "release_free_memory",
    "clean_temp_files",
    "pid_alive",
    "sha256",
    "SUMMARY_FIRST",
]

SUMMARY_FIRST = ["policy", "seed", *(m for m in METRICS if m in HEADLINE), "makespan"]
"""The leading columns of a summary table: labels, the headline metrics in declaration order, then makespan (the
order ``summary.csv`` has always had); every other column follows in its own order."""
TMP_PREFIX = ".tmp-"
DASK_TMP = ".dask-tmp"
_MODE: int | None = None


def _file_mode() -> int:
    """The mode a new file gets under the process's umask (read once)."""
    global _MODE
    if _MODE is None:
        mask = os.umask(0o022)
        os.umask(mask)
        _MODE = 0o666 & ~mask
    return _MODE


def atomic_write(path: str | Path, write: Any) -> None:
    """Call ``write(tmp_name)`` for a temporary file next to ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, _file_mode())
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (flushed to disk first when ``sync``)."""

    def w(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())

    atomic_write(Path(path), w)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parquet_bytes(df: pd.DataFrame, types: Mapping[str, pa.DataType] | None = None) -> bytes:
    """``df`` as the bytes of a Parquet file (zstd, no index, no pandas metadata, the schema of ``to_arrow``)."""
    sink = pa.BufferOutputStream()
    pq.write_table(to_arrow(df, types), sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def write_parquet(df: pd.DataFrame, path: str | Path, types: Mapping[str, pa.DataType] | None = None) -> str:
    """Write ``df`` as Parquet atomically (see ``parquet_bytes``); return the file's SHA-256."""
    data = parquet_bytes(df, types)
    atomic_write_bytes(Path(path), data, sync=False)
    return sha256(data)


def read_parquet_bytes(data: bytes) -> pa.Table:
    """Parse a Parquet file's bytes; a damaged file raises ``pyarrow.ArrowException`` or ``OSError``."""
    return pq.read_table(pa.BufferReader(data))


def write_csv(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` as CSV (no index, full float precision) atomically."""
    atomic_write(Path(path), lambda tmp: df.to_csv(tmp, index=False, **_CSV))


_CSV: dict[str, Any] = {"float_format": "%.12g", "lineterminator": "\n"}
CSV_ROWS = 2000
"""Rows ``write_csv_rows`` converts to pandas at a time."""


def write_csv_rows(table: pa.Table, order: pa.Array, columns: list[str], path: str | Path) -> None:
    """Write the rows of ``table`` in ``order`` (row indices), ``columns`` only, as ``write_csv`` writes the same
    rows as one frame, byte for byte, converting ``CSV_ROWS`` rows to pandas at a time (memory stays flat however
    many rows). Each slice converts as the whole would: an integer column with a missing value anywhere is written
    as float; a table with dates or times (pandas formats those by the whole column) goes whole."""
    table = table.select(columns)
    casts = {i: pa.float64() for i, f in enumerate(table.schema)
             if pa.types.is_integer(f.type) and table.column(i).null_count}
    for i, t in casts.items():
        table = table.set_column(i, table.schema.field(i).with_type(t), table.column(i).cast(t))
    whole = any(pa.types.is_temporal(f.type) for f in table.schema)
    step = max(1, len(order)) if whole else CSV_ROWS

    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            for start in range(0, max(1, len(order)), step):
                part = table.take(order[start:start + step]).to_pandas()
                part.to_csv(f, index=False, header=start == 0, **_CSV)

    atomic_write(Path(path), w)


def release_free_memory() -> None:
    """Give the memory a batch's compaction freed back to the system: Arrow's pool keeps what it freed for reuse, and
    the C heap keeps its free pages resident (glibc's ``malloc_trim``; elsewhere the pool alone), so the command's
    RSS between batches, and the peak of its end on top of it, carried the last batch's transient memory (the writer
    alone at 20,000 runs: 263 MB before the end and 279 at the end's peak; 219-237 and 251-265 with this)."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Any:
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def summary_columns(names: list[str], by: list[str]) -> list[str]:
    """Summary columns in their CSV order: the label columns ``by``, then ``SUMMARY_FIRST``, then the rest."""
    first = [c for c in by if c in names]
    first += [c for c in SUMMARY_FIRST if c in names and c not in first]
    return first + [c for c in names if c not in first]


def _owner_alive(name: str, prefix: str) -> bool:
    owner = name[len(prefix):].split("-", 1)[0]
    return owner.isdigit() and (int(owner) == os.getpid() or pid_alive(int(owner)))


def clean_temp_files(directory: str | Path) -> int:
    """Remove temporary files (and Dask scratch folders, ``.dask-tmp-<pid>``) under ``directory`` whose writer is
    dead (its pid is in the name; a name without one is from an older capsim and counts as dead); return how many.
    A live writer's files are never touched."""
    import shutil

    root = Path(directory)
    n = 0
    for p in root.rglob(f"{TMP_PREFIX}*"):
        if p.is_file() and not _owner_alive(p.name, TMP_PREFIX):
            p.unlink(missing_ok=True)
            n += 1
    for p in root.glob(f"{DASK_TMP}*"):
        if p.is_dir() and not _owner_alive(p.name, DASK_TMP + "-"):
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n
