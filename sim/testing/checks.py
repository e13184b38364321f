"""The conformance checks of the three kinds of component: the parameter contract every component follows
(``check_component``), and ``check_policy``, ``check_predictor`` and ``check_trace_reader``."""

from __future__ import annotations

import dataclasses
import inspect
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.catalogue import configurations, job_types, vm_types
from sim.contracts import TIME_MODELS, Component, Policy, Predictor
from sim.model import CapsimError, Config, JobSpec
from sim.testing.replay import check_replay_policy
from sim.testing.runs import World, check_plan_names, check_run, recorded_run, small_worlds
from sim.testing.spot import check_spot_pricing
from sim.traces.base import MEASURED, REQUIRED, TraceReader

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["check_component", "check_policy", "check_predictor", "check_trace_reader"]


def _same(a: Any, b: Any) -> bool:
    """Equal parameter values: components by their parameters, arrays by content, others by ``==`` and type (an int
    stands for the equal float)."""
    if isinstance(a, Component) and isinstance(b, Component):
        return type(a) is type(b) and _same_params(a.get_params(), b.get_params())
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    try:
        return bool(a == b) and (type(a) is type(b) or {type(a), type(b)} <= {int, float})
    except Exception:  # noqa: BLE001  (values that cannot compare are not the same)
        return False


