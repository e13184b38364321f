"""The engine's one contact with SimPy: callbacks due at exact absolute times, in priority order within an instant.

SimPy schedules an event at ``now + delay``. In floating point ``now + (t - now)`` is not always ``t`` (it can miss
when ``t`` is more than twice ``now``), and an event one ulp early or late would reorder the simulation. ``Clock.at``
therefore hands ``Environment.schedule`` a plain float delay when it lands exactly on ``t`` (the usual case) and
otherwise a ``_DelayTo``: a float equal to the delay whose sum with ``now`` is exactly ``t``. Only SimPy's public
``Environment.schedule``, ``Environment.now`` and ``Environment.run`` are used; a ``Call`` is an ``Event`` subclass
filled in as a triggered event the way SimPy's own ``Timeout`` fills itself in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT, Event, EventPriority

__all__ = ["Clock", "Call", "URGENT", "NORMAL", "LAST"]

_new = object.__new__

LAST = EventPriority(NORMAL + 1)
"""A priority after every ``URGENT`` and ``NORMAL`` call of the same instant (the engine's decision)."""


class Call(Event):
    """A SimPy event that calls ``callback(call)`` at ``time``; ``value`` is the argument it carries.

    Made only by ``Clock.at``, which fills it in the way SimPy's own ``Timeout.__init__`` does (an event triggered
    on creation, processed when its time comes) without the cost of an ``__init__`` call per event.
    """

    time: float
    """The exact time the call is due (equal to ``env.now`` while it runs)."""

    @property
    def value(self) -> Any:
        """The argument the call carries (always available: a call is triggered when it is made)."""
        return self._value


class _DelayTo(float):
    """A delay whose sum with the time it was computed from is exactly ``target`` (see the module docstring)."""

    target: float

    def __add__(self, now: Any) -> float:
        return self.target

    __radd__ = __add__


class Clock:
    """Schedules callbacks at exact absolute times on a SimPy environment and runs them.

    Calls due at the same time run in ``priority`` order (lower first: ``URGENT``, ``NORMAL``, ``LAST``), calls of
    equal time and priority in the order they were scheduled, including calls scheduled while that instant runs.
    """

    def __init__(self, start: float = 0.0):
        self.env = simpy.Environment(initial_time=start)
        self.calls = 0
        """Calls scheduled so far (SimPy processes each one, a cancelled one as a no-op)."""

    @property
    def now(self) -> float:
        return self.env.now

    def at(self, time: float, callback: Callable[[Call], Any], value: Any = None,
           priority: EventPriority = NORMAL) -> Call:
        """Call ``callback(call)`` at exactly ``time`` (not before ``now``); ``call.value`` is ``value``."""
        env = self.env
        now = env.now
        delay = time - now
        if not delay >= 0:
            raise ValueError(f"clock: cannot schedule at t={time!r}, before now (t={now!r})")
        self.calls += 1
        call = _new(Call)
        call.env = env
        call.callbacks = [callback]
        call._value = value
        call._ok = True
        call.time = time
        if now + delay != time:
            delay = _DelayTo(delay)
            delay.target = time
        env.schedule(call, priority, delay)
        return call

    @staticmethod
    def cancel(call: Call) -> None:
        """Make a call that has not run yet do nothing when its time comes."""
        call.callbacks.clear()

    def run(self) -> None:
        """Run every call, including those scheduled on the way, until none is left."""
        self.env.run()
