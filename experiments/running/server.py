"""Imported first by the pool's fork server (``experiments.running.pool.PRELOAD``): it makes the server a clean
parent for workers before anything else is imported there.

The server ignores Ctrl-C from here on (the command started it with Ctrl-C blocked: ``pool.sigint_blocked``), dies
with the command that started it, however the command ends (``PR_SET_PDEATHSIG``; its workers then
die with it the same way), and it imports the numeric libraries with one thread each and Arrow's allocator without
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

if sys.platform.startswith("linux"):
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
