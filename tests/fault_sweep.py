"""``python -m tests.fault_sweep ARGS``: the ``capsim`` command line with one more policy, ``sleepy``, for fault tests.

``sleepy`` plans as FIFO but sleeps ``CAPSIM_SLEEPY`` seconds (default 0.05) at each decision, so a sweep of a few
tiny runs lasts long enough to be killed part-way, and its results are still FIFO's, byte for byte (wall-clock
columns aside). SIGUSR1 makes the command write every thread's stack to stderr (how a stuck stop is diagnosed). As a
program it imports the policies only once capsim handles signals (``console``'s ``setup``), as ``capsim`` does: the
stress tests measure capsim's stops, not a window of this harness's own imports (a Ctrl-C there once went unseen).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from typing import Any

Sleepy: Any = None


def register() -> None:
    """Define ``Sleepy`` and register it as the policy ``sleepy`` (once)."""
    global Sleepy
    import optim
    from optim.base import POLICIES, Policy
    from sim.model import Plan, Snapshot

    if "sleepy" in POLICIES.kinds():
        return

    class _Sleepy(Policy):
        """FIFO that takes its time."""

        name = "sleepy"

        def __init__(self) -> None:
            self._fifo = optim.build("fifo")

        def decide(self, snapshot: Snapshot) -> Plan:
            time.sleep(float(os.environ.get("CAPSIM_SLEEPY", "0.05")))
            return self._fifo.decide(snapshot)

    _Sleepy.__name__ = _Sleepy.__qualname__ = "Sleepy"  # pickled by reference as tests.fault_sweep.Sleepy
    Sleepy = _Sleepy
    POLICIES.register("sleepy")(Sleepy)


if __name__ == "__main__":
    from experiments.entry import handle_early

    handle_early()  # as ``capsim`` does: a signal before or after the command's own handling is one line, 130/143
    from experiments.cli import console

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck command's stacks, on demand (test_interrupts)

    console(sys.argv[1:], setup=register)
else:
    register()
