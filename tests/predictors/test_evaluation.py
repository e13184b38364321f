"""Evaluation protocols (splits that really hold data out, cells as published), noise floors, and ``capsim predict``."""

from __future__ import annotations

import csv
import math

import numpy as np
import pandas as pd
import pytest

from experiments.cli import main
from experiments.cli.predict import parse_app
from predictors.evaluation import CELL_COLUMNS, evaluate, noise_floor, parse_predictor, trainable_kinds
from predictors.measurements import NO_DEPTH, runs
from predictors.protocols import COMPUTE_TRAIN, DEPTH_KS, splits
from sim.model import CapsimError


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    return runs().reset_index(drop=True)


def _only(df: pd.DataFrame, protocol: str):
    (s,) = list(splits(df, protocol))
    return s


def test_batch_holds_out_the_largest_batch_of_every_cell(df: pd.DataFrame) -> None:
    s = _only(df, "batch")
    train, test = df.iloc[s.train], df.iloc[s.test]
    assert not set(s.train) & set(s.test) and len(s.cells) == 95
    for c in s.cells:
        _, app, fw, gpu, n, _ = c.key
        cell = df[(df.application == app) & (df.framework == fw) & (df.gpu == gpu) & (df.gpus == n)
                  & (df.depth == NO_DEPTH)]
        assert set(df.iloc[c.rows].batch_size) == {cell.batch_size.max()}
        seen = train[(train.application == app) & (train.framework == fw) & (train.gpu == gpu) & (train.gpus == n)
                     & (train.depth == NO_DEPTH)]
        assert seen.batch_size.max() < cell.batch_size.max() and len(seen)
    assert (test.depth == NO_DEPTH).all()


def test_gpus_holds_out_the_largest_count_of_every_gpu_type(df: pd.DataFrame) -> None:
    s = _only(df, "gpus")
    train = df.iloc[s.train]
    assert len(s.cells) == 26
    for c in s.cells:
        _, app, fw, gpu, n, _ = c.key
        assert n is None
        held = set(df.iloc[c.rows].gpus)
        assert len(held) == 1
        seen = train[(train.application == app) & (train.framework == fw) & (train.gpu == gpu)
                     & (train.depth == NO_DEPTH)]
        assert seen.gpus.max() < held.pop()


def test_compute_trains_on_three_gpus_and_predicts_the_1080ti(df: pd.DataFrame) -> None:
    s = _only(df, "compute")
    assert set(df.iloc[s.train].gpu) == set(COMPUTE_TRAIN)
    assert set(df.iloc[s.test].gpu) == {"GTX1080Ti"} and len(s.cells) == 7
    assert {c.key[1] for c in s.cells} == {"alexnet", "deepspeech", "resnet50", "vgg19"}


def test_depth_trains_shallow_and_reports_per_gpu_count(df: pd.DataFrame) -> None:
    got = list(splits(df, "depth"))
    assert [s.cells[0].key[-1] for s in got] == list(DEPTH_KS)
    for s, k in zip(got, DEPTH_KS):
        train = df.iloc[s.train]
        assert train[train.application == "resnet"].depth.max() == k
        assert df.iloc[s.test].depth.min() == k + 1
        assert [c.key[1:5] for c in s.cells] == [("resnet_depth", "pytorch", None, n) for n in (1, 2, 4)]


def test_interpolation_folds_partition_each_application(df: pd.DataFrame) -> None:
    got = list(splits(df, "interpolation"))
    tested = np.concatenate([s.test for s in got])
    assert len(tested) == len(set(tested)) == len(df)
    cells = {c.key for s in got for c in s.cells}
    assert len(cells) == 8 and all(k[3] is None and k[4] is None for k in cells)


def test_noise_floor_by_hand() -> None:
    rows = pd.DataFrame({"application": "a", "framework": "f", "gpu": "M60", "gpus": 1, "batch_size": 8,
                         "iterations": [10, 10, 20], "cpu_threads": 2, "depth": -1, "runtime_s": [100.0, 110.0, 50.0]})
    f = noise_floor(rows)
    assert f[0] == pytest.approx(5 / 100 * math.sqrt(2)) and f[1] == pytest.approx(5 / 110 * math.sqrt(2))
    assert np.isnan(f[2])
    # runs on another machine (another disk speed, the publication's host feature) are not repeats
    g = noise_floor(rows.assign(iterations=10, disk_speed=[216.0, 384.0, 216.0]))
    assert g[0] == pytest.approx(25 / 100 * math.sqrt(2)) and np.isnan(g[1])


