"""One conformance suite run over every registered predictor (the registry is enumerated, never a hand list), built
on ``sim.testing.check_predictor`` (the checks an outside author runs on their own predictor).

A predictor that cannot be built with its defaults declares ``test_params`` on its class; none is skipped.
"""

from __future__ import annotations

import pytest

from predictors import build, registry
from predictors.measurements import runs
from sim.catalogue import job_types, vm_types
from sim.contracts import Predictor
from sim.testing import check_predictor

KINDS = sorted(registry(aliases=False))


def _params(kind: str) -> dict:
    return dict(registry()[kind].test_params)


def test_registry_is_enumerated() -> None:
    assert {"measured", "regression", "analytical", "wave", "noisy", "table", "hybrid"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_check_predictor(kind: str) -> None:
    check_predictor(build(kind, **_params(kind)), runs=runs())


def test_every_trainable_kind_learns_from_its_runs() -> None:
    # fitted without any K80 or M60 run (wave's origin), nothing may be read off those measurements any more
    no_k80 = runs()[~runs()["gpu"].isin(["K80", "M60"])]
    j6, nc6 = job_types()["J6"], vm_types()["NC6"]
    for kind in KINDS:
        cls = registry()[kind]
        if not cls.trainable():
            continue
        full = build(kind, **_params(kind)).runtime(j6, nc6, 1)
        part = build(kind, **_params(kind)).fit(no_k80)
        assert isinstance(part, Predictor)
        assert part.runtime(j6, nc6, 1) != full, kind
