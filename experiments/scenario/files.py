"""Files a scenario reads (traces), each read, checked and hashed once per file version and process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["file_sha256", "trace_rows", "trace_hardware", "availability", "availability_sha256"]

_TRACES: dict[tuple, Any] = {}
_HARDWARE: dict[tuple, Any] = {}
_HASHES: dict[tuple, str] = {}
_SERIES: dict[tuple, Any] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def _remember(cache: dict, key: Any, value: Any, size: int) -> None:
    if len(cache) >= size:
        cache.pop(next(iter(cache)))
    cache[key] = value


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, computed once per file version and process (traces enter run ids by it)."""
    import hashlib

    key = _file_key(path)
    if key not in _HASHES:
        _remember(_HASHES, key, hashlib.sha256(path.read_bytes()).hexdigest(), 64)
    return _HASHES[key]


def trace_rows(path: Path, format: str, options: dict[str, Any], shown: str | None = None) -> Any:
    """A trace file's rows (``sim.workload.TraceRows``) read by its format's reader with ``options`` and checked,
    once per file version, format, options and process; a bad file or cell is a CapsimError naming the file (as
    ``shown``, e.g. the path the scenario gives, else ``path``), the row and the column."""
    key = (*_file_key(path), format, json.dumps(options, sort_keys=True, default=str), shown)
    if key not in _TRACES:
        from sim.traces import read_trace
        from sim.workload import validate_trace

        _remember(_TRACES, key, validate_trace(read_trace(path, format, **options), shown or str(path)), 16)
    return _TRACES[key]


def trace_hardware(path: Path, format: str, options: dict[str, Any]) -> Any:
    """The servers a trace's jobs ran on (``TraceReader.hardware``: ``sim.traces.Servers`` per kind), read once per
    file version, format, options and process; a format that does not describe them is a CapsimError."""
    key = (*_file_key(path), format, json.dumps(options, sort_keys=True, default=str))
    if key not in _HARDWARE:
        from sim.traces import TRACE_FORMATS

        _remember(_HARDWARE, key, TRACE_FORMATS.build(format, **options).hardware(path), 16)
    return _HARDWARE[key]


def _files(path: Path, format: str) -> list[Path]:
    if path.is_dir():
        return sorted(path.glob("*.json" if format == "skypilot" else "*.csv"))
    return [path] if path.is_file() else []


def availability(path: Path, format: str, encoding: str, min_count: float) -> Any:
    """The availability series in ``path`` (``sim.availability.read_availability``: a file or a directory of
    SkyPilot files), by market name, read once per file version, options and process."""
    from sim.availability import read_availability

    files = _files(path, format)
    key = (str(path.resolve()), tuple(_file_key(f) for f in files), format, encoding, min_count)
    if not files or key not in _SERIES:
        _remember(_SERIES, key, read_availability(path, format, encoding=encoding, min_count=min_count), 8)
    return _SERIES[key]


def availability_sha256(path: Path, format: str) -> str:
    """One hash of an availability trace's files (a directory: every file's name and hash), for run ids."""
    import hashlib

    files = _files(path, format)
    if not path.is_dir():
        return file_sha256(path)
    return hashlib.sha256("".join(f"{f.name}:{file_sha256(f)}\n" for f in files).encode()).hexdigest()
