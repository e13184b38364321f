"""The covering predictor: measured inside the measured range, the chosen extrapolation outside, and which it used."""

from __future__ import annotations

import math

import numpy as np
import pytest

from predictors import build
from predictors.hybrid import HybridPredictor
from predictors.measured import MeasuredPredictor
from sim.catalogue import configurations, gpu, job_types, vm_type, vm_types
from sim.model import CapsimError, VMType


@pytest.fixture(scope="module")
def hybrid() -> HybridPredictor:
    return HybridPredictor()


def test_covers_the_paper_catalogue_where_jobs_fit(hybrid: HybridPredictor) -> None:
    cfgs = configurations(vm_types().values())
    specs = list(job_types().values())
    table = hybrid.runtimes(specs, cfgs)
    measured = MeasuredPredictor().runtimes(specs, cfgs)
    fits = np.array([[hybrid.fits_memory(s, c) for c in cfgs] for s in specs])
    assert np.array_equal(np.isfinite(table), fits)
    inside = np.isfinite(measured)
    assert 0.5 < inside.mean() < 0.9
    assert (fits >= inside).all()  # every measured configuration fits ...
    assert np.array_equal(table[inside], measured[inside])  # ... and the measurements answer wherever they can
    assert fits.mean() > inside.mean() + 0.1
    p600 = np.array([c.vm.gpu.name == "QuadroP600" for c in cfgs])
    assert fits[:, ~p600].all()  # only the 2 GB P600 is ever too small
    for j in ("J2", "J3"):  # VGG-19 was never run on a P600: its weights, gradients and momentum take 1.6 GiB
        row = [s.name for s in specs].index(j)
        assert not fits[row, p600].any()
        why = hybrid.support(specs[row], vm_type("inhouse1"), 1)
        assert why is not None and why.startswith("does not fit in GPU memory")


def test_explains_a_refusal(hybrid: HybridPredictor) -> None:
    j5 = job_types()["J5"]  # batch 64: the P600 ran ResNet-50/PyTorch with at most 8 samples per GPU
    assert hybrid.explain(j5, vm_type("inhouse3"), 1).startswith("unsupported: does not fit in GPU memory")
    assert hybrid.explain(j5, vm_type("inhouse3"), 8).startswith("regression:")  # 8 samples per GPU
    assert math.isinf(hybrid.runtime(j5, vm_type("inhouse3"), 2))


def test_says_which_model_answered(hybrid: HybridPredictor) -> None:
    j5 = job_types()["J5"]
    assert hybrid.explain(j5, vm_type("NV6"), 1) == "measured"
    assert hybrid.explain(j5, vm_type("inhouse3"), 8).startswith("regression: structured/")
    assert "gpus: 8 GPUs beyond" in hybrid.explain(j5, vm_type("inhouse3"), 8)
    assert "compute" in hybrid.explain(j5, VMType("v", gpu("V100"), 1, 1.0), 1)
    assert hybrid.support(j5, vm_type("NV6"), 2) == "2 GPUs requested on NV6, which has 1"


def test_anchored_answers_carry_the_model_trend_from_the_nearest_measurement() -> None:
    h = build("hybrid", anchor=True)
    inside, outside = h.parts()
    j5, v = job_types()["J5"], vm_type("inhouse1")
    assert h.anchor_of(j5, "QuadroP600", 2) == (2, 16)  # the P600 ran ResNet-50/PyTorch up to batch 16 on 2 GPUs
    q0 = j5.__class__(j5.application, j5.framework, j5.iterations, 16, name=j5.name)
    kind = outside.question(j5, v, 2)[0]
    expect = outside.runtime(j5, v, 2) * inside.runtime(q0, v, 2) / float(outside.runtimes([q0], [
        configurations([v])[1]], kind=kind)[0, 0])
    assert h.runtime(j5, v, 2) == pytest.approx(expect, rel=1e-12)


def test_parts_must_fit_their_roles() -> None:
    with pytest.raises(CapsimError, match="inside must be a 'measured'"):
        build("hybrid", inside={"kind": "analytical"})
    with pytest.raises(CapsimError, match="outside must be a trainable"):
        build("hybrid", outside={"kind": "table", "table": {}})
    other = build("hybrid", outside={"kind": "analytical"})
    assert math.isfinite(other.runtime(job_types()["J5"], vm_type("inhouse3"), 8))
