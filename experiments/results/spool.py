"""The spool: each finished run is appended here the moment it arrives, so a killed command (SIGKILL included) loses
only the runs still running; runs leave it when they are compacted into Parquet batches.

A writer appends records (``running.records``: a run's tables as Arrow IPC) to a segment file,
``DIR/.spool/<stamp>-<pid>.log``, each framed as ``CAPSREC1``, its length and its SHA-256, written with one system
call and no buffering in the process. A reader reads a segment up to its last complete record whose checksum
matches (a record cut short by a kill is left out). A segment is removed once every run in it is in a batch; the
next writer into the folder compacts the segments a killed writer left. The folder ``.spool`` is hidden from
``pandas.read_parquet(DIR/<table>)``, which reads batches only.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments.running import interrupts
from experiments.running.records import decode_meta

__all__ = ["SPOOL", "Entry", "Spool", "segments", "scan", "read"]

SPOOL = ".spool"
_MAGIC = b"CAPSREC1"
_HEAD = struct.Struct("<8sQ32s")


@dataclass(frozen=True)
class Entry:
    """One record of a segment: where its bytes are, and the run it holds (``ok``: finished, else failed; its
    ``tables``)."""

    segment: str
    offset: int
    length: int
    run: str
    scenario: str
    ok: bool
    tables: tuple[str, ...]


def segments(root: Path) -> list[str]:
    """The spool segments of a folder, oldest first."""
    d = root / SPOOL
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if p.suffix == ".log" and not p.name.startswith("."))


def _entry(segment: str, offset: int, blob: bytes | memoryview) -> Entry:
    meta = decode_meta(blob)
    return Entry(segment, offset, len(blob), str(meta["run"]), str(meta.get("scenario") or ""), bool(meta["ok"]),
                 tuple(name for name, _ in meta["tables"]))


def scan(root: Path, segment: str) -> list[Entry]:
    """The complete, intact records of a segment in order (none if it is gone)."""
    try:
        data = memoryview((root / SPOOL / segment).read_bytes())
    except FileNotFoundError:
        return []
    out = []
    pos = 0
    while pos + _HEAD.size <= len(data):
        magic, n, digest = _HEAD.unpack_from(data, pos)
        start = pos + _HEAD.size
        if magic != _MAGIC or start + n > len(data) or hashlib.sha256(data[start:start + n]).digest() != digest:
            break  # cut short by a kill (or damaged): nothing after it can be trusted
        out.append(_entry(segment, start, data[start:start + n]))
        pos = start + n
    return out


def read(root: Path, e: Entry) -> bytes:
    """The bytes of a record (its checksum was checked by ``scan`` or when it was written)."""
    with open(root / SPOOL / e.segment, "rb") as f:
        f.seek(e.offset)
        data = f.read(e.length)
    if len(data) != e.length:
        raise OSError(f"{SPOOL}/{e.segment}: cut short")
    return data


class Spool:
    """A writer's spool: ``append`` writes a record to the current segment, starting one (announced through
    ``started``, before its file exists) when there is none; ``rotate`` makes the next record start a new one."""

    def __init__(self, root: Path, started: Callable[[str], None]):
        self.dir = root / SPOOL
        self.started = started
        self._fd: int | None = None
        self.current: str | None = None

    def append(self, blob: bytes) -> tuple[str, int]:
        """Write one record; return its segment and the offset of its bytes."""
        if self._fd is None:
            self.current = f"{time.time_ns():020d}-{os.getpid()}.log"
            self.started(self.current)
            self.dir.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.dir / self.current, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            self._size = 0
        assert self.current is not None
        frame = _HEAD.pack(_MAGIC, len(blob), hashlib.sha256(blob).digest()) + blob
        with interrupts.writing():
            view = memoryview(frame)
            while view:
                view = view[os.write(self._fd, view):]
        offset = self._size + _HEAD.size
        self._size += len(frame)
        return self.current, offset

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def rotate(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self, segment: str) -> None:
        if segment == self.current:
            self.rotate()
            self.current = None
        (self.dir / segment).unlink(missing_ok=True)
        try:
            self.dir.rmdir()
        except OSError:
            pass
