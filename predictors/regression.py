"""End-to-end regression in the style of aMLLibrary: augmented features, forward selection by MAPE, model families.

One model per application (application, framework; the variable-depth ResNet runs form their own model with the
depth as a feature). The target is the time per iteration ``runtime / iterations`` and the base features are batch
size, GPU GFLOP/s (``GPUModel.measured_gflops``), GPU count, CPU threads, ``1/iterations`` (which carries the fixed
overhead: ``runtime/it = per_it + overhead/it``) and the network depth where it varies. The linear families see those
features augmented with inverse terms ``1/x`` and products up to ``degree`` (``x·1/x`` skipped), reduced by sequential
forward selection scored by k-fold MAPE; they are fitted by least squares weighted by ``1/y²`` (relative error). Trees
and SVR see the base features and fit ``log y``. Every family × small grid is scored by k-fold MAPE; the best is
refitted on all the runs. A job's predicted runtime is ``iterations × predicted time per iteration``; for speed the
model is read on a grid of iteration counts (``ANCHORS``, 6 per decade up to 10⁷, beyond which the time per
iteration is held) and interpolated in ``1/iterations``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from predictors.base import Predictor, register
from predictors.measurements import NO_DEPTH, data_key, runs
from sim.model import INFEASIBLE, CapsimError, Config, JobSpec, VMType

__all__ = ["RegressionPredictor", "AppModel", "augment", "mape", "FAMILIES"]

ANCHORS = np.unique(np.round(np.geomspace(1, 1e7, 43)))
FAMILIES = ("linear", "ridge", "rf", "gbr", "svr")
GRIDS: dict[str, list[dict[str, Any]]] = {
    "linear": [{}],
    "ridge": [{"alpha": a} for a in (1e-4, 1e-2)],
    "rf": [{"max_depth": None, "min_samples_leaf": 1}],
    "gbr": [{"max_depth": d, "learning_rate": 0.1} for d in (3, 5)],
    "svr": [{"C": 30.0}],
}

def mape(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute percentage error, as a fraction."""
    return float(np.mean(np.abs(pred - y) / np.abs(y)))


def base_features(df: pd.DataFrame, with_depth: bool) -> pd.DataFrame:
    """The regression's base features for rows with columns batch_size, gflops, gpus, cpu_threads, iterations."""
    out = pd.DataFrame({
        "batch": df["batch_size"].to_numpy(float),
        "gflops": df["gflops"].to_numpy(float),
        "gpus": df["gpus"].to_numpy(float),
        "cpu": df["cpu_threads"].to_numpy(float),
        "inv_it": 1.0 / df["iterations"].to_numpy(float),
    })
    if with_depth:
        out["depth"] = df["depth"].to_numpy(float)
    return out


def augment(x: pd.DataFrame, degree: int) -> pd.DataFrame:
    """``x`` plus ``1/x`` terms plus products of up to ``degree`` factors (never a term with its own inverse)."""
    terms: dict[str, np.ndarray] = {}
    for c in x.columns:
        v = x[c].to_numpy(float)
        terms[c] = v
        if c.startswith("inv_"):
            terms[c[4:] + "_raw"] = 1.0 / v
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                terms["inv_" + c] = 1.0 / v
    names = list(terms)
    out = dict(terms)
    for d in range(2, degree + 1):
        for combo in itertools.combinations_with_replacement(names, d):
            roots = [n[4:] if n.startswith("inv_") else n.removesuffix("_raw") for n in combo]
            inv = [n.startswith("inv_") for n in combo]
            if any(roots[i] == roots[j] and inv[i] != inv[j] for i in range(d) for j in range(i + 1, d)):
                continue
            out["*".join(combo)] = np.prod([terms[n] for n in combo], axis=0)
    return pd.DataFrame(out)


def _folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    perm = np.random.default_rng(np.random.SeedSequence(seed)).permutation(n)
    return [perm[i::k] for i in range(k)]


