"""One run: a ``Task`` (scenario × policy × seed as plain data) and its ``Outcome`` (tables and summary row).

A ``Task`` carries plain data only (the scenario as validated data, the policy spec, the seed), so it pickles to any
worker; ``execute`` rebuilds the objects, runs the engine and returns plain DataFrames; ``run_task`` also encodes
them as the run's record (``running.records``) where the run ran. Only the caller writes files.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.scenario import PolicySpec, Scenario, build_policy

__all__ = ["Task", "Outcome", "execute", "run_task", "TABLES"]

TABLES = ("jobs", "nodes", "decisions", "segments")
"""The per-run record tables of ``sim.engine.RunResult`` that are stored (one row per job, node interval, decision,
run segment of a job on a node)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One simulation to run. ``labels`` are the leading columns of its rows (run id, grid values, policy, seed)."""

    run_id: str
    scenario: dict[str, Any]
    base_dir: str
    policy: dict[str, Any]
    seed: int
    labels: tuple[tuple[str, Any], ...] = ()
    scenario_id: str = ""
    """The hash of the resolved scenario without policy and seed: runs of one scenario share it (reports group by
    it, never pooling different scenarios)."""
    label_types: tuple[tuple[str, str], ...] = ()
    """The Arrow type (by name) of each grid label across the sweep, so every run's rows share one schema."""

    @staticmethod
    def make(sc: Scenario, policy: PolicySpec, seed: int, labels: Iterable[tuple[str, Any]] = (),
             run_id: str | None = None, label_types: tuple[tuple[str, str], ...] = (),
             shared: dict[Any, Any] | None = None) -> Task:
        """The task of ``policy`` and ``seed`` on ``sc`` (``run_id``: the run id when the caller has it already).
        ``shared``: a dict kept by a caller making many tasks, so tasks of one scenario and one policy share their
        plain data (a sweep of 20,000 seeds holds one copy, not 20,000)."""
        memo = shared if shared is not None else {}
        key = id(sc)
        if key not in memo:
            memo[key] = (sc, sc.model_dump(mode="python", exclude={"policies", "seeds"}, exclude_unset=False),
                         str(sc.base_dir), sc.scenario_id())
        _, data, base, scenario_id = memo[key]
        pkey = id(policy)
        if pkey not in memo:
            memo[pkey] = (policy, policy.model_dump())
        if run_id is None:
            rkey = (key, pkey)
            if rkey not in memo:
                memo[rkey] = sc.run_ids(policy)
            run_id = memo[rkey](seed)
        return Task(run_id, data, base, memo[pkey][1], seed, tuple(labels), scenario_id, label_types)

    def arrow_label_types(self) -> dict[str, Any]:
        """``label_types`` as Arrow types."""
        import pyarrow as pa

        return {k: pa.type_for_alias(v) for k, v in self.label_types}

    def scenario_obj(self) -> Scenario:
        return Scenario.model_validate(self.scenario).located(Path(self.base_dir))

    def config_json(self) -> str:
        """The run's configuration (scenario, policy as written and as built, seed) and the versions of the key
        packages where it ran, as JSON text, to record next to its results."""
        import json

        from experiments.running.versions import package_versions
        from experiments.scenario.components import resolved_policy

        resolved = resolved_policy(PolicySpec.model_validate(self.policy))
        return json.dumps({"scenario": self.scenario, "policy": self.policy, "policy_resolved": resolved,
                           "seed": self.seed, "versions": package_versions()}, sort_keys=True, default=str)

    @property
    def policy_label(self) -> str:
        return self.policy.get("name") or self.policy["kind"]


@dataclass
class Outcome:
    """What a task produced: its tables and summary row, or the error text when it failed."""

    task: Task
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    error: str | None = None
    wall: float = 0.0
    record: bytes | None = None
    """The run's record (``encoded``): its labelled tables as Arrow, what the result folder stores."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def encoded(self) -> Outcome:
        """This outcome with its record built and its frames dropped (what a worker sends back)."""
        if self.record is not None:
            return self
        from experiments.running.records import encode

        t = self.task
        error = None if self.ok else (self.error or "")
        try:
            blob = encode(t.run_id, t.scenario_id, _labels(t), t.config_json(), t.arrow_label_types(), self.summary,
                          self.tables, error)
        except Exception as e:  # noqa: BLE001 (a run whose tables cannot be stored is a failed run, not a crash)
            error = "its tables could not be stored:\n" + "".join(traceback.format_exception(e))
            blob = encode(t.run_id, t.scenario_id, _labels(t), t.config_json(), {}, error=error)
        return Outcome(t, error=error, wall=self.wall, record=blob)


def _labels(t: Task) -> list[tuple[str, Any]]:
    """The leading columns of a run's rows: run id, grid values, policy, seed."""
    return [("run_id", t.run_id), *t.labels, ("policy", t.policy_label), ("seed", t.seed)]


