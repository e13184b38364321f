"""Time models are components the simulation owns: the default follows the cluster's rules, and a new one plugs in
through ``Simulation(time=...)`` using only what ``sim.timing.Engine`` lists."""

from __future__ import annotations

import math

from sim.clock import LAST, Call
from sim.engine import Simulation
from sim.model import JobView
from sim.state import JobState, NodeState
from sim.timing import Engine, EventDriven, Rounds, TimeModel, default_time_model
from tests.sim.helpers import A, B, FirstFit, cluster, job, table


class Windowed(TimeModel):
    """Decisions merged over windows: anything that happens asks for a decision at the next multiple of
    ``window`` (as ElasticFlow's simulator decides once a minute); jobs run as in the event-driven model."""

    def __init__(self, window: float):
        self.window = window

    def start(self, run: Engine) -> None:
        self.run, self.due = run, math.nan

    def _soon(self, now: float) -> None:
        at = math.ceil(now / self.window) * self.window
        if at != self.due:
            self.due = at
            self.run.clock.at(at, self._decide, priority=LAST)

    def _decide(self, call: Call) -> None:
        self.due = math.nan
        self.run.decide("window", call.time)

    def arrived(self, st: JobState, now: float) -> None:
        self.run.world.add_waiting(JobView(st.job, st.est))
        self._soon(now)

    def placed(self, st: JobState, true: float) -> None:
        st.event = self.run.clock.at(st.since + (1.0 - st.done) * true + st.overhead, self.run.complete, st)

    def completed(self, st: JobState, now: float) -> None:
        self._soon(now)

    def ready(self, node: NodeState, now: float) -> None:
        self._soon(now)

    def revoked(self, now: float) -> None:
        self._soon(now)


def test_the_default_time_model_follows_the_rules():
    assert isinstance(default_time_model(cluster(1).rules), EventDriven)
    assert isinstance(default_time_model(cluster(1, round_length=60.0).rules), Rounds)
    assert isinstance(Simulation(cluster(1), [job(0, A, 0.0)], FirstFit(), table()).time, EventDriven)


def test_a_new_time_model_plugs_in():
    """A (100 s) arrives at 0 and starts at once (window 0); B (50 s) arrives at 10, is decided at 60 (the node is
    busy), A completes at 100, B starts at the next window, 120, ends at 170, and the idle VM stops at 180."""
    sim = Simulation(cluster(1), [job(0, A, 0.0), job(1, B, 10.0)], FirstFit(), table(), time=Windowed(60.0))
    for _ in range(2):  # a simulation runs again from scratch: the time model is reset by ``start``
        r = sim.run()
        assert list(r.decisions.time) == [0.0, 60.0, 120.0, 180.0]
        assert set(r.decisions.trigger) == {"window"}
        b = r.jobs.set_index("job_id").loc[1]
        assert (b.start_time, b.end_time) == (120.0, 170.0)
        assert list(r.nodes.stop_time) == [180.0] and r.summary["vm_cost"] == 0.18
