"""The aMLLibrary-style regression families: augmented linear models chosen by forward selection, trees and SVR.

Base features of a run: batch size, GPU speed (per-die GFLOP/s, ``structured.speed``), GPU count, CPU threads,
``1/iterations`` (which carries the fixed start-up time: ``runtime/it = per_it + startup/it``) and the network depth
where it varies. The target is the time per iteration. ``linear`` and ``ridge`` see the features augmented with inverse
terms ``1/x`` and products up to ``degree`` (``x·1/x`` skipped), reduced by sequential forward selection scored by
k-fold MAPE, fitted by least squares weighted by ``1/y²`` (relative error). ``rf``, ``gbr`` and ``svr`` see the
standardised base features and fit ``log y``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from predictors.structured import row_speeds

__all__ = ["FLEXIBLE", "GRIDS", "base_features", "augment", "forward_select", "select_features", "FlexibleModel",
           "fit_flexible", "folds"]

FLEXIBLE = ("linear", "ridge", "rf", "gbr", "svr")
GRIDS: dict[str, dict[str, Any]] = {
    "linear": {"alpha": 1e-8},
    "ridge": {"alpha": 1e-3},
    "rf": {"n_estimators": 30, "min_samples_leaf": 1},
    "gbr": {"n_estimators": 100, "max_depth": 3, "learning_rate": 0.15},
    "svr": {"C": 30.0},
}
"""One setting per family (a grid multiplies the fits; these were the usual winners of the former grids)."""


def base_features(rows: pd.DataFrame, with_depth: bool) -> pd.DataFrame:
    """The base features of rows with columns gpu, batch_size, gpus, cpu_threads, iterations (and depth)."""
    out = pd.DataFrame({
        "batch": rows["batch_size"].to_numpy(float),
        "speed": row_speeds(rows),
        "gpus": rows["gpus"].to_numpy(float),
        "cpu": rows["cpu_threads"].to_numpy(float),
        "inv_it": 1.0 / rows["iterations"].to_numpy(float),
    })
    if with_depth:
        out["depth"] = rows["depth"].to_numpy(float)
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


def folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    """``k`` random folds of ``range(n)`` (seeded)."""
    perm = np.random.default_rng(np.random.SeedSequence(seed)).permutation(n)
    return [np.sort(perm[i::k]) for i in range(k)]


def _wls(a: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Least squares of y on [1, a] weighted by 1/y² (relative error), ridge ``alpha`` on scaled columns."""
    w = 1.0 / y
    scale = np.abs(a).max(axis=0) if a.shape[1] else np.empty(0)
    scale[scale == 0] = 1.0
    design = np.c_[np.ones(len(a)), a / scale] * w[:, None]
    rhs = np.ones(len(a))
    if alpha > 0 and a.shape[1]:
        design = np.r_[design, np.c_[np.zeros((a.shape[1], 1)), np.sqrt(alpha) * np.eye(a.shape[1])]]
        rhs = np.r_[rhs, np.zeros(a.shape[1])]
    coef = np.linalg.lstsq(design, rhs, rcond=None)[0]
    return np.r_[coef[0], coef[1:] / scale]


