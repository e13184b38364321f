"""Every run metric declared once: name, label, unit, digits, domain, and how it is computed from a run's tables.

The engine's summary, ``capsim run``'s table, ``capsim report``, the plots and recomputation on an existing results
folder all read these declarations, so a new metric is one ``Metric`` entry here. ``compute`` receives the run's
``RunTables`` (per-job, per-node-interval, per-decision and, when present, per-segment rows) and returns a float.

Floor module: it imports nothing of the project but the vocabulary. Sums that the engine used to accumulate one event
at a time are computed in the same order (``_ordered_sum``), so the numbers are bit-identical to the records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Metric", "RunTables", "METRICS", "HEADLINE", "HEADLINES", "NO_DEADLINE", "metric", "summarise",
           "label_with_unit"]


@dataclass(frozen=True)
class RunTables:
    """The records of one run (or of many runs' rows filtered to one run). ``segments`` may be ``None`` for results
    written before segments were recorded; metrics that prefer segments then fall back to the node table."""

    jobs: pd.DataFrame
    nodes: pd.DataFrame
    decisions: pd.DataFrame
    segments: pd.DataFrame | None = None


@dataclass(frozen=True)
class Metric:
    """One summary metric of a run.

    ``unit`` is shown in axis labels and table headers (``$``, ``s``, ``jobs``, empty for a ratio); ``digits`` is the
    number of decimals in tables; ``lower``/``upper`` bound its domain (confidence intervals are clipped to it);
    ``better`` is ``lower`` or ``higher`` (or ``None`` for a count that is neither). ``compute`` is ``None`` for a
    metric of the instance rather than of the run's tables (the lower bound), which the runner adds to the summary.
    """

    name: str
    label: str
    unit: str
    digits: int
    compute: Callable[[RunTables], float] | None
    lower: float | None = 0.0
    upper: float | None = None
    better: str | None = "lower"
    description: str = ""

    def axis_label(self) -> str:
        return label_with_unit(self.label, self.unit)


def label_with_unit(label: str, unit: str) -> str:
    """``total cost ($)``; the bare label for a unitless quantity or one whose label ends with its unit
    (``late jobs``, not ``late jobs (jobs)``)."""
    return f"{label} ({unit})" if unit and label.split()[-1] != unit else label


def _ordered_sum(values: Iterable[float] | np.ndarray) -> float:
    """Left-to-right sum (as an event-by-event accumulator would give), not numpy's pairwise one."""
    arr = np.asarray(values, dtype=float)
    return float(np.cumsum(arr)[-1]) if arr.size else 0.0


def _busy_gpu_seconds(t: RunTables) -> float:
    """GPU-seconds some job held (a GPU two co-located jobs shared counts once, a MIG slice its compute share)."""
    if t.segments is not None:
        s = t.segments
        held = s["gpus"].to_numpy(dtype=float) * (s["end_time"].to_numpy() - s["start_time"].to_numpy())
        shared = _shared(s)
        if "slice" in s.columns and s["slice"].notna().any():  # "0/3g.20gb@4": 3 of the GPU's 7 compute slices
            held = held * s["slice"].map(lambda x: int(x.split("/")[1][0]) / 7 if isinstance(x, str) else 1.0)
            held = held.to_numpy(dtype=float)
        return _ordered_sum(held if shared is None else np.where(shared, 0.5 * held, held))
    return _ordered_sum(t.nodes["busy_gpu_seconds"].to_numpy())


def _shared(segments: pd.DataFrame) -> np.ndarray | None:
    """Which segments ran co-located (a partner on the same GPUs); None when none did or the records predate it."""
    if "partner" not in segments.columns:
        return None
    shared = segments["partner"].notna().to_numpy()
    return shared if shared.any() else None


def _colocated_share(t: RunTables) -> float:
    s = t.segments
    if s is None or len(s) == 0:
        return 0.0
    shared = _shared(s)
    if shared is None:
        return 0.0
    held = s["gpus"].to_numpy(dtype=float) * (s["end_time"].to_numpy() - s["start_time"].to_numpy())
    total = float(held.sum())
    return float(held[shared].sum()) / total if total > 0 else 0.0


def _vm_cost(t: RunTables) -> float:
    return float(t.nodes["cost"].sum())


def _no_deadlines(t: RunTables) -> bool:
    """Whether no job of the run has a deadline from its workload (its jobs table's deadlines are all NaN): then no
    deadline metric applies. A run without jobs keeps its zeros."""
    d = t.jobs.get("deadline")
    return d is not None and len(d) > 0 and bool(d.isna().all())


def _deadline_metric(compute: Callable[[RunTables], float]) -> Callable[[RunTables], float]:
    """``compute`` over the jobs that have a deadline; NaN when none has."""
    return lambda t: math.nan if _no_deadlines(t) else compute(t)


def _tardiness(t: RunTables) -> float:
    return float(t.jobs["tardiness_cost"].sum())


def _total_cost(t: RunTables) -> float:
    return _vm_cost(t) + (0.0 if _no_deadlines(t) else _tardiness(t))


def _idle_cost(t: RunTables) -> float:
    n = t.nodes
    return _ordered_sum(n["cost"].to_numpy()[n["jobs"].to_numpy() == 0])


def _mean_of(values: np.ndarray) -> float:
    """The mean over the jobs that have a value (a rejected job has no completion time or lateness)."""
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else 0.0


def _p95_of(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, 95)) if len(values) else 0.0


