"""Building the simulator's objects from a validated scenario: VM types, node slots, the cluster, the job mix, the
predictors, the jobs of a seed (Poisson or a trace read by its format's reader) and the policies.

``ScenarioBuild`` is mixed into ``experiments.scenario_spec.Scenario``; its methods read only the scenario's fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.scenario_vms import CloudSelection
from sim.model import Billing, JobSpec, VMType

if TYPE_CHECKING:
    from experiments.scenario_spec import ClusterSpec, PolicySpec, PredictorSpec, TraceSpec, WorkloadSpec

__all__ = ["ScenarioBuild", "registered_policies", "param_names", "file_sha256"]


class ScenarioBuild:
    """The building half of ``Scenario``."""

    if TYPE_CHECKING:  # provided by Scenario
        cluster: ClusterSpec
        workload: WorkloadSpec
        predictor: PredictorSpec
        estimator: PredictorSpec | None
        truth: PredictorSpec | None

        @property
        def n_jobs(self) -> int: ...

        def trace_spec(self) -> TraceSpec | None: ...

        def trace_path(self) -> Path | None: ...

    def vm_types(self) -> tuple[VMType, ...]:
        from sim import catalogue

        if self.cluster.servers is not None:
            return tuple(v for v, _ in self._servers())
        types = self._listed_vm_types()
        spot = self.cluster.spot
        return types if spot is None else catalogue.with_spot(types, spot.revocation_rate, spot.only)

    def _listed_vm_types(self) -> tuple[VMType, ...]:
        from sim import catalogue

        if self.cluster.vm_types is None:
            return tuple(catalogue.vm_types().values())
        out: list[VMType] = []
        for v in self.cluster.vm_types:
            if isinstance(v, str):
                out.append(catalogue.vm_type(v))
            elif isinstance(v, CloudSelection):
                out.extend(catalogue.select_vm_types(v.provider, v.region, v.gpu, v.gpus, v.boot_time))
            else:
                billing = Billing() if v.billing is None else Billing(v.billing.increment, v.billing.minimum)
                out.append(VMType(v.name, catalogue.gpu(v.gpu), v.gpus, v.price_per_hour, v.boot_time, v.provider,
                                  billing, v.spot_price_per_hour, v.region))
        return tuple(out)

    def _servers(self) -> list[tuple[VMType, int]]:
        from experiments.servers import server_types

        c = self.cluster
        return server_types(c.servers, c.gpus_per_server, c.server_price, c.gpu)

    def slots(self) -> list[Any]:
        from sim.engine import NodeSlot

        if self.cluster.servers is not None:
            return [NodeSlot(frozenset({v.name}), fixed=True) for v, n in self._servers() for _ in range(n)]
        if isinstance(self.cluster.nodes, int):
            return [NodeSlot(None) for _ in range(self.cluster.nodes)]
        out: list[Any] = []
        for g in self.cluster.nodes:
            allowed = None if g.vm_types is None else frozenset(g.vm_types)
            out.extend(NodeSlot(allowed) for _ in range(g.count))
        return out

    def build_cluster(self) -> Any:
        from sim.engine import Cluster

        c = self.cluster
        rounds = c.round_spec
        interval = float("inf") if c.decision_interval is None else c.decision_interval
        if rounds is not None and not rounds.effects:
            interval = rounds.length  # the event-driven variant: a decision every round length, no round effects
        return Cluster(
            self.vm_types(),
            tuple(self.slots()),
            billing_quantum=c.billing_quantum,
            restart_overhead=c.restart_overhead,
            decision_interval=interval,
            gang=c.gang if c.gang is not None else c.servers is not None,
            round_length=rounds.length if rounds is not None and rounds.effects else float("inf"),
            checkpoint_interval=c.checkpoint_interval if c.checkpoint_interval is not None else float("inf"),
            max_gang_gpus=c.max_gang_gpus,
        )

    def job_mix(self) -> tuple[tuple[JobSpec, float], ...]:
        from sim import catalogue

        known = catalogue.job_types()
        mix = self.workload.mix
        if mix is None:
            return tuple((s, 1.0) for s in known.values())
        if isinstance(mix, dict):
            return tuple((known[k], float(w)) for k, w in mix.items())
        out = []
        for j in mix:
            if j.application is None or j.framework is None or j.iterations is None or j.batch_size is None:
                out.append((known[j.name], j.weight))  # the model holds a full spec or only a catalogue name
            else:
                spec = JobSpec(j.application, j.framework, j.iterations, j.batch_size, j.name, j.depth)
                out.append((spec, j.weight))
        return tuple(out)

    def predictors(self) -> tuple[Any, Any]:
        """(estimator, truth) built from their specs; both default to ``predictor``, shared when identical."""
        est_spec = self.estimator or self.predictor
        truth_spec = self.truth or self.predictor
        est = _build_predictor(est_spec)
        truth = est if truth_spec == est_spec else _build_predictor(truth_spec)
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

    def trace_rows(self) -> Any:
        """The trace's rows, read and checked once per file and process (``sim.workload.TraceRows``; None without a
        trace); a bad file or cell is a CapsimError naming the file, the row and the column."""
        t, tp = self.trace_spec(), self.trace_path()
        if t is None or tp is None:
            return None
        key = (*_file_key(tp), t.format, json.dumps(t.options, sort_keys=True, default=str))
        if key not in _TRACES:
            from sim.traces import read_trace
            from sim.workload import validate_trace

            _remember(_TRACES, key, validate_trace(read_trace(tp, t.format, **t.options), str(tp)))
        return _TRACES[key]

    def build_policy(self, spec: PolicySpec, single_thread: bool = False) -> Any:
        """The policy for ``spec``; with ``single_thread`` a solver's ``threads`` defaults to 1 (parallel sweeps)."""
        import optim

        params = spec.params
        if single_thread and "threads" not in params:
            cls = optim.registry().get(spec.kind)
            if cls is not None and "threads" in (param_names(cls) or ()):
                params["threads"] = 1
        return optim.build_any(spec.kind, **params)


