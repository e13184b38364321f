"""Layer graphs, the analytical and wave-scaling predictors, and the regression, on hand-checked cases."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from predictors import build
from predictors.analytical import AnalyticalPredictor, allreduce_time
from predictors.augmented import augment, base_features
from predictors.measured import MeasuredPredictor
from predictors.memory import guard
from predictors.networks import conv_cost, fc_cost, layer_costs, network, parameters
from predictors.regression import RegressionPredictor
from predictors.wave import WavePredictor, gamma, scale_factor
from sim.catalogue import configurations, gpu, job_types, vm_type, vm_types
from sim.model import CapsimError, JobSpec, VMType


def vm(name: str, gpus: int = 4) -> VMType:
    return VMType(name=f"t-{name}", gpu=gpu(name), gpus=gpus, price_per_hour=1.0)


# --- layer graphs -------------------------------------------------------------------------------------------------

def test_alexnet_first_conv_flops_by_hand() -> None:
    # 224x224x3, 11x11 kernel, stride 4, pad 2, 64 filters: (224 + 4 - 11) // 4 + 1 = 55 outputs per side
    layer = conv_cost(3, 224, 224, 11, 4, 2, 64)
    macs = 55 * 55 * 64 * 11 * 11 * 3
    assert layer.shape == (64, 55, 55)
    assert layer.flops_fwd == 2 * macs == 140_553_600
    assert layer.flops_bwd == 2 * layer.flops_fwd
    assert layer.weights == 11 * 11 * 3 * 64 + 64
    first = layer_costs(network("alexnet"))
    assert first["flops"][0] == layer.flops_fwd + layer.flops_bwd


def test_fc_layer_by_hand() -> None:
    layer = fc_cost(9216, 4096)
    assert layer.flops_fwd == 2 * 9216 * 4096 and layer.weights == 9216 * 4096 + 4096


def test_network_sizes_match_the_published_ones() -> None:
    assert parameters(network("alexnet")) == pytest.approx(61.1e6, rel=0.01)
    assert parameters(network("vgg19")) == pytest.approx(143.7e6, rel=0.01)
    assert parameters(network("resnet50")) == pytest.approx(25.6e6, rel=0.01)
    fwd_gmacs = layer_costs(network("resnet50"))["flops"].sum() / 3 / 2 / 1e9
    assert fwd_gmacs == pytest.approx(4.1, rel=0.05)


def test_resnet_has_parallel_branches_and_depth_variants() -> None:
    g = network("resnet50")
    adds = [n for n in g if n.endswith(":add")]
    assert len(adds) == 16 and all(g.in_degree(n) == 2 for n in adds)
    assert len([n for n in network("resnet50", 1) if n.endswith(":add")]) == 4
    assert parameters(network("resnet50", 1)) < parameters(network("resnet50", 2)) < parameters(network("resnet50"))


def test_cifar_resnet_sizes_match_the_published_ones() -> None:
    # He et al. 2016, table 6: ResNet-20 (3 modules per stage) 0.27 M parameters, ResNet-56 (9) 0.85 M.
    assert parameters(network("resnet_cifar", 3)) == pytest.approx(0.27e6, rel=0.02)
    assert parameters(network("resnet_cifar", 9)) == pytest.approx(0.85e6, rel=0.02)
    g = network("resnet_cifar", 2)
    assert len([n for n in g if n.endswith(":conv")]) == 1 + 3 * 2 * 2
    # first 3x3 conv on 32x32x3 to 16 channels: 32*32*16*27 multiply-adds forward
    assert layer_costs(g)["flops"][0] == 3 * 2 * 32 * 32 * 16 * 27


def test_unknown_network_is_a_clear_error() -> None:
    with pytest.raises(CapsimError, match="no layer graph for network 'bert'"):
        network("bert")


# --- analytical ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def analytical() -> AnalyticalPredictor:
    return AnalyticalPredictor()


def test_ring_and_tree_allreduce_by_hand() -> None:
    assert allreduce_time(1e9, 4, 10.0, "ring") == pytest.approx(2 * 3 / 4 * 0.1)
    assert allreduce_time(1e9, 4, 10.0, "tree") == pytest.approx(2 * 2 * 0.1)
    assert allreduce_time(1e9, 1, 10.0, "ring") == 0.0


def test_analytical_linear_in_iterations_and_efficiencies_in_range(analytical: AnalyticalPredictor) -> None:
    s = job_types()["J5"]
    t1 = analytical.runtime(s, vm_type("NV6"), 1)
    t2 = analytical.runtime(dataclasses.replace(s, iterations=2 * s.iterations), vm_type("NV6"), 1)
    assert t2 == pytest.approx(2 * t1)
    effs = analytical.efficiencies()
    assert ("pytorch", "M60") in effs
    assert all(0.05 < e < 5 and f >= 0 for (e, f) in effs.values())


def test_analytical_models_the_depth_runs_as_a_cifar_resnet(analytical: AnalyticalPredictor) -> None:
    # the depth runs are input-bound: a CIFAR-10 ResNet is a few GFLOPs per batch, so depth barely matters
    shallow, deep = (analytical.runtime(JobSpec("resnet", "pytorch", 600, 128, depth=d), vm_type("NV6"), 1)
                     for d in (1, 10))
    assert shallow <= deep < 1.2 * shallow


def test_analytical_predicts_unmeasured_gpus_faster_on_bigger_ones(analytical: AnalyticalPredictor) -> None:
    s = job_types()["J6"]
    times = [analytical.runtime(s, vm(g), 1) for g in ("M60", "V100", "H100")]
    assert all(math.isfinite(t) for t in times) and times[0] > times[1] > times[2]


def test_analytical_overlap_and_interconnect() -> None:
    s, v = job_types()["J5"], vm_type("NV24")
    assert AnalyticalPredictor(branch_overlap=1.0).runtime(s, v, 1) < AnalyticalPredictor().runtime(s, v, 1)
    slow = AnalyticalPredictor(interconnect_gbs=1.0).comm_time("resnet50", None, 4)
    assert slow == pytest.approx(10 * AnalyticalPredictor().comm_time("resnet50", None, 4))
    assert slow == pytest.approx(2 * 3 / 4 * 4 * parameters(network("resnet50")) / 1e9)


def test_analytical_unsupported_and_errors(analytical: AnalyticalPredictor) -> None:
    j1 = job_types()["J1"]
    assert analytical.runtime(j1, vm_type("NV6"), 1) == math.inf
    assert "no layer graph for deepspeech" in analytical.support(j1, vm_type("NV6"), 1)
    blank = VMType("blank", dataclasses.replace(gpu("V100"), name="X1", sms=0, bandwidth_gbs=0), 1, 1.0)
    with pytest.raises(CapsimError, match="GPU model X1: no specs for sms, bandwidth_gbs"):
        analytical.runtime(job_types()["J5"], blank, 1)
    with pytest.raises(CapsimError, match="allreduce"):
        build("analytical", allreduce="star")


# --- wave scaling -------------------------------------------------------------------------------------------------

def test_gamma_at_its_limits() -> None:
    assert gamma(0.0, 10.0) == pytest.approx(1.0)
    assert gamma(10.0, 10.0) == pytest.approx(0.5)
    assert gamma(1e12, 10.0) == pytest.approx(0.0, abs=1e-9)
    g = gamma(np.array([1.0, 5.0, 20.0, 100.0]), 10.0)
    assert np.all(np.diff(g) < 0) and np.all((0 <= g) & (g <= 1))


def test_scale_factor_limits_are_spec_ratios() -> None:
    m60, v100 = gpu("M60"), gpu("V100")
    assert scale_factor(1.0, m60, v100) == pytest.approx(160 / 900)
    assert scale_factor(0.0, m60, v100) == pytest.approx(1178 / 1530 * 16 / 80)
    assert scale_factor(0.3, m60, m60) == pytest.approx(1.0)


def test_wave_reproduces_origin_and_speeds_up_bigger_gpus() -> None:
    w, m = WavePredictor(), MeasuredPredictor()
    s = job_types()["J5"]
    assert w.runtime(s, vm("M60"), 2) == pytest.approx(m.runtime(s, vm("M60"), 2))
    t = {g: w.runtime(s, vm(g), 1) for g in ("M60", "V100", "A100", "H100", "L4")}
    assert t["M60"] > t["L4"] > t["V100"] > t["A100"] > t["H100"]


def test_wave_unsupported_reasons() -> None:
    w = WavePredictor()
    assert "origin M60" in w.support(job_types()["J5"], vm("V100", 8), 8)
    assert "no layer graph" in w.support(job_types()["J1"], vm("V100"), 1)
    assert math.isfinite(WavePredictor(gamma_default=0.5).runtime(job_types()["J1"], vm("V100"), 1))


def test_wave_vectorised_equals_scalar() -> None:
    w = build("wave", origin="K80")
    cfgs = configurations(vm_types().values())
    specs = list(job_types().values())
    table = w.runtimes(specs, cfgs)
    scalar = np.array([[w.runtime(s, c.vm, c.gpus) for c in cfgs] for s in specs])
    assert np.array_equal(np.isinf(table), np.isinf(scalar))
    assert np.allclose(table[np.isfinite(table)], scalar[np.isfinite(scalar)])


# --- regression ---------------------------------------------------------------------------------------------------

def test_augment_skips_a_term_times_its_inverse() -> None:
    x = base_features(
        __import__("pandas").DataFrame({"batch_size": [8, 16], "gpu": ["M60", "K80"], "gpus": [1, 2],
                                        "cpu_threads": [2, 4], "iterations": [10, 20]}), with_depth=False)
    cols = set(augment(x, 2).columns)
    assert {"batch", "inv_batch", "batch*gpus", "batch*inv_gpus", "batch*batch"} <= cols
    assert "batch*inv_batch" not in cols and "inv_it*it_raw" not in cols
    assert len(augment(x, 1).columns) == 10


@pytest.fixture(scope="module")
def regression() -> RegressionPredictor:
    return RegressionPredictor(families=("structured", "linear"))


def test_regression_close_to_measured_on_measured_configs(regression: RegressionPredictor) -> None:
    m = MeasuredPredictor()
    s = job_types()["J6"]
    for name, g in (("NV6", 1), ("NV24", 4), ("NC12", 2)):
        assert regression.runtime(s, vm_type(name), g) == pytest.approx(m.runtime(s, vm_type(name), g), rel=0.15)


def test_regression_names_the_kind_of_question_and_its_model(regression: RegressionPredictor) -> None:
    j5 = job_types()["J5"]
    assert regression.question(j5, vm_type("NV6"), 1)[0] == "inside"
    assert regression.question(j5, vm_type("inhouse1"), 2)[0] == "batch"  # batch 64; the P600 ran 4..16 on 2 GPUs
    assert regression.question(j5, vm_type("inhouse3"), 8)[0] == "gpus"
    assert regression.question(j5, vm("V100", 1), 1)[0] == "compute"
    assert regression.question(job_types()["J1"], vm_type("inhouse2"), 8)[0] == "batch_below"
    assert regression.explain(j5, vm("V100", 1), 1).startswith("structured/")  # only structured models for new GPUs


def test_regression_answers_every_catalogue_configuration_that_fits_faster_on_faster_gpus(
        regression: RegressionPredictor) -> None:
    cfgs = configurations(vm_types().values())
    specs = list(job_types().values())
    table = regression.runtimes(specs, cfgs)
    fits = np.array([[guard(regression).reason(s, c.vm, c.gpus) is None for c in cfgs] for s in specs])
    assert np.array_equal(np.isfinite(table), fits) and (table[fits] > 0).all()
    assert {c.vm.gpu.name for row, s in zip(~fits, specs) for c, no in zip(cfgs, row) if no} == {"QuadroP600"}
    j5 = job_types()["J5"]
    assert regression.runtime(j5, vm("V100", 1), 1) < regression.runtime(j5, vm("M60", 1), 1)


def test_regression_bad_parameters() -> None:
    with pytest.raises(CapsimError, match="unknown families"):
        build("regression", families=["xgboost"])
    with pytest.raises(CapsimError, match="cpu_threads"):
        build("regression", cpu_threads="most")
    with pytest.raises(CapsimError, match="unknown application"):
        RegressionPredictor().runtime(JobSpec("bert", "pytorch", 10, 8), vm_type("NV6"), 1)