def _wls(a: np.ndarray, y: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """Least squares of y on [1, a] weighted by 1/y² (relative error), ridge ``alpha`` on scaled columns."""
    w = 1.0 / y
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    design = np.c_[np.ones(len(a)), a / scale] * w[:, None]
    if alpha > 0:
        design = np.r_[design, np.c_[np.zeros((a.shape[1], 1)), np.sqrt(alpha) * np.eye(a.shape[1])]]
        rhs = np.r_[np.ones(len(a)), np.zeros(a.shape[1])]
    else:
        rhs = np.ones(len(a))
    coef = np.linalg.lstsq(design, rhs, rcond=None)[0]
    return np.r_[coef[0], coef[1:] / scale]


def _cv_linear(a: np.ndarray, y: np.ndarray, folds: list[np.ndarray], alpha: float) -> float:
    errs = []
    for test in folds:
        train = np.setdiff1d(np.arange(len(y)), test)
        coef = _wls(a[train], y[train], alpha)
        pred = coef[0] + a[test] @ coef[1:]
        errs.append(np.abs(pred - y[test]) / y[test])
    return float(np.mean(np.concatenate(errs)))


def forward_select(aug: pd.DataFrame, y: np.ndarray, folds: list[np.ndarray], max_features: int) -> list[str]:
    """Sequential forward selection of augmented columns by k-fold MAPE of the weighted linear fit."""
    chosen: list[str] = []
    best = math.inf
    cols = {c: aug[c].to_numpy(float) for c in aug.columns if np.all(np.isfinite(aug[c]))}
    while len(chosen) < max_features:
        scores = {}
        for c in cols:
            if c in chosen:
                continue
            a = np.column_stack([cols[n] for n in chosen + [c]])
            scores[c] = _cv_linear(a, y, folds, 1e-8)
        if not scores:
            break
        c, s = min(scores.items(), key=lambda kv: kv[1])
        if s > best * 0.995:
            break
        chosen.append(c)
        best = s
    return chosen


def _tree(family: str, params: dict[str, Any], seed: int):
    """A scikit-learn estimator for the non-linear families (imported here: scikit-learn takes seconds to import)."""
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
    from sklearn.svm import SVR

    if family == "rf":
        return RandomForestRegressor(n_estimators=60, random_state=seed, n_jobs=1, **params)
    if family == "gbr":
        return GradientBoostingRegressor(n_estimators=150, random_state=seed, **params)
    return SVR(gamma="scale", epsilon=0.01, **params)


@dataclass
class AppModel:
    """One application's fitted model: the family, its parameters, selected features, CV MAPE per candidate."""

    family: str
    params: dict[str, Any]
    with_depth: bool
    degree: int
    features: list[str] = field(default_factory=list)
    coef: np.ndarray | None = None
    estimator: Any = None
    center: np.ndarray | None = None
    scale: np.ndarray | None = None
    scores: dict[str, float] = field(default_factory=dict)

    def per_iteration(self, rows: pd.DataFrame) -> np.ndarray:
        x = base_features(rows, self.with_depth)
        if self.coef is not None:
            aug = augment(x, self.degree)[self.features].to_numpy(float)
            return self.coef[0] + aug @ self.coef[1:]
        z = (x.to_numpy(float) - self.center) / self.scale
        return np.exp(self.estimator.predict(z))


def fit_app(df: pd.DataFrame, families: Sequence[str], degree: int, folds_k: int, max_features: int,
            seed: int) -> AppModel:
    """Choose and fit one application's model on its runs ``df`` (module docstring)."""
    with_depth = bool((df["depth"] != NO_DEPTH).any()) and df["depth"].nunique() > 1
    x = base_features(df, with_depth)
    y = (df["runtime_s"] / df["iterations"]).to_numpy(float)
    k = max(2, min(folds_k, len(df)))
    folds = _folds(len(df), k, seed)
    scores: dict[str, float] = {}
    best: tuple[float, str, dict[str, Any]] = (math.inf, "", {})
    feats: list[str] = []
    aug = None
    if {"linear", "ridge"} & set(families):
        aug = augment(x, degree)
        feats = forward_select(aug, y, folds, max_features)
        a = aug[feats].to_numpy(float)
        for fam in ("linear", "ridge"):
            if fam in families:
                for p in GRIDS[fam]:
                    s = _cv_linear(a, y, folds, p.get("alpha", 1e-8))
                    scores[f"{fam}{p}"] = s
                    best = min(best, (s, fam, p), key=lambda t: t[0])
    xv = x.to_numpy(float)
    center, scale = xv.mean(axis=0), xv.std(axis=0)
    scale[scale == 0] = 1.0
    z, ly = (xv - center) / scale, np.log(y)
    for fam in ("rf", "gbr", "svr"):
        if fam not in families:
            continue
        for p in GRIDS[fam]:
            errs = []
            for test in folds:
                train = np.setdiff1d(np.arange(len(y)), test)
                est = _tree(fam, p, seed).fit(z[train], ly[train])
                errs.append(np.abs(np.exp(est.predict(z[test])) - y[test]) / y[test])
            s = float(np.mean(np.concatenate(errs)))
            scores[f"{fam}{p}"] = s
            best = min(best, (s, fam, p), key=lambda t: t[0])
    _, fam, p = best
    if not fam:
        raise CapsimError(f"predictor 'regression': families {list(families)} must name some of {', '.join(FAMILIES)}")
    model = AppModel(fam, p, with_depth, degree, scores=scores)
    if fam in ("linear", "ridge"):
        model.features = feats
        model.coef = _wls(aug[feats].to_numpy(float), y, p.get("alpha", 1e-8))
    else:
        model.estimator = _tree(fam, p, seed).fit(z, ly)
        model.center, model.scale = center, scale
    return model


def model_key(key: tuple[str, str, int]) -> tuple[str, str, bool]:
    return key[0], key[1], key[2] != NO_DEPTH


def _best_cpu(d: pd.DataFrame) -> int:
    """The CPU-thread count whose runs are fastest relative to their (GPU, GPU count, batch) group's fastest."""
    t = d["runtime_s"] / d["iterations"]
    rel = t / t.groupby([d["gflops"], d["gpus"], d["batch_size"]]).transform("min")
    return int(rel.groupby(d["cpu_threads"]).mean().idxmin())


def query_frame(specs: Sequence[JobSpec], configs: Sequence[Config], cpu: float | np.ndarray) -> pd.DataFrame:
    """Rows (spec × config, spec-major) with the columns the fitted predictors read."""
    n, m = len(specs), len(configs)
    return pd.DataFrame({
        "batch_size": np.repeat([s.batch_size for s in specs], m),
        "iterations": np.repeat([s.iterations for s in specs], m),
        "depth": np.repeat([NO_DEPTH if s.depth is None else s.depth for s in specs], m),
        "gflops": np.tile([c.vm.gpu.measured_gflops or np.nan for c in configs], n),
        "gpus": np.tile([c.gpus for c in configs], n),
        "cpu_threads": np.tile(np.broadcast_to(np.asarray(cpu, dtype=float), (m,)), n),
    })


_SHARED_FITS: dict[tuple, dict] = {}


@register("regression")
class RegressionPredictor(Predictor):
    """aMLLibrary-style regression, one model per application, fitted lazily on the shipped runs.

    ``cpu_threads``: the CPU-thread count assumed for a job: an integer, ``"max"`` (the application's largest measured
    count) or ``"best"`` (per GPU model, the measured count whose runs are fastest relative to their group's fastest;
    the application's overall best for GPUs it never ran on).
    The model is used only within the measured GPUs' compute range, GPU count range and batch range ×
    ``batch_margin`` of the application (outside: unsupported), since the features of an unmeasured GPU are its
    GFLOP/s alone. ``data`` (a runs frame) replaces the shipped runs, for evaluation. Models fitted on the shipped
    runs are cached per process and shared by instances with the same fitting settings (fitting is deterministic).
    """

    def __init__(self, families: Sequence[str] = FAMILIES, degree: int = 2, folds: int = 5, max_features: int = 8,
                 cpu_threads: str | int = "best", seed: int = 0, gpu_range: str = "measured",
                 batch_margin: float = 1.0, data: pd.DataFrame | None = None):
        bad = set(families) - set(FAMILIES)
        if bad or not families:
            raise CapsimError(f"predictor 'regression': unknown families {sorted(bad)}; choose from {', '.join(FAMILIES)}")
        if degree < 1:
            raise CapsimError(f"predictor 'regression': degree must be >= 1, got {degree}")
        self.families, self.degree, self.folds = tuple(families), int(degree), int(folds)
        self.max_features, self.cpu_threads, self.seed = int(max_features), cpu_threads, int(seed)
        self.gpu_range, self.batch_margin = gpu_range, float(batch_margin)
        self._data = data
        # fits on the shipped runs are shared by every instance with the same settings in this process
        shared_key = (self.families, self.degree, self.folds, self.max_features, self.seed)
        self._models: dict[tuple[str, str, bool], tuple[AppModel, dict[str, float]] | None] = (
            _SHARED_FITS.setdefault(shared_key, {}) if data is None else {})

    def data(self) -> pd.DataFrame:
        return runs() if self._data is None else self._data

    def rows_for(self, mkey: tuple[str, str, bool]) -> pd.DataFrame:
        df = self.data()
        sel = (df["application"] == mkey[0]) & (df["framework"] == mkey[1])
        sel &= (df["depth"] != NO_DEPTH) if mkey[2] else (df["depth"] == NO_DEPTH)
        return df[sel]

    def model(self, mkey: tuple[str, str, bool]) -> tuple[AppModel, dict[str, float]] | None:
        """(fitted model, measured ranges) of one application, or None if it has no runs."""
        if mkey not in self._models:
            d = self.rows_for(mkey)
            if len(d) < 4:
                self._models[mkey] = None
            else:
                m = fit_app(d, self.families, self.degree, self.folds, self.max_features, self.seed)
                ranges = {
                    "gflops_lo": d["gflops"].min(), "gflops_hi": d["gflops"].max(),
                    "gpus_hi": d["gpus"].max(), "batch_lo": d["batch_size"].min(),
                    "batch_hi": d["batch_size"].max(), "cpu_max": d["cpu_threads"].max(),
                    "best_cpu": _best_cpu(d),
                    "best_cpu_on": {g: _best_cpu(x) for g, x in d.groupby("gflops")},
                }
                self._models[mkey] = (m, ranges)
        return self._models[mkey]

    def _cpu(self, gflops: float | None, ranges: dict) -> float:
        if self.cpu_threads == "max":
            return float(ranges["cpu_max"])
        if self.cpu_threads == "best":
            return float(ranges["best_cpu_on"].get(gflops, ranges["best_cpu"]))
        return float(self.cpu_threads)

    def predict_frame(self, rows: pd.DataFrame, mkey: tuple[str, str, bool]) -> np.ndarray:
        """Predicted runtimes (s) of rows of one application, NaN if it has no model; no range checks."""
        fitted = self.model(mkey)
        if fitted is None:
            return np.full(len(rows), np.nan)
        return rows["iterations"].to_numpy(float) * fitted[0].per_iteration(rows)

    def _reason(self, spec: JobSpec, vm: VMType, gpus: int, ranges: dict[str, float]) -> str | None:
        g = vm.gpu.measured_gflops
        if gpus < 1 or gpus > vm.gpus:
            return f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        if g is None:
            return f"GPU model {vm.gpu.name} has no measured GFLOP/s, the regression's GPU feature"
        if self.gpu_range == "measured" and not ranges["gflops_lo"] <= g <= ranges["gflops_hi"]:
            return f"{vm.gpu.name} ({g:.0f} GFLOP/s) is outside the measured GPUs' range for {spec.app_key}"
        if gpus > ranges["gpus_hi"]:
            return f"{gpus} GPUs exceed the {ranges['gpus_hi']:.0f} measured for {spec.app_key}"
        lo, hi = ranges["batch_lo"] / self.batch_margin, ranges["batch_hi"] * self.batch_margin
        if not lo <= spec.batch_size <= hi:
            return f"batch size {spec.batch_size} outside the measured {ranges['batch_lo']:.0f}..{ranges['batch_hi']:.0f}"
        return None

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        fitted = self.model(model_key(data_key(spec)))
        if fitted is None:
            return f"no runs of {spec.app_key} to fit a regression on"
        return self._reason(spec, vm, gpus, fitted[1])

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.runtimes([spec], [Config(vm, gpus)])[0, 0])

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        """Vectorised: the model is evaluated per distinct (application, batch, depth) × config on the anchor grid
        of iteration counts ``ANCHORS`` and interpolated linearly in ``1/iterations`` (the feature it enters by)."""
        out = np.full((len(specs), len(configs)), INFEASIBLE)
        if out.size == 0:
            return out
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(specs):
            groups.setdefault((model_key(data_key(s)), s.batch_size, s.depth, s.application, s.framework), []).append(i)
        inv = 1.0 / ANCHORS[::-1]
        for (mkey, _, _, _, _), idx in groups.items():
            fitted = self.model(mkey)
            if fitted is None:
                continue
            m, ranges = fitted
            first = specs[idx[0]]
            ok = np.array([self._reason(first, c.vm, c.gpus, ranges) is None for c in configs], dtype=bool)
            probes = [JobSpec(first.application, first.framework, 1, first.batch_size, depth=first.depth)] * len(inv)
            q = query_frame(probes, configs, np.array([self._cpu(c.vm.gpu.measured_gflops, ranges) for c in configs]))
            q["iterations"] = np.repeat(ANCHORS[::-1], len(configs))
            grid = m.per_iteration(q).reshape(len(inv), len(configs))
            its = np.fromiter((specs[i].iterations for i in idx), dtype=float, count=len(idx))
            x = np.clip(1.0 / its, inv[0], inv[-1])
            hi = np.clip(np.searchsorted(inv, x), 1, len(inv) - 1)
            w = ((x - inv[hi - 1]) / (inv[hi] - inv[hi - 1]))[:, None]
            vals = (grid[hi - 1] * (1 - w) + grid[hi] * w) * its[:, None]
            out[idx] = np.where(ok[None, :] & np.isfinite(vals) & (vals > 0), vals, INFEASIBLE)
        return out
