"""Round mode: the engine's decision points and job progress when ``ClusterRules.round_length`` R is finite (Gavel's
round-based scheduling, as Gavel's simulator runs it; see ``docs/gavel.md``).

- Decisions happen only at round boundaries (trigger ``round``). A job that arrives waits for the first boundary at
  or after its arrival; when no round is under way, its arrival time is a boundary.
- At a boundary every running job is settled (its round's work credited and its view renewed: ``since`` = the
  boundary, ``done`` = the work done), the jobs that arrived are admitted, the policy decides, and every running job
  is given its round's micro-task: as many whole iterations as fit in R seconds after any boot and restart overhead
  (at least one, at most what is left).
- The round ends when its slowest micro-task ends, which is the next boundary. A job that finishes earlier completes
  at its own finish time, and its GPUs stay idle until the round ends: no backfilling inside a round.
- A job the plan leaves alone keeps its GPUs into the next round (a lease extension, free of charge); one preempted
  or moved pays the cluster's ``restart_overhead`` when it runs again (0 in Gavel).
- When no job runs, the next boundary is the next arrival; if none is left while jobs wait, a ``stall`` decision.

- Co-located jobs (``ClusterRules.jobs_per_gpu`` 2) run as one micro-task, as Gavel packs a pair: each member does
  the whole iterations that fit at its co-located pace, and the pair's micro-task ends when the later member ends;
  a member whose last iterations these are completes then, not at its own end. A partner's arrival or departure
  changes the pace from the next micro-task on (a survivor's share stays idle until the round ends).

Spot VMs are not modelled in round mode (``Cluster`` refuses them), so no revocation reaches this model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.clock import LAST, Call
from sim.state import job_view
from sim.timing.base import Engine, TimeModel

if TYPE_CHECKING:
    from sim.state import JobState, NodeState

__all__ = ["Rounds"]


class Rounds(TimeModel):
    """Round-based decisions and whole-iteration progress (see the module docstring)."""

    def start(self, run: Engine) -> None:
        self.run = run
        self._length = run.rules.round_length
        self._arrived: list[JobState] = []
        self._boundary = False

    def arrived(self, st: JobState, now: float) -> None:
        """Queue an arrived job for the next boundary; with no round under way, that boundary is now."""
        self._arrived.append(st)
        if not self._boundary:
            self._boundary = True
            self.run.clock.at(now, self._on_boundary, priority=LAST)

    def placed(self, st: JobState, true: float) -> None:
        pass  # the round's dispatch gives it its micro-task

    def completed(self, st: JobState, now: float) -> None:
        pass  # the next boundary is the end of the round's slowest micro-task

    def ready(self, node: NodeState, now: float) -> None:
        pass  # a micro-task already starts when its VM is ready

    def revoked(self, now: float) -> None:
        raise AssertionError("round mode has no spot VMs")

    def available(self, now: float) -> None:
        raise AssertionError("round mode has no spot VMs")

    def paced(self, st: JobState, now: float, slow: float) -> None:
        st.slow = slow  # the micro-task under way keeps its pace; the next one takes the new

    def _on_boundary(self, call: Call) -> None:
        now = call.time
        self._boundary = False
        run = self.run
        world = run.world
        jobs = world.jobs
        for jid, jv in tuple(world.running.items()):
            st = jobs[jid]
            if st.pending:
                st.steps += st.pending
                st.pending = 0
                st.done = st.steps / st.job.spec.iterations
            world.add_running(job_view(st.job, st.est, st.done, st.node, st.cfg, now, jv.parts, jv.partner, jv.pace,
                                       jv.slice))
        for st in self._arrived:
            world.add_waiting(job_view(st.job, st.est, st.done))
        self._arrived.clear()
        if run.all_done:
            return  # the last jobs just completed: nothing is left to decide
        run.decide("round", now)
        self._dispatch(now)
        if not world.running and world.waiting and run.all_arrived:
            run.decide("stall", now)
            self._dispatch(now)
            if not world.running:
                raise run.stuck(now, "no job is yet to arrive")

    def _dispatch(self, now: float) -> None:
        """Give every running job its micro-task for the round that starts at ``now``; schedule the round's end."""
        length = self._length
        run = self.run
        jobs = run.world.jobs
        clock = run.clock
        end_max = -1.0
        for jid in run.world.running:
            st = jobs[jid]
            if st.event is not None or st.pending:
                continue  # already given its micro-task for this round
            mate = st.partner
            steps, end = _microtask(st, now, length)
            if mate is not None:  # one micro-task for the pair, ending with its later member
                mate_steps, mate_end = _microtask(mate, now, length)
                end = max(end, mate_end)
                _finish(mate, mate_steps, end, run)
            _finish(st, steps, end, run)
            if end > end_max:
                end_max = end
        if end_max >= 0.0 and not self._boundary:
            self._boundary = True
            clock.at(end_max, self._on_boundary, priority=LAST)


def _microtask(st: JobState, now: float, length: float) -> tuple[int, float]:
    """The whole iterations job ``st`` does in the round that starts at ``now`` (at its pace, after any boot and
    restart overhead; at least one, at most what is left) and when they end."""
    start = st.since if st.since > now else now
    iterations = st.job.spec.iterations
    true = float(st.true[st.cfg]) * st.slow
    left = iterations - st.steps
    room = length - (start - now) - st.overhead
    steps = int(room * iterations / true) if room > 0 else 0
    steps = 1 if steps < 1 else left if steps > left else steps
    end = start + st.overhead + steps * true / iterations
    st.overhead = 0.0
    return steps, end


def _finish(st: JobState, steps: int, end: float, run: Engine) -> None:
    """Give job ``st`` its micro-task of ``steps`` iterations ending at ``end``: its completion if they are its last."""
    if steps == st.job.spec.iterations - st.steps:
        st.final = steps
        st.event = run.clock.at(end, run.complete, st)
    else:
        st.pending = steps
