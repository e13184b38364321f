"""Checks of a scenario that its models cannot express: unknown names (VM types, GPU models, job types, policies,
predictors, trace formats), parameters a component does not take (read from ``Component.param_names()``), files.

``validate_scenario`` runs the models and these checks and returns every problem at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from experiments.scenario.components import PredictorSpec, build_policy, param_names
from experiments.scenario.loading import Problem, did_you_mean, pydantic_problems
from experiments.scenario.outside import policy_class
from experiments.scenario.spec import Scenario
from experiments.scenario.vms import CloudSelection, CustomVM
from experiments.scenario.workload import TraceSpec
from sim.model import CapsimError

__all__ = ["semantic_problems", "validate_scenario"]


def _unknown_params(cls: Any, params: dict[str, Any], what: str, path: tuple) -> list[Problem]:
    """A problem per parameter ``cls`` does not take (with a close match and the accepted ones)."""
    known = param_names(cls)
    if known is None:
        return []
    return [Problem(path + (k,), f"unknown parameter {k!r} for {what}{did_you_mean(k, known)} "
                    f"(parameters: {', '.join(known) or 'none'})") for k in params if k not in known]


def _bool_for_number(cls: Any, params: dict[str, Any], what: str, path: tuple) -> list[Problem]:
    """A problem per parameter given true/false where ``cls`` takes a number (YAML reads `yes`, `off` as booleans)."""
    try:
        defaults = cls.param_defaults()
    except (AttributeError, TypeError):
        return []
    out = []
    for k, v in params.items():
        d = defaults.get(k)
        if isinstance(v, bool) and isinstance(d, (int, float)) and not isinstance(d, bool):
            out.append(Problem(path + (k,), f"expected a number for {what} (default {d!r}), found {v!r} (YAML reads "
                               f"yes/no/on/off/true/false as true or false)"))
    return out


def _param_at(at: tuple, message: str, params: dict[str, Any]) -> tuple:
    """The path of the parameter a component's error is about (its message opens ``<component>: <param> ...``, as
    ``milp policy: fallback 'none' is not a policy``), so the problem points at that parameter's line."""
    m = re.match(r"[^:]*: (\w+)\b", message)
    return at + (m.group(1),) if m and m.group(1) in params else at


def _check_params(cls: Any, params: dict[str, Any], what: str, at: tuple, build: Any, problems: list[Problem]) -> None:
    """A problem per parameter ``cls`` does not take; if there is none, a trial ``build()`` whose failure is one."""
    hints = _unknown_params(cls, params, what, at) or _bool_for_number(cls, params, what, at)
    if hints:
        problems.extend(hints)
        return
    try:
        build()
    except CapsimError as e:
        problems.append(Problem(_param_at(at, str(e), params), str(e)))
    except Exception as e:  # noqa: BLE001 (a constructor rejecting its parameters is a user mistake)
        problems.append(Problem(at, f"{what} rejected its parameters: {type(e).__name__}: {e}"))


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
    import predictors

    _check_params(known[kind], d, f"predictor {kind!r}", path, lambda: predictors.build(kind, **d), problems)


def _check_colocation(sc: Scenario, problems: list[Problem]) -> None:
    """``colocation``'s interference models are registered kinds, given parameters they take."""
    from predictors import interference

    known = interference.registry()
    assert sc.colocation is not None
    for field in ("interference", "estimator"):
        spec = getattr(sc.colocation, field)
        if spec is None:
            continue
        at = ("colocation", field)
        if spec.kind not in known:
            problems.append(Problem(at + ("kind",), f"unknown interference model {spec.kind!r}"
                                    f"{did_you_mean(spec.kind, known)} (known: {', '.join(sorted(known))})"))
            continue
        _check_params(known[spec.kind], spec.params, f"interference model {spec.kind!r}", at,
                      lambda spec=spec: interference.build(spec.kind, **spec.params), problems)