def _jct(t: RunTables) -> np.ndarray:
    return t.jobs["jct"].to_numpy()


def _mean_wait(t: RunTables) -> float:
    return float(t.jobs["wait_time"].mean()) if len(t.jobs) else 0.0


def _makespan(t: RunTables) -> float:
    j = t.jobs
    return float(j["end_time"].max() - j["submit_time"].min()) if len(j) else 0.0


def _utilisation(t: RunTables) -> float:
    n = t.nodes
    billed = float((n["billed_seconds"] * n["gpus"]).sum())
    return float(_busy_gpu_seconds(t) / billed) if billed > 0 else 0.0


def _lateness(t: RunTables) -> np.ndarray:
    """Each job's lateness, max(0, end − deadline) in seconds (0 for a job that ended by its deadline)."""
    return t.jobs["lateness"].to_numpy(dtype=float)


def _deadline_met(t: RunTables) -> float:
    j = t.jobs[t.jobs["deadline"].notna().to_numpy()] if "deadline" in t.jobs.columns else t.jobs
    if "status" in j.columns:
        return float((j["status"] == "on_time").mean()) if len(j) else math.nan
    late = j["lateness"].to_numpy(dtype=float)
    return float((late <= 0).mean()) if len(late) else math.nan


def _rejected(t: RunTables) -> float:
    j = t.jobs
    return float((j["status"] == "rejected").sum()) if "status" in j.columns else 0.0


def _gavel_drops(t: RunTables) -> np.ndarray:
    """Jobs Gavel would drop: their last round ran fewer iterations than they have GPUs (round mode only)."""
    j = t.jobs
    if "final_round_iterations" not in j.columns:
        return np.zeros(len(j), dtype=bool)
    last = j["final_round_iterations"].to_numpy(dtype=float, na_value=np.nan)
    return np.nan_to_num(last, nan=np.inf) < j["gpus"].to_numpy(dtype=float)


def _gavel_mean_jct(t: RunTables) -> float:
    jct = t.jobs["jct"].to_numpy()[~_gavel_drops(t)]
    return float(jct.mean()) if len(jct) else 0.0


def _gavel_makespan(t: RunTables) -> float:
    return float(t.jobs["end_time"].max()) if len(t.jobs) else 0.0


def _gavel_utilisation(t: RunTables) -> float:
    n = t.nodes
    gpus = float(n.groupby("node")["gpus"].max().sum()) if len(n) else 0.0
    span = _gavel_makespan(t)
    return float(_busy_gpu_seconds(t) / (gpus * span)) if gpus > 0 and span > 0 else 0.0


def _revocations(t: RunTables) -> float:
    n = t.nodes
    return float(n["revoked"].sum()) if "revoked" in n.columns else 0.0


def _lost_gpu_hours(t: RunTables) -> float:
    j = t.jobs
    return _ordered_sum(j["lost_gpu_seconds"].to_numpy()) / 3600.0 if "lost_gpu_seconds" in j.columns else 0.0


def _spot_cost_share(t: RunTables) -> float:
    n = t.nodes
    total = _vm_cost(t)
    if "spot" not in n.columns or total <= 0:
        return 0.0
    return float(n["cost"][n["spot"].to_numpy(dtype=bool)].sum()) / total


