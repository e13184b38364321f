"""The runtime model for trace jobs: the measured run is the truth on its configuration, GPU counts follow the named
law (hand-computed), GPU models the cloud predictor's cross-GPU scaling, and what cannot be answered says why."""

from __future__ import annotations

import math

import numpy as np
import pytest

import predictors
from predictors.crossgpu import default_scaling
from predictors.throughput import TABLES
from predictors.trace import SERIAL, fitted_serial_shares
from sim.catalogue import configurations, gpu, trace_gpu
from sim.model import CapsimError, Config, JobSpec, Measured, VMType

V100 = VMType("v100x8", gpu("V100"), 8, 24.0)
H100 = VMType("h100x8", gpu("H100"), 8, 98.0)
A100 = VMType("a100x8", gpu("A100-40GB"), 8, 30.0)
G2 = VMType("g2x8", trace_gpu("G2"), 8, 0.0)
CONFIGS = configurations((V100, H100, A100, G2))


def trace_job(seconds: float = 3600.0, gpus: int = 2, model: str | None = None, **kw) -> JobSpec:
    return JobSpec(kw.pop("application", ""), "", math.ceil(seconds), kw.pop("batch_size", 1),
                   measured=Measured(seconds, gpus, model), gpus=gpus, **kw)


def runtimes(spec: JobSpec, **params) -> dict[str, float]:
    row = predictors.build("trace", **params).runtimes([spec], CONFIGS)[0]
    return {c.label: float(t) for c, t in zip(CONFIGS, row)}


def test_the_measured_run_is_the_truth_on_its_own_configuration() -> None:
    job = trace_job(3600.0, 2)
    for law in ("linear", "amdahl", "measured"):
        t = runtimes(job, scaling=law)
        assert t["v100x8x2"] == t["h100x8x2"] == t["g2x8x2"] == 3600.0  # the trace's own hardware: every GPU alike
    named = trace_job(3600.0, 2, "V100")
    assert runtimes(named)["v100x8x2"] == 3600.0


def test_gpu_counts_follow_the_named_law() -> None:
    t = runtimes(trace_job(3600.0, 2), scaling="linear")
    assert t["v100x8x1"] == 7200.0 and t["v100x8x8"] == 900.0
    t = runtimes(trace_job(3600.0, 2), scaling="amdahl", serial=0.2)
    # S(n) = 1 / (0.2 + 0.8 / n): S(2) = 1 / 0.6, S(8) = 1 / 0.3
    assert t["v100x8x8"] == pytest.approx(3600.0 * 0.3 / 0.6) and t["v100x8x1"] == pytest.approx(3600.0 / 0.6)
    assert runtimes(trace_job(100.0, 1), serial=0.0)["a100x8x4"] == pytest.approx(25.0)
    assert runtimes(trace_job(100.0, 1), serial=1.0)["a100x8x8"] == pytest.approx(100.0)


def test_measured_scaling_reads_the_tables_where_they_know_the_model() -> None:
    rates = TABLES["elasticflow"]().rates
    job = trace_job(3600.0, 1, application="resnet50", batch_size=128)
    t = runtimes(job, scaling="measured")
    key = "resnet50 (batch size 128)"
    ratio = rates[("A100-40GB", key, 1)] / rates[("A100-40GB", key, 4)]
    assert t["a100x8x4"] == pytest.approx(3600.0 * ratio)
    assert t["v100x8x4"] == pytest.approx(3600.0 * ratio), "no V100 series: the A100's ratio"
    unknown = runtimes(trace_job(3600.0, 1), scaling="measured")
    assert unknown["a100x8x4"] == pytest.approx(3600.0 * (SERIAL + (1 - SERIAL) / 4)), "Amdahl for the others"


def test_other_gpu_models_follow_the_cross_gpu_scaling() -> None:
    t = runtimes(trace_job(3600.0, 8, "V100"))
    f = default_scaling().factor(gpu("V100"), gpu("H100"))
    assert f > 1 and t["h100x8x8"] == pytest.approx(3600.0 / f)
    back = runtimes(trace_job(t["h100x8x8"], 8, "H100"))
    assert back["v100x8x8"] == pytest.approx(3600.0), "scaling there and back is the identity"
    assert t["g2x8x8"] == math.inf, "no published specifications: nothing scales to it"
    p = predictors.build("trace")
    why = p.support(trace_job(3600.0, 8, "V100"), G2, 8)
    assert why is not None and "G2" in why and "not published" in why
    own = runtimes(trace_job(3600.0, 8), gpu="V100")
    assert own == t, "gpu names the model a run without one was measured on"
    alias = runtimes(trace_job(3600.0, 8, "V100M32"))
    assert alias["h100x8x8"] == pytest.approx(t["h100x8x8"]), "Alibaba's V100M32 is a V100"


def test_gpu_model_constraints_and_jobs_without_a_run() -> None:
    job = trace_job(60.0, 1, gpu_models=frozenset({"A100-40GB"}))
    t = runtimes(job)
    assert t["a100x8x1"] == 60.0 and t["v100x8x1"] == math.inf
    assert "only on A100-40GB" in (predictors.build("trace").support(job, V100, 1) or "")
    plain = JobSpec("resnet50", "pytorch", 1000, 64)
    assert np.isinf(predictors.build("trace").runtimes([plain], CONFIGS)).all()
    base = predictors.build("throughput", table="elasticflow")
    with_base = predictors.build("trace", base={"kind": "throughput", "table": "elasticflow"})
    np.testing.assert_array_equal(with_base.runtimes([plain], CONFIGS), base.runtimes([plain], CONFIGS))
    assert with_base.runtime(plain, A100, 2) == base.runtime(plain, A100, 2)


