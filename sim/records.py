"""The records of a run, declared once per table: a ``Table`` subclass whose annotated fields are the columns.

A field ``name: list[T]`` is one column, in declaration order; ``T`` gives its dtype (``int`` → ``int64``, ``float`` →
``float64``, ``bool`` → ``bool``, ``str`` and ``str | None`` → ``object``, ``float | None`` → ``float64`` with NaN,
``int | None`` → nullable ``Int64``), so names, order and Parquet dtypes live in one place. Each table's ``add`` (or
``Jobs.of``) reads one row off the run's state and appends it column by column, by name (``self.time.append(now)``):
cheaper than a row object per event, and no positional tuple to keep in step with the columns. ``frame()`` checks that
every column has the same length and returns the DataFrame.

A plain ``int`` or ``float`` column keeps its last rows in its list and the rows before in numpy arrays (``spill``,
which ``add`` calls every ``SPILL`` rows): 8 bytes a row, no Python object per value, for a million-job run's several
million rows. (An ``array.array`` would hold them as compactly, but its ``append`` parses each value with
``PyArg_Parse``, five times a list's cost, at some thirty appends a job.) The values are moved with ``struct``
(``packed``): a third of ``np.fromiter``'s cost, which converts each value through numpy's scalar machinery.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterable, Sequence
from itertools import islice, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any, ClassVar, get_args, get_type_hints

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from sim.contracts import Predictor, Source
    from sim.model import Config, DecisionInfo, Job, JobSpec, Plan, VMType
    from sim.state import Interval, JobState

__all__ = ["Table", "Jobs", "Nodes", "Segments", "Decisions", "JOB_COLUMNS", "NODE_COLUMNS", "SEGMENT_COLUMNS",
           "DECISION_COLUMNS"]

_DTYPES: dict[Any, str] = {int: "int64", float: "float64", str: "object", str | None: "object",
                           float | None: "float64", int | None: "Int64", bool: "bool"}
_ARRAYS: dict[Any, type] = {int: np.int64, float: np.float64}
"""Column types whose rows are spilled into numpy arrays of this dtype."""
_JOB, _SPEC = attrgetter("job"), attrgetter("spec")
SPILL = 4096
"""Rows a table's ``add`` keeps in its numeric columns' lists before moving them into arrays."""
_CODES: dict[type, str] = {np.int64: "q", np.float64: "d"}
_PACKERS: dict[tuple[str, int], struct.Struct] = {}


def packed(values: Iterable[Any], dtype: type, n: int) -> np.ndarray:
    """The ``n`` Python numbers of ``values`` as a new array of ``dtype`` (``np.int64`` or ``np.float64``): ``struct``
    packs each exactly as the C ``int64_t`` or ``double`` numpy holds, ``SPILL`` values at a time (a million-row column
    is never copied whole into a tuple); a chunk with a value struct does not take as one (None, a float in an integer
    column) is converted by ``np.fromiter`` as before."""
    out: np.ndarray = np.empty(n, dtype=dtype)
    code, size = _CODES[dtype], out.itemsize
    items = iter(values)
    for at in range(0, n, SPILL):
        k = min(SPILL, n - at)
        chunk = values if k == n and values.__class__ is list else tuple(islice(items, k))
        packer = _PACKERS.get((code, k))
        if packer is None:
            if len(_PACKERS) > 64:
                _PACKERS.clear()
            packer = _PACKERS[(code, k)] = struct.Struct(f"={k}{code}")
        try:
            packer.pack_into(out.data, at * size, *chunk)
        except struct.error:
            out[at:at + k] = np.fromiter(chunk, dtype=dtype, count=k)
    return out


class Table:
    """One table of a run's records: a subclass declares the columns; an instance holds one list per column."""

    dtypes: ClassVar[dict[str, str]] = {}
    """Column name → pandas dtype, in column order (derived from the subclass's annotations)."""
    _numeric: ClassVar[dict[str, type]] = {}
    """Column name → numpy dtype of the columns whose rows are spilled into arrays."""
    _derived: ClassVar[tuple[str, ...]] = ()
    """Columns not kept row by row but built by ``_columns`` when the frame is made."""

    def __init_subclass__(cls) -> None:
        hints = get_type_hints(cls)
        names = cls.__dict__.get("__annotations__", {})
        cls.dtypes = {name: _DTYPES[get_args(hints[name])[0]] for name in names}
        cls._numeric = {name: _ARRAYS[t] for name in names if (t := get_args(hints[name])[0]) in _ARRAYS}

    def __init__(self) -> None:
        for name in self.dtypes:
            if name not in self._derived:
                setattr(self, name, [])
        self.spilled = 0
        """Rows moved out of the numeric columns' lists (``spill``)."""
        self._arrays: dict[str, list[np.ndarray]] = {name: [] for name in self._numeric}

    def spill(self) -> None:
        """Move the rows of the numeric columns' lists into arrays (every column holds the same rows)."""
        rows = 0
        for name, dtype in self._numeric.items():
            values = getattr(self, name)
            rows = len(values)
            self._arrays[name].append(packed(values, dtype, len(values)))
            values.clear()
        self.spilled += rows

    def put(self, name: str, row: int, value: Any) -> None:
        """Overwrite column ``name`` at ``row``, counted from the table's first row whether spilled or not."""
        if name not in self._numeric:
            getattr(self, name)[row] = value
        elif row >= self.spilled:
            getattr(self, name)[row - self.spilled] = value
        else:
            for chunk in self._arrays[name]:
                if row < len(chunk):
                    chunk[row] = value
                    return
                row -= len(chunk)

    def _columns(self) -> dict[str, Sequence[Any]]:
        """Every column's values by name (a subclass builds its derived columns here)."""
        if any(self._arrays.values()):  # every row into the arrays, each column's joined into one as it goes
            self.spill()
        cols: dict[str, Any] = {}
        for name in self.dtypes:
            if name in self._derived:
                continue
            arrays = self._arrays.get(name)
            if arrays:
                if len(arrays) > 1:
                    arrays[:] = [np.concatenate(arrays)]  # (the parts freed at once: one column's copy at a time)
                cols[name] = arrays[0]
            else:
                cols[name] = getattr(self, name)
        return cols

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame with its fixed column order and dtypes (identical Parquet every run)."""
        cols = self._columns()
        lengths = {name: len(v) for name, v in cols.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{type(self).__name__}: columns of unequal length {lengths}")
        data = {}
        for name, dtype in self.dtypes.items():
            if dtype == "object" or dtype == "Int64":
                data[name] = pd.Series(cols[name], dtype=dtype)
            else:
                data[name] = pd.Series(np.asarray(cols[name], dtype=dtype), copy=False)
        return pd.DataFrame(data, columns=list(self.dtypes), copy=False)  # a numeric column keeps its array's buffer


class Jobs(Table):
    """One row per job: what it was, when it ran, where it ended up, and what it cost."""

    job_id: list[int]
    name: list[str]
    application: list[str]
    framework: list[str]
    iterations: list[int]
    batch_size: list[int]
    submit_time: list[float]
    start_time: list[float]
    """First start."""
    end_time: list[float]
    deadline: list[float]
    """NaN when the workload gave the job none (``Job.deadline_given``): the placeholder the policies saw is no
    deadline of the job, so its lateness and tardiness cost are NaN too."""
    weight: list[float]
    vm_type: list[str]
    """The configuration of its last run (as ``gpus`` and ``node``)."""
    gpus: list[int]
    node: list[int]
    runs: list[int]
    """Run segments: 1, plus one per preemption or move."""
    wait_time: list[float]
    jct: list[float]
    lateness: list[float]
    tardiness_cost: list[float]
    cost_share: list[float]
    """Its share of the VM cost, by GPU-seconds on each interval it ran on."""
    est_runtime: list[float]
    """The estimator's runtime of the whole job on its last configuration, as known before it ran."""
    est_source: list[str]
    """The kind of answer the estimator gave for the job's last configuration (``Predictor.source``: measured,
    interpolated, an extrapolation, scaled, ...)."""
    est_error: list[float]
    """The expected relative error of that kind of answer (``capsim predict evaluate``'s figure; NaN: not measured)."""
    true_runtime: list[float]
    final_round_iterations: list[int | None]
    """Round mode only: iterations of the job's last round. Gavel fails, and after five tries drops, a job whose last
    round has fewer iterations than it has GPUs (``sim.metrics``' ``gavel_dropped``); capsim runs it."""
    revocations: list[int]
    """Runs of the job ended by the revocation of a spot VM it ran on."""
    lost_gpu_seconds: list[float]
    """GPU-seconds of work those revocations threw away (the work since each run's last checkpoint)."""
    status: list[str]
    """``on_time``, ``late``, ``rejected`` (turned away by admission control, never run: no start, end or
    lateness) or ``no_deadline`` (ran; the workload gave it no deadline). A policy that judges deadlines by its own
    plan (ElasticFlow) gives the verdict; otherwise it is the end against the deadline."""
    gpu_request: list[float]
    """GPUs the job asked for: its GPU count times the share of each it asked for (0.25: a quarter of one GPU, a
    fractional request; ``JobSpec.gpu_share``); NaN for a job that lets the policy choose. No policy shares a GPU
    yet, so a fractional request runs on whole GPUs (``gpus``), rounded up."""

    @classmethod
    def of(cls, states: Sequence[JobState], configs: Sequence[Config], estimator: Predictor) -> Jobs:
        """The job table of finished jobs, from their states (``configs``: the cluster's, indexed by ``cfg``); the
        ``estimator`` says its source for each one's last configuration (asked once per job spec and configuration).
        Numeric columns are filled straight into arrays (no Python float per value: a million jobs' table).
        """
        # The columns a job's spec and configuration fix are computed once per distinct (spec, runtime rows,
        # configuration) and gathered row by row: a million jobs share a few hundred.
        seen: dict[tuple[int, int, int, int], int] = {}
        first: list[JobState] = []
        index = array("q")  # (8 bytes a row: a list would keep an int object per distinct index past 256)
        for st in states:  # (``states`` hold every spec and row: no id is reused)
            key = (id(st.job.spec), id(st.base), id(st.true), st.cfg)
            k = seen.get(key)
            if k is None:
                k = seen[key] = len(first)
                first.append(st)
            index.append(k)
        rows = np.asarray(index, dtype=np.intp)
        sources: list[Source] = []
        for st in first:
            c = configs[st.cfg]
            sources.append(estimator.source(st.job.spec, c.vm, c.gpus))
        kinds = [st.job.spec for st in first]

        def each(values: list[Any], dtype: Any = object) -> np.ndarray:
            return np.array(values + [None], dtype=object)[:-1][rows] if dtype is object else \
                np.array(values, dtype=dtype)[rows]

        t = cls()
        n = len(states)
        jobs = list(map(_JOB, states))

        def ints(values: Iterable[int]) -> np.ndarray:
            return packed(values, np.int64, n)

        def floats(values: Iterable[float]) -> np.ndarray:
            return packed(values, np.float64, n)

        submit = floats(map(attrgetter("submit_time"), jobs))
        start = floats(map(attrgetter("first_start"), states))
        end = floats(map(attrgetter("end"), states))
        deadline = floats(map(attrgetter("deadline"), jobs))
        weight = floats(map(attrgetter("weight"), jobs))
        over = end - deadline
        lateness = np.where(over > 0.0, over, 0.0)  # max(0.0, over) as Python takes it (NaN: 0)
        cols: dict[str, Any] = {
            "job_id": ints(map(attrgetter("id"), jobs)),
            "name": each([s.name for s in kinds]),
            "application": each([s.application for s in kinds]),
            "framework": each([s.framework for s in kinds]),
            "iterations": each([s.iterations for s in kinds], np.int64),
            "batch_size": each([s.batch_size for s in kinds], np.int64),
            "submit_time": submit,
            "start_time": start,
            "end_time": end,
            "deadline": deadline,
            "weight": weight,
            "vm_type": each([configs[st.cfg].vm.name for st in first]),
            "gpus": each([configs[st.cfg].gpus for st in first], np.int64),
            "node": ints(map(attrgetter("node"), states)),
            "runs": ints(map(attrgetter("runs"), states)),
            "wait_time": start - submit,  # float64 arithmetic: the same values as Python's
            "jct": end - submit,
            "lateness": lateness,
            "tardiness_cost": weight * lateness,
            "cost_share": floats(map(attrgetter("cost_share"), states)),
            "est_runtime": each([float(st.base[st.cfg]) for st in first], np.float64),
            "est_source": each([s.kind for s in sources]),
            "est_error": each([s.error for s in sources], np.float64),
            "true_runtime": each([float(st.true[st.cfg]) for st in first], np.float64),
            "final_round_iterations": list(map(attrgetter("final"), states)),
            "revocations": ints(map(attrgetter("revoked"), states)),
            "lost_gpu_seconds": floats(map(attrgetter("lost"), states)),
            "status": np.array(["on_time", "late"], dtype=object)[(lateness > 0.0).view(np.int8)],
            "gpu_request": each([cls.request(s) for s in kinds], np.float64),
        }
        for name, col in cols.items():
            setattr(t, name, col)
        t.without_placeholders(jobs)
        return t

    @staticmethod
    def request(spec: JobSpec) -> float:
        """The ``gpu_request`` of a job of ``spec``."""
        return math.nan if spec.gpus is None else spec.gpus * (spec.gpu_share or 1.0)

    def without_placeholders(self, jobs: Sequence[Job]) -> None:
        """Empty the deadline columns of the rows of ``jobs`` (in row order) whose workload gave no deadline: a
        placeholder drawn to steer the policies is no deadline a job can meet or miss."""
        for i, j in enumerate(jobs):
            if not j.deadline_given:
                self.deadline[i] = self.lateness[i] = self.tardiness_cost[i] = math.nan
                if self.status[i] != "rejected":
                    self.status[i] = "no_deadline"


