"""The models of a scenario file (pydantic; unknown keys are errors) and its fully resolved configuration.

``Scenario`` holds what a YAML scenario says, resolves it (defaults filled, catalogue names replaced by their
definitions, a trace by its content hash) for the run id, and builds the simulator's objects through the
``ScenarioBuild`` mix-in (``experiments.scenario_build``). Checks the models cannot express (unknown names, files)
live in ``experiments.scenario_checks``; ``experiments.scenario`` is the public face of all three.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from experiments.folders import name_problem
from experiments.scenario_build import ScenarioBuild, file_sha256, registered_policies
from experiments.scenario_vms import (
    CloudSelection,
    NonNeg,
    PositiveFloat,
    PositiveInt,
    SpotSpec,
    VMEntry,
    _Strict,
    resolved_vm,
)
from sim.cluster import MAX_BILLING_QUANTUM
from sim.traces.base import DEFAULT_FORMAT

__all__ = ["Scenario", "ClusterSpec", "CloudSelection", "WorkloadSpec", "TraceSpec", "PolicySpec", "PredictorSpec",
           "parse_seeds"]

MAX_SEEDS = 100_000
"""The most seeds one scenario or sweep may list (a range like `0-99999999` is a typo, not an experiment)."""


class SlotGroup(_Strict):
    """``count`` node slots that may host only the listed VM types (all of the cluster's types if omitted)."""

    count: PositiveInt = 1
    vm_types: Annotated[list[str], Field(min_length=1)] | None = None


def _nodes_tag(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return "<count>"
    if isinstance(v, list):
        return "<groups>"
    return None


class RoundsSpec(_Strict):
    """Round-based scheduling (``sim.rounds``): decisions only at boundaries ``length`` s apart (Gavel: 360 s).
    ``effects: false`` keeps a decision every ``length`` s but drops the round effects (admission at boundaries, no
    backfilling, whole iterations): the event-driven, work-conserving variant."""

    length: PositiveFloat = 360.0
    effects: bool = True


_FIXED_CLUSTER = ("servers", "gpus_per_server", "server_price", "gang", "rounds", "spot", "checkpoint_interval",
                  "max_gang_gpus", "gpu")
"""ClusterSpec fields left out of the scenario's data when unset, so that scenarios without them keep their run ids."""


def _no_sexagesimal(v: Any, numbers: bool) -> Any:
    """Reject a number where YAML turned an unquoted ``4:4:4`` into one (base 60), or any number if not ``numbers``."""
    if isinstance(v, int) and not isinstance(v, bool) and (v >= 3600 or not numbers):
        hint = " (YAML reads an unquoted 4:4:4 as a base-60 number): write it in quotes" if v >= 3600 else ""
        raise ValueError(f"expected a quoted text like '4:4:4' or a mapping {{V100: 4, ...}}, found the number "
                         f"{v}{hint}")
    return v


class ClusterSpec(_Strict):
    """Node slots and the VM types they may host, billing and rescheduling options; or a fixed cluster of servers
    (``servers``, see ``experiments.servers``), optionally scheduled in rounds. ``spot`` adds spot variants of the
    VM types (``SpotSpec``); ``checkpoint_interval`` (s of work; none: no checkpoints) bounds what a revoked job
    loses; ``max_gang_gpus`` caps the GPU count of a gang's configurations (``sim.cluster.Cluster``)."""

    nodes: Annotated[
        Annotated[PositiveInt, Tag("<count>")] | Annotated[list[SlotGroup], Field(min_length=1), Tag("<groups>")],
        Discriminator(
            _nodes_tag,
            custom_error_type="capsim_choice",
            custom_error_message="expected a number of nodes or a list of slot groups {count, vm_types}",
        ),
    ] = 5
    vm_types: Annotated[list[VMEntry], Field(min_length=1)] | None = None
    billing_quantum: NonNeg = 0.0
    restart_overhead: NonNeg = 0.0
    decision_interval: PositiveFloat | None = None
    servers: str | dict[str, Annotated[int, Field(ge=0)]] | None = None
    gpus_per_server: PositiveInt | str | dict[str, PositiveInt] | None = None
    server_price: NonNeg | dict[str, NonNeg] | None = None
    gang: bool | None = None
    rounds: PositiveFloat | RoundsSpec | None = None
    spot: SpotSpec | None = None
    checkpoint_interval: PositiveFloat | None = None
    max_gang_gpus: PositiveInt | None = None
    gpu: str | None = None
    """The GPU model of a ``servers: "NxG"`` cluster (N servers of G GPUs of one model)."""

    @field_validator("servers", mode="before")
    @classmethod
    def _quoted_servers(cls, v: Any) -> Any:
        return _no_sexagesimal(v, numbers=False)

    @field_validator("gpus_per_server", mode="before")
    @classmethod
    def _quoted_gpus(cls, v: Any) -> Any:
        return _no_sexagesimal(v, numbers=True)

    @field_validator("servers", "gpus_per_server")
    @classmethod
    def _colons(cls, v: Any) -> Any:
        if isinstance(v, str):
            from experiments.servers import parse_colons, parse_shape

            if parse_shape(v) is None:
                parse_colons(v)
        return v

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: Any) -> Any:
        d = handler(self)
        if isinstance(d, dict):
            for k in _FIXED_CLUSTER:
                if d.get(k) is None:
                    d.pop(k, None)
        return d

    @property
    def round_spec(self) -> RoundsSpec | None:
        return RoundsSpec(length=self.rounds) if isinstance(self.rounds, (int, float)) else self.rounds

    @field_validator("vm_types", mode="before")
    @classmethod
    def _one_selection(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v  # `vm_types: {provider: aws}` is a list of one selection

    @field_validator("billing_quantum")
    @classmethod
    def _quantum(cls, v: float) -> float:
        if v > MAX_BILLING_QUANTUM:
            raise ValueError(f"expected a billing quantum of at most {MAX_BILLING_QUANTUM:g} s (a day: longer ones "
                             f"make every VM cost one quantum whatever it does, and huge ones bill nothing), found "
                             f"{v:g}")
        return v

    @property
    def node_count(self) -> int:
        if self.servers is not None:
            from experiments.servers import server_types

            return sum(n for _, n in server_types(self.servers, self.gpus_per_server, self.server_price, self.gpu))
        return self.nodes if isinstance(self.nodes, int) else sum(g.count for g in self.nodes)


class JobTypeSpec(_Strict):
    """A job type in the mix: a catalogue name (``J1``) alone, or a full spec; ``weight`` is its share of the mix."""

    name: str
    application: str | None = None
    framework: Literal["pytorch", "tensorflow"] | None = None
    iterations: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    depth: PositiveInt | None = None
    weight: PositiveFloat = 1.0

    @model_validator(mode="after")
    def _complete(self) -> JobTypeSpec:
        given = [self.application, self.framework, self.iterations, self.batch_size]
        if any(x is not None for x in given) and any(x is None for x in given):
            missing = [n for n, x in zip(("application", "framework", "iterations", "batch_size"), given) if x is None]
            raise ValueError(f"expected a full job spec or only a catalogue name, found {', '.join(missing)} missing")
        return self


def _mix_tag(v: Any) -> str | None:
    if isinstance(v, dict):
        return "<weights>"
    if isinstance(v, list):
        return "<specs>"
    return None


Range = Annotated[list[NonNeg], Field(min_length=2, max_length=2)]


class TraceSpec(BaseModel):
    """A trace file in a registered format (``sim.traces``); further keys are that format's reader options."""

    model_config = ConfigDict(extra="allow", frozen=True)
    path: str
    format: str = DEFAULT_FORMAT

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _trace_tag(v: Any) -> str | None:
    if isinstance(v, str):
        return "<path>"
    if isinstance(v, (dict, TraceSpec)):  # a mapping when validating, the model when serialising
        return "<file>"
    return None


TraceEntry = Annotated[
    Annotated[str, Tag("<path>")] | Annotated[TraceSpec, Tag("<file>")],
    Discriminator(
        _trace_tag,
        custom_error_type="capsim_choice",
        custom_error_message="expected a file path or a mapping {path, format, <reader options>}",
    ),
]


class WorkloadSpec(_Strict):
    """Poisson arrivals of a job mix (or a trace file), deadlines and tardiness weights."""

    jobs: PositiveInt | None = None
    mean_interarrival: PositiveFloat = 30.0
    mix: (
        Annotated[
            Annotated[dict[str, PositiveFloat], Field(min_length=1), Tag("<weights>")]
            | Annotated[list[JobTypeSpec], Field(min_length=1), Tag("<specs>")],
            Discriminator(
                _mix_tag,
                custom_error_type="capsim_choice",
                custom_error_message="expected a mapping {J1: weight, ...} or a list of job specs",
            ),
        ]
        | None
    ) = None
    deadline_factor: Range = [1.0, 3.0]
    weight_range: Range = [0.003, 0.015]
    trace: TraceEntry | None = None

    @field_validator("deadline_factor", "weight_range")
    @classmethod
    def _ordered(cls, v: list[float]) -> list[float]:
        if v[0] > v[1]:
            raise ValueError(f"expected [low, high] with low ≤ high, found {v}")
        return v


class PolicySpec(BaseModel):
    """A policy: its registry ``kind``, an optional display ``name``, and any parameters for ``optim.build``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str
    name: str | None = None

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def label(self) -> str:
        return self.name or self.kind


class PredictorSpec(BaseModel):
    """A predictor: its registry ``kind`` plus parameters for ``predictors.build`` (nested ``base:`` allowed)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


_SEED_RANGE = re.compile(r"^\s*(\d+)\s*(?:-|\.\.)\s*(\d+)\s*$")


def parse_seeds(value: Any) -> list[int]:
    """Seeds from a list of whole numbers, one number, or an inclusive range text ``"0-4"`` / ``"0..4"``."""
    if isinstance(value, bool):
        raise ValueError(f"expected a list of seeds or a range like '0-4', found {value!r}")
    if isinstance(value, int):
        return _checked_seeds([value], value)
    if isinstance(value, str):
        m = _SEED_RANGE.match(value)
        if m and int(m.group(1)) <= int(m.group(2)):
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi - lo >= MAX_SEEDS:
                raise ValueError(f"expected at most {MAX_SEEDS:,} seeds, found the range {value!r} of {hi - lo + 1:,}")
            return _checked_seeds(list(range(lo, hi + 1)), value)
        if re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", value):
            return _checked_seeds([int(x) for x in value.split(",")], value)
        raise ValueError(f"expected a list of seeds or a range like '0-4', found {value!r}")
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return _checked_seeds(list(value), value)
    raise ValueError(f"expected a non-empty list of whole-number seeds or a range like '0-4', found {value!r}")


def _checked_seeds(seeds: list[int], given: Any) -> list[int]:
    if any(not 0 <= x < 2**63 for x in seeds):
        raise ValueError(f"expected seeds ≥ 0 (and below 2^63), found {given!r}")
    if len(set(seeds)) != len(seeds):
        twice = sorted({x for x in seeds if seeds.count(x) > 1})
        raise ValueError(f"expected distinct seeds (a seed run twice would count twice in every mean), found "
                         f"{', '.join(map(str, twice))} more than once in {given!r}")
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"expected at most {MAX_SEEDS:,} seeds, found {len(seeds):,}")
    return seeds


class Scenario(_Strict, ScenarioBuild):
    """One experiment: cluster, workload, predictor (estimator and truth default to it), policies and seeds."""

    name: str = "scenario"
    cluster: ClusterSpec = ClusterSpec()
    workload: WorkloadSpec = WorkloadSpec()
    predictor: PredictorSpec = PredictorSpec(kind="hybrid")
    estimator: PredictorSpec | None = None
    truth: PredictorSpec | None = None
    policies: list[PolicySpec] | None = None
    seeds: list[int] = [0]

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _file: str = PrivateAttr(default="<scenario>")

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> list[int]:
        return parse_seeds(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        why = name_problem(v)
        if why:
            raise ValueError(why)
        return v

    # ----- resolution helpers -------------------------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def file(self) -> str:
        return self._file

    @property
    def n_jobs(self) -> int:
        """The number of jobs: the trace's rows, else ``workload.jobs`` (default: 10 per node)."""
        rows = self.trace_rows()
        return len(rows) if rows is not None else self._poisson_jobs()

    def _poisson_jobs(self) -> int:
        return self.workload.jobs if self.workload.jobs is not None else 10 * self.cluster.node_count

    def policy_specs(self) -> list[PolicySpec]:
        """The policies to run: those listed, else every registered policy with default parameters (on a rented
        cluster, those that plan capacity)."""
        if self.policies is not None:
            return list(self.policies)
        return [PolicySpec(kind=k) for k in registered_policies(fixed=self.cluster.servers is not None)]

    def trace_spec(self) -> TraceSpec | None:
        """The trace as path, format and reader options (a bare path is a file of the default format)."""
        t = self.workload.trace
        return TraceSpec(path=t) if isinstance(t, str) else t

    def trace_path(self) -> Path | None:
        t = self.trace_spec()
        if t is None:
            return None
        p = Path(t.path)
        return p if p.is_absolute() else self._base_dir / p

    def resolved(self, policy: PolicySpec | None = None, seed: int | None = None) -> dict[str, Any]:
        """The fully resolved configuration as plain data: defaults filled, catalogue names replaced by their
        definitions (VM types, job types), a trace by its content hash."""
        d = self.model_dump(mode="json", exclude={"policies", "seeds"})
        d["cluster"]["vm_types"] = [resolved_vm(v) for v in self.vm_types()]
        if self.workload.trace is None:
            d["workload"]["mix"] = [
                {"name": s.name, "application": s.application, "framework": s.framework, "iterations": s.iterations,
                 "batch_size": s.batch_size, "depth": s.depth, "weight": w} for s, w in self.job_mix()
            ]
        d["workload"]["jobs"] = self._poisson_jobs()  # also with a trace: run ids of trace scenarios stay as they were
        d["estimator"] = d["estimator"] or d["predictor"]
        d["truth"] = d["truth"] or d["predictor"]
        t, tp = self.trace_spec(), self.trace_path()
        if t is not None and tp is not None:
            d["workload"]["trace"] = {"sha256": file_sha256(tp)}
            if t.format != DEFAULT_FORMAT or t.options:  # a bare path hashes as it always did
                d["workload"]["trace"].update(format=t.format, options=t.options)
        if policy is not None:
            d["policy"] = policy.model_dump(mode="json")
        if seed is not None:
            d["seed"] = seed
        return d

    def run_id(self, policy: PolicySpec, seed: int) -> str:
        """A stable id: the hash of the fully resolved configuration of this policy and seed (the name aside)."""
        return _hash_without_name(self.resolved(policy, seed))

    def scenario_id(self) -> str:
        """The hash of the fully resolved configuration without policy and seed (the name aside): every run of this
        scenario shares it."""
        return _hash_without_name(self.resolved())


def _hash_without_name(resolved: dict[str, Any]) -> str:
    resolved.pop("name")
    blob = json.dumps(resolved, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
