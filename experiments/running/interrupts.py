"""SIGTERM as an exception that is never lost and never lands half-way through a close.

``capsim`` turns SIGTERM into ``Terminated`` so a terminated command unwinds like Ctrl-C: the result folder's lock is
released, worker processes are stopped and every finished run is kept. Raised by the handler, the exception lands
wherever the main thread is. Two places are unsafe:

- where Python cannot let it escape (an at-fork hook, a ``__del__``: it prints "Exception ignored" and goes on), so
  the command would run to its end;
- inside the process pool's own bookkeeping (closing a pipe between the ``close`` and the forgetting of its file
  descriptor), which left a stale descriptor that the interpreter's exit then wrote to, with a traceback.

So the handler always records the request. While a process pool runs (``deferred()``), it only records it, and the
loop that waits for runs raises it at a safe point: ``check()`` between runs and at least every ``POLL`` seconds.
Elsewhere it raises at once, as before, and ``check()`` catches a swallowed one. Imports only the standard library,
so the command line still starts at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Terminated", "POLL", "on_sigterm", "check", "reset", "deferred"]

POLL = 1.0
"""Seconds a loop waiting for runs may go without calling ``check()``."""

_requested = False
_deferred = False


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C, so the lock is released, workers stopped and finished runs kept."""


def on_sigterm(signum: int, frame: Any) -> None:
    """The SIGTERM handler: remember the request, then (unless ``deferred``) raise ``Terminated`` where the main
    thread is."""
    global _requested
    _requested = True
    if not _deferred:
        raise Terminated()


@contextmanager
def deferred() -> Iterator[None]:
    """While inside, SIGTERM is only recorded: the code inside calls ``check()`` at points where unwinding is safe."""
    global _deferred
    before, _deferred = _deferred, True
    try:
        yield
    finally:
        _deferred = before


def check() -> None:
    """Raise ``Terminated`` if SIGTERM arrived, even if the handler's own exception was swallowed."""
    if _requested:
        raise Terminated()


def reset() -> None:
    """Forget a request (a command ends; the next in the same process starts clean)."""
    global _requested
    _requested = False
