"""Imported first by the pool's fork server (``experiments.running.pool.PRELOAD``): it makes the server a clean
parent for workers before anything else is imported there.

The server ignores Ctrl-C from here on (the command started it with Ctrl-C blocked: ``pool.sigint_blocked``), dies
with the command that started it, however the command ends (``PR_SET_PDEATHSIG``), and every process it forks
gets the same signal for the server's death in the moment after the fork, before it reads what to run (a worker
still unpickling its task or importing, e.g. a Dask worker starting, does not outlive a SIGKILL of the command
until its start is over); and it imports the numeric libraries with one thread each and Arrow's allocator without
its background thread, so it runs no thread whose locks a forked worker could inherit. Standard library only, and
nothing imported before the settings are made.
"""

from __future__ import annotations

import os
import signal
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["JE_ARROW_MALLOC_CONF"] = "background_thread:false"  # Arrow's jemalloc would start a thread

signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command alone acts on Ctrl-C; it started us with it blocked
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` ends (exit at once if it is gone already)."""
    if _prctl is None or _prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:  # 1 = PR_SET_PDEATHSIG
        return
    if os.getppid() != parent:
        os._exit(1)


_prctl = None
if sys.platform.startswith("linux"):
    import ctypes

    try:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        pass
    _die_with(os.getppid())
    _server = os.getpid()
    os.register_at_fork(after_in_child=lambda: _die_with(_server))