def forward_select(aug: pd.DataFrame, y: np.ndarray, parts: list[np.ndarray], max_features: int) -> list[str]:
    """Sequential forward selection of augmented columns by k-fold MAPE of the weighted linear fit.

    Each step adds the column whose fit (``_wls`` with a 1e-8 ridge) has the lowest k-fold MAPE; it stops when no
    column lowers it by 0.5 %. The k-fold fits are solved from Gram matrices (all rows minus the fold's rows), which is
    the same least-squares problem as fitting each training fold afresh, at a fraction of the cost.
    """
    cols = [c for c in aug.columns if np.all(np.isfinite(aug[c]))]
    a = aug[cols].to_numpy(float)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    z = np.c_[np.ones(len(y)), a / scale] / y[:, None]
    gram, rhs = z.T @ z, z.sum(axis=0)
    fold_parts = [(z[p], z[p].T @ z[p], z[p].sum(axis=0)) for p in parts]
    train_sets = [(gram - gf, rhs - rf) for _, gf, rf in fold_parts]
    total = sum(len(zf) for zf, _, _ in fold_parts)
    chosen: list[int] = []
    best = math.inf
    while len(chosen) < max_features:
        cands = np.array([c for c in range(1, z.shape[1]) if c not in chosen])
        if not len(cands):
            break
        idx = np.c_[np.tile([0] + chosen, (len(cands), 1)), cands]  # (candidates, columns of each fit)
        reg = 1e-8 * np.diag([0.0] + [1.0] * (idx.shape[1] - 1))
        err = np.zeros(len(cands))
        for (zf, _, _), (g, r) in zip(fold_parts, train_sets):
            lhs = g[idx[:, :, None], idx[:, None, :]] + reg
            try:
                w = np.linalg.solve(lhs, r[idx][..., None])[..., 0]
            except np.linalg.LinAlgError:
                w = np.stack([np.linalg.lstsq(m, v, rcond=None)[0] for m, v in zip(lhs, r[idx])])
            err += np.abs(np.einsum("nck,ck->nc", zf[:, idx], w) - 1.0).sum(axis=0)
        k = int(np.argmin(err))
        score = float(err[k] / total)
        if score > best * 0.995:
            break
        chosen.append(int(cands[k]))
        best = score
    return [cols[c - 1] for c in chosen]


def _estimator(family: str, seed: int) -> Any:
    """A scikit-learn estimator for the non-linear families (imported here: scikit-learn takes seconds to import)."""
    p = GRIDS[family]
    if family == "rf":
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(random_state=seed, n_jobs=1, **p)
    if family == "gbr":
        from sklearn.ensemble import GradientBoostingRegressor

        return GradientBoostingRegressor(random_state=seed, **p)
    from sklearn.svm import SVR

    return SVR(gamma="scale", epsilon=0.01, **p)


@dataclass
class FlexibleModel:
    """One application's fitted flexible model: the family, selected features (linear ones), the estimator."""

    family: str
    with_depth: bool
    degree: int
    features: list[str] = field(default_factory=list)
    coef: np.ndarray | None = None
    estimator: Any = None
    center: np.ndarray | None = None
    scale: np.ndarray | None = None

    def per_iteration(self, rows: pd.DataFrame) -> np.ndarray:
        x = base_features(rows, self.with_depth)
        if self.coef is not None:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                aug = augment(x, self.degree)[self.features].to_numpy(float)
                return self.coef[0] + aug @ self.coef[1:]
        z = (x.to_numpy(float) - self.center) / self.scale
        return np.exp(self.estimator.predict(z))


def select_features(rows: pd.DataFrame, with_depth: bool, degree: int, k: int, max_features: int,
                    seed: int) -> list[str]:
    """The augmented columns forward selection picks on one application's runs (shared by linear and ridge)."""
    y = (rows["runtime_s"] / rows["iterations"]).to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        aug = augment(base_features(rows, with_depth), degree)
    return forward_select(aug, y, folds(len(y), max(2, min(k, len(y))), seed), max_features)


def fit_flexible(rows: pd.DataFrame, family: str, with_depth: bool, degree: int, k: int, max_features: int,
                 seed: int, features: list[str] | None = None) -> FlexibleModel:
    """Fit one flexible family on one application's runs (the linear ones on ``features``, selected here if None)."""
    x = base_features(rows, with_depth)
    y = (rows["runtime_s"] / rows["iterations"]).to_numpy(float)
    model = FlexibleModel(family, with_depth, degree)
    if family in ("linear", "ridge"):
        if features is None:
            features = select_features(rows, with_depth, degree, k, max_features, seed)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            aug = augment(x, degree)
        model.features = list(features)
        model.coef = _wls(aug[model.features].to_numpy(float), y, GRIDS[family]["alpha"])
        return model
    xv = x.to_numpy(float)
    model.center, model.scale = xv.mean(axis=0), xv.std(axis=0)
    model.scale[model.scale == 0] = 1.0
    model.estimator = _estimator(family, seed).fit((xv - model.center) / model.scale, np.log(y))
    return model