def _check_trace(sc: Scenario, trace: TraceSpec, problems: list[Problem]) -> None:
    """The trace's format is registered, its options are the reader's parameters, and its file exists."""
    from sim.traces import TRACE_FORMATS

    mapping = not isinstance(sc.workload.trace, str)
    at = ("workload", "trace")
    formats = TRACE_FORMATS.kinds()
    if trace.format not in formats:
        problems.append(Problem(at + ("format",), f"unknown trace format {trace.format!r}"
                                f"{did_you_mean(trace.format, formats)} (known formats: {', '.join(sorted(formats))})"))
        return
    reader = formats[trace.format]
    before = len(problems)
    _check_params(reader, trace.options, f"trace format {trace.format!r}", at,
                  lambda: TRACE_FORMATS.build(trace.format, **trace.options), problems)
    if len(problems) > before:
        return
    tp = sc.trace_path()
    where = at + (("path",) if mapping else ())
    if tp is not None and not tp.is_file():
        problems.append(Problem(where, f"expected a {getattr(reader, 'file_kind', 'trace')} file (relative "
                                f"to the scenario file), found no file at {tp}"))
        return
    try:
        sc.trace_rows()  # read and checked once, here, rather than in every run
    except CapsimError as e:  # the file as the scenario names it (a reader names the path it was given)
        problems.append(Problem(where, str(e).replace(str(tp), trace.path) if tp is not None else str(e)))
    except OSError as e:
        problems.append(Problem(where, f"cannot read {tp}: {e.strerror}"))


def _selected(sel: CloudSelection, at: tuple, problems: list[Problem]) -> list[str]:
    """The names of the cloud VM types ``sel`` selects; a problem (and none) if a filter matches nothing."""
    from sim import catalogue

    try:
        return [v.name for v in catalogue.select_vm_types(sel.provider, sel.region, sel.gpu, sel.gpus)]
    except CapsimError as e:
        problems.append(Problem(at, str(e)))
        return []


_FEASIBLE: dict[str, str | None] = {}


def _check_feasible(sc: Scenario, problems: list[Problem]) -> None:
    """Every job of the workload (its mix, or every trace row) has a configuration the truth predictor can run it
    on, checked once here rather than failing every run; the answer is kept per truth, VM types and job specs."""
    from sim.workload import fastest_runtimes, trace_jobs

    rows = sc.trace_rows()
    specs = sorted({repr(s) for s in rows.specs}) if rows is not None else [repr(s) for s, _ in sc.job_mix()]
    truth_spec = sc.truth or sc.predictor
    try:
        configs = sc.build_cluster().configs  # a fixed cluster's gangs reach counts no single server has
    except CapsimError:
        return  # the cluster's own problems are reported where they are found
    key = repr((truth_spec.model_dump(mode="json"), [repr(c) for c in configs], specs, rows is not None))
    if key not in _FEASIBLE:
        if len(_FEASIBLE) > 256:
            _FEASIBLE.clear()
        try:
            _, truth = sc.predictors()
            if rows is not None:
                trace_jobs(rows, truth, configs, 0, rows.source)
            else:
                fastest_runtimes([s for s, _ in sc.job_mix()], truth, configs)
            _FEASIBLE[key] = None
        except CapsimError as e:
            _FEASIBLE[key] = str(e)
        except Exception as e:  # noqa: BLE001 (a predictor failing on this workload fails every run: say so now)
            _FEASIBLE[key] = (f"the truth predictor {truth_spec.kind!r} fails on this workload: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}")
    why = _FEASIBLE[key]
    if why is not None:
        problems.append(Problem(("workload", "trace" if rows is not None else "mix"), why))


def _check_fixed_cluster(sc: Scenario, problems: list[Problem]) -> None:
    """A fixed cluster's GPU models and the fields it excludes; rounds exclude periodic decisions."""
    from experiments.scenario.servers import TRACE, check_servers

    problems.extend(Problem(("cluster",) + path, message) for path, message in check_servers(sc.cluster))
    if sc.cluster.servers == TRACE:
        _check_trace_servers(sc, problems)
    if sc.cluster.rounds is not None and sc.cluster.decision_interval is not None:
        problems.append(Problem(("cluster", "rounds"), "expected rounds or decision_interval, not both: in round "
                                "mode the decisions are the round boundaries"))


