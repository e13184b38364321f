"""Scenario files: the cluster, the workload, the predictors and the policies of one experiment.

A scenario is YAML validated by the pydantic models below (unknown keys are errors). ``load_scenario`` reads a file
and raises one CapsimError listing every problem; ``Scenario`` then builds the simulator's objects (VM types, node
slots, cluster, jobs, predictors, policies) for a given seed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from sim.model import CapsimError, JobSpec, VMType

from experiments.loading import Problem, Source, did_you_mean, pydantic_problems, raise_problems, read_yaml

__all__ = [
    "Scenario",
    "ClusterSpec",
    "WorkloadSpec",
    "PolicySpec",
    "PredictorSpec",
    "load_scenario",
    "default_scenario_path",
    "validate_scenario",
    "parse_seeds",
]

NonNeg = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CustomVM(_Strict):
    """A VM type not in the catalogue, defined inline."""

    name: str
    gpu: str
    gpus: PositiveInt
    price_per_hour: NonNeg
    boot_time: NonNeg = 0.0
    provider: str = "custom"


class SlotGroup(_Strict):
    """``count`` node slots that may host only the listed VM types (all of the cluster's types if omitted)."""

    count: PositiveInt = 1
    vm_types: list[str] | None = None


def _nodes_tag(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return "<count>"
    if isinstance(v, list):
        return "<groups>"
    return None


def _vm_tag(v: Any) -> str | None:
    if isinstance(v, str):
        return "<name>"
    if isinstance(v, dict):
        return "<custom>"
    return None


VMEntry = Annotated[
    Annotated[str, Tag("<name>")] | Annotated[CustomVM, Tag("<custom>")],
    Discriminator(
        _vm_tag,
        custom_error_type="capsim_choice",
        custom_error_message="expected a catalogue VM type name or a mapping {name, gpu, gpus, price_per_hour}",
    ),
]


class ClusterSpec(_Strict):
    """Node slots and the VM types they may host, billing and rescheduling options."""

    nodes: Annotated[
        Annotated[PositiveInt, Tag("<count>")] | Annotated[list[SlotGroup], Tag("<groups>")],
        Discriminator(
            _nodes_tag,
            custom_error_type="capsim_choice",
            custom_error_message="expected a number of nodes or a list of slot groups {count, vm_types}",
        ),
    ] = 5
    vm_types: list[VMEntry] | None = None
    billing_quantum: NonNeg = 0.0
    restart_overhead: NonNeg = 0.0
    decision_interval: PositiveFloat | None = None

    @property
    def node_count(self) -> int:
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
    def _complete(self) -> "JobTypeSpec":
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


class WorkloadSpec(_Strict):
    """Poisson arrivals of a job mix (or a CSV trace), deadlines and tardiness weights."""

    jobs: PositiveInt | None = None
    mean_interarrival: PositiveFloat = 30.0
    mix: (
        Annotated[
            Annotated[dict[str, PositiveFloat], Tag("<weights>")] | Annotated[list[JobTypeSpec], Tag("<specs>")],
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
    trace: str | None = None

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
        return [value]
    if isinstance(value, str):
        m = _SEED_RANGE.match(value)
        if m and int(m.group(1)) <= int(m.group(2)):
            return list(range(int(m.group(1)), int(m.group(2)) + 1))
        if re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", value):
            return [int(x) for x in value.split(",")]
        raise ValueError(f"expected a list of seeds or a range like '0-4', found {value!r}")
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        if any(x < 0 for x in value):
            raise ValueError(f"expected seeds ≥ 0, found {value}")
        if len(set(value)) != len(value):
            raise ValueError(f"expected distinct seeds, found {value}")
        return list(value)
    raise ValueError(f"expected a non-empty list of whole-number seeds or a range like '0-4', found {value!r}")


class Scenario(_Strict):
    """One experiment: cluster, workload, predictor (estimator and truth default to it), policies and seeds."""

    name: str = "scenario"
    cluster: ClusterSpec = ClusterSpec()
    workload: WorkloadSpec = WorkloadSpec()
    predictor: PredictorSpec = PredictorSpec(kind="measured")
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

    # ----- resolution helpers -------------------------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def file(self) -> str:
        return self._file

    @property
    def n_jobs(self) -> int:
        return self.workload.jobs if self.workload.jobs is not None else 10 * self.cluster.node_count

    def policy_specs(self) -> list[PolicySpec]:
        """The policies to run: those listed, else every registered policy with default parameters."""
        if self.policies is not None:
            return list(self.policies)
        return [PolicySpec(kind=k) for k in registered_policies()]

    def trace_path(self) -> Path | None:
        if self.workload.trace is None:
            return None
        p = Path(self.workload.trace)
        return p if p.is_absolute() else self._base_dir / p

    def resolved(self, policy: PolicySpec | None = None, seed: int | None = None) -> dict[str, Any]:
        """The fully resolved configuration as plain data: defaults filled, catalogue names replaced by their
        definitions (VM types, job types), a trace by its content hash."""
        d = self.model_dump(mode="json", exclude={"policies", "seeds"})
        d["cluster"]["vm_types"] = [
            {"name": v.name, "gpu": v.gpu.name, "gpus": v.gpus, "price_per_hour": v.price_per_hour,
             "boot_time": v.boot_time, "provider": v.provider} for v in self.vm_types()
        ]
        if self.workload.trace is None:
            d["workload"]["mix"] = [
                {"name": s.name, "application": s.application, "framework": s.framework, "iterations": s.iterations,
                 "batch_size": s.batch_size, "depth": s.depth, "weight": w} for s, w in self.job_mix()
            ]
        d["workload"]["jobs"] = self.n_jobs
        d["estimator"] = d["estimator"] or d["predictor"]
        d["truth"] = d["truth"] or d["predictor"]
        tp = self.trace_path()
        if tp is not None:
            d["workload"]["trace"] = {"sha256": hashlib.sha256(tp.read_bytes()).hexdigest()}
        if policy is not None:
            d["policy"] = policy.model_dump(mode="json")
        if seed is not None:
            d["seed"] = seed
        return d

    def run_id(self, policy: PolicySpec, seed: int) -> str:
        """A stable id: the hash of the fully resolved configuration of this policy and seed (the name aside)."""
        resolved = self.resolved(policy, seed)
        resolved.pop("name")
        blob = json.dumps(resolved, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # ----- building the simulator's objects -----------------------------------------------------------------------
    def vm_types(self) -> tuple[VMType, ...]:
        from sim import catalogue

        if self.cluster.vm_types is None:
            return tuple(catalogue.vm_types().values())
        out = []
        for v in self.cluster.vm_types:
            if isinstance(v, str):
                out.append(catalogue.vm_type(v))
            else:
                out.append(VMType(v.name, catalogue.gpu(v.gpu), v.gpus, v.price_per_hour, v.boot_time, v.provider))
        return tuple(out)

    def slots(self) -> list[Any]:
        from sim.engine import NodeSlot

        if isinstance(self.cluster.nodes, int):
            return [NodeSlot(None) for _ in range(self.cluster.nodes)]
        out = []
        for g in self.cluster.nodes:
            allowed = None if g.vm_types is None else frozenset(g.vm_types)
            out.extend(NodeSlot(allowed) for _ in range(g.count))
        return out

    def build_cluster(self) -> Any:
        from sim.engine import Cluster

        c = self.cluster
        return Cluster(
            self.vm_types(),
            self.slots(),
            billing_quantum=c.billing_quantum,
            restart_overhead=c.restart_overhead,
            decision_interval=float("inf") if c.decision_interval is None else c.decision_interval,
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
            if j.application is None:
                out.append((known[j.name], j.weight))
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
        tp = self.trace_path()
        if tp is not None:
            import pandas as pd

            try:
                df = pd.read_csv(tp)
            except Exception as e:  # noqa: BLE001 (any parsing failure is the user's file)
                raise CapsimError(f"{tp}: cannot read the trace CSV: {e}") from None
            return list(wl.trace_jobs(df, truth, configs, seed, str(tp), deadline_factor=tuple(w.deadline_factor),
                                      weight_range=tuple(w.weight_range)))
        spec = wl.WorkloadSpec(
            n_jobs=self.n_jobs,
            mean_interarrival=w.mean_interarrival,
            mix=self.job_mix(),
            deadline_factor=tuple(w.deadline_factor),
            weight_range=tuple(w.weight_range),
        )
        return list(wl.poisson_jobs(spec, truth, configs, seed))

    def build_policy(self, spec: PolicySpec, single_thread: bool = False) -> Any:
        """The policy for ``spec``; with ``single_thread`` a solver's ``threads`` defaults to 1 (parallel sweeps)."""
        import optim

        params = spec.params
        if single_thread and "threads" not in params:
            cls = optim.registry().get(spec.kind)
            if cls is not None and "threads" in inspect.signature(cls).parameters:
                params["threads"] = 1
        return optim.build(spec.kind, **params)


def registered_policies() -> list[str]:
    """Registered policy kinds in registration order, each policy once (aliases such as ``ps`` dropped)."""
    import optim

    return list(optim.registry(aliases=False))


_PREDICTORS: dict[str, Any] = {}


def _build_predictor(spec: PredictorSpec) -> Any:
    """Build a predictor, reusing one built earlier in this process from the same spec (fits are costly)."""
    import predictors

    key = json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    if key not in _PREDICTORS:
        if len(_PREDICTORS) >= 16:
            _PREDICTORS.pop(next(iter(_PREDICTORS)))
        _PREDICTORS[key] = predictors.build(spec.kind, **spec.params)
    return _PREDICTORS[key]


# ----- validation ---------------------------------------------------------------------------------------------------


def _unknown_params(cls: Any, params: dict[str, Any], what: str, path: tuple) -> list[Problem]:
    """A problem per parameter ``cls`` does not take (with a close match and the accepted ones)."""
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return []
    known = [n for n in sig.parameters if n != "self"]
    return [Problem(path + (k,), f"unknown parameter {k!r} for {what}{did_you_mean(k, known)} "
                    f"(parameters: {', '.join(known) or 'none'})") for k in params if k not in known]


def _check_predictor(spec: dict[str, Any] | PredictorSpec, path: tuple, known: dict, problems: list[Problem]) -> None:
    d = spec.model_dump() if isinstance(spec, PredictorSpec) else dict(spec)
    kind = d.pop("kind", None)
    if kind not in known:
        problems.append(
            Problem(path + ("kind",), f"unknown predictor {kind!r}{did_you_mean(str(kind), known)} "
                    f"(known predictors: {', '.join(sorted(known))})")
        )
        return
    if isinstance(d.get("base"), dict):
        _check_predictor(d["base"], path + ("base",), known, problems)
        if problems:
            return
    hints = _unknown_params(known[kind], d, f"predictor {kind!r}", path)
    if hints:
        problems.extend(hints)
        return
    try:
        import predictors

        predictors.build(kind, **d)
    except CapsimError as e:
        problems.append(Problem(path, str(e)))
    except Exception as e:  # noqa: BLE001 (a constructor rejecting its parameters is a user mistake)
        problems.append(Problem(path, f"predictor {kind!r} rejected its parameters: {type(e).__name__}: {e}"))


def semantic_problems(sc: Scenario) -> list[Problem]:
    """Problems pydantic cannot see: unknown names (VM types, GPUs, job types, policies, predictors), files."""
    from sim import catalogue

    problems: list[Problem] = []
    catalogue_vms = catalogue.vm_types()
    cluster_vm_names: list[str] = []
    if sc.cluster.vm_types is None:
        cluster_vm_names = list(catalogue_vms)
    else:
        for i, v in enumerate(sc.cluster.vm_types):
            name = v if isinstance(v, str) else v.name
            if isinstance(v, str) and v not in catalogue_vms:
                problems.append(Problem(("cluster", "vm_types", i), f"unknown VM type {v!r}{did_you_mean(v, catalogue_vms)} "
                                        f"(the catalogue has {', '.join(catalogue_vms)}; or define it inline)"))
            if not isinstance(v, str) and v.gpu not in catalogue.gpu_models():
                models = catalogue.gpu_models()
                problems.append(Problem(("cluster", "vm_types", i, "gpu"), f"unknown GPU model {v.gpu!r}"
                                        f"{did_you_mean(v.gpu, models)} (known: {', '.join(models)})"))
            if name in cluster_vm_names:
                problems.append(Problem(("cluster", "vm_types", i), f"VM type {name!r} is listed twice"))
            cluster_vm_names.append(name)
    if isinstance(sc.cluster.nodes, list):
        for gi, g in enumerate(sc.cluster.nodes):
            for vi, v in enumerate(g.vm_types or []):
                if v not in cluster_vm_names:
                    problems.append(Problem(("cluster", "nodes", gi, "vm_types", vi),
                                            f"expected one of the cluster's VM types ({', '.join(cluster_vm_names)}), "
                                            f"found {v!r}{did_you_mean(v, cluster_vm_names)}"))
    jt = catalogue.job_types()
    mix = sc.workload.mix
    if isinstance(mix, dict):
        for name in mix:
            if name not in jt:
                problems.append(Problem(("workload", "mix", name), f"unknown job type {name!r}{did_you_mean(name, jt)} "
                                        f"(known: {', '.join(jt)}; or give a list of full job specs)"))
    elif isinstance(mix, list):
        for i, j in enumerate(mix):
            if j.application is None and j.name not in jt:
                problems.append(Problem(("workload", "mix", i, "name"),
                                        f"expected a catalogue job type ({', '.join(jt)}) or a full spec "
                                        f"(application, framework, iterations, batch_size), found {j.name!r}"))
    tp = sc.trace_path()
    if tp is not None:
        for name in sorted(sc.workload.model_fields_set - {"trace", "deadline_factor", "weight_range"}):
            problems.append(Problem(("workload", name), f"expected no {name!r} with a trace (the trace file gives the "
                                    f"jobs and their arrival times; only deadline_factor and weight_range apply, to "
                                    f"rows without a deadline or weight), found "
                                    f"{getattr(sc.workload, name)!r}; remove it or remove `trace`"))
    if tp is not None and not tp.is_file():
        problems.append(Problem(("workload", "trace"), f"expected a CSV file (relative to the scenario file), "
                                f"found no file at {tp}"))

    import optim
    import predictors

    known_pred = predictors.registry()
    for field in ("predictor", "estimator", "truth"):
        spec = getattr(sc, field)
        if spec is not None:
            _check_predictor(spec, (field,), known_pred, problems)

    known_pol = optim.registry()
    if sc.policies is not None:
        if not sc.policies:
            problems.append(Problem(("policies",), "expected at least one policy, found an empty list"))
        seen: dict[str, int] = {}
        for i, p in enumerate(sc.policies):
            if p.kind not in known_pol:
                problems.append(Problem(("policies", i, "kind"), f"unknown policy {p.kind!r}"
                                        f"{did_you_mean(p.kind, known_pol)} (known policies: {', '.join(sorted(known_pol))})"))
                continue
            if p.label in seen:
                problems.append(Problem(("policies", i, "name"), f"policy name {p.label!r} is used twice "
                                        f"(also policies[{seen[p.label]}]); give each a distinct `name:`"))
            seen[p.label] = i
            hints = _unknown_params(known_pol[p.kind], p.params, f"policy {p.kind!r}", ("policies", i))
            if hints:
                problems.extend(hints)
                continue
            try:
                optim.build(p.kind, **p.params)
            except CapsimError as e:
                problems.append(Problem(("policies", i), str(e)))
            except Exception as e:  # noqa: BLE001 (a constructor rejecting its parameters is a user mistake)
                problems.append(Problem(("policies", i), f"policy {p.kind!r} rejected its parameters: "
                                        f"{type(e).__name__}: {e}"))
    elif not known_pol:
        problems.append(Problem(("policies",), "no policies are registered; list some under `policies:`"))
    return problems


def validate_scenario(data: Any, file: str, base_dir: Path, prefix: tuple = ()) -> tuple[Scenario | None, list[Problem]]:
    """Validate plain data as a Scenario; return it (or None) and every problem found, paths under ``prefix``."""
    if not isinstance(data, dict):
        return None, [Problem(prefix, f"expected a mapping of scenario fields, found {type(data).__name__}")]
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        problems = pydantic_problems(e, Scenario)
        bad_top = {p.path[0] for p in problems if p.path} | {"name"}
        try:
            partial = Scenario.model_validate({k: v for k, v in data.items() if k not in bad_top})
        except ValidationError:
            partial = None
        if partial is not None:
            partial._base_dir = base_dir
            problems += [p for p in semantic_problems(partial) if p.path and p.path[0] not in bad_top]
        for p in problems:
            p.path = tuple(prefix) + tuple(p.path)
        return None, problems
    sc._base_dir = base_dir
    sc._file = file
    problems = semantic_problems(sc)
    for p in problems:
        p.path = tuple(prefix) + tuple(p.path)
    return (sc if not problems else None), problems


def default_scenario_path() -> Path:
    """The embedded default scenario (the paper's catalogue and jobs, 5 nodes, 50 jobs, every policy)."""
    return Path(str(resources.files("experiments").joinpath("scenarios", "default.yaml")))


def load_scenario(path: str | Path | None = None) -> Scenario:
    """Read and validate a scenario file (the embedded default when ``path`` is None)."""
    p = Path(path) if path is not None else default_scenario_path()
    src: Source = read_yaml(p, "scenario file")
    sc, problems = validate_scenario(src.data, str(p), p.resolve().parent)
    raise_problems(src, problems)
    assert sc is not None
    return sc
