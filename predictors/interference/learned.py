"""A learned interference model (``learned``): a pair's slowdowns and a job's GPU utilisation from layer-graph
features, in the spirit of Yeung et al. (HotCloud'20: a random forest on graph features predicts utilisation).

Trained on measured pairs (Gavel's by default, ``predictors.interference.table``): one sample per job of a measured
single-GPU pair, its features, its partner's and the GPU's (``predictors.interference.features``), the target the log
of its slowdown; a second forest learns each job type's utilisation inferred from the same pairs. It answers for any
job with a layer graph or a row of costs, on any GPU with specifications, measured or not: what it says for a job never
measured is its leave-job-type-out error (``leave_family_out``, ``capsim predict evaluate --protocols interference``,
docs/sharing.md). Pairs on more than one GPU each were not measured: it says they cannot share.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from predictors.interference.base import Interference, register
from predictors.interference.features import family, gpu_features, job_features
from predictors.interference.table import PairTable, gavel_pairs, read_pairs
from predictors.memory import GIB, footprint
from sim.catalogue import gpu_models
from sim.model import CapsimError, JobSpec, VMType

__all__ = ["LearnedInterference", "spec_of", "pair_samples", "leave_family_out", "SEED_RMSLE"]

SEED_RMSLE = 0.154
"""Yeung et al.'s error for GPU utilisation (RMSLE, random forest on graph features), the figure to report beside."""

_TYPE = re.compile(r"^(.*) \(batch size (\d+)\)$")
_N = 5
_JOB_AND_GPU = np.r_[0:_N, 2 * _N:2 * _N + 3]
"""Columns of a feature row that describe the job and its GPU (not its partner): what utilisation is learned from."""


def spec_of(job_type: str) -> JobSpec:
    """A job spec of a Gavel job type name (``"ResNet-50 (batch size 64)"``; a name without batch: batch 1)."""
    m = _TYPE.match(job_type)
    app, batch = (m.group(1), int(m.group(2))) if m else (job_type, 1)
    return JobSpec(application=app, framework="pytorch", iterations=1, batch_size=batch, name=job_type)


def _row(a: np.ndarray, b: np.ndarray, gpu: Any) -> np.ndarray:
    return np.concatenate([a, b, gpu_features(a, gpu), gpu_features(b, gpu)[2:]])


def pair_samples(table: PairTable) -> pd.DataFrame:
    """One row per job of every measured single-GPU pair whose jobs have features: gpu, job, partner, their families,
    the slowdown and the job's inferred utilisation alone (NaN where none), and the feature row ``x``."""
    models = gpu_models()
    rows = []
    for (gpu, a, b, n), (ta, tb) in sorted(table.pairs.items()):
        if n != 1 or gpu not in models or min(ta, tb) <= 0:
            continue
        ia = table.alone.get((gpu, a, n), 0.0)
        fa, fb = job_features(spec_of(a)), job_features(spec_of(b))
        if ia <= 0 or fa is None or fb is None:
            continue
        rows.append({"gpu": gpu, "job": a, "partner": b, "family": family(spec_of(a)),
                     "partner_family": family(spec_of(b)), "slowdown": ia / ta,
                     "utilisation": table.utilisation(gpu, n).get(a, math.nan), "x": _row(fa, fb, models[gpu])})
    return pd.DataFrame(rows)


def _matrix(samples: pd.DataFrame) -> np.ndarray:
    return np.stack(list(samples["x"]))


def _forest(trees: int, seed: int) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(n_estimators=trees, min_samples_leaf=2, random_state=seed, n_jobs=1)


def _mean_of_trees(forest: Any, x: np.ndarray) -> np.ndarray:
    """The forest's prediction, read from its trees directly: ``forest.predict`` costs milliseconds per call in
    checks and thread dispatch, and policies ask for one pair at a time."""
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    return np.mean([t.tree_.predict(x32).reshape(len(x32)) for t in forest.estimators_], axis=0)


