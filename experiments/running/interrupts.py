"""Ctrl-C and SIGTERM: never lost, never landing half-way through a write, and a command stopped within 2 s.

``capsim`` handles SIGINT and SIGTERM alike: the handler records the request and raises ``KeyboardInterrupt`` or
``Terminated`` where the main thread is, so the command unwinds (the folder's lock released, workers stopped, every
finished run kept) and exits 130 or 143. Three places need more:

- writes of results (``deferred()``): there the handler only records the request, and the code raises it at a safe
  point (``check()``: between runs and at least every ``POLL`` seconds while waiting for workers);
- places where Python cannot let the exception escape (an at-fork hook, a ``__del__``) or a library would swallow
  it (pydantic's callbacks): ``check()`` raises a request whose exception was swallowed or never raised;
- native code that runs on without returning to Python (a solver's long call in this process): a watchdog thread,
  woken by the signal itself (``signal.set_wakeup_fd``), ends the process after ``GRACE`` seconds if the command
  has not finished unwinding by then, and never while a write is in progress. Finished runs are on disk by then.

Imports only the standard library, so the command line still starts at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Terminated", "POLL", "GRACE", "install", "on_signal", "check", "reset", "deferred", "writing",
           "exit_code", "pid_alive"]

POLL = 0.25
"""Seconds a loop waiting for runs may go without calling ``check()``."""
GRACE = 1.5
"""Seconds after a signal within which the command must have unwound, else the watchdog ends the process."""
EXIT: dict[int, int] = {int(signal.SIGINT): 130, int(signal.SIGTERM): 143}
_MESSAGES = {int(signal.SIGINT): "capsim: interrupted", int(signal.SIGTERM): "capsim: terminated"}

_requested: int | None = None
_deferred = 0
_active = False
_writing = threading.RLock()  # writes nest (a batch written, then its journal line)


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C, so the lock is released, workers stopped and finished runs kept."""


def _exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated()


def on_signal(signum: int, frame: Any) -> None:
    """The SIGINT and SIGTERM handler: remember the request, then (unless ``deferred``) raise where the main thread
    is."""
    global _requested
    if _requested is None:
        _requested = signum
    if _active and not _deferred and not _called_by_pydantic(frame):
        raise _exception(signum)


def _called_by_pydantic(frame: Any) -> bool:
    """Whether the main thread is in Python code that pydantic called while validating or serialising a model: a
    discriminator that raises while pydantic-core serialises is taken as a failed match (the exception lost, and a
    ``UserWarning`` on the user's terminal), so the request waits for the next ``check()``."""
    for _ in range(8):
        if frame is None:
            return False
        if str(frame.f_globals.get("__name__", "")).startswith("pydantic"):
            return True
        frame = frame.f_back
    return False


@contextmanager
def deferred() -> Iterator[None]:
    """While inside, a signal is only recorded: the code inside calls ``check()`` where unwinding is safe."""
    global _deferred
    _deferred += 1
    try:
        yield
    finally:
        _deferred -= 1


@contextmanager
def writing() -> Iterator[None]:
    """A write of results: a signal is recorded (raised by ``check()`` after it), and the watchdog waits for it."""
    with _writing, deferred():
        yield


def check() -> None:
    """Raise the recorded request, even if the handler's own exception was swallowed."""
    if _requested is not None:
        raise _exception(_requested)


def exit_code() -> int | None:
    """130 or 143 when a signal was recorded, else None."""
    return None if _requested is None else EXIT[_requested]


def _watch(read_fd: int, finished: threading.Event) -> None:
    """The watchdog of one command (``finished``: set when that command has unwound)."""
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            data = b""
        if not data:  # the command closed its end: it is over
            os.close(read_fd)
            return
        signums = [b for b in data if b in EXIT]
        if not signums:
            continue
        deadline = time.monotonic() + GRACE
        if finished.wait(max(0.0, deadline - time.monotonic())):
            continue  # the command unwound in time: wait for the end of its pipe
        with _writing:  # never end the process half-way through a write of results
            if finished.is_set():
                continue
            try:
                sys.stderr.write(_MESSAGES[signums[0]] + " (stopped while inside native code)\n")
                sys.stderr.flush()
            finally:
                os._exit(EXIT[signums[0]])


@contextmanager
def install() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as this module describes for the duration of one command (main thread only; in
    another thread the signals are left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _active
    previous = {s: signal.signal(signal.Signals(s), on_signal) for s in EXIT}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    finished = threading.Event()
    threading.Thread(target=_watch, args=(read_fd, finished), name="capsim-signal-watch", daemon=True).start()
    _active = True
    try:
        yield
    finally:
        _active = False  # a signal from here on is only recorded: the command has ended
        finished.set()
        signal.set_wakeup_fd(old_fd)
        for s, h in previous.items():
            signal.signal(s, h)
        os.close(write_fd)
        reset()


def reset() -> None:
    """Forget a request (a command ends; the next in the same process starts clean)."""
    global _requested
    _requested = None


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (a zombie counts as dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
