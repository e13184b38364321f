"""The predictor contract (``sim.contracts.Predictor``, re-exported here for predictor authors), its registry, and
the two shapes most predictors share:

- ``TrainablePredictor``: learns from a table of measured runs (``fit(runs) -> self``; until fitted explicitly it
  fits itself on the shipped runs on first use) and predicts such a table row by row (``predict_runs``), which is how
  ``capsim predict evaluate`` scores it.
- ``AffinePredictor``: a runtime ``overhead + iterations × per-iteration time`` whose two terms depend on the job only
  through its application, framework, depth and batch size; the subclass provides ``terms`` and gets ``runtime``,
  ``support`` and an exact vectorised ``runtimes``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.contracts import PREDICTORS, NotFittedError, Predictor, Source
from sim.model import INFEASIBLE, CapsimError, Config, JobSpec, VMType

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Predictor", "Source", "TrainablePredictor", "AffinePredictor", "NotFittedError", "register", "alias",
           "registry", "build", "RUN_COLUMNS", "shared_fits", "adopt_fits"]

register = PREDICTORS.register
"""Class decorator adding a predictor to the registry under ``name`` (the YAML ``predictor.kind``)."""
alias = PREDICTORS.alias
registry = PREDICTORS.kinds
"""Every registered predictor kind (``aliases=False``: each once)."""
build = PREDICTORS.build
"""Build the registered predictor ``kind`` with ``params``; a parameter given as a mapping with a ``kind`` key
(``base: {kind: measured}``) is built first; a clear error names the known kinds otherwise."""

RUN_COLUMNS = ("application", "framework", "gpu", "gpus", "batch_size", "iterations", "cpu_threads", "depth",
               "runtime_s")
"""The columns a runs table needs (the layout of ``predictors.measurements.runs()``)."""


_SHARED: dict[tuple, Any] = {}
"""Fits shared by every instance with the same fitting parameters and training data, in this process."""


def shared_fits() -> dict[tuple, Any]:
    """The fits made in this process (see ``TrainablePredictor.shared``), to hand to a worker process through
    ``adopt_fits``: it then answers from them instead of fitting the same models again."""
    return dict(_SHARED)


def adopt_fits(fits: dict[tuple, Any]) -> None:
    """Take fits made by another process (``shared_fits``); a fit made here already stays. Keys name the kind, the
    fitting parameters and a content hash of the training data, so a fit is only ever used for what it was made of."""
    for key, value in fits.items():
        _SHARED.setdefault(key, value)


def fingerprint(runs: pd.DataFrame) -> str:
    """A content hash of a runs table (its ``RUN_COLUMNS``, row order included, index ignored)."""
    import pandas as pd

    h = pd.util.hash_pandas_object(runs[list(RUN_COLUMNS)], index=False).to_numpy()
    return hashlib.sha1(h.tobytes()).hexdigest()


class TrainablePredictor(Predictor):
    """A predictor that learns from a table of measured runs.

    ``fit(runs)`` checks the table, stores it as ``runs_`` and forgets what was learnt before; models are then fitted
    per application on first use (a scenario asks about a few applications; fitting all would waste seconds) and
    shared, through ``shared``, with every instance of the same kind, fitting parameters (``fit_params``) and
    training data in the process. An instance never fitted explicitly fits itself on the shipped runs on first use.
    """

    fit_params: tuple[str, ...] | None = None
    """The parameters that change what is learnt (None: all of them); the others only change how answers are read."""

    def fit(self, runs: pd.DataFrame) -> TrainablePredictor:
        missing = [c for c in RUN_COLUMNS if c not in runs.columns]
        if missing:
            raise CapsimError(f"predictor {self.name!r}: the runs table lacks the columns {missing}; "
                              f"it needs {', '.join(RUN_COLUMNS)} (the layout of predictors.measurements.runs())")
        if len(runs) == 0:
            raise CapsimError(f"predictor {self.name!r}: cannot fit on an empty runs table")
        for k in [k for k in vars(self) if k.endswith("_") and not k.endswith("__")]:
            delattr(self, k)
        self._forget()
        self.runs_ = runs
        self.fingerprint_ = fingerprint(runs)
        self._fit(runs)
        return self

    def _fit(self, runs: pd.DataFrame) -> None:
        """Eager part of fitting (default none: models are fitted per application on first use)."""

    def _forget(self) -> None:
        """Drop caches of answers derived from an earlier fit (default none)."""

    def training_runs(self) -> pd.DataFrame:
        """The runs this predictor learns from, fitting on the shipped runs first if it was never fitted."""
        if not hasattr(self, "runs_"):
            from predictors.measurements import runs

            self.fit(runs())
        return self.runs_

    def shared(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, memoised per (kind, fitting parameters, training data, ``key``) across instances."""
        self.training_runs()
        names = self.fit_params if self.fit_params is not None else self.param_names()
        params = tuple((n, _label(getattr(self, n))) for n in names)
        full = (self.name, params, self.fingerprint_, key)
        if full not in _SHARED:
            _SHARED[full] = make()
        return _SHARED[full]

    def predict_runs(self, rows: pd.DataFrame) -> np.ndarray:
        """Seconds for each row of a runs table (its GPU, GPU count, batch, iterations, depth; the CPU-thread count
        where the predictor models it), NaN where unsupported. The default asks ``runtime`` row by row."""
        from predictors.measurements import row_configs, row_specs

        out = np.array([self.runtime(s, c.vm, c.gpus) for s, c in zip(row_specs(rows), row_configs(rows))], float)
        out[~np.isfinite(out)] = np.nan
        return out