def _rounded_up(t: RunTables) -> float:
    j = t.jobs
    if "gpu_request" not in j.columns:
        return 0.0
    request = j["gpu_request"].to_numpy(dtype=float)
    return float((request < j["gpus"].to_numpy(dtype=float)).sum())


def _walls(t: RunTables) -> np.ndarray:
    return t.decisions["wall_time"].to_numpy(dtype=float)


def _wall_sum(t: RunTables) -> float:
    w = _walls(t)
    return float(w.sum()) if len(w) else 0.0


def _fallbacks(t: RunTables) -> float:
    return float(sum(1 for f in t.decisions["fallback"] if isinstance(f, str) and f))


def _deterministic(t: RunTables) -> float:
    """1 when no decision stopped on a wall-clock limit (the status a policy records then: ``time_limit``)."""
    return 0.0 if (t.decisions["status"] == "time_limit").any() else 1.0


NO_DEADLINE = ("; empty (NaN) when no job of the run has a deadline from its workload (a trace without deadlines, "
               "such as Gavel's: the deadlines capsim draws there only steer deadline-driven policies)")
"""Why a deadline metric can be empty, appended to each one's description (``capsim report --metrics list``)."""

_LIST = [
    Metric("vm_cost", "VM cost", "$", 2, _vm_cost, description="money paid for VMs, billed per the cluster's rule"),
    Metric("idle_cost", "idle VM cost", "$", 2, _idle_cost,
           description="VM cost of intervals on which no job ran (boot-only or kept idle)"),
    Metric("tardiness_cost", "tardiness cost", "$", 2, _deadline_metric(_tardiness),
           description="Σ weight × max(0, end − deadline) over the jobs with a deadline" + NO_DEADLINE),
    Metric("total_cost", "total cost", "$", 2, _total_cost,
           description="VM cost + tardiness cost, the objective (VM cost alone when no job has a deadline from its "
                       "workload)"),
    Metric("late_jobs", "late jobs", "jobs", 2, _deadline_metric(lambda t: float((t.jobs["lateness"] > 0).sum())),
           description="jobs that ended after their deadline" + NO_DEADLINE),
    Metric("deadline_met", "deadlines met", "", 3, _deadline_met, upper=1.0, better="higher",
           description="fraction of the jobs with a deadline on time (ElasticFlow's deadline-satisfaction ratio): "
                       "ended by their deadline, "
                       "or judged so by a policy that judges by its plan; rejected jobs count as misses (NaN for a run "
                       "without jobs)" + NO_DEADLINE),
    Metric("rejected", "rejected jobs", "jobs", 0, _rejected, better=None,
           description="jobs turned away by admission control (ElasticFlow): never run, counted as deadline misses"),
    Metric("mean_lateness", "mean lateness", "s", 1, _deadline_metric(lambda t: _mean_of(_lateness(t))),
           description="mean over all jobs with a deadline that ran of max(0, end − deadline): a job on time counts "
                       "0" + NO_DEADLINE),
    Metric("p95_lateness", "p95 lateness", "s", 1, _deadline_metric(lambda t: _p95_of(_lateness(t))),
           description="95th percentile over all jobs with a deadline of max(0, end − deadline)" + NO_DEADLINE),
    Metric("jobs", "jobs", "jobs", 0, lambda t: float(len(t.jobs)), better=None, description="jobs in the run"),
    Metric("mean_jct", "mean JCT", "s", 1, lambda t: _mean_of(_jct(t)),
           description="mean job completion time, end − submit"),
    Metric("p95_jct", "p95 JCT", "s", 1, lambda t: _p95_of(_jct(t)),
           description="95th percentile of job completion time"),
    Metric("mean_wait", "mean wait", "s", 1, _mean_wait, description="mean time from submission to first start"),
    Metric("makespan", "makespan", "s", 1, _makespan, description="last end − first submission"),
    Metric("gpu_utilisation", "GPU utilisation", "", 3, _utilisation, upper=1.0, better="higher",
           description="busy GPU-seconds / billed GPU-seconds (a GPU two co-located jobs share is busy once)"),
    Metric("colocated_share", "co-located share", "", 3, _colocated_share, upper=1.0, better=None,
           description="share of the jobs' GPU-seconds run on GPUs shared with another job (co-location)"),
    Metric("decisions", "decisions", "", 0, lambda t: float(len(t.decisions)), better=None,
           description="decision points"),
    Metric("decision_wall_sum", "decision time", "s", 3, _wall_sum,
           description="wall-clock seconds the policy spent deciding, summed"),
    Metric("decision_wall_p95", "decision time p95", "s", 3, lambda t: _p95_of(_walls(t)),
           description="95th percentile of one decision's wall-clock seconds"),
    Metric("fallbacks", "fallbacks", "", 0, _fallbacks, better=None,
           description="decisions where the policy fell back to another (e.g. a solver failure)"),
    Metric("deterministic", "deterministic", "", 0, _deterministic, upper=1.0, better=None,
           description="1 when no decision stopped on a wall-clock limit (status time_limit), so the run repeats "
                       "byte for byte from its scenario and seed on any machine; 0 when one did, and its results "
                       "depend on the machine's speed and load that day"),
    Metric("gavel_mean_jct", "Gavel's average JCT", "s", 1, _gavel_mean_jct,
           description="mean JCT over the jobs Gavel would complete (those it would drop left out, as its average "
                       "does)"),
    Metric("gavel_makespan", "Gavel's total duration", "s", 1, _gavel_makespan,
           description="last end − t = 0, the simulation's time origin (Gavel's total duration)"),
    Metric("gavel_utilisation", "Gavel's utilisation", "", 3, _gavel_utilisation, upper=1.0, better="higher",
           description="busy GPU-seconds / (the cluster's GPUs × Gavel's total duration); Gavel also counts idle gaps "
                       "after an empty round as busy, this does not"),
    Metric("gavel_dropped", "jobs Gavel would drop", "jobs", 0, lambda t: float(_gavel_drops(t).sum()), better=None,
           description="jobs whose last round runs fewer iterations than they have GPUs: Gavel fails that round five "
                       "times and drops the job (round mode; capsim runs it)"),
    Metric("lower_bound", "lower bound", "$", 2, None,
           description="clairvoyant LP bound on any schedule's total cost of the instance (optim.bound), supplied by "
                       "the runner; NaN on fixed clusters and past experiments.running.tasks.BOUND_MAX_JOBS jobs"),
    Metric("bound_ratio", "cost / lower bound", "", 2, None,
           description="total cost / lower bound: how far the run is at most from the best possible schedule"),
    Metric("revocations", "spot revocations", "VMs", 0, _revocations, better=None,
           description="spot VMs the provider took back during the run"),
    Metric("lost_gpu_hours", "lost GPU-hours", "GPU-h", 2, _lost_gpu_hours,
           description="GPU-hours of work thrown away by revocations (each revoked run's work since its last "
                       "checkpoint)"),
    Metric("spot_cost_share", "spot share of VM cost", "", 3, _spot_cost_share, upper=1.0, better=None,
           description="cost of spot VMs / VM cost (0 without VM cost)"),
    Metric("rounded_up_jobs", "jobs rounded up to whole GPUs", "jobs", 0, _rounded_up, better=None,
           description="jobs that asked for a fraction of a GPU (gpu_request below gpus) and ran on whole GPUs: no "
                       "policy shares a GPU yet"),
]

