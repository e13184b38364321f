"""The throughput predictor: runtime = iterations / measured iterations per second, by name or from a file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import predictors
from predictors.throughput import ThroughputPredictor, gavel_table
from sim.catalogue import gpu
from sim.model import CapsimError, Config, JobSpec, VMType

V100 = VMType("v100", gpu("V100"), 1, 0.0)
K80X4 = VMType("k80x4", gpu("K80"), 4, 0.0)
R50 = JobSpec("ResNet-50", "pytorch", 15821, 64, gpus=1)
A3C = JobSpec("A3C", "pytorch", 1000, 1)
R50_128 = JobSpec("ResNet-50", "pytorch", 1000, 128)


def test_runtime_is_iterations_over_the_measured_rate():
    p = predictors.build("throughput")
    rate = gavel_table().rate("V100", "ResNet-50 (batch size 64)", 1)
    assert rate == pytest.approx(4.3948, abs=1e-3)
    assert p.runtime(R50, V100, 1) == 15821 / rate
    assert p.runtime(A3C, V100, 1) == 1000 / gavel_table().rate("V100", "A3C", 1), "a type named without batch size"
    assert p.runtime(R50, K80X4, 4) == 15821 / gavel_table().rate("K80", "ResNet-50 (batch size 64)", 4)


def test_unsupported_configurations_say_why():
    p = ThroughputPredictor()
    assert p.runtime(R50_128, K80X4, 2) == math.inf
    assert "does not run on 2 x K80 (measured 0 iterations/s)" in p.support(R50_128, K80X4, 2)
    assert "no rate for ResNet-50 (batch size 64) on 3 x K80" in p.support(R50, K80X4, 3)
    assert "no job type 'VGG (batch size 8)'" in p.support(JobSpec("VGG", "pytorch", 10, 8), V100, 1)
    assert p.support(R50, V100, 1) is None


def test_runtimes_is_the_vectorised_runtime():
    p = ThroughputPredictor()
    specs = [R50, A3C, R50_128, JobSpec("VGG", "pytorch", 10, 8)]
    configs = [Config(V100, 1)] + [Config(K80X4, g) for g in range(1, 5)]
    table = p.runtimes(specs, configs)
    loop = np.array([[p.runtime(s, c.vm, c.gpus) for c in configs] for s in specs])
    np.testing.assert_array_equal(table, loop)
    assert p.runtimes([], configs).shape == (0, 5) and p.runtimes(specs, []).shape == (4, 0)


def test_any_file_in_gavels_layout(tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"v100": {"('ResNet-50 (batch size 64)', 1)": {"null": 2.0}},
                             "v100_unconsolidated": {"('ResNet-50 (batch size 64)', 1)": {"null": 9.0}}}))
    p = predictors.build("throughput", path=str(f))
    assert p.runtime(R50, V100, 1) == 15821 / 2.0
    assert p.describe().startswith("throughput(path=")
    f.write_text(json.dumps({"v100": {"ResNet": {"null": 2.0}}}))
    with pytest.raises(CapsimError, match="t.json: worker type 'v100': expected keys like"):
        ThroughputPredictor(path=str(f)).runtime(R50, V100, 1)
    shipped = "elasticflow, elasticflow_a100, elasticflow_t4, gavel"
    with pytest.raises(CapsimError, match=f"unknown table 'elastic'.*shipped tables are {shipped}"):
        ThroughputPredictor(table="elastic")
