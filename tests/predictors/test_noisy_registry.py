"""The noisy wrapper's error statistics and determinism; building predictors from YAML-style dicts."""

from __future__ import annotations

import numpy as np
import pytest

from predictors import build, registry
from predictors.table import TablePredictor
from predictors.uncertainty.noisy import NoisyPredictor, expected_mape, lognormal_params
from sim.catalogue import vm_types
from sim.model import CapsimError, Config, JobSpec, VMType


def _unit_table(n: int) -> tuple[TablePredictor, list[JobSpec], list[Config]]:
    vms = list(vm_types().values())[:4]
    specs = [JobSpec("alexnet", "pytorch", 100 + i, 32, name=f"S{i}") for i in range(n)]
    configs = [Config(v, 1) for v in vms]
    table = {f"{s.name}/{c.vm.name}/1": 1000.0 for s in specs for c in configs}
    return TablePredictor(table), specs, configs


@pytest.mark.parametrize("mape, bias", [(0.2, 0.0), (0.05, 0.0), (0.3, 0.1), (0.25, -0.2)])
def test_error_statistics_match_request(mape: float, bias: float) -> None:
    base, specs, configs = _unit_table(5000)
    p = NoisyPredictor(base, mape=mape, bias=bias, seed=7)
    f = p.runtimes(specs, configs) / 1000.0
    assert np.abs(f - 1).mean() == pytest.approx(mape, rel=0.03, abs=0.002)
    assert f.mean() - 1 == pytest.approx(bias, abs=0.01)


def test_lognormal_params_closed_form() -> None:
    mu, sigma = lognormal_params(0.2, 0.0)
    assert expected_mape(mu, sigma) == pytest.approx(0.2, abs=1e-9)
    assert np.exp(mu + sigma**2 / 2) == pytest.approx(1.0)
    assert lognormal_params(0.0, 0.0) == pytest.approx((0.0, 0.0), abs=1e-6)


def test_deterministic_per_spec_and_config() -> None:
    base, specs, configs = _unit_table(3)
    twin = JobSpec("alexnet", "pytorch", 100, 32, name="S0")
    p = NoisyPredictor(base, mape=0.2, seed=3)
    a = p.runtimes(specs, configs)
    assert np.array_equal(a, NoisyPredictor(base, mape=0.2, seed=3).runtimes(specs, configs))
    assert p.runtime(twin, configs[1].vm, 1) == a[0, 1]
    assert not np.array_equal(a, NoisyPredictor(base, mape=0.2, seed=4).runtimes(specs, configs))
    assert p.runtimes(specs[::-1], configs)[-1, 1] == a[0, 1]


def test_noisy_keeps_infeasible_and_reasons() -> None:
    p = build("noisy", base={"kind": "measured"}, mape=0.2, seed=0)
    v = vm_types()["inhouse1"]
    spec = JobSpec("vgg19", "pytorch", 1000, 32)
    assert p.runtime(spec, v, 1) == np.inf
    assert "never measured" in p.support(spec, v, 1)


def test_registry_builds_each_from_dicts() -> None:
    assert {"measured", "noisy", "table"} <= set(registry())
    p = build(kind="noisy", base={"kind": "noisy", "base": {"kind": "measured"}, "mape": 0.1}, mape=0.2)
    assert isinstance(p, NoisyPredictor) and isinstance(p.base, NoisyPredictor)
    assert p.base.base.name == "measured"


@pytest.mark.parametrize(
    "config, words",
    [
        ({"kind": "oracle"}, "unknown predictor 'oracle'"),
        ({"kind": "noisy", "base": {"kind": "measured"}, "mape": 0.1, "bias": 0.3}, "must be at least |bias|"),
        ({"kind": "measured", "colour": "red"}, "bad parameters"),
    ],
)
def test_clear_registry_errors(config: dict, words: str) -> None:
    with pytest.raises(CapsimError, match=words.replace("|", r"\|").replace("(", r"\(")):
        build(**config)


def test_require_names_the_unsupported_configuration() -> None:
    p = build("measured")
    spec = JobSpec("vgg19", "pytorch", 1000, 32, name="J2")
    with pytest.raises(CapsimError, match=r"job J2 \(batch 32\) on 1 GPUs of inhouse1 \(QuadroP600\) is unsupported"):
        p.require(spec, vm_types()["inhouse1"], 1)
    assert p.require(spec, vm_types()["NV6"], 1) == p.runtime(spec, vm_types()["NV6"], 1)


def test_input_floor_keeps_cpu_bound_alexnet_from_scaling_with_the_gpu() -> None:
    from predictors.analytical import AnalyticalPredictor

    spec = JobSpec("alexnet", "pytorch", 1000, 256)
    gpu_only = AnalyticalPredictor(cpu_threads=None)
    floored = AnalyticalPredictor(cpu_threads=2)
    h100 = VMType("h", __import__("sim.catalogue", fromlist=["gpu"]).gpu("H100"), 1, 1.0)
    floor = floored.input_time("alexnet", "pytorch", 256, 1, 2) * 1000
    assert floored.runtime(spec, h100, 1) == pytest.approx(max(gpu_only.runtime(spec, h100, 1), floor))
    assert floored.runtime(spec, h100, 1) > gpu_only.runtime(spec, h100, 1)
    assert floored.input_time("vgg19", "pytorch", 256, 1, "max") == 0.0


@pytest.mark.parametrize("config", [{"kind": "measured"}, {"kind": "analytical"}, {"kind": "wave"},
                                    {"kind": "noisy", "base": {"kind": "measured"}},
                                    {"kind": "regression", "families": ["linear"], "folds": 2, "max_features": 2}])
def test_empty_tables(config: dict) -> None:
    p = build(**config)
    configs = [Config(v, 1) for v in vm_types().values()]
    assert p.runtimes([], configs).shape == (0, len(configs))
    assert p.runtimes([JobSpec("alexnet", "pytorch", 10, 32)], []).shape == (1, 0)
