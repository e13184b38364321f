"""End-to-end regression with extrapolation-aware model choice: one model per kind of question, per application.

One application is an (application, framework) pair; its variable-depth runs form their own application with the
depth as a feature. The target is the time per iteration ``runtime / iterations``. The candidate models are the
``structured`` family (``predictors.structured``: per GPU type, a non-negative sum of physical terms; one candidate
per term set of ``TERM_SETS``) and the aMLLibrary-style families of ``predictors.augmented`` (``linear``, ``ridge``,
``rf``, ``gbr``, ``svr``), those named in ``families``. The structured family's all-reduce shape (``AppFit.comm``:
ring, tree or linear in the GPU count) is read off each application's runs first, by the ``gpus`` validation below,
and shared by all its structured candidates.

A question is one of six kinds (``AXES``), read off the application's training runs: ``inside`` (a measured GPU
type, a GPU count within its measured counts, a batch within the range measured at that count, a measured depth), or
an extrapolation — ``compute`` (a GPU type never measured), ``gpus`` (a count outside the measured ones of that GPU
type), ``depth`` (a depth outside the measured ones), ``batch`` / ``batch_below`` (a batch above / below the range
measured at that GPU type and count), checked in that order. Every candidate is scored per kind by a validation that
asks that kind of question of the training runs: ``inside`` by random k-fold (``folds``), ``batch`` by holding out
the largest batch of every (GPU type, GPU count) cell (``batch_below`` the smallest), ``gpus`` the largest count of
every GPU type, ``compute`` the fastest GPU type, ``depth`` the largest depth of every GPU count; the extrapolations
also roll the origin back one step (predict the second largest from the values below it). Candidates: every family
inside; outside, only bounded ones (``UNBOUNDED`` trees and RBF-SVR answer flat or mean-reverting beyond the data);
for a GPU type never measured, only the structured family. A question is answered by the candidate that scored best
on its kind, a flexible one only if it beats the best structured one by ``PARSIMONY``; a kind the runs cannot
validate (one GPU type, say) takes the best mean score over the kinds that could be validated. Never random k-fold
alone: trees validate well inside and answer flat beyond, which the extrapolation scores catch.

A configuration that would not fit in its GPUs' memory (``predictors.memory``) is unsupported, with the reason;
``predict_runs`` answers runs that did run and asks no such question. A job's runtime is ``iterations × predicted time
per iteration``; for speed the chosen model is read on a grid of iteration counts (``ANCHORS``, 6 per decade up to
10⁷, beyond which the time per iteration is held) and interpolated in ``1/iterations`` (the structured family is
exactly linear in it). The CPU-thread count a job is assumed to get is ``cpu_threads``: an integer, ``"max"`` (the
largest measured) or ``"best"`` (per GPU type, the measured setting whose runs are fastest relative to their group;
the application's overall best on a GPU type never measured).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from predictors.augmented import FLEXIBLE, fit_flexible, folds, select_features
from predictors.base import TrainablePredictor, register
from predictors.measurements import NO_DEPTH, data_key, measured_gpu_name
from predictors.memory import guard
from predictors.structured import (
    COMM_SHAPES,
    DEPTH,
    LEVELS,
    TERM_SETS,
    fit_structured,
    input_scaling,
    row_speeds,
    speed,
    with_comm,
)
from predictors.uncertainty.provenance import QuestionSources, question, ranges_of
from sim.model import INFEASIBLE, CapsimError, Config, JobSpec, VMType

__all__ = ["RegressionPredictor", "FAMILIES", "AXES", "AppFit", "axis_splits", "mape"]

FAMILIES = ("structured",) + FLEXIBLE
DEFAULT_FAMILIES = ("structured", "linear", "ridge", "rf", "gbr", "svr")
AXES = ("inside", "batch", "batch_below", "gpus", "compute", "depth")
UNBOUNDED = ("rf", "gbr", "svr")
"""Families that answer a flat (trees) or mean-reverting (RBF SVR) time beyond the data: candidates inside only."""
PARSIMONY = 0.10
"""A flexible candidate must beat the best structured one by this fraction of its score to be chosen."""
ANCHORS = np.unique(np.round(np.geomspace(1, 1e7, 43)))
MKey = tuple[str, str, bool]


def mape(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute percentage error, as a fraction."""
    return float(np.mean(np.abs(pred - y) / np.abs(y)))