def _same_params(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def check_component(component: Component) -> None:
    """The parameter contract: ``get_params()`` names the constructor's parameters in order; ``clone()`` is a new,
    unfitted component of the same class with the same parameters and label (component parameters cloned, not
    shared); ``set_params()`` changes a parameter and sets it back, refuses an unknown name, and leaves no learnt
    state; the label names a parameter that differs from its default; no ``*args``/``**kwargs``; and built from its
    defaults and ``test_params``, it stores each of them as given (the very object, not a converted copy)."""
    cls, label = type(component), component.describe()
    params = component.get_params()
    assert tuple(params) == cls.param_names(), f"{label}: get_params() gives {list(params)}, the signature " \
                                               f"{list(cls.param_names())}"
    defaults = cls.param_defaults()
    nested = {k: params[k] for k, v in cls.test_params.items() if isinstance(v, Mapping) and "kind" in v}
    given = {**defaults, **cls.test_params, **nested}  # a {kind: ...} parameter is the one the registry built
    for name, value in cls(**{**dict(cls.test_params), **nested}).get_params().items():
        scalar = isinstance(given[name], (bool, int, float, str)) and type(value) is type(given[name])
        assert value is given[name] or (scalar and value == given[name]), \
            f"{label}: built with {name}={given[name]!r}, it stores {value!r}: store parameters as given"
    twin = component.clone()
    assert type(twin) is cls and twin is not component, f"{label}: clone() is not a new {cls.__name__}"
    assert _same_params(twin.get_params(), params), f"{label}: clone() has {twin.get_params()}, not {params}"
    assert twin.describe() == label, f"{label}: its clone is labelled {twin.describe()!r}"
    assert not twin.fitted if isinstance(twin, Predictor) else True, f"{label}: a clone holds learnt state"
    for k, v in params.items():
        assert not isinstance(v, Component) or twin.get_params()[k] is not v, f"{label}: clone() shares {k}"
    try:
        twin.set_params(no_such_parameter=1)
    except CapsimError as e:
        assert "no_such_parameter" in str(e), f"{label}: set_params' error does not name the parameter: {e}"
    else:
        raise AssertionError(f"{label}: set_params(no_such_parameter=1) was accepted")
    for name, value in params.items():
        if not isinstance(value, bool) or name in cls.test_params:
            continue
        assert twin.set_params(**{name: not value}) is twin and twin.get_params()[name] is (not value), \
            f"{label}: set_params({name}={not value}) did not take"
        if defaults[name] is not inspect.Parameter.empty and (not value) != defaults[name]:
            assert name in twin.describe(), f"{label}: the label {twin.describe()!r} does not name {name}"
        twin.set_params(**{name: value})
    assert _same_params(twin.get_params(), params), f"{label}: set_params back gives {twin.get_params()}"


def check_policy(policy: Policy, worlds: Sequence[World] | None = None) -> None:
    """Everything a policy must do: the parameter contract (``check_component``); capability flags declared on the
    class (booleans, and a known ``time_model``), never set on the instance; on each of ``worlds`` (default
    ``small_worlds()``) a run through the real engine that keeps its invariants (``check_run``), plans that name only
    known jobs, nodes and VM types, and decisions that a clone replays identically on the same snapshots; and, for a
    policy that plans capacity, spot priced at its expected cost (``check_spot_pricing``). A policy on ElasticFlow's
    time model is checked on ``sim.testing.replay``'s worlds instead (``check_replay_policy``)."""
    label, cls = policy.describe(), type(policy)
    check_component(policy)
    for flag in ("may_preempt", "may_share", "may_gang", "may_colocate", "prices_unplaceable", "plans_capacity",
                 "time_model"):
        kind = str if flag == "time_model" else bool
        assert isinstance(getattr(cls, flag), kind), f"{label}: {flag} is not a {kind.__name__} class attribute"
        assert flag not in vars(policy), f"{label}: {flag} is set on the instance; declare it on the class"
    assert cls.time_model in TIME_MODELS, f"{label}: time_model {cls.time_model!r} is none of {TIME_MODELS}"
    if cls.time_model == "elasticflow":
        assert not cls.plans_capacity, f"{label}: a policy on ElasticFlow's time model schedules given servers"
        check_replay_policy(policy)
        return
    single = bool(getattr(cls, "single_gpu_only", False))
    for i, world in enumerate(worlds if worlds is not None else small_worlds(single_gpu=single)):
        result, seen = recorded_run(world, policy.clone())
        check_run(world, result)
        assert seen, f"{label}: the engine never asked the policy (world {i})"
        replay = policy.clone()
        for k, (snapshot, plan) in enumerate(seen):
            check_plan_names(snapshot, plan)
            assert replay.decide(snapshot) == plan, f"{label}: decision {k} of world {i} differs when replayed"
    if cls.plans_capacity:
        check_spot_pricing(policy.clone())


def _inputs() -> tuple[list[JobSpec], tuple[Config, ...]]:
    """The catalogue's job types, shorter copies of them and a larger batch, on the catalogue's configurations."""
    base = list(job_types().values())
    specs = base + [dataclasses.replace(s, iterations=s.iterations // 3 + 1) for s in base]
    specs += [dataclasses.replace(base[4], batch_size=128)]
    return specs, configurations(tuple(vm_types().values()))


def check_predictor(predictor: Predictor, runs: pd.DataFrame | None = None,
                    specs: Sequence[JobSpec] | None = None, configs: Sequence[Config] | None = None) -> None:
    """Everything a predictor must do, on ``specs`` x ``configs`` (default: the catalogue's job types and variants on
    its configurations): the parameter contract; ``runtimes`` equal to ``runtime`` cell by cell; inf exactly where
    ``support`` gives a one-line reason, positive elsewhere; the same answers from a clone. A trainable predictor
    fitted on ``runs`` (a runs table, ``predictors.measurements.runs()`` for capsim's) returns itself, holds learnt
    state, answers as one fitted on the same runs by itself; an untrainable one refuses ``fit``."""
    label = predictor.describe()
    check_component(predictor)
    if specs is None or configs is None:
        specs, configs = _inputs()
    table = predictor.runtimes(specs, configs)
    assert table.shape == (len(specs), len(configs)), f"{label}: runtimes() has shape {table.shape}"
    scalar = np.array([[predictor.runtime(s, c.vm, c.gpus) for c in configs] for s in specs]).reshape(table.shape)
    assert np.array_equal(table, scalar), f"{label}: runtimes() differs from runtime()"
    for i, s in enumerate(specs):
        for k, c in enumerate(configs):
            why = predictor.support(s, c.vm, c.gpus)
            assert (why is None) == bool(np.isfinite(table[i, k])), f"{label}: {s.name} on {c.label}: {why!r}"
            assert why is None or (isinstance(why, str) and why), f"{label}: support() reason {why!r}"
    assert (table[np.isfinite(table)] > 0).all(), f"{label}: a runtime <= 0"
    assert np.array_equal(predictor.clone().runtimes(specs, configs), table), f"{label}: a clone answers otherwise"
    if not type(predictor).trainable():
        try:
            predictor.clone().fit(runs if runs is not None else _no_runs())
        except CapsimError as e:
            assert "not trainable" in str(e), f"{label}: fit() refused with {e}"
        else:
            raise AssertionError(f"{label}: an untrainable predictor accepted fit()")
        return
    assert runs is not None, f"{label} is trainable: give check_predictor the runs to fit it on"
    fresh = predictor.clone()
    assert not fresh.fitted, f"{label}: learnt state set in __init__"
    assert fresh.fit(runs) is fresh and fresh.fitted, f"{label}: fit() must return the fitted predictor itself"
    again = predictor.clone().fit(runs)
    assert np.array_equal(fresh.runtimes(specs, configs), again.runtimes(specs, configs)), \
        f"{label}: two fits on the same runs answer otherwise"
    assert not fresh.clone().fitted, f"{label}: a clone of a fitted predictor holds learnt state"


def _no_runs() -> Any:
    import pandas as pd

    return pd.DataFrame()


def check_trace_reader(reader: TraceReader, path: str | Path | None = None) -> None:
    """Everything a trace reader must do: the parameter contract; a declared ``example`` of ``example_jobs`` jobs and
    ``file_kind``; the example (with its ``companions`` beside it), or the file at ``path``, read twice into the same
    table with the ``REQUIRED`` or the ``MEASURED`` columns and one row per job, which ``sim.workload`` validates and
    turns into jobs numbered from 0 in submission order, the same jobs from the same seed."""
    from sim.workload import trace_jobs

    label, cls = reader.describe(), type(reader)
    check_component(reader)
    assert cls.example and cls.example_jobs > 0 and cls.file_kind, f"{label}: no example, example_jobs or file_kind"
    with tempfile.TemporaryDirectory() as tmp:
        if path is None:
            path = Path(tmp) / f"example.{cls.name}"
            path.write_text(cls.example, encoding="utf-8")
            for name, text in cls.companions.items():
                (Path(tmp) / name).write_text(text, encoding="utf-8")
        table = reader.read(Path(path))
        columns = set(table.columns)
        assert len(table) == cls.example_jobs and (set(REQUIRED) <= columns or set(MEASURED) <= columns), \
            f"{label}: the example gives {len(table)} rows with columns {list(table.columns)}"
        assert table.equals(reader.read(Path(path))), f"{label}: two reads of one file differ"
        jobs = trace_jobs(table, _PerIteration(), _CONFIGS, 0, str(path))
        assert [j.id for j in jobs] == list(range(len(table)))
        assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
        assert all(j.deadline >= j.submit_time and j.weight >= 0 for j in jobs)
        assert jobs == trace_jobs(reader.read(Path(path)), _PerIteration(), _CONFIGS, 0, str(path))


class _PerIteration(Predictor):
    """A truth for any job: 10 ms per iteration over the GPU count (so every application is supported)."""

    name = "per_iteration"

    def runtime(self, spec: JobSpec, vm: Any, gpus: int) -> float:
        return 0.01 * spec.iterations / gpus


_CONFIGS = configurations(tuple(vm_types().values())[:3], {v.name: 64 for v in tuple(vm_types().values())[:3]})
