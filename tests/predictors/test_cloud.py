"""ElasticFlow's throughput tables, the cross-GPU scaling and its leave-one-GPU-out error, the ``cloud`` predictor."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import predictors
from predictors import crossgpu
from predictors.throughput import ThroughputPredictor, elasticflow_table
from sim.catalogue import cloud_vm_types, configurations, gpu, gpu_models
from sim.model import JobSpec, VMType
from sim.traces import read_trace

ROOT = Path(__file__).resolve().parents[2]
P4D, P4DE, P5, G6, P3 = (cloud_vm_types()[n] for n in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge",
                                                         "g6.12xlarge", "p3.16xlarge"))


def test_elasticflow_tables_read_cell_by_cell():
    t = elasticflow_table()
    assert t.rate("A100-40GB", "resnet50 (batch size 64)", 8) == 21.265357623184627  # the file's cell
    assert t.rate("T4", "imagenet (batch size 3200)", 1) == 0.06775786325152656
    assert ("T4", "deepspeech2 (batch size 320)", 64) not in t.rates, "nan cell: unsupported"
    assert ("A100-40GB", "deepspeech2 (batch size 32)", 64) not in t.rates, "empty cell: unsupported"
    assert ("A100-40GB", "resnet50_cifar10 (batch size 64)", 16) not in t.rates, "0 cell: unsupported"
    assert {g for g, _, _ in t.rates} == {"A100-40GB", "T4"}
    p = ThroughputPredictor(table="elasticflow_t4")
    assert "has no job type 'resnet50 (batch size 64)'" in p.support(JobSpec("resnet50", "pytorch", 1, 64), P4D, 1)


def test_a_trace_job_runs_its_recorded_duration_on_its_requested_a100s():
    """ElasticFlow computed num_iteration = duration x the A100 rate: the runtime gives the duration back."""
    rows = read_trace(ROOT / "sim/data/elasticflow/195job.csv", "elasticflow")
    p = predictors.build("cloud")
    for r in rows.itertuples():
        spec = JobSpec(r.application, "pytorch", int(r.iterations), int(r.batch_size), gpus=int(r.gpus))
        rate = elasticflow_table().rate("A100-40GB", f"{r.application} (batch size {r.batch_size})", r.gpus)
        assert abs(p.runtime(spec, P4D, r.gpus) - r.duration) <= 1.0 / rate + 1e-6, r.name


def test_fit_recovers_a_known_power_law():
    gpus = gpu_models()
    names = ["K80", "P100", "V100", "T4", "A100-40GB"]
    a, b = 0.3, 0.6
    speeds = {(m, g): c * gpus[g].fp32_tflops ** a * gpus[g].bandwidth_gbs ** b
              for m, c in (("x", 2.0), ("y", 50.0)) for g in names}
    fit = crossgpu.fit_scaling(speeds, ("fp32_tflops", "bandwidth_gbs"), ("x", "y"))
    assert fit.exponents == pytest.approx((a, b), abs=1e-9)
    assert all(abs(r["error"]) < 1e-9 for r in crossgpu.leave_one_gpu_out(speeds, fit.features, ("x", "y")))


def test_leave_one_gpu_out_holds_each_gpu_out_and_predicts_from_the_others():
    rows = crossgpu.leave_one_gpu_out(crossgpu.shipped_speeds())
    by = {(r["model"], r["held_out"]): r for r in rows}
    assert {g for m, g in by if m == "ResNet-50"} == {"A100-40GB", "T4", "V100", "P100", "K80"}
    assert {g for m, g in by if m == "DeepSpeech2"} == {"A100-40GB", "T4"}
    assert {g for m, g in by if m == "BERT-like"} == {"A100-40GB", "T4", "V100", "P100", "K80"}
    for r in rows:
        assert r["reference"] != r["held_out"] and r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1)
    # the prediction of a held-out GPU never uses it: refitting without it changes nothing when it is absent
    rest = {k: v for k, v in crossgpu.shipped_speeds().items() if k[1] != "T4"}
    r = by[("DeepSpeech2", "T4")]
    fit = crossgpu.fit_scaling(rest)
    assert r["predicted"] == pytest.approx(rest[("DeepSpeech2", "A100-40GB")] * fit.factor(gpu("A100-40GB"), gpu("T4")))


def test_the_leave_one_gpu_out_table_in_the_docs_is_the_computed_one():
    s = crossgpu.default_scaling()
    table = crossgpu.format_table(crossgpu.leave_one_gpu_out(crossgpu.shipped_speeds(), s.features))
    docs = (ROOT / "docs/predictors.md").read_text(encoding="utf-8")
    for part in table.split("\n\n"):
        assert part in docs, "re-run `capsim predict crossgpu` and paste its tables into docs/predictors.md"
    assert crossgpu.compare_features(crossgpu.shipped_speeds()) in docs
    assert s.describe() in docs


def test_cloud_answers_measured_twin_scaled_or_says_why():
    p = predictors.build("cloud")
    r50 = JobSpec("resnet50", "pytorch", 10_000, 64)
    a100 = elasticflow_table().rate("A100-40GB", "resnet50 (batch size 64)", 8)
    assert p.runtime(r50, P4D, 8) == 10_000 / a100 and p.explain(r50, P4D, 8).startswith("measured on 8 x A100-40GB")
    f = crossgpu.default_scaling().factor(gpu("A100-40GB"), gpu("H100"))
    assert p.runtime(r50, P5, 8) == pytest.approx(10_000 / (a100 * f), rel=1e-12)
    assert p.explain(r50, P5, 8).startswith("scaled from 8 x A100-40GB")
    assert p.explain(r50, P4DE, 8).startswith("scaled from 8 x A100-40GB"), "the table describes the 40 GB A100"
    assert "as 'ResNet-50 (batch size 64)'" in p.explain(r50, P3, 8), "Gavel's ResNet-50 on V100 is the same network"
    bert = JobSpec("bert", "pytorch", 100, 64)
    assert p.explain(bert, P3, 1).startswith("scaled from 1 x A100-40GB"), "Gavel's Transformer is not BERT"
    assert math.isinf(p.runtime(JobSpec("alexnet", "pytorch", 10, 64), P4D, 1))
    assert "no table of 'elasticflow+gavel' has the job type 'alexnet (batch size 64)'" in p.support(
        JobSpec("alexnet", "pytorch", 10, 64), P4D, 1)
    assert "measured deepspeech2 (batch size 32) on 64 GPUs of any model" in p.support(
        JobSpec("deepspeech2", "pytorch", 10, 32), P4D, 64)
    measured_only = predictors.build("cloud", scale=False)
    assert "(scale: false)" in measured_only.support(r50, G6, 4)


def test_cloud_vectorised_equals_scalar_on_the_cloud_catalogue_with_gang_counts():
    p = predictors.build("cloud")
    specs = [JobSpec(m, "pytorch", 1000 + i, b) for i, (m, b) in enumerate(
        [("resnet50", 64), ("bert", 128), ("gpt2", 256), ("imagenet", 3200), ("ResNet-18", 32), ("alexnet", 8)])]
    configs = configurations(cloud_vm_types().values(), {"p4d.24xlarge": 64, "p5.48xlarge": 32})
    table = p.runtimes(specs, configs)
    scalar = np.array([[p.runtime(s, c.vm, c.gpus) for c in configs] for s in specs])
    assert np.array_equal(table, scalar)
    assert np.isfinite(table[:5]).any(axis=1).all() and not np.isfinite(table[5]).any()


def test_elastic_trace_jobs_may_run_on_any_count_the_tables_have():
    rows = read_trace(ROOT / "sim/data/elasticflow/195job.csv", "elasticflow", elastic=True)
    assert rows["gpus"].isna().all() and (rows["requested_gpus"] >= 1).all()
    p = predictors.build("cloud")
    spec = JobSpec(rows.application[0], "pytorch", int(rows.iterations[0]), int(rows.batch_size[0]))
    big = VMType("a100x64", gpu("A100-40GB"), 64, 0.0)
    finite = [g for g in range(1, 65) if math.isfinite(p.runtime(spec, big, g))]
    assert set(finite) <= {1, 2, 4, 8, 16, 32, 64} and {1, 2, 4, 8} <= set(finite)


def test_the_command_prints_the_tables(capsys):
    from experiments.cli import main

    assert main(["predict", "crossgpu"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\| ResNet-50 \| 5 \| \d+% \|", out) and "Candidate features" in out
    assert isinstance(pd.DataFrame(crossgpu.leave_one_gpu_out(crossgpu.shipped_speeds())), pd.DataFrame)
