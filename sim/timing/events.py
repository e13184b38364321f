"""The event-driven time model: the policy decides at every arrival, completion, boot ending (when jobs are queued or
were placed on the booting VM), spot revocation, recorded spot market coming back while jobs wait and, optionally,
every ``ClusterRules.decision_interval`` seconds.

Triggers falling at one instant are folded into one decision taken after every other event of that instant (its
trigger names them all, e.g. ``arrival+completion``). A trigger with no other call due at its instant is decided at
once, within its event (which the run ends with it, ``TimeModel``): the same decision, in the same order, as an event
of its own processed next, without the cost of scheduling one.

A placed job runs until its work is done: its completion is due ``(1 - done) x runtime + restart overhead`` after it
starts (once its VMs are ready). When a co-located job's partner arrives or leaves, its work so far is accounted at
the old pace and its completion moved (``paced``).

A policy that leaves jobs waiting while nothing runs, nothing boots and no job is yet to arrive is asked once more
(trigger ``stall``; with periodic decisions, after two idle ticks); if that plan starts nothing either, the run stops
with an error naming the policy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sim.clock import LAST, Call
from sim.state import job_view
from sim.timing.base import Engine, TimeModel

if TYPE_CHECKING:
    from sim.state import JobState, NodeState

__all__ = ["EventDriven", "TRIGGERS"]

TRIGGERS = ("arrival", "completion", "ready", "periodic", "revocation", "market")
"""What can trigger an event-driven decision (besides ``stall``); ``market``: a recorded spot market has VMs again."""
_ARRIVAL, _COMPLETION, _READY, _PERIODIC, _REVOCATION, _MARKET = (1 << i for i in range(len(TRIGGERS)))
_TRIGGER_NAMES = tuple("+".join(t for i, t in enumerate(TRIGGERS) if m & (1 << i)) for m in range(1 << len(TRIGGERS)))
"""The trigger of a decision from the bit mask of what fell at its instant, e.g. ``arrival+completion``."""


class EventDriven(TimeModel):
    """Decisions at events (see the module docstring)."""

    def start(self, run: Engine) -> None:
        self.run = run
        self._pending = 0
        self._idle_ticks = 0
        self._interval = interval = run.rules.decision_interval
        if not run.all_arrived and math.isfinite(interval):
            run.clock.at(run.clock.now + interval, self._on_periodic)

    def arrived(self, st: JobState, now: float) -> None:
        self.run.world.add_waiting(job_view(st.job, st.est, 0.0, None, None, None, (), None, 1.0, None))
        self._trigger(_ARRIVAL, now)

    def placed(self, st: JobState, true: float) -> None:
        self._idle_ticks = 0
        run = self.run
        st.event = run.clock.at(st.since + ((1.0 - st.done) * true + st.overhead), run.complete, st)

    def completed(self, st: JobState, now: float) -> None:
        self._trigger(_COMPLETION, now)

    def ready(self, node: NodeState, now: float) -> None:
        if self.run.world.waiting or node.jobs:
            self._trigger(_READY, now)

    def revoked(self, now: float) -> None:
        self._trigger(_REVOCATION, now)

    def available(self, now: float) -> None:
        self._trigger(_MARKET, now)

    def paced(self, st: JobState, now: float, slow: float) -> None:
        true = float(st.true[st.cfg])
        begin = st.since
        if now > begin:
            elapsed = now - begin
            if elapsed > st.overhead:
                st.done = min(1.0, st.done + (elapsed - st.overhead) / (true * st.slow))
                st.overhead = 0.0
            else:
                st.overhead -= elapsed
            begin = now
        st.slow = slow
        run = self.run
        if st.event is not None:
            run.clock.cancel(st.event)
        st.event = run.clock.at(begin + ((1.0 - st.done) * true * slow + st.overhead), run.complete, st)

    def _trigger(self, bit: int, now: float, last: bool = True) -> None:
        """Fold ``bit`` into the decision at ``now``, taken after every other event of this instant: at once if no
        other call is due at ``now`` and the calling event does nothing after (``last``), else as an event."""
        if self._pending:
            self._pending |= bit
            return
        self._pending = bit
        if last:
            self.run.clock.soon(self._decide, LAST)
        else:
            self.run.clock.at(now, self._on_decide, priority=LAST)

    def _on_periodic(self, call: Call) -> None:
        if self.run.all_done:
            if self._pending:
                self._pending |= _PERIODIC
            return
        self._trigger(_PERIODIC, call.time, last=False)
        self.run.clock.at(call.time + self._interval, self._on_periodic)

    def _on_decide(self, call: Call) -> None:
        self._decide(call.time)

    def _decide(self, now: float) -> None:
        mask, self._pending = self._pending, 0
        run = self.run
        run.decide(_TRIGGER_NAMES[mask], now)
        world = run.world
        if (world.waiting and not world.running and not self._pending and not run.booting and not run.waking
                and run.all_arrived):
            if math.isfinite(self._interval):
                # Periodic ticks are always pending: a policy may wait one tick, not two with nothing changing.
                self._idle_ticks += bool(mask & _PERIODIC)
                if self._idle_ticks < 2:
                    return
            run.decide("stall", now)
            if not world.running:
                raise run.stuck(now, "no event is pending")
