"""One conformance suite run over every registered predictor (the registry is enumerated, never a hand list).

A predictor that cannot be built with its defaults declares ``test_params`` on its class; none is skipped.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from predictors import build
from predictors.base import TrainablePredictor, clone
from predictors.measurements import runs
from sim.catalogue import configurations, job_types, vm_types
from sim.contracts import PREDICTORS, Predictor

KINDS = sorted(PREDICTORS.kinds(aliases=False))


def _params(kind: str) -> dict:
    return dict(PREDICTORS.kinds()[kind].test_params)


def _table_inputs():
    base = list(job_types().values())
    specs = base + [dataclasses.replace(s, iterations=s.iterations // 3 + 1, name=s.name) for s in base]
    specs += [dataclasses.replace(base[4], batch_size=128, name=base[4].name)]
    return specs, configurations(vm_types().values())


@pytest.fixture(scope="module", params=KINDS)
def case(request):
    kind = request.param
    p = build(kind, **_params(kind))
    specs, configs = _table_inputs()
    return kind, p, specs, configs, p.runtimes(specs, configs)


def test_registry_is_enumerated() -> None:
    assert {"measured", "regression", "analytical", "wave", "noisy", "table", "hybrid"} <= set(KINDS)


def test_vectorised_equals_scalar(case) -> None:
    kind, p, specs, configs, table = case
    assert table.shape == (len(specs), len(configs))
    scalar = np.array([[p.runtime(s, c.vm, c.gpus) for c in configs] for s in specs])
    assert np.array_equal(table, scalar), f"{kind}: runtimes differs from runtime"


def test_inf_exactly_where_support_gives_a_reason(case) -> None:
    kind, p, specs, configs, table = case
    for i, s in enumerate(specs):
        for k, c in enumerate(configs):
            why = p.support(s, c.vm, c.gpus)
            assert (why is None) == bool(np.isfinite(table[i, k])), f"{kind}: {s.name} on {c.label}: {why!r}"
            assert why is None or (isinstance(why, str) and why)
    assert (table[np.isfinite(table)] > 0).all()


def test_deterministic_across_instances(case) -> None:
    kind, p, specs, configs, table = case
    again = build(kind, **_params(kind))
    assert np.array_equal(again.runtimes(specs, configs), table)


def test_params_round_trip(case) -> None:
    kind, p, specs, configs, table = case
    params = p.get_params()
    assert set(params) == set(p.param_names())
    twin = build(kind, **params)
    assert twin.get_params().keys() == params.keys()
    assert twin.describe() == p.describe()
    assert np.array_equal(twin.runtimes(specs, configs), table)


def test_trainable_predictors_fit_explicitly(case) -> None:
    kind, p, specs, configs, table = case
    cls = type(p)
    if not cls.trainable():
        with pytest.raises(Exception, match="not trainable"):
            p.fit(runs())
        return
    assert isinstance(p, TrainablePredictor)
    fresh = build(kind, **_params(kind))
    assert not fresh.fitted, f"{kind}: learnt state set in __init__"
    assert fresh.fit(runs()) is fresh and fresh.fitted
    assert np.array_equal(fresh.runtimes(specs, configs), table)
    assert not any(k.endswith("_") for k in vars(clone(fresh))), "clone must be unfitted"


def test_every_trainable_kind_learns_from_its_runs() -> None:
    # fitted without any K80 or M60 run (wave's origin), nothing may be read off those measurements any more
    no_k80 = runs()[~runs()["gpu"].isin(["K80", "M60"])]
    j6, nc6 = job_types()["J6"], vm_types()["NC6"]
    for kind in KINDS:
        cls = PREDICTORS.kinds()[kind]
        if not cls.trainable():
            continue
        full = build(kind, **_params(kind)).runtime(j6, nc6, 1)
        part = build(kind, **_params(kind)).fit(no_k80)
        assert isinstance(part, Predictor)
        assert part.runtime(j6, nc6, 1) != full, kind