def _check_trace_servers(sc: Scenario, problems: list[Problem]) -> None:
    """``servers: trace``: a trace whose format describes its hardware, and prices for its GPU models."""
    at = ("cluster", "servers")
    if sc.trace_spec() is None:
        problems.append(Problem(at, "expected a workload trace with servers: trace (the cluster is the hardware the "
                                "trace's jobs ran on); give workload.trace or list the servers"))
        return
    tp = sc.trace_path()
    if tp is None or not tp.exists():
        return  # the missing file is reported at workload.trace.path
    try:
        hardware = sc.hardware()
    except CapsimError as e:
        problems.append(Problem(at, str(e)))
        return
    price = sc.cluster.server_price
    if isinstance(price, dict):
        models = sorted({h.gpu for h in hardware})
        for m in price:
            if m not in models:
                problems.append(Problem(("cluster", "server_price", m), f"expected a GPU model of the trace's hardware "
                                        f"({', '.join(models)}), found {m!r}{did_you_mean(m, models)}"))


def _check_rented_slots(sc: Scenario, problems: list[Problem]) -> None:
    """The rented slots: what their groups name (``experiments.scenario.slots``), their spot markets, and no
    rentable type named like an owned server's."""
    from experiments.scenario.slots import entry_problems, slot_problems

    c = sc.cluster
    before = len(problems)
    problems.extend(Problem(("cluster",) + path, message) for path, message in entry_problems(c))
    if len(problems) == before:
        _check_spot(sc, problems)
    if len(problems) > before:
        return
    owned = c.owned_names(sc.hardware())
    problems.extend(Problem(("cluster",) + path, message)
                    for path, message in slot_problems(c, owned, c.rentable_vm_types(sc.base_dir)))
    if owned and len(problems) == before:
        for v in c.rentable_vm_types(sc.base_dir):
            if v.name in owned:
                problems.append(Problem(("cluster", "vm_types"), f"expected rentable VM types named apart from the "
                                        f"owned servers' ({', '.join(owned)}), found a rentable type {v.name!r}; "
                                        f"rename it"))


def _check_spot(sc: Scenario, problems: list[Problem]) -> None:
    """``cluster.spot``: rented slots to rent spot on, not with rounds, a replayed trace that reads, rates for known
    names, some type with a spot price."""
    spot = sc.cluster.spot
    if spot is None or sc.cluster.rented_nodes is None:  # spot without rented slots: check_servers names it
        return
    at = ("cluster", "spot")
    if sc.cluster.rounds is not None:
        problems.append(Problem(at, "expected no spot VMs with cluster.rounds (round mode does not model them); "
                                "remove one of them"))
        return
    listed = sc.cluster.listed_vm_types()
    before = len(problems)
    if spot.trace is not None:
        try:
            sc.cluster.spot_markets(sc.base_dir)
        except CapsimError as e:
            problems.append(Problem(at + ("trace",), str(e)))
            return
    if isinstance(spot.revocation_rate, dict):
        known = {v.name for v in listed} | {v.gpu.name for v in listed} | {"default"}
        for k in spot.revocation_rate:
            if k not in known:
                problems.append(Problem(at + ("revocation_rate", k), f"expected a VM type or GPU model of the "
                                        f"cluster, or 'default', found {k!r}{did_you_mean(k, known)}"))
    if not any(v.spot_price_per_hour is not None for v in listed):
        problems.append(Problem(at, "expected some VM type with a spot price (spot_price_per_hour), found none: no "
                                "VM can be rented spot"))
    if len(problems) > before:
        return
    try:
        sc.cluster.rentable_vm_types(sc.base_dir)
    except CapsimError as e:
        problems.append(Problem(at + ("revocation_rate",), str(e)))


