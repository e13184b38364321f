"""A scenario file's model (pydantic; unknown keys are errors) and its fully resolved configuration.

``Scenario`` is composed of its parts, each a model that builds its own simulator objects: the cluster
(``experiments.scenario.cluster``), the workload (``.workload``), the predictors and policies (``.components``).
It resolves itself (defaults filled, catalogue names replaced by their definitions, a trace by its content hash)
for run ids. Checks the models cannot express (unknown names, files) live in ``experiments.scenario.checks``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr, field_validator, model_serializer

from experiments.scenario.cluster import ClusterSpec
from experiments.scenario.colocation import ColocationSpec
from experiments.scenario.components import (
    PolicySpec,
    PredictorSpec,
    build_predictor,
    registered_policies,
    resolved_policy,
    resolved_predictor,
)
from experiments.scenario.fields import StrictModel
from experiments.scenario.files import availability_sha256, file_sha256, trace_hardware, trace_rows
from experiments.scenario.names import name_problem
from experiments.scenario.workload import TraceSpec, WorkloadSpec
from sim.model import JobSpec, VMType
from sim.traces.base import DEFAULT_FORMAT

__all__ = ["Scenario", "parse_seeds", "MAX_SEEDS"]

MAX_SEEDS = 100_000
"""The most seeds one scenario or sweep may list (a range like `0-99999999` is a typo, not an experiment)."""


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


class Scenario(StrictModel):
    """One experiment: cluster, workload, predictor (estimator and truth default to it), policies and seeds; and,
    when it names it, co-location (two jobs per GPU, ``ColocationSpec``)."""

    name: str = "scenario"
    cluster: ClusterSpec = ClusterSpec()
    workload: WorkloadSpec = WorkloadSpec()
    predictor: PredictorSpec = PredictorSpec(kind="hybrid")
    estimator: PredictorSpec | None = None
    truth: PredictorSpec | None = None
    policies: list[PolicySpec] | None = None
    seeds: list[int] = [0]
    colocation: ColocationSpec | None = None

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _file: str = PrivateAttr(default="<scenario>")

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: Any) -> Any:
        d = handler(self)
        if isinstance(d, dict) and d.get("colocation") is None:
            d.pop("colocation", None)  # scenarios without co-location keep their run ids
        return d

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

    def located(self, base_dir: Path, file: str | None = None) -> Scenario:
        """This scenario, its relative paths (a trace) read from ``base_dir``, its ``file`` named in messages."""
        self._base_dir = base_dir
        if file is not None:
            self._file = file
        return self

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
        return self.workload.jobs if self.workload.jobs is not None else 10 * self.node_count

    @property
    def node_count(self) -> int:
        """The node slots of the cluster (a fixed cluster's servers, the trace's own with ``servers: trace``)."""
        return len(self.slots()) if self.hardware() is not None else self.cluster.node_count

    def hardware(self) -> Any:
        """The trace's own servers (``sim.traces.Servers``) when the cluster is ``servers: trace``, else None."""
        from experiments.scenario.servers import TRACE

        t, tp = self.trace_spec(), self.trace_path()
        if self.cluster.servers != TRACE or t is None or tp is None:
            return None
        return trace_hardware(tp, t.format, t.options)

    def policy_specs(self) -> list[PolicySpec]:
        """The policies to run: those listed, else every registered policy with default parameters (on a rented
        cluster, those that plan capacity)."""
        if self.policies is not None:
            return list(self.policies)
        return [PolicySpec(kind=k) for k in registered_policies(fixed=self.cluster.servers_only,
                                                               mig=bool(self.cluster.mig))]

    def trace_spec(self) -> TraceSpec | None:
        """The trace as path, format and reader options (a bare path is a file of the default format)."""
        return self.workload.trace_spec()

    def trace_path(self) -> Path | None:
        t = self.trace_spec()
        if t is None:
            return None
        p = Path(t.path)
        return p if p.is_absolute() else self._base_dir / p

    def trace_rows(self) -> Any:
        """The trace's rows (``sim.workload.TraceRows``; None without a trace), read and checked once per file
        version and process (``experiments.scenario.files.trace_rows``)."""
        t, tp = self.trace_spec(), self.trace_path()
        return None if t is None or tp is None else trace_rows(tp, t.format, t.options, shown=t.path)

    def notes(self) -> list[str]:
        """What in the scenario is valid but likely not meant (``experiments.scenario.slots.free_rented_note``)."""
        from experiments.scenario.slots import free_rented_note

        note = free_rented_note(self.cluster, self.cluster.rentable_vm_types(self._base_dir), self._file)
        return [] if note is None else [note]

    def trace_report(self) -> Any:
        """What the trace's reader, then the cluster, did with the rows they could not use as they were (a
        ``sim.traces.report.TraceReport``; None without a production trace)."""
        rows = self.trace_rows()
        if rows is None or rows.report is None:
            return None
        from sim.traces.table import fit_to_cluster

        return fit_to_cluster(rows, self.build_cluster().configs).report

    # ----- the simulator's objects ----------------------------------------------------------------------------------
    def vm_types(self) -> tuple[VMType, ...]:
        """Every VM type of the cluster (``ClusterSpec.all_vm_types``)."""
        return self.cluster.all_vm_types(self._base_dir, self.hardware())

    def slots(self) -> list[Any]:
        return self.cluster.slots(self.hardware(), self._base_dir)

    def build_cluster(self) -> Any:
        """The simulator's cluster; with co-location its rules let two jobs share a GPU."""
        hardware = self.hardware()
        largest = None
        if hardware is not None:
            rows = self.trace_rows()
            largest = max((s.gpus or (s.measured.gpus if s.measured else 1) for s in rows.specs), default=1)
        cluster = self.cluster.build(self._base_dir, hardware, largest)
        if self.colocation is None:
            return cluster
        from dataclasses import replace

        return replace(cluster, rules=replace(cluster.rules, jobs_per_gpu=2))

    def for_policy(self, kind: str) -> Scenario:
        """The scenario a run of policy ``kind`` uses: this one, except that a policy that packs jobs in pairs on a
        GPU (Gavel's packing policies, ``packs``) gets co-location with Gavel's measured pairs (``table``) when the
        scenario does not name co-location, so that a Gavel replay needs nothing but the policy's name."""
        from experiments.scenario.outside import policy_class

        if self.colocation is not None or not getattr(policy_class(kind), "packs", False):
            return self
        return self.model_copy(update={"colocation": ColocationSpec()})

    def interference(self) -> tuple[Any, Any]:
        """(the interference model the policies are told, the truth's), or (None, None) without co-location."""
        return self.colocation.models() if self.colocation is not None else (None, None)

    def job_mix(self) -> tuple[tuple[JobSpec, float], ...]:
        return self.workload.job_mix()

    def predictors(self) -> tuple[Any, Any]:
        """(estimator, truth) built from their specs; both default to ``predictor``, shared when identical."""
        est_spec = self.estimator or self.predictor
        truth_spec = self.truth or self.predictor
        est = build_predictor(est_spec)
        truth = est if truth_spec == est_spec else build_predictor(truth_spec)
        return est, truth

    def build_jobs(self, seed: int, truth: Any, configs: Any) -> list[Any]:
        """The workload for ``seed``: Poisson arrivals of the mix, or the trace file's jobs."""
        from sim import workload as wl

        w = self.workload
        deadline_factor = (w.deadline_factor[0], w.deadline_factor[1])
        weight_range = (w.weight_range[0], w.weight_range[1])
        rows = self.trace_rows()
        if rows is not None:
            return list(wl.trace_jobs(rows, truth, configs, seed, rows.source, deadline_factor=deadline_factor,
                                      weight_range=weight_range))
        spec = wl.WorkloadSpec(
            n_jobs=self.n_jobs,
            mean_interarrival=w.mean_interarrival,
            mix=self.job_mix(),
            deadline_factor=deadline_factor,
            weight_range=weight_range,
        )
        return list(wl.poisson_jobs(spec, truth, configs, seed))

    # ----- identity -------------------------------------------------------------------------------------------------

    def resolved(self, policy: PolicySpec | None = None, seed: int | None = None) -> dict[str, Any]:
        """The fully resolved configuration as plain data: defaults filled, catalogue names replaced by their
        definitions (VM types, job types), a trace by its content hash, the policy and predictors by what they build
        (every parameter, defaults included: ``resolved_policy``, ``resolved_predictor``)."""
        d = self.model_dump(mode="json", exclude={"policies", "seeds"})
        d["cluster"]["vm_types"] = self.cluster.resolved_vm_types(self._base_dir, self.hardware())
        if d["cluster"]["nodes"] is None:  # servers alone resolve as they always did: their run ids stay the same
            d["cluster"]["nodes"] = 5
        if self.workload.trace is None:
            d["workload"]["mix"] = [
                {"name": s.name, "application": s.application, "framework": s.framework, "iterations": s.iterations,
                 "batch_size": s.batch_size, "depth": s.depth, "weight": w} for s, w in self.job_mix()
            ]
        d["workload"]["jobs"] = self._poisson_jobs()  # also with a trace: run ids of trace scenarios stay as they were
        d["estimator"] = resolved_predictor(self.estimator or self.predictor)
        d["truth"] = resolved_predictor(self.truth or self.predictor)
        d["predictor"] = resolved_predictor(self.predictor)
        t, tp = self.trace_spec(), self.trace_path()
        if t is not None and tp is not None:
            d["workload"]["trace"] = {"sha256": file_sha256(tp)}
            if t.format != DEFAULT_FORMAT or t.options:  # a bare path hashes as it always did
                d["workload"]["trace"].update(format=t.format, options=t.options)
        spot = self.cluster.spot
        st = None if spot is None else spot.trace_spec()
        if spot is not None and st is not None:
            sp = Path(st.path) if Path(st.path).is_absolute() else self._base_dir / st.path
            d["cluster"]["spot"]["trace"] = {**st.model_dump(mode="json", exclude={"path"}),
                                             "sha256": availability_sha256(sp, st.format)}
        if policy is not None:
            d["policy"] = resolved_policy(policy)
        if seed is not None:
            d["seed"] = seed
        return d

    def run_id(self, policy: PolicySpec, seed: int) -> str:
        """A stable id: the hash of the fully resolved configuration of this policy and seed (the name aside)."""
        return _hash_without_name(self.resolved(policy, seed))

    def run_ids(self, policy: PolicySpec) -> Callable[[int], str]:
        """``run_id(policy, seed)`` for many seeds: the configuration is resolved once, the seed being its only
        change (a plan of 20,000 seeds resolved it 20,000 times, and the garbage of every resolution stayed in the
        command's memory as fragments between the plan's own objects)."""
        resolved = self.resolved(policy)
        resolved.pop("name")

        def run_id(seed: int) -> str:
            resolved["seed"] = seed
            return _hash(resolved)

        return run_id

    def scenario_id(self) -> str:
        """The hash of the fully resolved configuration without policy and seed (the name aside): every run of this
        scenario shares it."""
        return _hash_without_name(self.resolved())


def _hash_without_name(resolved: dict[str, Any]) -> str:
    resolved.pop("name")
    return _hash(resolved)


def _hash(resolved: dict[str, Any]) -> str:
    blob = json.dumps(resolved, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
