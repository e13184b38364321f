"""The GPU-memory guard: a footprint estimate from the layer graphs, validated on the runs, and runs that vouch."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from predictors import build
from predictors.measured import MeasuredPredictor
from predictors.measurements import row_configs, row_specs, runs
from predictors.memory import (
    GIB,
    RESERVE_GIB,
    STATE_COPIES,
    MemoryGuard,
    activation_bytes,
    footprint,
    guard,
    per_gpu_batch,
)
from predictors.networks import graph_name, network, parameters
from sim.catalogue import configurations, gpu, job_types, vm_type, vm_types
from sim.model import JobSpec, VMType


def vm(name: str, gpus: int = 1) -> VMType:
    return VMType(f"t-{name}", gpu(name), gpus, 1.0)


def test_activations_by_hand_alexnet() -> None:
    # kept up to the second ReLU: the input 3·224², ReLU1 64·55², pool1 64·27² (conv2's input), ReLU2 192·27²; at
    # ReLU2's backward also its output gradient and its input gradient (192·27² each): AlexNet's peak
    held = 3 * 224**2 + 64 * 55**2 + 64 * 27**2 + 192 * 27**2
    assert activation_bytes("alexnet") == 4.0 * (held + 2 * 192 * 27**2)


def test_footprint_adds_reserve_state_and_activations() -> None:
    j2 = job_types()["J2"]  # VGG-19, batch 32
    assert parameters(network("vgg19")) == 143_667_240  # the published VGG-19 (configuration E) count
    fp = footprint(j2, 3)
    assert fp is not None
    assert fp.state == STATE_COPIES * 4 * 143_667_240 and fp.reserve == RESERVE_GIB * GIB
    assert fp.activations == 11 * activation_bytes("vgg19")  # ⌈32 / 3⌉ samples on the most loaded GPU
    assert fp.total == fp.reserve + fp.state + fp.activations
    assert per_gpu_batch(64, 3) == 22 and per_gpu_batch(64, 4) == 16
    assert footprint(job_types()["J1"], 1) is None  # DeepSpeech: no layer graph
    assert footprint(JobSpec("resnet", "pytorch", 10, 64), 1) is None  # a ResNet variant needs its depth


def test_the_estimate_alone_fits_every_measured_run() -> None:
    d = runs().drop_duplicates(["application", "framework", "depth", "gpu", "gpus", "batch_size"])
    d = d[d["application"].map(lambda a: graph_name(a) is not None)]
    ratios = []
    for s, c in zip(row_specs(d), row_configs(d)):
        fp = footprint(s, c.gpus)
        assert fp is not None
        ratios.append(fp.total / (c.vm.gpu.memory_gb * GIB))
    assert len(ratios) > 300 and max(ratios) < 1.0
    assert max(ratios) > 0.8  # the TensorFlow grids on the P600 stop near the limit (see docs/predictors.md)


def test_the_estimate_refuses_what_the_tensorflow_grids_stop_before() -> None:
    # the TensorFlow runs double the samples per GPU until they stop: the next step does not fit
    g = MemoryGuard(runs())
    for app, gpu_name, ran in (("alexnet", "QuadroP600", 256), ("resnet50", "QuadroP600", 16),
                               ("resnet50", "M60", 64), ("vgg19", "M60", 64)):
        spec = JobSpec(app, "tensorflow", 100, ran)
        assert g.reason(spec, vm(gpu_name), 1) is None
        why = g.reason(JobSpec(app, "tensorflow", 100, 2 * ran), vm(gpu_name), 1)
        assert why is not None and why.startswith("does not fit in GPU memory"), (app, gpu_name)


def test_every_measured_run_fits_and_so_does_every_measured_answer() -> None:
    g = MemoryGuard(runs())
    d = runs().drop_duplicates(["application", "framework", "depth", "gpu", "gpus", "batch_size"])
    for s, c in zip(row_specs(d), row_configs(d)):
        assert g.reason(s, c.vm, c.gpus) is None, (s, c.label)
    cfgs = configurations(vm_types().values())
    specs = list(job_types().values())
    inside = np.isfinite(MeasuredPredictor().runtimes(specs, cfgs))
    for i, k in zip(*np.nonzero(inside)):
        assert g.reason(specs[i], cfgs[k].vm, cfgs[k].gpus) is None


def _table(rows: list[tuple]) -> pd.DataFrame:
    cols = ["application", "framework", "gpu", "gpus", "batch_size", "iterations", "cpu_threads", "depth", "runtime_s"]
    return pd.DataFrame([(a, f, g, n, b, 10, 4, d, 100.0) for a, f, g, n, b, d in rows], columns=cols)


def test_runs_vouch_by_linear_scaling_without_a_layer_graph() -> None:
    # one DeepSpeech run: 32 samples on one 8 GiB M60 proves c + 32 s <= 8 GiB, so b samples fit in 8 · max(1, b/32)
    g = MemoryGuard(_table([("deepspeech", "tensorflow", "M60", 1, 32, -1)]))
    spec = lambda b: JobSpec("deepspeech", "tensorflow", 10, b)  # noqa: E731
    assert g.reason(spec(32), vm("M60"), 1) is None
    assert g.reason(spec(16), vm("K80"), 1) is None  # fewer samples, more memory
    assert g.reason(spec(64), vm("T4"), 1) is None  # twice the samples in twice the memory (16 GiB)
    assert g.reason(spec(128), vm("T4", 2), 2) is None  # 64 per GPU
    for b, name in ((33, "M60"), (64, "K80"), (16, "QuadroP600")):  # less memory than any run proves enough
        why = g.reason(spec(b), vm(name), 1)
        assert why is not None and "no layer graph" in why, (b, name)
    assert "at most 48 (from 32 per GPU in 8 GiB)" in (g.reason(spec(64), vm("K80"), 1) or "")


def test_a_deeper_network_vouches_for_a_shallower_one() -> None:
    g = MemoryGuard(_table([("deepspeech", "tensorflow", "QuadroP600", 1, 16, 800)]))
    at = lambda depth: JobSpec("deepspeech", "tensorflow", 10, 16, depth=depth)  # noqa: E731
    p600 = vm("QuadroP600")
    assert g.reason(at(800), p600, 1) is None and g.reason(at(400), p600, 1) is None
    assert g.reason(at(1600), p600, 1) is not None
    assert g.reason(JobSpec("deepspeech", "tensorflow", 10, 16), p600, 1) is not None  # the standard network


def test_a_run_vouches_where_the_estimate_would_refuse() -> None:
    # VGG-19 on a P600 at 4 samples per GPU: estimated 2.11 GiB of 2, but a run (here: invented) proves it fits
    spec = JobSpec("vgg19", "pytorch", 10, 4)
    assert footprint(spec, 1).total > 2 * GIB  # type: ignore[union-attr]
    assert MemoryGuard(runs()).reason(spec, vm("QuadroP600"), 1) is not None
    assert MemoryGuard(_table([("vgg19", "pytorch", "QuadroP600", 1, 4, -1)])).reason(spec, vm("QuadroP600"), 1) is None


@pytest.mark.parametrize("kind", ["regression", "hybrid", "analytical", "wave"])
def test_extrapolating_predictors_refuse_what_does_not_fit(kind: str) -> None:
    p = build(kind)
    j2 = job_types()["J2"]  # VGG-19/PyTorch: its origin M60 ran batch 32, so `wave` would answer it on a P600
    why = p.support(j2, vm_type("inhouse1"), 1)
    assert why is not None and why.startswith("does not fit in GPU memory") and "QuadroP600 (2 GiB)" in why
    assert math.isinf(p.runtime(j2, vm_type("inhouse1"), 1))
    assert p.support(j2, vm("V100"), 1) is None  # 16 GiB


def test_runs_that_ran_are_answered_without_a_memory_question() -> None:
    # `predict_runs` scores a model on measured runs: it answers even a row the guard would refuse
    row = _table([("vgg19", "pytorch", "QuadroP600", 1, 32, -1)])
    for kind in ("regression", "hybrid", "analytical"):
        p = build(kind)
        assert np.isfinite(p.predict_runs(row)).all(), kind
        assert math.isinf(p.runtime(row_specs(row)[0], row_configs(row)[0].vm, 1)), kind


def test_the_guard_is_built_once_per_training_data() -> None:
    a, b = build("regression"), build("analytical")
    assert guard(a) is guard(b)
    assert guard(build("regression").fit(runs()[runs()["gpu"] != "K80"])) is not guard(a)