def semantic_problems(sc: Scenario, runnable: bool = True) -> list[Problem]:
    """Problems pydantic cannot see: unknown names (VM types, GPUs, job types, policies, predictors), files, trace
    contents; with ``runnable``, also jobs the truth predictor cannot run (a sweep's base scenario need not be
    runnable on its own: its grid points are checked)."""
    from sim import catalogue

    problems: list[Problem] = []
    catalogue_vms = catalogue.vm_types()
    cluster_vm_names: list[str] = []
    if sc.cluster.vm_types is None:
        cluster_vm_names = list(catalogue_vms)
    else:
        known_vms = {**catalogue_vms, **catalogue.cloud_vm_types()}
        for i, v in enumerate(sc.cluster.vm_types):
            if isinstance(v, CloudSelection):
                names = _selected(v, ("cluster", "vm_types", i), problems)
            else:
                names = [v if isinstance(v, str) else v.name]
            if isinstance(v, str) and v not in known_vms:
                problems.append(Problem(("cluster", "vm_types", i),
                                        f"unknown VM type {v!r}{did_you_mean(v, known_vms)} "
                                        f"(the catalogue has {', '.join(catalogue_vms)}; the cloud catalogue "
                                        f"{len(known_vms) - len(catalogue_vms)} more, see docs/clouds.md; "
                                        f"or define it inline)"))
            if isinstance(v, CustomVM) and v.gpu not in catalogue.gpu_models():
                models = catalogue.gpu_models()
                problems.append(Problem(("cluster", "vm_types", i, "gpu"), f"unknown GPU model {v.gpu!r}"
                                        f"{did_you_mean(v.gpu, models)} (known: {', '.join(models)})"))
            for name in names:
                if name in cluster_vm_names:
                    problems.append(Problem(("cluster", "vm_types", i), f"VM type {name!r} is listed twice"))
                cluster_vm_names.append(name)
    _check_fixed_cluster(sc, problems)
    if not problems:
        _check_rented_slots(sc, problems)
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
    trace = sc.trace_spec()
    if trace is not None:
        for name in sorted(sc.workload.model_fields_set - {"trace", "deadline_factor", "weight_range"}):
            problems.append(Problem(("workload", name), f"expected no {name!r} with a trace (the trace file gives the "
                                    f"jobs and their arrival times; only deadline_factor and weight_range apply, to "
                                    f"rows without a deadline or weight), found "
                                    f"{getattr(sc.workload, name)!r}; remove it or remove `trace`"))
        _check_trace(sc, trace, problems)

    import optim
    import predictors

    known_pred = predictors.registry()
    for field in ("predictor", "estimator", "truth"):
        spec = getattr(sc, field)
        if spec is not None:
            _check_predictor(spec, (field,), known_pred, problems)

    if sc.colocation is not None:
        _check_colocation(sc, problems)

    known_pol = optim.registry()
    if sc.policies is not None:
        if not sc.policies:
            problems.append(Problem(("policies",), "expected at least one policy, found an empty list"))
        seen: dict[str, int] = {}
        for i, p in enumerate(sc.policies):
            try:
                cls = policy_class(p.kind)
            except CapsimError as e:
                problems.append(Problem(("policies", i, "kind"), str(e)))
                continue
            if cls is None:
                problems.append(Problem(("policies", i, "kind"), f"unknown policy {p.kind!r}"
                                        f"{did_you_mean(p.kind, known_pol)} (known policies: "
                                        f"{', '.join(sorted(known_pol))}; or package.module:Class for your own)"))
                continue
            if p.label in seen:
                problems.append(Problem(("policies", i, "name"), f"policy name {p.label!r} is used twice "
                                        f"(also policies[{seen[p.label]}]); give each a distinct `name:`"))
            seen[p.label] = i
            _check_params(cls, p.params, f"policy {p.kind!r}", ("policies", i),
                          lambda p=p: build_policy(p), problems)
    elif not known_pol:
        problems.append(Problem(("policies",), "no policies are registered; list some under `policies:`"))
    if runnable and not problems:
        _check_feasible(sc, problems)
    return problems


def validate_scenario(data: Any, file: str, base_dir: Path, prefix: tuple = (),
                      runnable: bool = True) -> tuple[Scenario | None, list[Problem]]:
    """Validate plain data as a Scenario; return it (or None) and every problem found, paths under ``prefix``
    (``runnable``: see ``semantic_problems``)."""
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
            partial.located(base_dir)
            problems += [p for p in semantic_problems(partial, runnable=False) if p.path and p.path[0] not in bad_top]
        for p in problems:
            p.path = tuple(prefix) + tuple(p.path)
        return None, problems
    sc.located(base_dir, file)
    problems = semantic_problems(sc, runnable)
    for p in problems:
        p.path = tuple(prefix) + tuple(p.path)
    return (sc if not problems else None), problems
