"""What an estimator that observes running jobs is shown (``Predictor.observes``; the ``online`` estimator).

At every decision, before the policy's snapshot is taken, each running job whose current run has done at least one
iteration is observed: its ``Progress`` (the configuration it runs on, the iterations it has done in all, and of this
run the iterations done and the seconds they took, after its VM was ready and any restart overhead) goes to the
estimator's ``refine``, whose answer becomes the job's estimates; its view is renewed with them, ``done`` = iterations
done / iterations and ``since`` = now, so ``JobView.remaining_at`` reads the time left from the refined estimate.

Nothing else is shown: an observer of a real job sees its iteration counter and the clock. In capsim a job trains at
a constant pace on one configuration (its true runtime over its iterations), so what is seen tells that pace; how far
a real window of iterations strays from the pace of the rest of the run is the estimator's to model
(``predictors.online``). A job lifted off its VM keeps the estimates last refined (they describe the configuration it
ran on), and ``done`` is then the work done, as without observation. Round mode observes at the round boundaries,
where the work of the round is credited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.model import JobView, Progress

if TYPE_CHECKING:
    from sim.contracts import Predictor
    from sim.state import World

__all__ = ["observe"]


def observe(world: World, now: float, estimator: Predictor, rounds: bool) -> None:
    """Show ``estimator`` the progress of every running job that has done an iteration in its current run, and renew
    its view with the refined estimates (module docstring)."""
    jobs = world.jobs
    for jid, jv in tuple(world.running.items()):
        st = jobs[jid]
        iterations = st.job.spec.iterations
        true = float(st.true[st.cfg])
        if rounds:
            total = st.steps
        else:
            worked = now - st.since - st.overhead
            if worked <= 0.0:
                continue
            total = min(iterations - 1, int((st.done + worked / true) * iterations + 1e-9))
        run = total - st.run_start
        if run < 1:
            continue
        seen = Progress(st.cfg, total, run, run * true / iterations, now)
        st.est = estimator.refine(st.job, st.est, seen)
        world.add_running(JobView(st.job, st.est, done=total / iterations, node=st.node, config=st.cfg, since=now,
                                  parts=jv.parts, progress=seen))
