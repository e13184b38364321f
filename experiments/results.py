"""Writing and reading results: deterministic tables, atomic writes, Parquet datasets of a result folder.

Same scenario and seed give byte-identical files: rows are sorted by their labels in a stable way, columns keep a
fixed order and dtypes, Parquet is written by pyarrow with zstd and no pandas index. Every file is written to a
temporary name in the same directory and renamed into place, so a killed process never leaves a half-written file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.metrics import HEADLINE, METRICS

__all__ = [
    "atomic_write",
    "atomic_write_bytes",
    "write_parquet",
    "write_csv",
    "tidy",
    "summary_frame",
    "read_dataset",
    "clean_temp_files",
    "SUMMARY_FIRST",
]

SUMMARY_FIRST = ["policy", "seed", *(m for m in METRICS if m in HEADLINE), "makespan"]
"""The leading columns of a summary table: labels, the headline metrics in declaration order, then makespan (the
order ``summary.csv`` has always had); every other column follows in its own order."""
TMP_PREFIX = ".tmp-"


def atomic_write(path: str | Path, write: Any) -> None:
    """Call ``write(tmp_name)`` for a temporary file next to ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""

    def w(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    atomic_write(Path(path), w)


def _to_arrow(df: pd.DataFrame) -> pa.Table:
    table = pa.Table.from_pandas(df, preserve_index=False)
    return table.replace_schema_metadata(None)


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` as Parquet (zstd, no index, no pandas metadata) atomically."""
    table = _to_arrow(df)
    atomic_write(Path(path), lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def write_csv(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` as CSV (no index, full float precision) atomically."""
    atomic_write(Path(path), lambda tmp: df.to_csv(tmp, index=False, float_format="%.12g", lineterminator="\n"))


def tidy(frames: Iterable[pd.DataFrame], by: list[str]) -> pd.DataFrame:
    """Concatenate per-run frames and sort rows stably by the label columns ``by`` (row order within a run kept)."""
    frames = [f for f in frames if f is not None]
    nonempty = [f for f in frames if len(f)]
    if not nonempty:
        return frames[0].iloc[0:0].reset_index(drop=True) if frames else pd.DataFrame()
    df = pd.concat(nonempty, ignore_index=True, sort=False)
    keys = [c for c in by if c in df.columns]
    if keys:
        df = df.sort_values(keys, kind="mergesort").reset_index(drop=True)
    return df


def summary_frame(rows: list[dict[str, Any]] | pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Summary rows as a frame with the label columns ``by``, then ``SUMMARY_FIRST``, first; rows sorted stably by
    ``by``."""
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    first = [c for c in by if c in df.columns]
    first += [c for c in SUMMARY_FIRST if c in df.columns and c not in first]
    df = df[first + [c for c in df.columns if c not in first]]
    return df.sort_values([c for c in by if c in df.columns], kind="mergesort").reset_index(drop=True)


def read_dataset(directory: str | Path, only: set[str] | None = None) -> pd.DataFrame:
    """Read the Parquet files of one table directory into one frame (temporary files ignored).

    ``only`` keeps the files whose stem (run id) is in it, so leftovers of unfinished runs are never opened.
    """
    d = Path(directory)
    files = sorted(p for p in d.glob("*.parquet") if not p.name.startswith(".") and (only is None or p.stem in only))
    if not files:
        return pd.DataFrame()
    tables = [pq.read_table(p) for p in files]
    table = pa.concat_tables(tables, promote_options="permissive")
    return table.to_pandas()


def clean_temp_files(directory: str | Path) -> int:
    """Remove temporary files a killed writer left behind under ``directory``; return how many."""
    n = 0
    for p in Path(directory).rglob(f"{TMP_PREFIX}*"):
        if p.is_file():
            p.unlink(missing_ok=True)
            n += 1
    return n
