"""The structured family on hand-built runs: exact recovery, the max combination, borrowed all-reduce, the pooled
fallback with per-die speed, the per-cell level; and the regression's choice of models per kind of question."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictors.regression import RegressionPredictor, axis_splits
from predictors.structured import TERM_SETS, fit_structured, speed, with_comm
from sim.catalogue import gpu


def runs_from(fn, gpus=("M60", "K80"), counts=(1, 2, 4), batches=(8, 16, 32, 64), cpus=(2, 8)) -> pd.DataFrame:
    rows = []
    for g in gpus:
        for n in counts:
            for b in batches:
                for c in cpus:
                    it = 6400 // b
                    rows.append({"application": "toy", "framework": "pytorch", "gpu": g, "gpus": n,
                                 "batch_size": b, "iterations": it, "cpu_threads": c, "depth": -1,
                                 "runtime_s": it * fn(g, n, b, c, it)})
    return pd.DataFrame(rows)


def law(g: str, n: int, b: int, c: int, it: int) -> float:
    k = 1.0 if g == "M60" else 1.5
    return k * (0.02 + 0.003 * b / n) + 0.05 * (n - 1) / n + 30.0 / it


def test_recovers_a_sum_of_terms_exactly() -> None:
    d = runs_from(law)
    m = fit_structured(d, ("fixed", "work", "allreduce", "startup"))
    theta = m.per_gpu["K80"][0]
    assert theta == pytest.approx([0.03, 0.0045, 0.05, 30.0], rel=1e-6)
    y = d["runtime_s"] / d["iterations"]
    assert np.allclose(m.per_iteration(d), y, rtol=1e-9)


def test_max_combination_fits_an_input_bound_regime_that_a_sum_cannot() -> None:
    def bound(g, n, b, c, it):
        return max(0.01 + 0.002 * b / n, 0.006 * b / c)

    d = runs_from(bound, counts=(1, 2))
    y = (d["runtime_s"] / d["iterations"]).to_numpy()
    terms = ("fixed", "work", "allreduce", "startup", "input")
    err_max = np.abs(fit_structured(d, terms, "max").per_iteration(d) / y - 1).max()
    err_sum = np.abs(fit_structured(d, terms, "sum").per_iteration(d) / y - 1).max()
    assert err_max < 1e-6 and err_sum > 0.05


def test_a_gpu_type_measured_on_one_count_borrows_the_allreduce() -> None:
    d = runs_from(law)
    d = d[(d.gpu == "M60") | (d.gpus == 1)]
    m = fit_structured(d, ("fixed", "work", "allreduce", "startup"))
    assert m.per_gpu["K80"][0][2] == pytest.approx(m.per_gpu["M60"][0][2]) == pytest.approx(0.05, rel=1e-6)


def test_host_terms_are_per_machine_and_unknown_machines_read_the_most_measured() -> None:
    def on_host(g, n, b, c, it, host):
        return 0.02 + 0.003 * b / n + (0.004 if host == 216.0 else 0.007) * b / c + 30.0 / it

    d = runs_from(lambda *a: 0.0, gpus=("M60",))
    d["disk_speed"] = np.where(np.arange(len(d)) % 3 == 0, 384.0, 216.0)
    d["runtime_s"] = [it * on_host(g, n, b, c, it, h) for g, n, b, c, it, h in
                      zip(d.gpu, d.gpus, d.batch_size, d.cpu_threads, d.iterations, d.disk_speed)]
    terms = ("fixed", "work", "startup", "input")
    m = fit_structured(d, terms)
    y = d["runtime_s"] / d["iterations"]
    assert np.allclose(m.per_iteration(d), y, rtol=1e-9)
    assert m.hosts["M60"].machines == (216.0, 384.0) and m.hosts["M60"].default == 216.0
    unknown = m.per_iteration(d.drop(columns="disk_speed"))
    on_216 = [on_host(*r, 216.0) for r in zip(d.gpu, d.gpus, d.batch_size, d.cpu_threads, d.iterations)]
    assert np.allclose(unknown, on_216, rtol=1e-9)
    # one machine per GPU type: nothing to split, the same fit as without the column
    one = d.assign(disk_speed=384.0, runtime_s=[it * on_host(g, n, b, c, it, 384.0) for g, n, b, c, it in
                                                 zip(d.gpu, d.gpus, d.batch_size, d.cpu_threads, d.iterations)])
    assert fit_structured(one, terms).per_gpu["M60"][0] == pytest.approx([0.02, 0.003, 30.0, 0.007], rel=1e-6)


def test_pooled_model_scales_the_gpu_side_with_per_die_speed() -> None:
    # GPU-side terms exactly inversely proportional to per-die speed, shared start-up and all-reduce
    def scaled(g, n, b, c, it):
        return (0.02 + 0.003 * b / n) * 3000.0 / speed(gpu(g)) + 0.05 * (n - 1) / n + 30.0 / it

    d = runs_from(scaled, gpus=("QuadroP600", "K80", "M60"))
    m = fit_structured(d, ("fixed", "work", "allreduce", "startup"))
    q = runs_from(scaled, gpus=("GTX1080Ti",))
    assert m.alpha == 1.0
    assert np.allclose(m.per_iteration(q), q["runtime_s"] / q["iterations"], rtol=1e-6)
    assert speed(gpu("K80")) == 5591 / 2 and speed(gpu("V100")) == 15700.0


def test_cell_level_corrects_a_cell_bias() -> None:
    d = runs_from(lambda g, n, b, c, it: law(g, n, b, c, it) * (1.2 if (g, n) == ("M60", 2) else 1.0))
    terms = ("fixed", "work", "allreduce", "startup")
    y = d["runtime_s"] / d["iterations"]
    cell = (d.gpu == "M60") & (d.gpus == 2)
    plain = fit_structured(d, terms)
    fixed = plain.with_cells(d)
    worst_fixed = np.abs(fixed.per_iteration(d[cell]) / y[cell] - 1).max()
    assert worst_fixed < np.abs(plain.per_iteration(d[cell]) / y[cell] - 1).max() and worst_fixed < 0.02


def test_a_measured_configuration_takes_the_level_of_its_own_runs_and_others_the_coarser_cell() -> None:
    d = runs_from(lambda g, n, b, c, it: law(g, n, b, c, it) * (1.3 if (g, n, b) == ("K80", 2, 32) else 1.0))
    model = fit_structured(d, ("fixed", "work", "allreduce", "startup")).with_cells(d)
    y = (d["runtime_s"] / d["iterations"]).to_numpy()
    odd = ((d.gpu == "K80") & (d.gpus == 2) & (d.batch_size == 32)).to_numpy()
    assert np.allclose(model.per_iteration(d[odd]), y[odd], rtol=1e-6)
    plain = fit_structured(d, ("fixed", "work", "allreduce", "startup"))
    cell = ((d.gpu == "K80") & (d.gpus == 2) & (d.cpu_threads == 8)).to_numpy()
    median = np.median(y[cell] / plain.per_iteration(d[cell]))
    between = d[cell & (d.batch_size == 16).to_numpy()].assign(batch_size=24)  # a batch never measured
    assert model.per_iteration(between) / plain.per_iteration(between) == pytest.approx([median], rel=1e-9)


def test_validation_splits_ask_the_right_question() -> None:
    d = runs_from(law)
    (top, top_out), (second, second_out) = axis_splits(d, "batch", 3, 0)
    assert set(d.iloc[top].batch_size) == set(d.iloc[top_out].batch_size) == {64}
    assert set(d.iloc[second].batch_size) == {32} and set(d.iloc[second_out].batch_size) == {32, 64}
    (low, _), _ = axis_splits(d, "batch_below", 3, 0)
    assert set(d.iloc[low].batch_size) == {8}
    (most, _), (next_most, out) = axis_splits(d, "gpus", 3, 0)
    assert set(d.iloc[most].gpus) == {4} and set(d.iloc[next_most].gpus) == {2} and set(d.iloc[out].gpus) == {2, 4}
    ((fast, _),) = axis_splits(d, "compute", 3, 0)
    assert set(d.iloc[fast].gpu) == {"M60"}
    assert axis_splits(d, "depth", 3, 0) is None
    assert len(axis_splits(d, "inside", 3, 0)) == 3


def test_regression_keeps_unbounded_families_inside() -> None:
    r = RegressionPredictor()
    fit = r.model(("resnet50", "tensorflow", False))
    assert set(fit.eligible("inside")) == set(fit.labels)
    assert not {"rf", "gbr", "svr"} & set(fit.eligible("batch"))
    assert all(lab.startswith("structured/") for lab in fit.eligible("compute"))
    for kind in ("batch", "gpus", "compute"):
        assert fit.chosen(kind) in fit.eligible(kind)


def test_amdahl_input_recovers_a_saturating_thread_law_that_the_threaded_term_alone_cannot() -> None:
    def saturating(g, n, b, c, it):
        return 0.01 + 0.002 * b / n + b * (0.0005 + 0.004 / c)

    d = runs_from(saturating, counts=(1, 2), cpus=(2, 4, 8, 16))
    y = (d["runtime_s"] / d["iterations"]).to_numpy()
    assert set(TERM_SETS["input_amdahl"][0]) - set(TERM_SETS["input"][0]) == {"input_serial"}
    amdahl = fit_structured(d, ("fixed", "work", "input", "input_serial"))  # the toy's 1/iterations ∝ batch
    threaded = fit_structured(d, ("fixed", "work", "input"))
    assert np.abs(amdahl.per_iteration(d) / y - 1).max() < 1e-6
    assert np.abs(threaded.per_iteration(d) / y - 1).max() > 0.02


def test_all_reduce_shapes_and_the_regression_picks_the_one_that_predicts_more_gpus() -> None:
    assert with_comm(("fixed", "allreduce", "depth_allreduce"), "tree") == (
        "fixed", "allreduce_tree", "depth_allreduce_tree")
    assert with_comm(("allreduce",), "ring") == ("allreduce",)
    with pytest.raises(ValueError):
        with_comm(("allreduce",), "star")
    for shape, comm in (("linear", lambda n: 0.03 * (n - 1)), ("ring", lambda n: 0.2 * (n - 1) / n)):
        d = runs_from(lambda g, n, b, c, it, comm=comm: 0.02 + 0.003 * b / n + comm(n) + 30.0 / it,
                      counts=(1, 2, 3, 4, 6))
        fit = RegressionPredictor(families=("structured",)).fit(d).model(("toy", "pytorch", False))
        assert fit.comm == shape


def test_a_deeper_network_is_not_read_at_the_level_of_a_shallower_ones_runs() -> None:
    d = runs_from(lambda g, n, b, c, it: law(g, n, b, c, it) * (1.3 if b == 32 else 1.0)).assign(depth=2)
    terms = ("fixed", "work", "allreduce", "startup", "depth_fixed", "depth_work")
    plain = fit_structured(d, terms)
    model = plain.with_cells(d)
    same = d[d.batch_size == 32]
    assert np.allclose(model.per_iteration(same), same["runtime_s"] / same["iterations"], rtol=1e-6)
    deeper = same.assign(depth=3)
    cell = ((d.gpu == same.gpu.iloc[0]) & (d.gpus == same.gpus.iloc[0]) & (d.cpu_threads == same.cpu_threads.iloc[0]))
    y = (d["runtime_s"] / d["iterations"])[cell]
    median = np.median(y / plain.per_iteration(d[cell]))
    assert model.per_iteration(deeper.iloc[:1]) / plain.per_iteration(deeper.iloc[:1]) == pytest.approx([median])
