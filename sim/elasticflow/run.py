"""A replay as a run of the engine: ElasticFlow's time model on a homogeneous cluster of fixed servers, its records
in the engine's tables (``sim.records``) so that every report, figure and metric reads it like any other run.

The cluster must be fixed servers of one VM type (``servers: "32x8"`` with ``gpu:``). A job's throughput on g GPUs
(a level of ``sim.elasticflow.vocabulary.LEVELS``) is its iterations over the predictor's runtime there: the
estimator's for what the policy is told, the truth's for how the job progresses. Every job also needs the seconds it
ran in its trace (``Job.duration``, an ElasticFlow trace's ``duration`` column), the work of the rigid policies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.elasticflow.replay import Log, replay
from sim.elasticflow.state import Run
from sim.elasticflow.vocabulary import LEVELS, ReplayCluster, ReplayJob, ReplayPolicy
from sim.metrics import RunTables
from sim.model import CapsimError, DecisionInfo, Job, VMType
from sim.records import Decisions, Jobs, Nodes, Segments

if TYPE_CHECKING:
    from sim.cluster import Cluster
    from sim.contracts import Predictor

__all__ = ["run_replay", "replay_cluster"]


def replay_cluster(cluster: Cluster) -> tuple[ReplayCluster, VMType]:
    """The replay cluster of ``cluster`` (fixed servers of one VM type), or a CapsimError saying what is wrong."""
    if not cluster.slots or not all(s.fixed for s in cluster.slots) or len(cluster.vm_types) != 1:
        raise CapsimError("ElasticFlow's policies replay a homogeneous cluster of fixed servers: give the scenario "
                          "`cluster: {servers: \"32x8\", gpu: A100-40GB}` (N servers x G GPUs of one GPU model)")
    vm = cluster.vm_types[0]
    return ReplayCluster(len(cluster.slots), vm.gpus, vm.gpu.name), vm


def _rates(predictor: Predictor, job: Job, vm: VMType) -> tuple[float, ...]:
    spec = job.spec
    out = []
    for g in LEVELS:
        t = predictor.runtime(spec, VMType(vm.name, vm.gpu, max(g, vm.gpus), vm.price_per_hour), g)
        out.append(spec.iterations / t if math.isfinite(t) and t > 0 else 0.0)
    if not any(out):
        raise CapsimError(f"job {job.id} ({spec.name or spec.application}, batch {spec.batch_size}): the predictor "
                          f"{predictor.describe()} gives no throughput on {vm.gpu.name} at any GPU count; "
                          f"ElasticFlow's tables cover A100-40GB and T4 (`predictor: {{kind: throughput, table: "
                          f"elasticflow}}`)")
    return tuple(out)


def run_replay(cluster: Cluster, jobs: Sequence[Job], policy: ReplayPolicy, estimator: Predictor,
               truth: Predictor, label: str) -> RunTables:
    """Replay ``jobs`` under ``policy`` and return the run's records (the engine adds the summary)."""
    rc, vm = replay_cluster(cluster)
    told: list[ReplayJob] = []
    true: list[tuple[float, ...]] = []
    cache: dict[tuple[object, bool], tuple[float, ...]] = {}
    for j in jobs:
        if j.duration is None:
            raise CapsimError(f"job {j.id} ({j.spec.name}) has no trace duration: ElasticFlow's policies replay "
                              f"traces that record how long each job ran (an ElasticFlow trace's `duration` column)")
        if j.spec.gpus is None:
            raise CapsimError(f"job {j.id} ({j.spec.name}) asks for no GPU count: read ElasticFlow traces with "
                              f"`elastic: false` (the default) so the rigid policies know each job's request")
        for key, pred in (((j.spec, False), estimator), ((j.spec, True), truth)):
            if key not in cache:
                cache[key] = _rates(pred, j, vm)
        told.append(ReplayJob(j.id, j.spec.name, j.spec.application, j.spec.batch_size, j.submit_time, j.deadline,
                              int(j.spec.gpus), float(j.duration), float(j.spec.iterations), cache[(j.spec, False)]))
        true.append(cache[(j.spec, True)])
    runs, log = replay(told, rc, policy, true if truth is not estimator else None)
    rate = cluster.rules.owned_price_per_hour.get(vm.name, vm.price_per_hour)
    return RunTables(_jobs(runs, jobs, vm, estimator).frame(), _nodes(runs, rc, vm, rate).frame(),
                     _decisions(log, label).frame(), _segments(runs, vm).frame())


