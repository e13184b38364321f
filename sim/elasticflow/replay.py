"""Run one replay: the policy's clock (``sim.elasticflow.vocabulary``) over the trace's jobs, and the decision log."""

from __future__ import annotations

from sim.elasticflow.state import Log, Run
from sim.elasticflow.vocabulary import ReplayCluster, ReplayJob, ReplayPolicy
from sim.model import CapsimError

__all__ = ["Log", "replay"]


def replay(jobs: list[ReplayJob], cluster: ReplayCluster, policy: ReplayPolicy,
           true_rates: list[tuple[float, ...]] | None = None) -> tuple[list[Run], Log]:
    """Replay ``jobs`` (in submission order) on ``cluster`` under ``policy``; every job ends done or rejected. The jobs
    progress at ``true_rates`` (per job and level) where given, else at the rates the policy is told."""
    from sim.elasticflow.elastic import run_elastic
    from sim.elasticflow.rigid import run_las, run_lease
    from sim.elasticflow.slices import run_slices

    runs = [Run(j, None if true_rates is None else true_rates[k]) for k, j in enumerate(jobs)]
    log = Log(cluster.gpus)
    policy.reset(cluster)
    clocks = {"elastic": run_elastic, "las": run_las, "lease": run_lease, "slices": run_slices}
    clock = getattr(policy, "clock", None)
    if clock not in clocks:
        raise CapsimError(f"policy {policy.describe()!r} declares clock {clock!r}; expected one of {sorted(clocks)}")
    if runs:
        clocks[clock](runs, cluster, policy, log)
    for r in runs:
        if r.status not in ("done", "rejected"):
            raise CapsimError(f"policy {policy.describe()!r} left job {r.id} {r.status} when the replay ended")
    return runs, log
