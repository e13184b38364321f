"""Where results go and who writes them: result folders inside the output root, one writer per folder at a time.

A scenario's or sweep's ``name`` becomes ``results/<name>/``, so a name is one safe path component (letters, digits,
``_ . + -``); ``--out`` is the only way to write anywhere else, and it must name a new or empty folder or a result
folder (never a file, nor a folder holding other things). A writer (``capsim run`` or ``capsim sweep``) holds the
folder's lock file, ``DIR/.capsim.lock``, for as long as it writes: the file names the holder's pid and command, and
the lock itself is an ``flock`` the kernel releases when the holder dies, so a lock left by a killed process is
taken over by the next writer and a live one is never broken.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from experiments.scenario.names import RESULTS_ROOT, name_problem
from sim.model import CapsimError

__all__ = ["LOCK", "MANIFEST", "LEGACY_MANIFEST", "output_dir", "check_result_dir", "read_manifest", "FolderLock"]

LOCK = ".capsim.lock"
MANIFEST = "manifest.json"
LEGACY_MANIFEST = "sweep.json"
_MARKERS = (MANIFEST, LEGACY_MANIFEST, "summary", LOCK)


def _is_store(d: Path) -> bool:
    return any((d / m).exists() for m in _MARKERS)


def check_result_dir(d: Path, option: str = "--out") -> None:
    """A clear error unless ``d`` is missing, an empty folder or a result folder: never a file, a folder holding
    other things, nor a folder of the flat layout of an older ``capsim run``."""
    if d.exists() and not d.is_dir():
        raise CapsimError(f"{option} {d}: is a file, not a folder; give a folder for the results (it is created "
                          f"if missing)")
    if not d.is_dir() or _is_store(d):
        return
    try:
        entries = sorted(p.name for p in d.iterdir())
    except OSError as e:
        raise CapsimError(f"{option} {d}: cannot list the folder: {e.strerror}") from None
    if not entries:
        return
    if "jobs.parquet" in entries or "summary.csv" in entries:
        raise CapsimError(f"{option} {d}: holds the flat files of an older `capsim run` (jobs.parquet, summary.csv); "
                          f"move them away or choose another folder")
    shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
    raise CapsimError(f"{option} {d}: is not a capsim result folder and not empty (it holds {shown}); choose a new "
                      f"or empty folder, so no other files are mixed with (or replaced by) results")


def read_manifest(root: Path) -> dict[str, Any]:
    """A result folder's manifest (``manifest.json``, or ``sweep.json`` of older folders; empty when it has none); a
    damaged one is a clear error."""
    for name in (MANIFEST, LEGACY_MANIFEST):
        path = root / name
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise CapsimError(f"{path}: damaged manifest ({e}); a result folder's manifest is JSON written by "
                                  f"capsim: restore it, or delete it and run the sweep again") from None
            if not isinstance(data, dict) or not isinstance(data.get("runs", {}), dict) \
                    or not isinstance(data.get("run_ids", []), list):
                raise CapsimError(f"{path}: damaged manifest (expected a JSON object with `run_ids` and `runs`); "
                                  f"delete it and run the sweep again")
            return data
    return {}


def output_dir(out: str | None, name: str) -> Path:
    """The result folder of a command: ``--out`` as given, else ``results/<name>``; checked by ``check_result_dir``."""
    if out:
        d = Path(out)
    else:
        why = name_problem(name)
        if why:
            raise CapsimError(f"name: {why}")
        d = RESULTS_ROOT / name
    check_result_dir(d, "--out" if out else "result folder")
    return d


class FolderLock:
    """The lock of one result folder, held by one writer at a time (a context manager).

    ``acquire`` raises a CapsimError naming the holder when a live process holds it; ``stale`` is then the pid of a
    dead holder whose lock was taken over (None if there was none).
    """

    def __init__(self, root: str | Path, command: str = ""):
        self.root = Path(root)
        self.path = self.root / LOCK
        self.command = command or "capsim " + " ".join(sys.argv[1:])
        self.stale: int | None = None
        self._fd: int | None = None

    def _holder(self, text: str) -> dict[str, Any]:
        try:
            info = json.loads(text)
            return info if isinstance(info, dict) else {}
        except ValueError:
            return {}

    def acquire(self) -> FolderLock:
        try:
            import fcntl
        except ImportError:  # not POSIX: no kernel lock to lean on; the pid in the file decides
            return self._acquire_by_pid()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CapsimError(f"{self.root}: cannot create the result folder: {e.strerror}") from None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                text = os.read(fd, 4096).decode("utf-8", "replace")
                os.close(fd)
                raise CapsimError(self._busy(self._holder(text))) from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder removed the file as we opened it: lock the new one
        old = self._holder(os.read(fd, 4096).decode("utf-8", "replace"))
        pid = old.get("pid")
        self.stale = pid if isinstance(pid, int) and pid != os.getpid() else None
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, self._info())
        self._fd = fd
        return self

    def _info(self) -> bytes:
        return (json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                            "since": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n").encode()

    def _busy(self, holder: dict[str, Any]) -> str:
        who = f"pid {holder.get('pid', '?')}"
        if holder.get("command"):
            who = f"`{holder['command']}`, {who}"
        if holder.get("since"):
            who += f", since {holder['since']}"
        return (f"{self.root}: another capsim is writing to this result folder ({who}); wait for it to finish, or "
                f"write elsewhere with --out")

    def _acquire_by_pid(self) -> FolderLock:
        from experiments.results.files import pid_alive

        self.root.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                holder = self._holder(self.path.read_text(encoding="utf-8", errors="replace"))
                pid = holder.get("pid")
                if isinstance(pid, int) and pid_alive(pid):
                    raise CapsimError(self._busy(holder)) from None
                self.stale = pid if isinstance(pid, int) else None
                self.path.unlink(missing_ok=True)
                continue
            os.write(fd, self._info())
            os.close(fd)
            return self
        raise CapsimError(self._busy({}))

    def release(self) -> None:
        if self._fd is None:
            if self.path.is_file() and self._holder(self.path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