def _label(v: Any) -> Any:
    if isinstance(v, Predictor):
        return v.describe()
    if isinstance(v, (list, dict, set)):
        return repr(v)
    return v


class AffinePredictor(Predictor):
    """Runtime ``overhead + iterations × per_iteration``; both terms depend on the spec only through its application,
    framework, depth and batch size. A subclass provides ``terms(spec, vm, gpus, cpu=None) -> (overhead,
    per_iteration, reason)`` (``reason`` None where supported, else a one-line why; the terms are then ignored;
    ``cpu`` a measured run's CPU-thread count, None for the predictor's own assumption)."""

    def terms(self, spec: JobSpec, vm: VMType, gpus: int, cpu: int | None = None) -> tuple[float, float, str | None]:
        raise NotImplementedError(self)

    def predict_runs(self, rows: pd.DataFrame) -> np.ndarray:
        """Each row of a runs table at its own CPU-thread count, NaN where unsupported."""
        from predictors.measurements import row_configs, row_specs

        out = np.full(len(rows), np.nan)
        for i, (s, c, cpu) in enumerate(zip(row_specs(rows), row_configs(rows), rows["cpu_threads"])):
            a, b, why = self.terms(s, c.vm, c.gpus, int(cpu))
            if why is None:
                out[i] = a + s.iterations * b
        return out

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        a, b, why = self.terms(spec, vm, gpus)
        return a + spec.iterations * b if why is None else INFEASIBLE

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        return self.terms(spec, vm, gpus)[2]

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        """Vectorised: one ``terms`` call per distinct (application, framework, depth, batch) × configuration, then
        the same ``overhead + iterations × per_iteration`` arithmetic as ``runtime``, so both agree exactly."""
        index: dict[tuple, int] = {}
        rows = np.empty(len(specs), dtype=np.intp)
        firsts: list[JobSpec] = []
        for i, s in enumerate(specs):
            shape = (s.application, s.framework, s.depth, s.batch_size)
            j = index.get(shape)
            if j is None:
                j = index[shape] = len(firsts)
                firsts.append(s)
            rows[i] = j
        a = np.empty((len(firsts), len(configs)))
        b = np.empty_like(a)
        for j, s in enumerate(firsts):
            for k, c in enumerate(configs):
                ta, tb, why = self.terms(s, c.vm, c.gpus)
                a[j, k], b[j, k] = (ta, tb) if why is None else (INFEASIBLE, INFEASIBLE)
        its = np.fromiter((s.iterations for s in specs), dtype=float, count=len(specs))
        with np.errstate(invalid="ignore"):
            out = a[rows] + its[:, None] * b[rows]
        out[~np.isfinite(out)] = INFEASIBLE
        return out