def test_evaluate_writes_published_cells(df: pd.DataFrame) -> None:
    sub = df[(df.application == "resnet50") & (df.framework == "tensorflow")]
    ev = evaluate(["gpus"], ["measured", "analytical"], data=sub)
    assert list(ev.cells.columns) == CELL_COLUMNS
    cov = ev.coverage.set_index(["gpu", "predictor"])["coverage"]
    assert (cov.xs("measured", level="predictor") == 0).all()  # measured never extrapolates GPU counts
    assert (cov.xs("analytical", level="predictor") == 1).all()
    assert ev.cells[ev.cells.predictor == "analytical"].mape.max() < 0.5
    assert (ev.cells.test_runs > 0).all()


def test_trainable_kinds_come_from_the_registry() -> None:
    kinds = trainable_kinds()
    assert {"measured", "regression", "analytical", "wave", "hybrid"} <= set(kinds)
    assert "noisy" not in kinds and "table" not in kinds


def test_predictor_specs_and_errors(df: pd.DataFrame) -> None:
    assert parse_predictor("hybrid(anchor=true)") == ("hybrid(anchor=true)", "hybrid", {"anchor": True})
    assert parse_predictor("regression(families=structured|gbr, folds=4)")[2] == {
        "families": ["structured", "gbr"], "folds": 4}
    with pytest.raises(CapsimError, match="unknown evaluation protocol"):
        list(splits(df, "time-travel"))
    with pytest.raises(CapsimError, match="unknown predictor 'oracle'"):
        evaluate(["gpus"], ["oracle"], data=df.head(10))
    with pytest.raises(CapsimError, match="does not learn from runs"):
        parse_predictor("noisy")


def test_predict_evaluate_command(tmp_path, capsys) -> None:
    out = tmp_path / "ev"
    code = main(["predict", "evaluate", "--out", str(out), "--protocols", "depth",
                 "--predictors", "measured,analytical", "--workers", "1"])
    text = capsys.readouterr()
    assert code == 0
    with open(out / "cells.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header == CELL_COLUMNS
    cells = pd.read_csv(out / "cells.csv")
    assert set(cells.protocol) == {"depth"} and set(cells.depth_k) == set(DEPTH_KS)
    assert (out / "summary.csv").exists() and (out / "pred_vs_measured_depth.png").exists()
    assert "depth" in text.out and "analytical" in text.out
    assert "\r" not in text.err and "4/4" in text.err  # plain progress lines, not a bar, when not on a terminal


def test_predict_show_prints_every_predictor(capsys) -> None:
    code = main(["predict", "show", "resnet50_pt", "--gpu", "M60", "--gpus", "2", "--batch", "64",
                 "--iterations", "6000", "--predictors", "measured,analytical,wave"])
    out = capsys.readouterr().out
    assert code == 0
    assert all(k in out for k in ("measured", "analytical", "wave"))
    measured_line = next(line for line in out.splitlines() if line.strip().startswith("measured"))
    assert float(measured_line.split()[1]) == pytest.approx(3165.6, rel=0.01)


def test_predict_show_says_which_model_answers(capsys) -> None:
    code = main(["predict", "show", "resnet50_pt", "--gpu", "QuadroP600", "--gpus", "2", "--batch", "32",
                 "--iterations", "6000", "--predictors", "hybrid"])
    out = capsys.readouterr().out
    assert code == 0 and "regression" in out and "batch 32 above" in out
    code = main(["predict", "show", "resnet50_pt", "--gpu", "QuadroP600", "--gpus", "2", "--batch", "64",
                 "--iterations", "6000", "--predictors", "hybrid"])
    out = capsys.readouterr().out
    assert code == 0 and "does not fit in GPU memory" in out and "32 samples per GPU" in out


def test_predict_show_errors(capsys) -> None:
    assert main(["predict", "show", "bert_pt", "--gpu", "M60", "--batch", "8", "--iterations", "10"]) == 2
    assert "unknown application 'bert'" in capsys.readouterr().err
    assert main(["predict", "show", "alexnet", "--gpu", "M60", "--batch", "8", "--iterations", "10"]) == 2
    assert main(["predict", "show", "alexnet_pt", "--gpu", "Voodoo", "--batch", "8", "--iterations", "10"]) == 2
    assert parse_app("vgg19", "pytorch") == ("vgg19", "pytorch")