def param_names(cls: Any) -> tuple[str, ...] | None:
    """A registered kind's parameters (``Component.param_names()``), or None when they cannot be listed (a kind
    outside the contract, or one taking ``**kwargs``): its constructor then checks them itself."""
    try:
        return tuple(cls.param_names())
    except (AttributeError, TypeError):
        return None


def registered_policies(fixed: bool = True) -> list[str]:
    """Registered policy kinds in registration order, each policy once (aliases such as ``ps`` dropped); without
    ``fixed``, only those that plan capacity (``Policy.plans_capacity``: not Gavel's, which schedule given servers)."""
    import optim

    return [k for k, cls in optim.registry(aliases=False).items() if fixed or getattr(cls, "plans_capacity", True)]


_PREDICTORS: dict[str, Any] = {}
_TRACES: dict[tuple, Any] = {}
_HASHES: dict[tuple, str] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def _remember(cache: dict, key: Any, value: Any, size: int = 16) -> None:
    if len(cache) >= size:
        cache.pop(next(iter(cache)))
    cache[key] = value


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, computed once per file version and process (traces enter run ids by it)."""
    import hashlib

    key = _file_key(path)
    if key not in _HASHES:
        _remember(_HASHES, key, hashlib.sha256(path.read_bytes()).hexdigest(), 64)
    return _HASHES[key]


def _build_predictor(spec: PredictorSpec) -> Any:
    """Build a predictor, reusing one built earlier in this process from the same spec (fits are costly)."""
    import predictors

    key = json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    if key not in _PREDICTORS:
        _remember(_PREDICTORS, key, predictors.build(spec.kind, **spec.params))
    return _PREDICTORS[key]