class Nodes(Table):
    """One row per VM interval on a node: from start to stop, what it billed and how many jobs it served."""

    node: list[int]
    vm_type: list[str]
    gpus: list[int]
    price_per_hour: list[float]
    start_time: list[float]
    ready_time: list[float]
    stop_time: list[float]
    billed_seconds: list[float]
    cost: list[float]
    busy_gpu_seconds: list[float]
    jobs: list[int]
    """Jobs that ran on it (0: its cost is idle cost)."""
    spot: list[bool]
    """Rented on the spot market (``VMType.spot``)."""
    revoked: list[bool]
    """Stopped by the provider's revocation (a spot VM), not by a plan or the end of the run."""

    def add(self, node: int, iv: Interval, now: float, billed: float, price: float, cost: float, busy: float,
            revoked: bool = False) -> None:
        """VM interval ``iv`` of node ``node``, stopped at ``now`` (by a revocation if ``revoked``) after ``busy``
        GPU-seconds of work, billed ``billed`` seconds at ``price`` $ per hour (an owned server's amortised rate)."""
        vm = iv.vm
        if len(self.node) >= SPILL:
            self.spill()
        self.node.append(node)
        self.vm_type.append(vm.name)
        self.gpus.append(vm.gpus)
        self.price_per_hour.append(price)
        self.start_time.append(iv.start)
        self.ready_time.append(now if now < iv.ready else iv.ready)  # min(iv.ready, now)
        self.stop_time.append(now)
        self.billed_seconds.append(billed)
        self.cost.append(cost)
        self.busy_gpu_seconds.append(busy)
        self.jobs.append(len(iv.gpu_secs))
        self.spot.append(vm.spot)
        self.revoked.append(revoked)