def axis_splits(rows: pd.DataFrame, axis: str, k: int, seed: int
                ) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The validation of one kind of question on one application's runs: (held-out positions, positions left out of
    training) per step, or None if the runs cannot ask it. Extrapolations roll the origin back one step: predict the
    largest value (of every cell) from the smaller ones, then the second largest from the values below it."""
    if axis == "inside":
        return [(f, f) for f in folds(len(rows), max(2, min(k, len(rows))), seed)]
    if axis == "compute":
        names = rows["gpu"].to_numpy()
        if len(set(names)) < 2:
            return None
        held = np.flatnonzero(names == names[int(np.argmax(row_speeds(rows)))])
        return [(held, held)]
    if axis in ("batch", "batch_below"):
        col, by = "batch_size", ["gpu", "gpus"]
    elif axis == "gpus":
        col, by = "gpus", ["gpu"]
    elif axis == "depth":
        if (rows["depth"] == NO_DEPTH).any():
            return None
        col, by = "depth", ["gpu", "gpus"]
    else:
        raise CapsimError(f"unknown kind of question {axis!r}: choose from {', '.join(AXES)}")
    down = axis == "batch_below"
    rank = rows.groupby(by)[col].rank(method="dense", ascending=down).to_numpy()
    levels = rows.groupby(by)[col].transform("nunique").to_numpy()
    out = []
    for step in (1, 2):
        held = np.flatnonzero((rank == step) & (levels > step))
        if len(held):
            out.append((held, np.flatnonzero((rank <= step) & (levels > step))))
    return out or None


class AppFit:
    """One application's fit, built lazily per kind of question: the validation scores per (candidate, kind), the
    candidate chosen per kind, the chosen candidates refitted on all the runs, and what was measured."""

    def __init__(self, owner: RegressionPredictor, rows: pd.DataFrame, with_depth: bool):
        self.owner, self.rows, self.with_depth = owner, rows, with_depth
        self.labels = owner.candidates(rows)
        self.scores: dict[tuple[str, str], float] = {}
        self.validated: set[str] = set()
        self.choice: dict[str, str] = {}
        self.models: dict[str, Any] = {}
        self.ranges = ranges_of(rows)
        self._comm: str | None = None
        self._seen: dict[tuple[str, str | None, str], float] = {}

    @property
    def comm(self) -> str:
        """How the structured family's gradient exchange grows with the GPU count (``structured.COMM_SHAPES``): the
        shape of the best (structured candidate, shape) pair on the ``gpus`` validation (the largest count of every
        GPU type predicted from the smaller ones; ``+cell`` candidates left out, as they answer a count never
        measured as their plain twins do); ``ring`` if the runs cannot tell (fewer than three counts)."""
        if self._comm is None:
            self._comm = "ring"
            own = [lab for lab in self.labels if lab.startswith("structured/") and "+cell" not in lab]
            parts = axis_splits(self.rows, "gpus", self.owner.folds, self.owner.seed)
            if own and parts is not None and self.rows["gpus"].nunique() > 2:
                best = min((self._score(lab, parts, sh, axis="gpus"), COMM_SHAPES.index(sh), sh)
                           for sh in COMM_SHAPES for lab in own)
                self._comm = best[2]
        return self._comm

    def _score(self, label: str, parts: list[tuple[np.ndarray, np.ndarray]], comm: str,
               memos: list[dict] | None = None, axis: str | None = None) -> float:
        """Mean relative error (capped at 10) of ``label`` over validation ``parts`` (remembered per ``axis``)."""
        key = (label, axis, comm if label.startswith("structured/") else "")
        if axis is not None and key in self._seen:
            return self._seen[key]
        d, o = self.rows, self.owner
        y = (d["runtime_s"] / d["iterations"]).to_numpy(float)
        errs = []
        for i, (test, out) in enumerate(parts):
            train = np.ones(len(d), dtype=bool)
            train[out] = False
            memo = memos[i] if memos is not None else {}
            with np.errstate(all="ignore"):
                p = o.fit_candidate(label, d[train], self.with_depth, memo, comm).per_iteration(d.iloc[test])
            p = np.where(np.isfinite(p) & (p > 0), p, np.inf)
            errs.append(np.minimum(np.abs(p - y[test]) / y[test], 10.0))
        score = float(np.mean(np.concatenate(errs)))
        if axis is not None:
            self._seen[key] = score
        return score

    def validate(self, axis: str) -> bool:
        """Score every candidate on one kind of question; False if the runs cannot ask it."""
        if axis not in self.validated:
            self.validated.add(axis)
            d, o = self.rows, self.owner
            parts = axis_splits(d, axis, o.folds, o.seed)
            if parts is not None:
                memos: list[dict] = [{} for _ in parts]
                for label in self.eligible(axis):
                    self.scores[(label, axis)] = self._score(label, parts, self.comm, memos, axis)
        return any((lab, axis) in self.scores for lab in self.labels)

    def eligible(self, axis: str) -> list[str]:
        """The candidates for one kind of question: all inside; the bounded ones (not ``UNBOUNDED``) for batch, GPU
        count and depth; the structured ones only for a GPU never measured (the only family whose GPU dependence is a
        scaling law: polynomial and inverse terms of a GPU's speed explode three times beyond the measured speeds)."""
        if axis == "inside":
            return self.labels
        if axis == "compute":
            return [lab for lab in self.labels if lab.startswith("structured/")] or self.labels
        return [lab for lab in self.labels if lab not in UNBOUNDED]

    def chosen(self, axis: str) -> str:
        """The candidate answering one kind of question (module docstring)."""
        if axis not in self.choice:
            if self.validate(axis):
                pool = [axis]
            else:
                pool = [a for a in AXES[1:] if a != axis and self.validate(a)] or ["inside"]
                self.validate("inside")
            labels = self.eligible(axis)
            mean = {lab: float(np.mean([self.scores.get((lab, a), np.inf) for a in pool])) for lab in labels}
            best = min(labels, key=lambda lab: (mean[lab], labels.index(lab)))
            own = [lab for lab in labels if lab.startswith("structured/")]
            if own and not best.startswith("structured/"):
                alt = min(own, key=lambda lab: (mean[lab], own.index(lab)))
                best = alt if mean[alt] <= (1 + PARSIMONY) * mean[best] else best
            self.choice[axis] = best
        return self.choice[axis]

    def model(self, axis: str, structured: bool = False) -> Any:
        """The candidate chosen for ``axis`` (``structured``: the best structured one), fitted on all the runs."""
        label = self.chosen(axis)
        if structured and not label.startswith("structured/"):
            own = [lab for lab in self.labels if lab.startswith("structured/")]
            if not own:
                return None
            label = min(own, key=lambda lab: (self.scores.get((lab, axis), np.inf), own.index(lab)))
        if label not in self.models:
            memo = self.models.setdefault("_memo", {})
            self.models[label] = self.owner.fit_candidate(label, self.rows, self.with_depth, memo, self.comm)
        return self.models[label]


@register("regression")
class RegressionPredictor(QuestionSources, TrainablePredictor):
    """Regression with one model per kind of question, chosen by validations that ask it (module docstring).

    ``families``: the model families tried; ``degree``: the largest degree of the feature products; ``folds``: k of
    the k-fold validations; ``max_features``: the most features forward selection keeps; ``cpu_threads``: the CPU
    threads a job is assumed to get; ``seed``: the folds' random split."""

    fit_params = ("families", "degree", "folds", "max_features", "seed")

    def __init__(self, families: Sequence[str] = DEFAULT_FAMILIES, degree: int = 2, folds: int = 3,
                 max_features: int = 8, cpu_threads: str | int = "best", seed: int = 0):
        bad = set(families) - set(FAMILIES) if not isinstance(families, str) else {families}
        if bad or not families:
            raise CapsimError(f"predictor 'regression': unknown families {sorted(bad)}; "
                              f"choose from {', '.join(FAMILIES)}")
        if cpu_threads not in ("best", "max") and not (isinstance(cpu_threads, int) and cpu_threads > 0):
            raise CapsimError(f"predictor 'regression': cpu_threads must be 'best', 'max' or a positive integer, "
                              f"got {cpu_threads!r}")
        self.families, self.degree, self.folds = families, degree, folds
        self.max_features, self.cpu_threads, self.seed = max_features, cpu_threads, seed
        self.check_param("degree", int, low=1)
        self.check_param("folds", int, low=2)
        self.check_param("max_features", int, low=1)
        self.check_param("seed", int, low=0)

    # ----- fitting --------------------------------------------------------------------------------------------------
    def rows_for(self, mkey: MKey) -> pd.DataFrame:
        df = self.training_runs()
        sel = (df["application"] == mkey[0]) & (df["framework"] == mkey[1])
        sel &= (df["depth"] != NO_DEPTH) if mkey[2] else (df["depth"] == NO_DEPTH)
        return df[sel]

    def candidates(self, rows: pd.DataFrame) -> list[str]:
        """Candidate labels for one application's runs: the structured term sets whose input term scales as the
        runs' input pipeline does (``structured.input_scaling``; both kinds when one GPU count cannot tell), each
        with and without the per-cell level, then the other families."""
        out = []
        if "structured" in self.families:
            sets = list(TERM_SETS)
            if rows["gpus"].nunique() > 1:
                scaling = input_scaling(rows)
                wrong = "input" if scaling[True][1] < scaling[False][1] else "input_gpu"
                sets = [t for t in sets if wrong not in TERM_SETS[t][0]]
            out = [f"structured/{t}{lv}" for lv in LEVELS for t in sets]
        return out + [f for f in self.families if f != "structured"]

    def fit_candidate(self, label: str, rows: pd.DataFrame, with_depth: bool, memo: dict | None = None,
                      comm: str = "ring") -> Any:
        """Fit one candidate on ``rows``; ``memo`` shares the forward selection of linear and ridge; ``comm`` is the
        structured family's all-reduce shape."""
        if label.startswith("structured/"):
            name = label.split("/", 1)[1]
            terms, combine = TERM_SETS[name.removesuffix("+cell")]
            model = fit_structured(rows, with_comm(terms + (DEPTH if with_depth else ()), comm), combine)
            return model.with_cells(rows) if name.endswith("+cell") else model
        features = None
        if label in ("linear", "ridge"):
            memo = {} if memo is None else memo
            if "features" not in memo:
                memo["features"] = select_features(rows, with_depth, self.degree, self.folds, self.max_features,
                                                   self.seed)
            features = memo["features"]
        return fit_flexible(rows, label, with_depth, self.degree, self.folds, self.max_features, self.seed, features)

    def model(self, mkey: MKey) -> AppFit | None:
        """The fit of one application, or None if it has fewer than 4 runs."""
        return self.shared(mkey, lambda: self._fit_app(mkey))

    def _fit_app(self, mkey: MKey) -> AppFit | None:
        d = self.rows_for(mkey).reset_index(drop=True)
        if len(d) < 4:
            return None
        return AppFit(self, d, bool(mkey[2] and d["depth"].nunique() > 1))

    # ----- answering ------------------------------------------------------------------------------------------------
    def _cpu(self, gpu: str, ranges: dict[str, Any]) -> float:
        if self.cpu_threads == "max":
            return float(ranges["cpu_max"])
        if self.cpu_threads == "best":
            return float(ranges["cpu_best"].get(gpu, ranges["cpu_best_all"]))
        return float(self.cpu_threads)

    def predict_rows(self, fit: AppFit, rows: pd.DataFrame, kind: str | None = None) -> tuple[np.ndarray, list[str]]:
        """(seconds per iteration, kind of question) of query rows of one application, each answered by the model
        chosen for its kind (or for ``kind`` if given); where that model gives no positive time, the best structured
        candidate for the kind answers (its terms and coefficients are non-negative); NaN if none does."""
        kinds = [kind or question(fit.ranges, g, int(n), int(b), int(d))[0]
                 for g, n, b, d in zip(rows["gpu"], rows["gpus"], rows["batch_size"], rows["depth"])]
        out = np.full(len(rows), np.nan)
        arr = np.array(kinds)
        for k in set(kinds):
            sel = arr == k
            with np.errstate(all="ignore"):
                out[sel] = fit.model(k).per_iteration(rows[sel])
                bad = sel & ~(np.isfinite(out) & (out > 0))
                backup = fit.model(k, structured=True) if bad.any() else None
                if backup is not None:
                    out[bad] = backup.per_iteration(rows[bad])
        out[~(np.isfinite(out) & (out > 0))] = np.nan
        return out, kinds

    def _static_reason(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        if gpus < 1 or gpus > vm.gpus:
            return f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        if self.model(_mkey(spec)) is None:
            return f"no runs of {spec.app_key} to fit a regression on"
        return guard(self).reason(spec, vm, gpus)

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        why = self._static_reason(spec, vm, gpus)
        if why is None and not math.isfinite(self.runtime(spec, vm, gpus)):
            kind = self.explain(spec, vm, gpus)
            return f"the model chosen for this question ({kind}) answers no positive time"
        return why

    def question(self, spec: JobSpec, vm: VMType, gpus: int) -> tuple[str, str] | None:
        """(kind of question, why) of a configuration against the application's training runs, None if no runs."""
        fit = self.model(_mkey(spec))
        return None if fit is None else question(fit.ranges, _gpu_name(vm), gpus, spec.batch_size, _depth(spec))

    def explain(self, spec: JobSpec, vm: VMType, gpus: int) -> str:
        """Which model answers this configuration and why: ``candidate[, all-reduce shape] (kind: reason)``."""
        why = self._static_reason(spec, vm, gpus)
        if why is not None:
            return f"unsupported: {why}"
        fit = self.model(_mkey(spec))
        assert fit is not None
        kind, reason = question(fit.ranges, _gpu_name(vm), gpus, spec.batch_size, _depth(spec))
        label = fit.chosen(kind)
        shape = f", {fit.comm} all-reduce" if label.startswith("structured/") else ""
        return f"{label}{shape} ({kind}: {reason})"

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.runtimes([spec], [Config(vm, gpus)])[0, 0])

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config], kind: str | None = None) -> np.ndarray:
        """Vectorised: per distinct (application, batch, depth), the model on the anchor grid of iteration counts
        × every configuration, interpolated linearly in ``1/iterations``. ``kind`` forces the model chosen for one
        kind of question (how ``hybrid`` reads the trend of an extrapolation back to its anchor)."""
        out = np.full((len(specs), len(configs)), INFEASIBLE)
        if out.size == 0:
            return out
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(specs):
            groups.setdefault((s.application, s.framework, s.depth, s.batch_size), []).append(i)
        inv = 1.0 / ANCHORS[::-1]
        for idx in groups.values():
            grid = self._grid(specs[idx[0]], configs, kind)
            if grid is None:
                continue
            its = np.fromiter((specs[i].iterations for i in idx), dtype=float, count=len(idx))
            x = np.clip(1.0 / its, inv[0], inv[-1])
            hi = np.clip(np.searchsorted(inv, x), 1, len(inv) - 1)
            w = ((x - inv[hi - 1]) / (inv[hi] - inv[hi - 1]))[:, None]
            vals = (grid[hi - 1] * (1 - w) + grid[hi] * w) * its[:, None]
            out[idx] = np.where(np.isfinite(vals) & (vals > 0), vals, INFEASIBLE)
        return out

    def _forget(self) -> None:
        self._grids: dict[tuple, np.ndarray] = {}

    def _grid(self, first: JobSpec, configs: Sequence[Config], kind: str | None) -> np.ndarray | None:
        """Seconds per iteration of a spec's shape on the anchor grid (rows) × ``configs``, NaN where unsupported;
        None without a fit. Each (shape, kind, configuration) column is computed once per fit: a scenario asks the
        same table at every run."""
        fit = self.model(_mkey(first))
        if fit is None:
            return None
        memo = getattr(self, "_grids", None)
        if memo is None:
            memo = self._grids = {}
        shape = (first.application, first.framework, first.depth, first.batch_size, kind)
        todo = list({c: None for c in configs if (shape, c) not in memo})
        inv = len(ANCHORS)
        for c in todo:
            if self._static_reason(first, c.vm, c.gpus) is not None:
                memo[(shape, c)] = np.full(inv, np.nan)
        todo = [c for c in todo if (shape, c) not in memo]  # no model is fitted for a question never answered
        if todo:
            names = [_gpu_name(c.vm) for c in todo]
            q = pd.DataFrame({
                "gpu": np.tile(names, inv),
                "speed": np.tile([speed(c.vm.gpu) for c in todo], inv),
                "gpus": np.tile([c.gpus for c in todo], inv),
                "batch_size": first.batch_size,
                "cpu_threads": np.tile([self._cpu(g, fit.ranges) for g in names], inv),
                "iterations": np.repeat(ANCHORS[::-1], len(todo)),
                "depth": _depth(first),
            })
            grid = self.predict_rows(fit, q, kind)[0].reshape(inv, len(todo))
            for k, c in enumerate(todo):
                memo[(shape, c)] = grid[:, k]
        return np.stack([memo[(shape, c)] for c in configs], axis=1)

    def predict_runs(self, rows: pd.DataFrame, kind: str | None = None) -> np.ndarray:
        """Each row at its own CPU-thread count, read directly (no anchor grid); ``kind`` as in ``runtimes``."""
        out = np.full(len(rows), np.nan)
        keys = [(a, f, d != NO_DEPTH) for a, f, d in zip(rows["application"], rows["framework"], rows["depth"])]
        for mkey in set(keys):
            sel = np.array([k == mkey for k in keys])
            fit = self.model(mkey)
            if fit is not None:
                q = rows[sel]
                out[sel] = self.predict_rows(fit, q, kind)[0] * q["iterations"].to_numpy(float)
        return out


def _mkey(spec: JobSpec) -> MKey:
    a, f, d = data_key(spec)
    return a, f, d != NO_DEPTH


def _gpu_name(vm: VMType) -> str:
    return measured_gpu_name(vm.gpu) or vm.gpu.name


def _depth(spec: JobSpec) -> int:
    return NO_DEPTH if spec.depth is None else int(spec.depth)
