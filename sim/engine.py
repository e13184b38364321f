"""The discrete-event engine: jobs arrive, a policy decides, VMs bill, jobs run on their true runtimes.

``Simulation`` is one experiment: a cluster, jobs, a policy, an estimator (what the policy is told) and a truth (how
long jobs really take), and a time model (``sim.timing``: when the policy is asked and how placed jobs progress;
event-driven by default, rounds when the cluster's rules give a round length). Each ``run`` is a fresh ``sim.run.Run``
which applies the events and plans and keeps the records; the plan rules are those of ``sim.rules``.

Fixed servers (``NodeSlot.fixed``) run from the start of the run to its end. A gang (a job on several nodes) starts
and stops on all of them at once; each of its parts is a run segment on its node."""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sim.cluster import Cluster, NodeSlot
from sim.contracts import Interference, Policy, Predictor
from sim.elasticflow.vocabulary import ReplayPolicy
from sim.metrics import summarise
from sim.model import CapsimError, Job
from sim.records import DECISION_COLUMNS, JOB_COLUMNS, NODE_COLUMNS, SEGMENT_COLUMNS, Segments
from sim.run import Run
from sim.sharing import PairView, TruePairs
from sim.timing import TimeModel, default_time_model
from sim.vocabulary.mig import slice_speeds

__all__ = ["Simulation", "RunResult", "Cluster", "NodeSlot", "JOB_COLUMNS", "NODE_COLUMNS", "DECISION_COLUMNS",
           "SEGMENT_COLUMNS"]


@dataclass
class RunResult:
    """The records of one run: one row per job, per node interval and per decision, plus the summary metrics."""

    jobs: pd.DataFrame
    nodes: pd.DataFrame
    decisions: pd.DataFrame
    summary: dict[str, float]
    segments: pd.DataFrame = field(default_factory=lambda: Segments().frame())
    """One row per run segment of a job on a node (a job preempted or moved has several)."""