class Segments(Table):
    """One row per run segment of a job on a node (a job preempted or moved has several, and a co-located one one per
    partner; a gang has one per node, all with the same times)."""

    job_id: list[int]
    node: list[int]
    vm_type: list[str]
    gpus: list[int]
    start_time: list[float]
    end_time: list[float]
    done: list[float]
    """Fraction of the job's work completed at the end of the segment."""
    partner: list[int | None]
    """The job that shared its GPUs throughout the segment (co-location, ``ClusterRules.jobs_per_gpu``), if any: a
    co-located job's run is split into segments where its partner changes."""

    def add(self, st: JobState, vm: VMType, now: float, node: int, gpus: int) -> None:
        """The job's current run on ``node`` (a ``vm``, ``gpus`` of its GPUs), ending at ``now``."""
        mate = st.partner
        if len(self.job_id) >= SPILL:
            self.spill()
        self.partner.append(None if mate is None else mate.job.id)
        self.job_id.append(st.job.id)
        self.node.append(node)
        self.vm_type.append(vm.name)
        self.gpus.append(gpus)
        self.start_time.append(st.since)
        self.end_time.append(now)
        self.done.append(st.done)


class Decisions(Table):
    """One row per decision: when, why, who decided, how the solver fared, and what the plan did."""

    decision: list[int]
    time: list[float]
    trigger: list[str]
    policy: list[str]
    status: list[str]
    solver: list[str | None]
    objective: list[float | None]
    gap: list[float | None]
    variables: list[int | None]
    constraints: list[int | None]
    fallback: list[str | None]
    reason: list[str | None]
    waiting: list[int]
    running: list[int]
    started: list[int]
    preempted: list[int]
    moved: list[int]
    wall_time: list[float]

    _derived = ("status", "solver", "objective", "gap", "variables", "constraints", "fallback", "reason")
    """The fields of each decision's ``DecisionInfo``, kept as the one object (``info``): most plans share one."""

    def __init__(self) -> None:
        super().__init__()
        self.info: list[DecisionInfo] = []
        """Each decision's ``Plan.info``, whose fields are the ``_derived`` columns."""

    def _columns(self) -> dict[str, Sequence[Any]]:
        cols: dict[str, Any] = super()._columns()
        # each distinct info once (most decisions share a few: a list scheduler's plans, one), then its values
        # gathered row by row
        infos = self.info
        if infos and all(map(is_, infos, repeat(infos[0]))):
            distinct, rows = infos[:1], np.zeros(len(infos), dtype=np.intp)
        else:
            seen: dict[int, int] = {}
            distinct = []
            index = array("q")
            for i in infos:  # (the list holds every info: no id is reused)
                k = seen.get(id(i))
                if k is None:
                    k = seen[id(i)] = len(distinct)
                    distinct.append(i)
                index.append(k)
            rows = np.asarray(index, dtype=np.intp)
        for name in self._derived:
            values = [getattr(i, name) for i in distinct]
            dtype = self.dtypes[name]
            if dtype == "Int64":
                known = np.array([v is not None for v in values], dtype=bool)
                ints = np.array([v if v is not None else 0 for v in values], dtype=np.int64)
                cols[name] = pd.arrays.IntegerArray(ints[rows], ~known[rows])
            elif dtype == "float64":
                cols[name] = np.array([math.nan if v is None else v for v in values], dtype=np.float64)[rows]
            else:
                cols[name] = np.array(values + [None], dtype=object)[:-1][rows]  # (None: never a 2-D array)
        return cols

    def add(self, policy: str, time: float, trigger: str, waiting: int, running: int, plan: Plan, wall: float
            ) -> None:
        """The decision ``policy`` took at ``time`` on a snapshot of ``waiting`` and ``running`` jobs with ``plan``,
        in ``wall`` seconds."""
        n = len(self.decision)
        if n >= SPILL:
            self.spill()
            n = 0
        self.decision.append(self.spilled + n)
        self.time.append(time)
        self.trigger.append(trigger)
        self.policy.append(policy)
        self.info.append(plan.info)
        self.waiting.append(waiting)
        self.running.append(running)
        self.started.append(len(plan.start))
        self.preempted.append(len(plan.preempt))
        self.moved.append(len(plan.move))
        self.wall_time.append(wall)


JOB_COLUMNS: dict[str, str] = dict(Jobs.dtypes)
NODE_COLUMNS: dict[str, str] = dict(Nodes.dtypes)
SEGMENT_COLUMNS: dict[str, str] = dict(Segments.dtypes)
DECISION_COLUMNS: dict[str, str] = dict(Decisions.dtypes)
