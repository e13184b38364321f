"""Evaluation protocols (splits that really hold data out) and the ``capsim predict`` command."""

from __future__ import annotations

import pytest

from experiments.cli import main
from experiments.commands.predict import format_table, parse_app
from predictors.evaluation import evaluate, splits, summarise
from predictors.measurements import runs
from sim.model import CapsimError


@pytest.fixture(scope="module")
def df():
    return runs().reset_index(drop=True)


def test_compute_split_holds_the_gpu_out_of_every_application(df) -> None:
    for label, train, test in splits(df, "compute"):
        held = set(df.loc[test, "gpu"])
        assert len(held) == 1 and not held & set(df.loc[train, "gpu"])


def test_batch_and_gpu_splits_extrapolate(df) -> None:
    for protocol, col in (("batch", "batch_size"), ("gpus", "gpus")):
        seen = 0
        for label, train, test in splits(df, protocol):
            first = df.loc[test[0]]
            tr = df.loc[train]
            tr = tr[(tr["application"] == first["application"]) & (tr["framework"] == first["framework"])
                    & (tr["depth"] == first["depth"])]
            assert tr[col].max() < df.loc[test, col].min()
            assert not set(test) & set(train)
            seen += 1
        assert seen >= 6


def test_interpolation_folds_partition_each_application(df) -> None:
    by_app: dict[str, list] = {}
    for label, train, test in splits(df, "interpolation"):
        by_app.setdefault(label, []).extend(test)
        assert not set(test) & set(train)
    for label, idx in by_app.items():
        assert len(idx) == len(set(idx))
    assert sum(len(v) for v in by_app.values()) == len(df)


def test_depth_split_trains_shallow_tests_deep(df) -> None:
    (label, train, test), = list(splits(df, "depth"))
    assert label == "resnet_unknown_depth" and df.loc[test, "depth"].min() == 6


def test_evaluate_small_subset_and_summary(df) -> None:
    sub = df[(df["application"] == "resnet50") & (df["framework"] == "tensorflow")]
    pred = evaluate(["gpus"], ["measured", "analytical"], data=sub)
    s = summarise(pred, by=("protocol", "app", "predictor")).set_index("predictor")
    assert s.loc["measured", "coverage"] == 0.0
    assert s.loc["analytical", "coverage"] == 1.0 and s.loc["analytical", "mape"] < 0.5
    assert "analytical" in format_table(summarise(pred, by=("protocol", "app", "predictor")))


def test_unknown_protocol_or_predictor(df) -> None:
    with pytest.raises(CapsimError, match="unknown evaluation protocol"):
        list(splits(df, "time-travel"))
    with pytest.raises(CapsimError, match="unknown predictor"):
        evaluate(["gpus"], ["oracle"], data=df.head(10))


def test_predict_show_prints_every_predictor(capsys) -> None:
    code = main(["predict", "show", "resnet50_pt", "--gpu", "M60", "--gpus", "2", "--batch", "64",
                 "--iterations", "6000", "--predictors", "measured,analytical,wave"])
    out = capsys.readouterr().out
    assert code == 0
    assert all(k in out for k in ("measured", "analytical", "wave"))
    measured_line = next(line for line in out.splitlines() if line.strip().startswith("measured"))
    assert float(measured_line.split()[1]) == pytest.approx(3165.6, rel=0.01)


def test_predict_show_errors(capsys) -> None:
    assert main(["predict", "show", "bert_pt", "--gpu", "M60", "--batch", "8", "--iterations", "10"]) == 2
    assert "unknown application 'bert'" in capsys.readouterr().err
    assert main(["predict", "show", "alexnet", "--gpu", "M60", "--batch", "8", "--iterations", "10"]) == 2
    assert main(["predict", "show", "alexnet_pt", "--gpu", "Voodoo", "--batch", "8", "--iterations", "10"]) == 2
    assert parse_app("vgg19", "pytorch") == ("vgg19", "pytorch")
