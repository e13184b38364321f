"""``python -m tests.fault_sweep ARGS``: the ``capsim`` command line with one more policy, ``sleepy``, for fault tests.

``sleepy`` plans as FIFO but sleeps ``CAPSIM_SLEEPY`` seconds (default 0.05) at each decision, so a sweep of a few
tiny runs lasts long enough to be killed part-way, and its results are still FIFO's, byte for byte (wall-clock
columns aside). SIGUSR1 makes the command write every thread's stack to stderr (how a stuck stop is diagnosed).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time

import optim
from optim.base import POLICIES, Policy
from sim.model import Plan, Snapshot


class Sleepy(Policy):
    """FIFO that takes its time."""

    name = "sleepy"

    def __init__(self) -> None:
        self._fifo = optim.build("fifo")

    def decide(self, snapshot: Snapshot) -> Plan:
        time.sleep(float(os.environ.get("CAPSIM_SLEEPY", "0.05")))
        return self._fifo.decide(snapshot)


def register() -> None:
    if "sleepy" not in POLICIES.kinds():
        POLICIES.register("sleepy")(Sleepy)


register()

if __name__ == "__main__":
    from experiments.cli import console

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck command's stacks, on demand (test_interrupts)

    console(sys.argv[1:])