METRICS: Mapping[str, Metric] = {m.name: m for m in _LIST}
"""Every metric, in the order of the summary row."""

HEADLINE = ("total_cost", "vm_cost", "tardiness_cost", "late_jobs", "mean_jct")
"""The metrics ``capsim run`` prints and tables lead with (the capacity-planning setting's headline)."""

HEADLINES: Mapping[str, tuple[str, ...]] = {
    "cost": HEADLINE,
    "gavel": ("gavel_mean_jct", "gavel_makespan", "gavel_utilisation"),
    "elasticflow": ("deadline_met", "rejected", "mean_jct", "makespan"),
}
"""The headline of each setting: capacity planning (cost), a Gavel replay (Gavel's own metrics), an ElasticFlow
replay (its deadline ratio, rejected jobs, average JCT and makespan). Which one a run belongs to is the caller's
to say (``experiments.results.headline``); a metric empty for every run is left out of a headline."""


def metric(name: str) -> Metric:
    """The declaration of ``name``; a ``KeyError`` lists the known ones."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known metrics: {', '.join(METRICS)}")
    return METRICS[name]


def summarise(tables: RunTables) -> dict[str, float]:
    """Every metric of one run computed from its tables, in declaration order (not those the runner supplies)."""
    out = {}
    for m in _LIST:
        if m.compute is None:
            continue
        v = m.compute(tables)
        out[m.name] = float(v) if not (isinstance(v, float) and math.isnan(v)) else math.nan
    return out
