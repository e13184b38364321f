"""The one way capsim makes a HiGHS solver object: silent, with a fixed thread count, and no banner on stdout.

highspy 1.16 prints HiGHS's banner ("Running HiGHS ...") on the C library's stdout when the first ``Highs`` object of
a process is constructed, before any option can silence it. ``new_highs`` constructs that first object with file
descriptor 1 pointed at the null device, so the banner never reaches a command's stdout (its tables and results),
whatever the worker, the start method or the order in which LPs and MILPs are solved. Every HiGHS object of the
project (the MILP, the lower bound, Gavel's allocations, PuLP's HiGHS interface) is made after ``quiet_banner()``.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any

__all__ = ["new_highs", "quiet_banner", "use_threads"]

_lock = threading.Lock()
_done = False
_threads: int | None = None


def _flush_c_stdio() -> None:
    """Flush the C library's stdio buffers (HiGHS writes through them; on a pipe they hold text until exit)."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask (an exotic platform): nothing buffered that we know of
        pass


def quiet_banner() -> None:
    """Construct this process's first ``highspy.Highs`` with stdout on the null device, once; later objects print
    no banner (HiGHS prints it once per process)."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        import highspy

        try:
            sys.stdout.flush()
        except (OSError, ValueError):  # a closed or broken stdout: nothing of ours to lose
            pass
        _flush_c_stdio()
        saved = os.dup(1)
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, 1)
            finally:
                os.close(null)
            try:
                highspy.Highs()
            finally:
                _flush_c_stdio()
                os.dup2(saved, 1)
        finally:
            os.close(saved)
        _done = True


def use_threads(threads: int) -> None:
    """Make HiGHS's next run use ``threads`` threads. HiGHS sizes one scheduler per process at its first run; a later
    run asking for another count fails without solving (status "Not Set"), so the scheduler is rebuilt when the
    count changes (capsim solves one model at a time per process)."""
    global _threads
    if threads == _threads:
        return
    import highspy

    if _threads is not None:
        highspy.Highs.resetGlobalScheduler(True)
    _threads = threads


def new_highs(threads: int = 1, msg: bool = False) -> Any:
    """A ``highspy.Highs`` with ``threads`` threads, logging only with ``msg`` (the solver's log, for debugging)."""
    quiet_banner()
    use_threads(int(threads))
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(msg))
    h.setOptionValue("threads", int(threads))
    return h
