"""SIGTERM as an exception that is never lost.

``capsim`` turns SIGTERM into ``Terminated``, raised in the main thread, so a terminated command unwinds like Ctrl-C:
the result folder's lock is released, worker processes are stopped and every finished run is kept. Python may run a
signal handler where an exception cannot escape (an at-fork hook, a ``__del__``, a weakref callback: it prints
"Exception ignored" and goes on), and the command would then run to its end. So the handler also records the request,
and the loops that wait for runs call ``check()`` between runs and at least every ``POLL`` seconds, which raises it
again. Imports nothing, so the command line still starts at once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Terminated", "POLL", "on_sigterm", "check", "reset"]

POLL = 1.0
"""Seconds a loop waiting for runs may go without calling ``check()``."""

_requested = False


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C, so the lock is released, workers stopped and finished runs kept."""


def on_sigterm(signum: int, frame: Any) -> None:
    """The SIGTERM handler: remember the request, then raise ``Terminated`` where the main thread is."""
    global _requested
    _requested = True
    raise Terminated()


def check() -> None:
    """Raise ``Terminated`` if SIGTERM arrived, even if the handler's own exception was swallowed."""
    if _requested:
        raise Terminated()


def reset() -> None:
    """Forget a request (a command ends; the next in the same process starts clean)."""
    global _requested
    _requested = False
