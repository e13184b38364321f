"""The engine's one contact with SimPy: callbacks due at exact absolute times, in priority order within an instant.

SimPy schedules an event at ``now + delay``. In floating point ``now + (t - now)`` is not always ``t`` (it can miss
when ``t`` is more than twice ``now``), and an event one ulp early or late would reorder the simulation. So a ``Call``
(a SimPy ``Event``) carries its own due time and priority, and is triggered on creation with ``Event.succeed``, as
SimPy's own ``Timeout`` is; ``succeed`` asks the environment to ``schedule`` it, and this module's environment
(a subclass overriding only the public ``Environment.schedule``, as ``simpy.rt.RealtimeEnvironment`` overrides
``step``) files it at the call's time and priority: with a plain float delay when ``now + delay`` lands exactly on the
time (the usual case), otherwise with a ``_DelayTo``, a float equal to the delay whose sum with ``now`` is exactly the
time. Only SimPy's public API is used (``Event``, ``Event.succeed``, ``Event.callbacks``, ``Event.value``,
``Environment.schedule``, ``now`` and ``run``): no private attribute is read or written, so nothing here depends on
SimPy 4's internals; the ``simpy<5`` bound is only the project's rule for every library whose major releases may remove
what it uses (docs/dependencies.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import NORMAL, URGENT, Event, EventPriority

__all__ = ["Clock", "Call", "URGENT", "NORMAL", "LAST"]

LAST = EventPriority(NORMAL + 1)
"""A priority after every ``URGENT`` and ``NORMAL`` call of the same instant (the engine's decision)."""


class Call(Event):
    """A SimPy event that calls ``callback(call)`` at ``time``; ``value`` is the argument it carries.

    Made only by ``Clock.at``; triggered on creation, processed when its time comes (or skipped: ``Clock.cancel``).
    """

    def __init__(self, env: _Environment, time: float, delay: float, priority: EventPriority,
                 callback: Callable[[Call], Any], value: Any):
        self.env = env
        self.callbacks = [callback]
        self.time = time
        """The exact time the call is due (equal to ``env.now`` while it runs)."""
        self.priority = priority
        self.delay = delay
        self.arg = value
        """The argument it carries (``value``, as a plain attribute: SimPy's ``Event.value`` is a property)."""
        self.succeed(value)

    if TYPE_CHECKING:  # SimPy's ``Event.value``, typed as what the engine reads: the argument the call carries

        @property
        def value(self) -> Any: ...


def _with_time(call: Call) -> None:
    call.value(call.time)


class _DelayTo(float):
    """A delay whose sum with the time it was computed from is exactly ``target`` (see the module docstring)."""

    target: float

    def __add__(self, now: Any) -> float:
        return self.target

    __radd__ = __add__


_schedule = simpy.Environment.schedule


class _Environment(simpy.Environment):
    """A SimPy environment that files each ``Call`` at its own time and priority when it is triggered."""

    def schedule(self, event: Event, priority: EventPriority = NORMAL, delay: Any = 0) -> None:
        if event.__class__ is Call:
            _schedule(self, event, event.priority, event.delay)
        else:
            _schedule(self, event, priority, delay)


class Clock:
    """Schedules callbacks at exact absolute times on a SimPy environment and runs them.

    Calls due at the same time run in ``priority`` order (lower first: ``URGENT``, ``NORMAL``, ``LAST``), calls of
    equal time and priority in the order they were scheduled, including calls scheduled while that instant runs.
    """

    def __init__(self, start: float = 0.0):
        self.env = _Environment(initial_time=start)
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
        if now + delay != time:
            delay = _DelayTo(delay)
            delay.target = time
        return Call(env, time, delay, priority, callback, value)

    def soon(self, callback: Callable[[float], Any], priority: EventPriority = NORMAL) -> None:
        """Call ``callback(now)`` after every call due now: at once when none is (what a call at ``now`` would do,
        being processed next, without scheduling one; the calling event must do nothing after), else as a call at
        ``now`` with ``priority``. Counted in ``calls`` either way."""
        env = self.env
        now = env.now
        if env.peek() > now:
            self.calls += 1
            callback(now)
        else:
            self.at(now, _with_time, callback, priority)

    @staticmethod
    def cancel(call: Call) -> None:
        """Make a call that has not run yet do nothing when its time comes."""
        call.callbacks.clear()

    def run(self) -> None:
        """Run every call, including those scheduled on the way, until none is left."""
        self.env.run()
