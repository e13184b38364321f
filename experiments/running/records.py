"""A finished run as one record of bytes: its tables as Arrow IPC streams in their stored schema, with the run's id,
scenario and outcome.

The record is built where the run ran (a worker, in parallel), sent back as bytes (nothing to pickle but a buffer),
appended as it is to the result folder's spool, and read back from there when runs are compacted into Parquet
batches (``experiments.results``). Each table gets the leading label columns of its rows (run id, grid values,
policy, seed) and the one schema per table that every Parquet file of a folder shares: grid labels take the Arrow
type of the whole sweep (``label_type``), and a text column whose values are all missing is ``string``, not
Arrow's ``null``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import pandas as pd
import pyarrow as pa

__all__ = ["to_arrow", "label_type", "encode", "decode_meta", "decode_tables", "FAILURES"]

FAILURES = "failures"
"""The table of a failed run: run id, grid values, policy, seed, configuration (JSON) and traceback."""
_LEN = struct.Struct("<I")


def label_type(values: Iterable[Any]) -> pa.DataType:
    """The one Arrow type of a label column (a swept field) across a sweep's files: bool, int64 or float64 when
    every given value is one, else text (numbers then become their text); missing values stay missing."""
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return pa.bool_()
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return pa.int64()
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return pa.float64()
    return pa.string()


def _column(values: Any, name: str, want: pa.DataType | None, dtype: Any) -> pa.Array | pa.ChunkedArray:
    arr = pa.array(values, from_pandas=True)
    if want is None and pa.types.is_null(arr.type) and pd.api.types.is_object_dtype(dtype):
        want = pa.string()
    return arr.cast(want) if want is not None and want != arr.type else arr


def to_arrow(df: pd.DataFrame, types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
    """``df`` as an Arrow table in its stored schema, column by column (what ``pyarrow.Table.from_pandas`` gives,
    without its per-call overhead on small frames and without pandas metadata): columns named in ``types`` take that
    type; a text column whose values are all missing is typed ``string``."""
    types = types or {}
    cols = [_column(df[c], c, types.get(c), df[c].dtype) for c in df.columns]
    return pa.Table.from_arrays(cols, names=[str(c) for c in df.columns])


@lru_cache(maxsize=64)
def _pandas_type(kind: str) -> pa.DataType:
    """The Arrow type pandas gives a column of Python values of type ``kind`` (by name; text is ``large_string``
    under pandas 3)."""
    sample = {"str": "a", "int": 1, "float": 1.5, "bool": True}.get(kind)
    if sample is None:
        return pa.string()
    return pa.Table.from_pandas(pd.DataFrame({"x": [sample]}), preserve_index=False).schema[0].type


def _labelled(table: pa.Table, labels: Sequence[tuple[str, Any]], types: Mapping[str, pa.DataType]) -> pa.Table:
    """``table`` with the label columns first (a label replaces a column of the same name), each a constant of the
    type pandas would give it, cast to ``types`` where the sweep fixes one."""
    n = table.num_rows
    names = [k for k, _ in labels]
    body = table.drop_columns([c for c in table.column_names if c in names])
    cols = []
    for k, v in labels:
        arr = pa.array([v] * n, type=_pandas_type(type(v).__name__) if v is not None else pa.null())
        want = types.get(k) or (pa.string() if v is None else None)
        cols.append(arr.cast(want) if want is not None and want != arr.type else arr)
    return pa.Table.from_arrays(cols + list(body.columns), names=names + body.column_names)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def encode(run_id: str, scenario: str, labels: Sequence[tuple[str, Any]], config: str,
           types: Mapping[str, pa.DataType], summary: Mapping[str, Any] | None = None,
           tables: Mapping[str, pd.DataFrame] | None = None, error: str | None = None) -> bytes:
    """The record of one run: a finished run's tables (``summary``, its one row with the run's configuration
    ``config`` as JSON, then each of ``tables``), or a failed run's ``failures`` row (with ``error``), every table
    with the label columns ``labels`` first; ``types`` are the sweep's label types."""
    out: dict[str, pa.Table] = {}
    if error is None:
        assert summary is not None and tables is not None  # a run that succeeded has its summary row and tables
        row = pd.DataFrame([{**summary, "config": config}])
        out["summary"] = _labelled(to_arrow(row, types), labels, types)
        for name, df in tables.items():
            out[name] = _labelled(to_arrow(df, types), labels, types)
    else:
        fail = pa.table({"config": pa.array([config], _pandas_type("str")),
                         "traceback": pa.array([error], _pandas_type("str"))})
        out[FAILURES] = _labelled(fail, labels, types)
    parts = {name: _ipc(t) for name, t in out.items()}
    meta = json.dumps({"run": run_id, "scenario": scenario, "ok": error is None,
                       "tables": [[name, len(b)] for name, b in parts.items()]}, separators=(",", ":")).encode()
    return b"".join([_LEN.pack(len(meta)), meta, *parts.values()])


def decode_meta(blob: bytes | memoryview) -> dict[str, Any]:
    """A record's run id (``run``), scenario, ``ok`` and its tables with their sizes (``tables``)."""
    (n,) = _LEN.unpack_from(blob, 0)
    meta: dict[str, Any] = json.loads(bytes(blob[_LEN.size:_LEN.size + n]))
    return meta


def decode_tables(blob: bytes | memoryview, only: Sequence[str] | None = None) -> dict[str, pa.Table]:
    """A record's tables (those named in ``only``, default every one)."""
    (n,) = _LEN.unpack_from(blob, 0)
    meta = json.loads(bytes(blob[_LEN.size:_LEN.size + n]))
    pos = _LEN.size + n
    view = memoryview(blob)
    out: dict[str, pa.Table] = {}
    for name, size in meta["tables"]:
        if only is None or name in only:
            out[name] = pa.ipc.open_stream(pa.py_buffer(view[pos:pos + size])).read_all()
        pos += size
    return out