class Simulation:
    """One run of ``policy`` on ``cluster`` over ``jobs``; the estimator informs the policy, the truth runs the jobs.

    ``truth=None`` uses the estimator as the truth. The policy sees a configuration as infeasible (``inf``) where the
    job asks for another GPU count (``JobSpec.gpus``) and, for a policy without ``may_gang``, where only a gang fits.
    ``seed`` is the run's seed: the revocations of spot VMs are drawn from it (nothing else in the engine is random).
    ``time`` is the time model (``sim.timing``); None takes the one the cluster's rules ask for. A policy that declares
    ElasticFlow's time model (``Policy.time_model``, ``sim.elasticflow.vocabulary.ReplayPolicy``) runs on it instead
    (``sim.elasticflow.run``), and ``time`` must then be None.

    Where the cluster's rules let two jobs share a GPU (``ClusterRules.jobs_per_gpu`` 2), ``interference`` is the
    interference model the policy is told (``Snapshot.colocation``) and ``true_interference`` the one co-located jobs
    run by (None: the same); both are required there and refused elsewhere. Where A100 and H100 GPUs may be cut into
    MIG slices (``ClusterRules.mig``), jobs on slices run at the shipped slice speeds (``sim.vocabulary.mig``).
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policy: Policy, estimator: Predictor,
                 truth: Predictor | None = None, seed: int = 0, time: TimeModel | None = None,
                 interference: Interference | None = None, true_interference: Interference | None = None):
        self.cluster = cluster
        self.seed = seed
        self.policy = policy
        self._replay = _replayed(policy, time)
        self.estimator = estimator
        self.truth = truth if truth is not None else estimator
        self.time = time if time is not None else default_time_model(cluster.rules)
        self.jobs = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        self.interference = interference
        self.true_interference = true_interference if true_interference is not None else interference
        if cluster.rules.colocation != (interference is not None) or (true_interference is not None
                                                                     and interference is None):
            raise CapsimError("simulation: co-location needs both a cluster whose jobs_per_gpu is 2 and an "
                              f"interference model (jobs_per_gpu {cluster.rules.jobs_per_gpu}, interference model "
                              f"{'none' if interference is None else interference.describe()}); give both or neither")
        self._label = policy.describe()
        self._last: Run | None = None
        ids = set()
        for j in self.jobs:
            if j.id in ids:
                raise CapsimError(f"simulation: job id {j.id} appears twice; give every job a distinct id")
            ids.add(j.id)
            if not (math.isfinite(j.submit_time) and math.isfinite(j.deadline) and j.weight >= 0):
                raise CapsimError(
                    f"simulation: job {j.id} needs a finite submit_time and deadline and a weight >= 0, got "
                    f"submit {j.submit_time}, deadline {j.deadline}, weight {j.weight}"
                )
        if self._replay is not None:
            return  # ElasticFlow's time model reads the predictors itself (sim.elasticflow.run)
        configs = cluster.configs
        self._gang_only = np.array([c.gpus > c.vm.gpus for c in configs], dtype=bool)
        caps = cluster.placeable_gpus if cluster.rules.gang else {}
        self._unplaceable = np.array([c.gpus > max(c.vm.gpus, caps.get(c.vm.name, 0)) for c in configs], dtype=bool)
        self._gpu_counts = np.array([c.gpus for c in configs], dtype=int)
        true = self._cache(self.truth, masked=False) if self.truth is not self.estimator else None
        self._est = self._cache(self.estimator, masked=True, raw=true is None)
        if true is None:
            true, self._est = self._est, self._masked(self._est)
        self._true = true  # read as float(row[k]): times stay plain floats
        for spec, row in self._est.items():
            if not np.isfinite(row).any():
                asks = f", asks for {spec.gpus} GPUs" if spec.gpus is not None else ""
                raise CapsimError(
                    f"job spec {spec.name or spec.app_key!r} ({spec.application}, {spec.framework}, "
                    f"{spec.iterations} iterations, batch {spec.batch_size}{asks}) has no feasible configuration "
                    f"under the estimator {type(self.estimator).__name__}"
                    f"{'' if self.policy.may_gang or not self._gang_only.any() else ' for a policy without may_gang'}; "
                    f"remove it or add VM types it can run on"
                )

    def _cache(self, predictor: Predictor, masked: bool, raw: bool = False) -> dict[Any, np.ndarray]:
        """One read-only runtime row per distinct job spec, shared by every job of that spec; ``masked`` applies the
        policy's view (``_masked``) unless ``raw``, which returns the predictor's rows (to mask afterwards)."""
        specs = list(dict.fromkeys(j.spec for j in self.jobs))
        if not specs:
            return {}
        configs = self.cluster.configs
        table = np.array(predictor.runtimes(specs, configs), dtype=float)
        if table.shape != (len(specs), len(configs)):
            raise CapsimError(
                f"predictor {type(predictor).__name__}: runtimes() returned shape {table.shape}, expected "
                f"{(len(specs), len(configs))}"
            )
        table.setflags(write=False)
        out = dict(zip(specs, table))  # read-only row views of one table: no copy per spec
        return out if raw or not masked else self._masked(out)

    def _masked(self, rows: dict[Any, np.ndarray]) -> dict[Any, np.ndarray]:
        """The estimates a policy sees: ``inf`` where a job asks for another GPU count, where only a gang fits for a
        policy without ``may_gang``, and on configurations no slot can hold (``ClusterRules.unplaceable_gangs``) for a
        policy without ``prices_unplaceable``. Rows that need no mask are returned as they are (the same arrays)."""
        masks = [m for m, on in ((self._gang_only, not self.policy.may_gang),
                                 (self._unplaceable, not self.policy.prices_unplaceable))
                 if on and m.any()]
        base = np.logical_or.reduce(masks) if masks else None
        out = {}
        for spec, row in rows.items():
            hide = base
            if spec.gpus is not None:
                other = self._gpu_counts != spec.gpus
                hide = other if hide is None else hide | other
            if hide is not None and hide.any():
                row = np.where(hide, np.inf, row)
                row.setflags(write=False)
            out[spec] = row
        return out

    @property
    def events(self) -> int:
        """SimPy events processed by the last ``run`` (arrivals, completions, boots, ticks and decisions)."""
        return self._last.clock.calls if self._last is not None else 0

    def run(self) -> RunResult:
        """Simulate until every job has completed and return the records (a fresh run each time: same records)."""
        if self._replay is not None:
            from sim.elasticflow.run import run_replay

            t = run_replay(self.cluster, self.jobs, self._replay, self.estimator, self.truth, self._label)
            assert t.segments is not None
            return RunResult(t.jobs, t.nodes, t.decisions, summarise(t), t.segments)
        gc_was_on = gc.isenabled()
        gc.disable()  # full collections would walk every record kept so far; a run collects young ones
        try:
            pairs = view = None
            if self.interference is not None and self.true_interference is not None:
                pairs = TruePairs(self.true_interference, self.cluster.configs)
                view = PairView(self.interference, pairs)
            self._last = run = Run(self.cluster, self.jobs, self._est, self._true, self.policy, self.time,
                                   label=self._label, truth=type(self.truth).__name__, seed=self.seed,
                                   estimator=self.estimator, pairs=pairs, view=view,
                                   mig=slice_speeds() if self.cluster.rules.mig else None)
            tables = run.execute()
            segments = tables.segments if tables.segments is not None else Segments().frame()
            return RunResult(tables.jobs, tables.nodes, tables.decisions, summarise(tables), segments)
        finally:
            if gc_was_on:
                gc.enable()


def _replayed(policy: Policy, time: TimeModel | None) -> ReplayPolicy | None:
    """The policy if it runs on ElasticFlow's time model (its declared ``time_model``), else None; a CapsimError for
    a declaration the engine cannot honour."""
    if policy.time_model == "engine":
        return None
    if policy.time_model != "elasticflow" or not isinstance(policy, ReplayPolicy):
        raise CapsimError(f"policy {policy.describe()!r} declares time_model {policy.time_model!r}; the engine runs "
                          f"'engine' (decide(Snapshot)) and 'elasticflow' (a sim.elasticflow.vocabulary.ReplayPolicy)")
    if time is not None:
        raise CapsimError(f"policy {policy.describe()!r} runs on ElasticFlow's time model; the simulation was also "
                          f"given the time model {type(time).__name__}: give none")
    return policy
