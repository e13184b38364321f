"""Time models: when a run's policy decides, and how the work of a placed job is scheduled.

A simulation owns one time model (``Simulation(..., time=...)``; by default ``Rounds`` when the cluster's rules give
a round length, else ``EventDriven``). The run (``sim.run.Run``) applies every event itself (arrivals, completions,
boots ending, revocations, plans) and tells its time model through the hooks of ``TimeModel``; the time model
answers by asking the policy (``Engine.decide``) when it sees fit and by scheduling each placed job's work. A new time
model (decisions merged over a window, co-located jobs sharing GPUs, ...) is one subclass here, using only what
``Engine`` lists. A policy that declares ElasticFlow's time model (``Policy.time_model``) runs on ``sim.elasticflow``
instead, not through a ``Run`` (docs/elasticflow.md says why).
"""

from __future__ import annotations

from sim.model import ClusterRules
from sim.timing.base import Engine, TimeModel
from sim.timing.events import EventDriven
from sim.timing.rounds import Rounds

__all__ = ["Engine", "TimeModel", "EventDriven", "Rounds", "default_time_model"]


def default_time_model(rules: ClusterRules) -> TimeModel:
    """The time model a cluster's rules ask for: rounds when they give a round length, else event-driven."""
    return Rounds() if rules.rounds else EventDriven()
