"""Scoring predictors on the measurements under named protocols (fit on a training split, predict the test runs).

Protocols, applied per application (application × framework; the variable-depth runs form their own application):
- ``interpolation``: random 5-fold split of the runs;
- ``batch``: train on the smaller half of the measured batch sizes, test on the larger;
- ``gpus``: train on the smaller half of the measured GPU counts, test on the larger;
- ``compute``: leave one GPU model out (each GPU model in turn is the test set);
- ``depth``: the variable-depth ResNet runs, train on depth ≤ 5, test on depth > 5.
Predictors scored: ``measured`` (``measured_x``: with ``extrapolate_batch``), ``regression`` (``regression_linear``:
the linear and ridge families only, which extrapolate more gracefully than trees), ``analytical`` (efficiency per
framework × GPU; ``analytical_app``: per application × GPU) and ``wave`` (origin M60, or K80 when M60 is held out).
Every test run is predicted with its own GPU, GPU count, batch size, iterations and CPU threads. A predictor may
decline a run (unsupported); MAPE is over the runs it answered and ``coverage`` says which fraction that was.
``noise_floor`` is the MAPE of predicting each test run by the mean of its repeats (same features) in the test set,
a lower bound no predictor can beat on average.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from predictors.analytical import AnalyticalPredictor
from predictors.measured import MeasuredPredictor
from predictors.measurements import NO_DEPTH, runs
from predictors.regression import FAMILIES, RegressionPredictor
from predictors.wave import WavePredictor
from sim.catalogue import gpu_models
from sim.model import CapsimError, JobSpec, VMType

__all__ = ["PROTOCOLS", "PREDICTORS", "splits", "evaluate", "summarise", "app_label"]

PROTOCOLS = ("interpolation", "batch", "gpus", "compute", "depth")
PREDICTORS = ("measured", "measured_x", "regression", "regression_linear", "analytical", "analytical_app", "wave")
FEATURES = ["gpu", "gpus", "batch_size", "iterations", "cpu_threads", "depth"]


def app_label(application: str, framework: str, has_depth: bool) -> str:
    short = {"pytorch": "pt", "tensorflow": "tf"}.get(framework, framework)
    return f"{application}_{short}" + ("_depth" if has_depth else "")


def _apps(df: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    for (a, f, d), g in df.groupby(["application", "framework", df["depth"] != NO_DEPTH]):
        yield app_label(a, f, bool(d)), g


def _lower_half(values: pd.Series) -> set:
    vals = sorted(values.unique())
    return set(vals[: max(1, len(vals) // 2)])


def splits(df: pd.DataFrame, protocol: str, seed: int = 0) -> Iterator[tuple[str, pd.Index, pd.Index]]:
    """(application label, training index, test index) of every split of ``protocol`` (module docstring).

    The training set is every run but the test runs (other applications included, which only the predictors pooling
    across applications use), except under ``compute``, where no application keeps a run on the held-out GPU.
    """
    if protocol not in PROTOCOLS:
        raise CapsimError(f"unknown evaluation protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
    for label, g in _apps(df):
        for test in _tests(g, protocol, label.endswith("_depth"), seed):
            if protocol == "compute":
                yield label, df.index[df["gpu"] != g.loc[test[0], "gpu"]], test
            else:
                yield label, df.index.difference(test), test


def _tests(g: pd.DataFrame, protocol: str, has_depth: bool, seed: int) -> Iterator[pd.Index]:
    if protocol == "interpolation":
        perm = np.random.default_rng(np.random.SeedSequence(seed)).permutation(len(g))
        for k in range(5):
            yield g.index[np.sort(perm[k::5])]
    elif protocol in ("batch", "gpus"):
        col = "batch_size" if protocol == "batch" else "gpus"
        if not has_depth and g[col].nunique() > 1:
            yield g.index[~g[col].isin(_lower_half(g[col]))]
    elif protocol == "compute":
        if g["gpu"].nunique() > 1:
            for name in sorted(g["gpu"].unique()):
                yield g.index[g["gpu"] == name]
    elif protocol == "depth" and has_depth and g["application"].iloc[0] == "resnet":
        yield g.index[g["depth"] > 5]


def _vm(gpu_name: str, gpus: int) -> VMType:
    return VMType(name=f"eval-{gpu_name}", gpu=gpu_models()[gpu_name], gpus=int(gpus), price_per_hour=0.0)


def _specs(rows: pd.DataFrame) -> list[JobSpec]:
    fw = rows["framework"].replace({"unknown": "tensorflow"})
    return [JobSpec(a, f, int(i), int(b), depth=None if d == NO_DEPTH else int(d))
            for a, f, i, b, d in zip(rows["application"], fw, rows["iterations"], rows["batch_size"], rows["depth"])]


def _by_row(make: Callable[[int], object], rows: pd.DataFrame, how: Callable) -> np.ndarray:
    """Predict rows with one predictor per CPU-thread setting (built lazily by ``make(cpu)``)."""
    out = np.full(len(rows), np.nan)
    specs = _specs(rows)
    gpus, names, cpus = rows["gpus"].to_numpy(int), rows["gpu"].to_numpy(), rows["cpu_threads"].to_numpy()
    vms = {(g, n): _vm(g, n) for g, n in set(zip(names, gpus))}
    for cpu in sorted(set(cpus)):
        pred = make(int(cpu))
        for j in np.flatnonzero(cpus == cpu):
            out[j] = how(pred, specs[j], vms[(names[j], gpus[j])], int(gpus[j]))
    return out


def _predict(name: str, train: pd.DataFrame, test: pd.DataFrame, regression_folds: int) -> np.ndarray:
    rt = lambda p, s, v, g: p.runtime(s, v, g)  # noqa: E731
    if name in ("measured", "measured_x"):
        x = name == "measured_x"
        return _by_row(lambda c: MeasuredPredictor(cpu_threads=c, extrapolate_batch=x, data=train), test, rt)
    if name == "wave":
        origins = [o for o in ("M60", "K80") if o in set(train["gpu"])]
        if not origins:
            return np.full(len(test), np.nan)
        return _by_row(lambda c: WavePredictor(origin=origins[0], base=MeasuredPredictor(cpu_threads=c, data=train)),
                       test, rt)
    if name in ("analytical", "analytical_app"):
        p = AnalyticalPredictor(efficiency_by="framework" if name == "analytical" else "application", data=train)
        return _by_row(lambda c: (p, c), test, lambda pc, s, v, g: pc[0].runtime(s, v, g, cpu=pc[1]))
    if name in ("regression", "regression_linear"):
        fams = ("linear", "ridge") if name == "regression_linear" else FAMILIES
        p = RegressionPredictor(families=fams, folds=regression_folds, data=train)
        a, f, d = test["application"].iloc[0], test["framework"].iloc[0], bool((test["depth"] != NO_DEPTH).any())
        return p.predict_frame(test, (a, f, d))
    raise CapsimError(f"unknown predictor {name!r} for evaluation: choose from {', '.join(PREDICTORS)}")


def evaluate(protocols: Sequence[str] = PROTOCOLS, predictors: Sequence[str] = PREDICTORS, seed: int = 0,
             regression_folds: int = 3, data: pd.DataFrame | None = None,
             progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Predictions of every test run: columns protocol, app, split, predictor, the run's features, measured, predicted."""
    df = (runs() if data is None else data).reset_index(drop=True)
    for p in predictors:
        if p not in PREDICTORS:
            raise CapsimError(f"unknown predictor {p!r} for evaluation: choose from {', '.join(PREDICTORS)}")
    frames = []
    for protocol in protocols:
        for k, (label, tr, te) in enumerate(splits(df, protocol, seed)):
            train, test = df.loc[tr], df.loc[te]
            for name in predictors:
                if progress:
                    progress(f"{protocol} {label} split {k} {name}")
                with np.errstate(all="ignore"):
                    pred = _predict(name, train, test, regression_folds)
                frames.append(test[FEATURES].assign(protocol=protocol, app=label, split=k, predictor=name,
                                                    measured=test["runtime_s"].to_numpy(), predicted=pred))
    return pd.concat(frames, ignore_index=True)


def summarise(pred: pd.DataFrame, by: Sequence[str] = ("protocol", "app", "gpu", "predictor")) -> pd.DataFrame:
    """MAPE (over answered runs), coverage and run count per group, plus the repeat noise floor."""
    p = pred.copy()
    ok = np.isfinite(p["predicted"]) & (p["predicted"] > 0)
    p["ape"] = np.where(ok, np.abs(p["predicted"] - p["measured"]) / p["measured"], np.nan)
    p["answered"] = ok
    keys = ["protocol", "app", "split", "predictor"] + FEATURES
    grp = p.groupby(keys)["measured"]
    n = grp.transform("size")
    loo = (grp.transform("sum") - p["measured"]) / (n - 1)
    p["floor"] = np.where(n > 1, np.abs(loo - p["measured"]) / p["measured"], np.nan)
    out = p.groupby(list(by)).agg(runs=("measured", "size"), coverage=("answered", "mean"), mape=("ape", "mean"),
                                  noise_floor=("floor", "mean")).reset_index()
    return out