def execute(task: Task, single_thread: bool = False) -> Outcome:
    """Run one task to completion; never raises (a failure comes back as ``Outcome.error`` with the traceback)."""
    from sim.engine import Simulation

    t0 = time.perf_counter()
    try:
        sc = task.scenario_obj()
        spec = PolicySpec.model_validate(task.policy)
        sc = sc.for_policy(spec.kind)
        estimator, truth = sc.predictors()
        cluster = sc.build_cluster()
        jobs = sc.build_jobs(task.seed, truth, cluster.configs)
        policy = build_policy(spec, single_thread=single_thread)
        if "seed" in policy.param_names() and "seed" not in spec.params:  # seeded policies draw from the run's seed
            policy.set_params(seed=task.seed)
        told, true_pairs = sc.interference()
        result = Simulation(cluster, jobs, policy, estimator, truth, seed=task.seed, interference=told,
                            true_interference=true_pairs).run()
        bound = _lower_bound(jobs, cluster, truth)
    except BaseException as e:  # noqa: BLE001 (recorded and reported by the caller; the sweep goes on)
        if not isinstance(e, Exception):  # Ctrl-C, SIGTERM, exit: stop, do not record a failed run
            raise
        return Outcome(task, error="".join(traceback.format_exception(e)), wall=time.perf_counter() - t0)
    labels = _labels(task)
    tables = {name: getattr(result, name) for name in TABLES}
    summary = {k: v for k, v in labels}
    summary.update({k: (v.item() if hasattr(v, "item") else v) for k, v in result.summary.items()})
    summary.update(lower_bound=bound, bound_ratio=summary["total_cost"] / bound if bound > 0 else float("nan"))
    return Outcome(task, tables, summary, wall=time.perf_counter() - t0)


def run_task(task: Task, single_thread: bool = False) -> Outcome:
    """``execute`` and the run's record built here (in a worker: in parallel, and only bytes go back)."""
    return execute(task, single_thread).encoded()


BOUND_MAX_JOBS = 5000
"""Runs with more jobs get no lower bound (NaN): its LP grows with jobs × time intervals × configurations."""
BYTES_PER_JOB = 4096
"""Memory one job takes in a run (its spec, runtimes, the engine's state, its rows of the record tables): 2.8-3.7 KB
measured with FIFO on 6,000 and 24,000 jobs (peak RSS growth), rounded up."""
BOUND_BYTES_PER_JOB2 = 240
"""Memory of the lower bound's LP per job squared (its time intervals grow with the jobs): 920 MB measured at 2,000
jobs, rounded up."""
MEMORY_SHARE = 0.8
"""The share of the machine's memory one run may be expected to take before it is refused."""


def memory_needed(n_jobs: int) -> int:
    """Bytes a run of ``n_jobs`` jobs is expected to need at its peak (``BYTES_PER_JOB``, and the lower bound's LP
    up to ``BOUND_MAX_JOBS`` jobs)."""
    bound = BOUND_BYTES_PER_JOB2 * n_jobs * n_jobs if n_jobs <= BOUND_MAX_JOBS else 0
    return BYTES_PER_JOB * n_jobs + bound


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def memory_problem(n_jobs: int, limit: int | None = None) -> str | None:
    """Why a run of ``n_jobs`` jobs would not fit in memory (None when it would): the estimate and the limit."""
    total = machine_memory() if limit is None else limit
    if total is None:
        return None
    allowed = int(MEMORY_SHARE * total)
    need = memory_needed(n_jobs)
    if need <= allowed:
        return None
    fit = allowed // BYTES_PER_JOB
    return (f"{n_jobs:,} jobs need about {_size(need)} of memory in one run (about {BYTES_PER_JOB // 1024} KB "
            f"each{', and the lower bound' if n_jobs <= BOUND_MAX_JOBS else ''}), more than the "
            f"{_size(allowed)} a run may take here ({MEMORY_SHARE:.0%} of {_size(total)}): use at most about "
            f"{fit:,} jobs, or a machine with more memory")


def _size(n: int) -> str:
    for unit, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1024:,.0f} KB"


def _lower_bound(jobs: list[Any], cluster: Any, truth: Any) -> float:
    """The clairvoyant lower bound of ``optim.bound`` on this instance's cost, or NaN where it does not apply (fixed
    servers rent nothing; more than ``BOUND_MAX_JOBS`` jobs) or fails: a bound never costs a finished run. A job
    whose deadline is a placeholder weighs 0 in it, as its lateness does in the run's total cost."""
    import math
    from dataclasses import replace

    import numpy as np

    from optim.bound import instance_bound

    if not jobs or len(jobs) > BOUND_MAX_JOBS or any(getattr(s, "fixed", False) for s in cluster.slots):
        return math.nan
    jobs = [j if j.deadline_given else replace(j, weight=0.0) for j in jobs]
    try:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return float(instance_bound(jobs, cluster.configs, truth, [s.allowed for s in cluster.slots]))
    except Exception:  # noqa: BLE001 (the run's own results stand without it)
        return math.nan