def test_vectorised_and_single_answers_agree() -> None:
    specs = [trace_job(10.0 * (i + 1), [1, 2, 4, 8][i % 4], [None, "V100", "H100"][i % 3]) for i in range(12)]
    p = predictors.build("trace", scaling="amdahl")
    table = p.runtimes(specs, CONFIGS)
    for i, s in enumerate(specs):
        for k, c in enumerate(CONFIGS):
            assert p.runtime(s, c.vm, c.gpus) == table[i, k]
    assert p.runtime(specs[0], V100, 1) == predictors.build("trace").runtimes([specs[0]], [Config(V100, 1)])[0, 0]


def test_the_default_serial_share_is_the_tables_median_fit() -> None:
    shares = fitted_serial_shares()
    assert len(shares) == 82 and ((shares >= 0) & (shares <= 1)).all()
    assert SERIAL == round(float(np.median(shares)), 2)


@pytest.mark.parametrize("params, message", [
    ({"scaling": "sqrt"}, "scaling must be one of linear, amdahl, measured"),
    ({"serial": 1.5}, r"serial must be a share in \[0, 1\]"),
    ({"gpu": "G2"}, "gpu must name a GPU model with published specifications"),
    ({"tables": ["nope"]}, r"unknown table\(s\) \['nope'\]"),
])
def test_bad_parameters(params, message) -> None:
    with pytest.raises(CapsimError, match=f"predictor 'trace': {message}"):
        predictors.build("trace", **params)


def test_sources_say_which_assumption_answered() -> None:
    from predictors.uncertainty.provenance import expected_error

    p = predictors.build("trace")
    named = trace_job(3600.0, 2, "V100")
    assert p.source(named, V100, 2).kind == "measured" and math.isnan(p.source(named, V100, 2).error)
    assert p.source(named, V100, 4).kind == "gpus"
    scaled = p.source(named, H100, 2)
    assert scaled.kind == "scaled" and scaled.error == expected_error("cloud", "scaled") > 0
    assert p.source(named, G2, 2).kind == "unsupported"  # G2's specifications were never published
    own = trace_job(3600.0, 2)  # the trace's own hardware: every GPU alike
    assert p.source(own, H100, 2).kind == "measured" and p.source(own, G2, 8).kind == "gpus"
    assert p.source(JobSpec("resnet50", "pytorch", 100, 64), V100, 1).kind == "unsupported"  # no run, no base


def test_scaling_laws_left_one_series_out_by_hand() -> None:
    from predictors.evaluation import TRACE_PROTOCOL, leave_one_series_out, trace_scaling_errors

    # serial shares by hand: A scales perfectly (0), B not at all (1), C to 1.5x on 2 GPUs (1/3)
    series = {("t", "G1", "j"): {1: 10.0, 2: 20.0, 4: 40.0}, ("t", "G2", "j"): {1: 10.0, 2: 10.0},
              ("t", "G1", "k"): {1: 10.0, 2: 15.0}}
    loo = leave_one_series_out(series)
    # A held out: Amdahl at the median of B's and C's shares, 2/3: runtime(2)/runtime(1) = 2/3 + 1/6, measured 1/2
    a2 = loo[(loo["law"] == "amdahl") & (loo["job"] == "j") & (loo["gpu"] == "G1") & (loo["n"] == 2)].iloc[0]
    assert a2["serial"] == pytest.approx(2 / 3) and a2["error"] == pytest.approx(2 / 3)
    errors = {r["predictor"]: r for r in trace_scaling_errors(series)}
    # linear: A exact, B 1/2 vs 1 → 0.5, C 1/2 vs 2/3 → 0.25
    assert errors["trace(scaling='linear')"]["error"] == pytest.approx(0.25)
    # amdahl: A (2/3 + 2) / 2, B 5/12 (share 1/6), C 1/8 (share 1/2)
    assert errors["trace"]["error"] == pytest.approx((4 / 3 + 5 / 12 + 1 / 8) / 3)
    # measured: A reads G2's ratio at 2 GPUs (1 vs 1/2 → 1), Amdahl at 4 (2); B reads G1's (0.5); C has no other model
    assert errors["trace(scaling='measured')"]["error"] == pytest.approx((1.5 + 0.5 + 0.125) / 3)
    assert {(r["cells"], r["runs"], r["source"], r["protocol"]) for r in errors.values()} == {
        (3, 4, "gpus", TRACE_PROTOCOL)}


@pytest.mark.parametrize("scaling", ["amdahl", "linear", "measured"])
def test_a_gpu_count_answer_states_the_measured_scaling_error(scaling) -> None:
    from predictors.evaluation import trace_scaling_errors

    p = predictors.build("trace", scaling=scaling)
    want = next(r["error"] for r in trace_scaling_errors() if r["predictor"] == p.describe())
    src = p.source(trace_job(3600.0, 2, "V100"), V100, 4)
    assert src.kind == "gpus" and 0 < src.error == pytest.approx(want, abs=5e-12)
    # only the default serial share was measured: another one states no error rather than a borrowed one
    assert math.isnan(predictors.build("trace", serial=0.3).source(trace_job(3600.0, 2, "V100"), V100, 4).error)
