"""The time model contract: the hooks a time model provides (``TimeModel``) and what it may use of the run it drives
(``Engine``). See ``sim.timing``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sim.clock import Call, Clock
    from sim.model import CapsimError, ClusterRules
    from sim.state import JobState, NodeState, World

__all__ = ["Engine", "TimeModel"]


class Engine(Protocol):
    """What a time model may use of the run it drives (``sim.run.Run`` provides it).

    ``clock`` schedules callbacks; ``world`` holds the jobs (``world.jobs``, ``world.waiting``, ``world.running``) and
    nodes; ``rules`` are the cluster's rules; ``label`` names the policy in messages; ``booting`` counts VMs still
    booting, ``waking`` the spot markets due to supply VMs again while jobs wait. ``decide`` asks the policy now and
    applies its plan; ``complete`` is the callback that ends a job (schedule it with the job's ``JobState`` as value
    when its work is done); ``stuck`` makes the error of a policy that leaves jobs waiting forever.
    """

    clock: Clock
    world: World
    rules: ClusterRules
    label: str
    booting: int

    @property
    def waking(self) -> int: ...

    @property
    def all_arrived(self) -> bool: ...

    @property
    def all_done(self) -> bool: ...

    def decide(self, trigger: str, now: float) -> None: ...

    def complete(self, call: Call) -> None: ...

    def stuck(self, now: float, why: str) -> CapsimError: ...


class TimeModel:
    """Decides when the policy is asked and schedules the work of placed jobs. A subclass provides every hook:

    - ``start(run)``: a run begins (its first arrival, if any, is scheduled); keep ``run`` and reset any state
      (a simulation may run again).
    - ``arrived(st, now)``: job ``st`` (a ``JobState``) arrived; it is not yet waiting: add its ``JobView`` to
      ``run.world`` (``add_waiting``) when the policy may see it.
    - ``placed(st, true)``: the run put job ``st`` on its nodes (``st.since``, ``st.overhead``, ``st.cfg`` are set;
      ``true`` is its whole runtime there); schedule its work, e.g. ``st.event = run.clock.at(end, run.complete, st)``.
    - ``completed(st, now)``: job ``st`` completed (it has left its nodes).
    - ``ready(node, now)``: the VM of ``node`` (a ``NodeState``) finished booting.
    - ``revoked(now)``: a spot VM was revoked; its jobs wait again.
    - ``available(now)``: a recorded spot market can supply VMs again while jobs wait (``sim.spot_market``).

    The run calls ``arrived``, ``completed``, ``ready``, ``revoked`` and ``available`` as the last act of the event
    that caused them, so a model may decide within the hook, as if in an event of its own processed next, when no
    other call is due at ``now`` (``Clock.soon``).
    - ``paced(st, now, slow)``: running job ``st`` runs ``slow`` times slower than alone from ``now`` on (a partner
      started on its GPUs or left them: co-location, ``ClusterRules.jobs_per_gpu``); ``st.slow`` is still the old
      pace. Account the work done at the old pace as the model counts it, set ``st.slow = slow`` and reschedule the
      rest; leave ``st.since`` to the run (it starts a new run segment at ``now``). Only runs where GPUs may be shared
      call it.
    """

    def start(self, run: Engine) -> None:
        raise NotImplementedError(self)

    def arrived(self, st: JobState, now: float) -> None:
        raise NotImplementedError(self)

    def placed(self, st: JobState, true: float) -> None:
        raise NotImplementedError(self)

    def completed(self, st: JobState, now: float) -> None:
        raise NotImplementedError(self)

    def ready(self, node: NodeState, now: float) -> None:
        raise NotImplementedError(self)

    def revoked(self, now: float) -> None:
        raise NotImplementedError(self)

    def available(self, now: float) -> None:
        raise NotImplementedError(self)

    def paced(self, st: JobState, now: float, slow: float) -> None:
        raise NotImplementedError(self)