@register("learned")
class LearnedInterference(Interference):
    """Slowdowns and utilisation from a random forest on layer-graph features (module docstring), trained on the
    measured pairs of ``path`` (Gavel's layout; default Gavel's). ``leave_out`` names job families kept out of the
    training (to measure what it says of a job never measured); ``trees`` and ``seed`` are the forests'."""

    test_params: ClassVar[dict[str, Any]] = {"trees": 20}

    def __init__(self, path: str | None = None, trees: int = 100, seed: int = 0, leave_out: Sequence[str] = ()):
        self.path = path
        self.trees = trees
        self.seed = seed
        self.leave_out = leave_out
        self._slow: Any = None
        self._busy: Any = None
        self._memo: dict[tuple, tuple[float, float]] = {}
        self._busy_memo: dict[tuple, float] = {}

    def fit(self, samples: pd.DataFrame | None = None) -> LearnedInterference:
        """Train both forests on ``samples`` (``pair_samples``; default: those of ``path``) minus ``leave_out``."""
        if samples is None:
            table = read_pairs(self.path) if self.path is not None else gavel_pairs()
            samples = pair_samples(table)
        keep = ~(samples["family"].isin(list(self.leave_out)) | samples["partner_family"].isin(list(self.leave_out)))
        train = samples[keep]
        if train.empty:
            raise CapsimError(f"interference model 'learned': no measured pair left to train on (leave_out="
                              f"{list(self.leave_out)!r})")
        x = _matrix(train)
        self._slow = _forest(self.trees, self.seed).fit(x, np.log(train["slowdown"].to_numpy()))
        busy = train.drop_duplicates(["gpu", "job"]).dropna(subset=["utilisation"])
        xb = _matrix(busy)[:, _JOB_AND_GPU]
        self._busy = _forest(self.trees, self.seed).fit(xb, busy["utilisation"].to_numpy())
        self._memo.clear()
        self._busy_memo.clear()
        return self

    def _ready(self) -> None:
        if self._slow is None:
            self.fit()

    def predict_rows(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slowdowns, utilisations) of feature rows (``pair_samples``'s ``x``): each job's, next to its partner."""
        self._ready()
        slow = np.maximum(np.exp(_mean_of_trees(self._slow, x)), 1.0)
        return slow, np.clip(_mean_of_trees(self._busy, x[:, _JOB_AND_GPU]), 0.0, 1.0)

    def slowdowns(self, a: JobSpec, b: JobSpec, vm: VMType, gpus: int) -> tuple[float, float]:
        if gpus != 1:
            return math.inf, math.inf
        key = (a.application, a.depth, a.batch_size, b.application, b.depth, b.batch_size, vm.gpu.name)
        if key not in self._memo:
            fa, fb = job_features(a), job_features(b)
            if fa is None or fb is None:
                self._memo[key] = (math.inf, math.inf)
            else:
                slow, _ = self.predict_rows(np.stack([_row(fa, fb, vm.gpu), _row(fb, fa, vm.gpu)]))
                self._memo[key] = (float(slow[0]), float(slow[1]))
        return self._memo[key]

    def utilisation(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        key = (spec.application, spec.depth, spec.batch_size, vm.gpu.name)
        if key not in self._busy_memo:
            f = job_features(spec)
            self._busy_memo[key] = math.nan if f is None else float(
                self.predict_rows(_row(f, f, vm.gpu)[None, :])[1][0])
        return self._busy_memo[key]

    def shares(self, spec: JobSpec, vm: VMType, gpus: int) -> bool:
        return gpus == 1 and job_features(spec) is not None

    def memory_gb(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        fp = footprint(spec, gpus)
        return fp.total / GIB if fp is not None else math.nan


def rmsle(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Root mean squared log error, ``log(1 + x)``, as the seed paper reports utilisation (in %)."""
    return float(np.sqrt(np.mean((np.log1p(predicted) - np.log1p(measured)) ** 2)))


def leave_family_out(table: PairTable | None = None, trees: int = 100, seed: int = 0) -> pd.DataFrame:
    """For each job family, train without any pair involving it and predict those pairs and its utilisation: one row
    per family with the held-out predictions, the slowdown's RMSLE and mean absolute percentage error, the RMSLE of a
    featureless guess (the training pairs' median slowdown) for comparison, the utilisation's RMSLE in % (the seed's
    unit) and that of the training job types' median, and one row ``all`` pooling every held-out prediction."""
    samples = pair_samples(table or gavel_pairs())
    rows, pooled = [], []
    for fam in sorted(samples["family"].unique()):
        model = LearnedInterference(trees=trees, seed=seed, leave_out=(fam,)).fit(samples)
        test = samples[(samples["family"] == fam) | (samples["partner_family"] == fam)]
        slow, _ = model.predict_rows(_matrix(test))
        trained = samples[~samples.index.isin(test.index)]
        flat = np.full(len(test), math.exp(float(np.median(np.log(trained["slowdown"])))))
        own = test[test["family"] == fam].drop_duplicates(["gpu", "job"]).dropna(subset=["utilisation"])
        _, busy = model.predict_rows(_matrix(own))
        flat_u = np.full(len(own), float(np.nanmedian(trained.drop_duplicates(["gpu", "job"])["utilisation"])))
        pooled.append((slow, test["slowdown"].to_numpy(), busy, own["utilisation"].to_numpy(), flat, flat_u))
        rows.append(_scores(fam, *pooled[-1]))
    cat = [np.concatenate([p[i] for p in pooled]) for i in range(6)]
    rows.append(_scores("all", *cat))
    return pd.DataFrame(rows)


def _scores(name: str, slow: np.ndarray, measured: np.ndarray, busy: np.ndarray, u: np.ndarray, flat: np.ndarray,
            flat_u: np.ndarray) -> dict[str, Any]:
    return {"family": name, "predictions": len(measured), "slowdown_rmsle": rmsle(slow, measured),
            "slowdown_mape": float(np.mean(np.abs(slow / measured - 1.0))),
            "constant_rmsle": rmsle(flat, measured),
            "job_types": len(u), "utilisation_rmsle_pct": rmsle(100 * busy, 100 * u) if len(u) else math.nan,
            "constant_utilisation_rmsle_pct": rmsle(100 * flat_u, 100 * u) if len(u) else math.nan}
