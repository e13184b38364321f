"""Estimates that sharpen as a job runs: another predictor's answer before a job starts, its observed pace after.

Before a job has run, ``online`` answers as its ``base`` (with the base's source and expected error). Once it has run,
the engine shows it what an observer of the job sees (``sim.contracts.Progress``: the configuration the job ran on, the
iterations it has done, and the seconds its latest run took for its iterations; ``docs/predictors.md``, *Estimates that
sharpen as a job runs*), and ``refine`` answers the job's time on that configuration from the time per iteration
observed over a moving window of its last ``window`` iterations: the whole job at that pace, so that a policy reads
the remaining time as ``(1 − done) × estimate``, the iterations left times the pace.

What the window's pace misses. In capsim a job trains at a constant pace on a configuration; a real one does not: the
time of one iteration varies around its mean (AI Gauge, Dube et al. SBAC-PAD'19: a coefficient of variation under
0.1, ``iteration_cv``), and a run's pace drifts by about as much as two runs of one configuration differ (``drift``:
by default each application's run-to-run variation in the shipped measurements, the noise floor of ``capsim predict
evaluate``, the same figure for every application they do not cover: their mean). The window's mean time per
iteration then errs from the pace of the rest of the run by a log-normal factor with ``sigma² = drift² +
iteration_cv² / w`` for a window of ``w`` iterations; ``refine`` draws it from a hash of (``seed``, job, configuration,
iterations done), so an estimate is a function of what was observed. ``expected_error`` is that factor's mean absolute
relative error.

``window: 0`` never observes: the predictor then answers as its base alone, everywhere (the baseline a sweep compares
with). Other configurations keep the base's answers (``transfer: false``): the base's error on one configuration says
little about its error on another when errors are drawn independently (``noisy``). ``transfer: true`` scales every
answer by the ratio observed on the configuration run, for bases whose errors are shared across configurations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import ClassVar

import numpy as np
from scipy.special import ndtri

from predictors.base import Predictor, Source, register
from predictors.uncertainty.noisy import expected_mape
from sim.contracts import Progress
from sim.model import CapsimError, Config, Job, JobSpec, VMType

__all__ = ["OnlinePredictor", "run_to_run_variation"]


@cache
def run_to_run_variation() -> dict[str, float]:
    """Each measured application's run-to-run variation (key ``application_framework``, the depth runs under
    ``resnet_pt``): the mean noise floor of its repeated runs (``predictors.evaluation.noise_floor``, a mean absolute
    relative deviation), and under ``*`` the mean over every repeated run."""
    from predictors.evaluation import noise_floor
    from predictors.measurements import runs

    df = runs()
    floor = noise_floor(df)
    key = df["application"] + "_" + df["framework"].map({"pytorch": "pt", "tensorflow": "tf"}).fillna("x")
    per = {str(k): float(np.nanmean(floor[(key == k).to_numpy()])) for k in key.unique()}
    per = {k: v for k, v in per.items() if math.isfinite(v)}
    per["*"] = float(np.nanmean(floor))
    return per


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
"""E|Z| for a standard normal: a normal error's mean absolute value per unit of standard deviation."""


@register("online")
class OnlinePredictor(Predictor):
    """``base`` before a job runs; its observed pace once it has run (module docstring).

    ``window``: the iterations whose mean pace is taken (0: never observe, the base alone); ``iteration_cv``: one
    iteration's coefficient of variation (AI Gauge's bound); ``drift``: a run's drift from its pace (``measured``: its
    application's run-to-run variation in the shipped measurements, or a number); ``transfer``: scale every
    configuration's answer by the ratio seen on the one that ran; ``seed``: the window errors' draws."""

    test_params: ClassVar = {"base": {"kind": "measured"}}

    def __init__(self, base: Predictor, window: int = 100, iteration_cv: float = 0.1,
                 drift: float | str = "measured", transfer: bool = False, seed: int = 0):
        if not isinstance(base, Predictor):
            raise CapsimError(f"predictor 'online': base must be a predictor or a mapping with 'kind', got {base!r}")
        if getattr(base, "observes", False):
            raise CapsimError("predictor 'online': its base already observes running jobs; wrap a plain predictor")
        self.base, self.window, self.iteration_cv, self.drift = base, window, iteration_cv, drift
        self.transfer, self.seed = transfer, seed
        self.check_param("window", int, low=0)
        self.check_param("iteration_cv", float, low=0.0)
        if drift != "measured":
            try:
                self.check_param("drift", float, low=0.0)
            except CapsimError as err:
                raise CapsimError(f"{err} (or 'measured': the application's run-to-run variation)") from None
        self.check_param("transfer", bool)
        self.check_param("seed", int, low=0)

    @property
    def observes(self) -> bool:
        """Whether running jobs are observed: ``window`` > 0 (0 answers as the base alone, a sweep's baseline)."""
        return self.window > 0

    # ----- before a job runs: the base ------------------------------------------------------------------------------
    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return self.base.runtime(spec, vm, gpus)

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        return self.base.runtimes(specs, configs)

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        return self.base.support(spec, vm, gpus)

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        return self.base.source(spec, vm, gpus)

    # ----- once it has run: its pace --------------------------------------------------------------------------------
    def job_drift(self, spec: JobSpec) -> float:
        """The run-to-run variation assumed for the job's application (``drift``)."""
        if self.drift != "measured":
            return float(self.drift)
        table = run_to_run_variation()
        return table.get(spec.app_key, table["*"])

    def sigma(self, spec: JobSpec, window: int) -> float:
        """Standard deviation of the log error of a pace observed over ``window`` iterations."""
        d = self.job_drift(spec) / _SQRT_2_OVER_PI  # a mean absolute deviation read as a normal's sigma
        return math.sqrt(d * d + self.iteration_cv ** 2 / max(window, 1))

    def expected_error(self, spec: JobSpec, window: int) -> float:
        """Mean absolute relative error of the remaining time estimated from a window of ``window`` iterations."""
        s = self.sigma(spec, window)
        return expected_mape(-s * s / 2.0, s)

    def refine(self, job: Job, estimates: np.ndarray, progress: Progress) -> np.ndarray:
        """The job's estimates after ``progress`` was observed: on the configuration it ran on, the whole job at the
        pace observed over the window (the window's true mean pace times its drawn error); elsewhere the base's
        answers (scaled by the observed ratio with ``transfer``)."""
        if progress.run_iterations < 1 or not progress.run_seconds > 0:
            return estimates
        w = min(self.window, progress.run_iterations)
        s = self.sigma(job.spec, w)
        pace = progress.run_seconds / progress.run_iterations
        observed = pace * math.exp(s * self._z(job.id, progress) - s * s / 2.0)
        whole = observed * job.spec.iterations
        k = progress.config
        row = np.array(estimates, dtype=float)
        if self.transfer and math.isfinite(row[k]) and row[k] > 0:
            row = row * (whole / row[k])
        row[k] = whole
        row.setflags(write=False)
        return row

    def _z(self, job_id: int, progress: Progress) -> float:
        ss = np.random.SeedSequence([self.seed, int(job_id), int(progress.config), int(progress.iterations)])
        u = (float(ss.generate_state(1, np.uint64)[0] >> np.uint64(11)) + 0.5) / float(1 << 53)
        return float(ndtri(u))

