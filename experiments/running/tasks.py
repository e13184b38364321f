"""One run: a ``Task`` (scenario × policy × seed as plain data) and its ``Outcome`` (tables and summary row).

A ``Task`` carries plain data only (the scenario as validated data, the policy spec, the seed), so it pickles to any
worker; ``execute`` rebuilds the objects, runs the engine and returns plain DataFrames. Only the caller writes files.
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

__all__ = ["Task", "Outcome", "execute", "TABLES"]

TABLES = ("jobs", "nodes", "decisions", "segments")
"""The per-run record tables of ``sim.engine.RunResult`` that are stored (one row per job, node interval, decision,
run segment of a job on a node)."""


@dataclass(frozen=True)
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

    @staticmethod
    def make(sc: Scenario, policy: PolicySpec, seed: int, labels: Iterable[tuple[str, Any]] = (),
             run_id: str | None = None) -> Task:
        """The task of ``policy`` and ``seed`` on ``sc`` (``run_id``: the run id when the caller has it already)."""
        data = sc.model_dump(mode="python", exclude={"policies", "seeds"}, exclude_unset=False)
        return Task(run_id or sc.run_id(policy, seed), data, str(sc.base_dir), policy.model_dump(), seed,
                    tuple(labels), sc.scenario_id())

    def scenario_obj(self) -> Scenario:
        return Scenario.model_validate(self.scenario).located(Path(self.base_dir))

    def config_json(self) -> str:
        """The run's configuration (scenario, policy, seed) as JSON text, to record next to its results."""
        import json

        return json.dumps({"scenario": self.scenario, "policy": self.policy, "seed": self.seed}, sort_keys=True,
                          default=str)

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

    @property
    def ok(self) -> bool:
        return self.error is None


def _label(df: pd.DataFrame, labels: list[tuple[str, Any]]) -> pd.DataFrame:
    df = df.reset_index(drop=True).copy()
    for i, (k, v) in enumerate(labels):
        if k in df.columns:
            df = df.drop(columns=k)
        df.insert(i, k, [v] * len(df))
    return df


def execute(task: Task, single_thread: bool = False) -> Outcome:
    """Run one task to completion; never raises (a failure comes back as ``Outcome.error`` with the traceback)."""
    from sim.engine import Simulation

    t0 = time.perf_counter()
    try:
        sc = task.scenario_obj()
        spec = PolicySpec.model_validate(task.policy)
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
    labels = [("run_id", task.run_id), *task.labels, ("policy", task.policy_label), ("seed", task.seed)]
    tables = {name: _label(getattr(result, name), labels) for name in TABLES}
    summary = {k: v for k, v in labels}
    summary.update({k: (v.item() if hasattr(v, "item") else v) for k, v in result.summary.items()})
    summary.update(lower_bound=bound, bound_ratio=summary["total_cost"] / bound if bound > 0 else float("nan"))
    return Outcome(task, tables, summary, wall=time.perf_counter() - t0)


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
    servers rent nothing; more than ``BOUND_MAX_JOBS`` jobs) or fails: a bound never costs a finished run."""
    import math

    import numpy as np

    from optim.bound import instance_bound

    if not jobs or len(jobs) > BOUND_MAX_JOBS or any(getattr(s, "fixed", False) for s in cluster.slots):
        return math.nan
    try:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return float(instance_bound(jobs, cluster.configs, truth, [s.allowed for s in cluster.slots]))
    except Exception:  # noqa: BLE001 (the run's own results stand without it)
        return math.nan