def _jobs(runs: list[Run], jobs: Sequence[Job], vm: VMType, estimator: Predictor) -> Jobs:
    t = Jobs()
    sources: dict[tuple[object, int], tuple[str, float]] = {}
    for r, j in zip(runs, jobs):
        s = j.spec
        done = r.status == "done"
        end = r.finish if done else math.nan
        t.job_id.append(j.id)
        t.name.append(s.name)
        t.application.append(s.application)
        t.framework.append(s.framework)
        t.iterations.append(s.iterations)
        t.batch_size.append(s.batch_size)
        t.submit_time.append(j.submit_time)
        t.start_time.append(r.start)
        t.end_time.append(end)
        t.deadline.append(j.deadline)
        t.weight.append(j.weight)
        t.vm_type.append(vm.name)
        t.gpus.append(r.final_gpus)
        t.node.append(r.node)
        t.runs.append(len(r.segments))
        t.wait_time.append(r.start - j.submit_time)
        t.jct.append(end - j.submit_time)
        late = max(0.0, end - j.deadline) if done else math.nan
        t.lateness.append(late)
        t.tardiness_cost.append(j.weight * late if done else math.nan)
        t.cost_share.append(0.0)
        g = r.final_gpus or j.spec.gpus or 1
        rate = r.true_rate(g) if g in LEVELS else 0.0
        t.est_runtime.append(s.iterations / rate if rate > 0 else math.inf)
        if (s, g) not in sources:
            src = estimator.source(s, vm, g)
            sources[(s, g)] = (src.kind, src.error)
        t.est_source.append(sources[(s, g)][0])
        t.est_error.append(sources[(s, g)][1])
        t.true_runtime.append(s.iterations / rate if rate > 0 else math.inf)
        t.final_round_iterations.append(None)
        t.revocations.append(0)
        t.lost_gpu_seconds.append(0.0)
        t.status.append("rejected" if not done else "on_time" if r.on_time else "late")
        t.gpu_request.append(Jobs.request(s))
    t.without_placeholders(jobs)
    return t


def _segments(runs: list[Run], vm: VMType) -> Segments:
    t = Segments()
    for r in runs:
        for node, gpus, start, end in r.segments:
            t.job_id.append(r.id)
            t.node.append(node)
            t.vm_type.append(vm.name)
            t.gpus.append(gpus)
            t.start_time.append(start)
            t.end_time.append(end)
            t.done.append(1.0 if end == r.finish else math.nan)
            t.partner.append(None)
    return t


def _nodes(runs: list[Run], rc: ReplayCluster, vm: VMType, rate: float) -> Nodes:
    """One interval per server, from the first arrival to the last completion (fixed servers are always on), billed
    that time at ``rate`` $ per hour (an owned server's amortised rate, ``ClusterRules.owned_price_per_hour``)."""
    t = Nodes()
    if not runs:
        return t
    start = min(r.job.submit for r in runs)
    ends = [r.finish for r in runs if r.status == "done"]
    stop = max(ends) if ends else start
    busy = np.zeros(rc.servers)
    per = rc.gpus_per_server
    for r in runs:
        for node, gpus, a, b in r.segments:
            first = max(node, 0)
            for k in range(max(1, math.ceil(gpus / per))):
                if first + k < rc.servers:
                    busy[first + k] += min(per, gpus - k * per) * (b - a)
    for n in range(rc.servers):
        billed = stop - start
        t.node.append(n)
        t.vm_type.append(vm.name)
        t.gpus.append(per)
        t.price_per_hour.append(rate)
        t.start_time.append(start)
        t.ready_time.append(start)
        t.stop_time.append(stop)
        t.billed_seconds.append(billed)
        t.cost.append(billed * rate / 3600.0)
        t.busy_gpu_seconds.append(float(busy[n]))
        t.jobs.append(0)
        t.spot.append(False)
        t.revoked.append(False)
    return t


_DECIDED = DecisionInfo()
"""Every replayed decision's info: status ok, no solver."""


def _decisions(log: Log, label: str) -> Decisions:
    t = Decisions()
    for now, trigger, runnable, running, started, wall in log.rows:
        t.decision.append(len(t.decision))
        t.time.append(now)
        t.trigger.append(trigger)
        t.policy.append(label)
        t.info.append(_DECIDED)
        t.waiting.append(runnable - running)
        t.running.append(running)
        t.started.append(started)
        t.preempted.append(0)
        t.moved.append(0)
        t.wall_time.append(wall)
    return t
