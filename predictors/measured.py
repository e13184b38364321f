"""Runtimes read off the shipped measurements: fixed overhead + iterations × per-iteration time, nothing invented.

Fit (lazily, once per application): for every measured (application, framework, depth, GPU model, GPU count,
batch size) group, keep the runs at one CPU-thread setting (``cpu_threads``: ``"best"`` = the setting with the
lowest mean time per iteration, i.e. a job whose data loading is tuned; an integer = the nearest measured setting),
then fit ``runtime = overhead + iterations × per_iteration`` by least squares over the repeats. A group measured at a
single iteration count cannot separate the two terms; it borrows the overhead fitted jointly over all that GPU
model's groups (one shared overhead, one slope per group), else the median overhead of the application on other
GPUs, else zero. Overheads are clipped to ``[0, 0.9 × the group's shortest run]``.

Answer rules for a (batch size B, GPU count n) on a GPU model:
- B measured: that group's fit. B between two measured sizes: per-sample time (per-iteration time / B) and overhead
  interpolated linearly in log B. B outside the measured range: unsupported (smaller batches were not measured and
  larger ones may not fit in memory), unless ``extrapolate_batch=True``, which then holds the nearest measured
  per-sample time (larger B) or per-iteration time (smaller B) constant.
- n measured: as above. n between two measured counts: the two answers interpolated linearly in n. n beyond the
  largest (or below the smallest) measured count on that GPU model: unsupported, never extrapolated.
- A GPU model, or an application on a GPU model, never measured: unsupported, with the reason.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import pandas as pd

from predictors.base import AffinePredictor, TrainablePredictor, register
from predictors.measurements import data_key, measured_gpu_name, row_configs, row_specs
from predictors.uncertainty.provenance import source
from sim.contracts import Source
from sim.model import INFEASIBLE, CapsimError, JobSpec, VMType

__all__ = ["MeasuredPredictor", "GroupFit", "select_cpu"]

Key = tuple[str, str, int]
Fits = dict[str, dict[int, dict[int, "GroupFit"]]]
OVERHEAD_CAP = 0.9


class GroupFit:
    """Fitted overhead (s) and per-iteration time (s) of one (GPU model, GPU count, batch size) group."""

    __slots__ = ("overhead", "per_iteration", "cpu_threads", "runs")

    def __init__(self, overhead: float, per_iteration: float, cpu_threads: int, runs: int):
        self.overhead, self.per_iteration, self.cpu_threads, self.runs = overhead, per_iteration, cpu_threads, runs


def select_cpu(df: pd.DataFrame, cpu_threads: str | int) -> pd.DataFrame:
    """Rows of each (gpu, gpus, batch_size) group at the chosen CPU-thread setting (see the module docstring)."""
    keys = ["gpu", "gpus", "batch_size"]
    per_it = (df["runtime_s"] / df["iterations"]).rename("tpi")
    stats = (pd.concat([df[keys + ["cpu_threads"]], per_it], axis=1).groupby(keys + ["cpu_threads"])["tpi"].mean()
             .reset_index())
    if cpu_threads == "best":
        chosen = stats.loc[stats.groupby(keys)["tpi"].idxmin(), keys + ["cpu_threads"]]
    else:
        want = int(cpu_threads)
        stats["dist"] = (stats["cpu_threads"] - want).abs() * 2 + (stats["cpu_threads"] < want)
        chosen = stats.loc[stats.groupby(keys)["dist"].idxmin(), keys + ["cpu_threads"]]
    return df.merge(chosen, on=keys + ["cpu_threads"], how="inner")


def _joint_overhead(df: pd.DataFrame) -> float | None:
    """One overhead shared by all groups of ``df`` (one slope each), or None if no group spans two iteration counts."""
    groups = list(df.groupby(["gpus", "batch_size"]))
    if not any(g["iterations"].nunique() > 1 for _, g in groups):
        return None
    cols = np.zeros((len(df), 1 + len(groups)))
    cols[:, 0] = 1.0
    y = np.empty(len(df))
    row = 0
    for j, (_, g) in enumerate(groups):
        k = len(g)
        cols[row:row + k, 1 + j] = g["iterations"].to_numpy(float)
        y[row:row + k] = g["runtime_s"].to_numpy(float)
        row += k
    coef = np.linalg.lstsq(cols, y, rcond=None)[0]
    return float(coef[0])


def _fit_key(df: pd.DataFrame, cpu_threads: str | int) -> dict[str, dict[int, dict[int, GroupFit]]]:
    """gpu → gpus → batch_size → GroupFit for one (application, framework, depth)."""
    sel = select_cpu(df, cpu_threads)
    shared = {str(g): _joint_overhead(d) for g, d in sel.groupby("gpu")}
    known = [max(v, 0.0) for v in shared.values() if v is not None]
    fallback = float(np.median(known)) if known else 0.0
    out: dict[str, dict[int, dict[int, GroupFit]]] = {}
    for key, d in sel.groupby(["gpu", "gpus", "batch_size"]):
        g, n, b = cast(tuple[str, int, int], key)  # pandas-stubs types a group key as Hashable
        it = d["iterations"].to_numpy(float)
        t = d["runtime_s"].to_numpy(float)
        cap = OVERHEAD_CAP * float(t.min())
        if len(np.unique(it)) > 1:
            a = float(np.polyfit(it, t, 1)[1])
        else:
            own = shared[g]
            a = own if own is not None else fallback
        a = min(max(a, 0.0), cap)
        per_it = float(np.mean((t - a) / it))
        fit = GroupFit(a, per_it, int(d["cpu_threads"].iloc[0]), len(d))
        out.setdefault(g, {}).setdefault(int(n), {})[int(b)] = fit
    return out


@register("measured")
class MeasuredPredictor(AffinePredictor, TrainablePredictor):
    """Runtimes read off measured runs (rules in the module docstring): the shipped Politecnico di Milano runs, or
    the table given to ``fit`` (a training split, say)."""

    fit_params = ()  # what is fitted depends on the data and the CPU-thread setting, which is part of each key

    def __init__(self, cpu_threads: str | int = "best", extrapolate_batch: bool = False):
        if cpu_threads != "best" and not (isinstance(cpu_threads, int) and cpu_threads > 0):
            raise CapsimError("predictor 'measured': cpu_threads must be 'best' or a positive integer, "
                              f"got {cpu_threads!r}")
        self.cpu_threads = cpu_threads
        self.extrapolate_batch = extrapolate_batch
        self.check_param("extrapolate_batch", bool)
        self._answers: dict[tuple, tuple[float, float, str | None]] = {}

    def _forget(self) -> None:
        self._answers = {}

    def fits(self, key: Key, cpu_threads: str | int | None = None) -> Fits:
        """The fitted groups of one (application, framework, depth) at a CPU-thread setting (default: the
        predictor's own), fitted on first use."""
        cpu = self.cpu_threads if cpu_threads is None else cpu_threads

        def make() -> Fits:
            df = self.training_runs()
            d = df[(df["application"] == key[0]) & (df["framework"] == key[1]) & (df["depth"] == key[2])]
            return _fit_key(d, cpu) if len(d) else {}

        return self.shared((key, cpu), make)

    def _at_count(self, byb: dict[int, GroupFit], batch: int) -> tuple[float, float] | str:
        sizes = sorted(byb)
        if batch in byb:
            f = byb[batch]
            return f.overhead, f.per_iteration
        if batch < sizes[0] or batch > sizes[-1]:
            if not self.extrapolate_batch:
                return f"batch size {batch} is outside the measured range {sizes[0]}..{sizes[-1]}"
            if batch > sizes[-1]:
                f = byb[sizes[-1]]
                return f.overhead, f.per_iteration / sizes[-1] * batch
            f = byb[sizes[0]]
            return f.overhead, f.per_iteration
        hi = next(s for s in sizes if s > batch)
        lo = max(s for s in sizes if s < batch)
        w = (math.log(batch) - math.log(lo)) / (math.log(hi) - math.log(lo))
        flo, fhi = byb[lo], byb[hi]
        per_sample = (1 - w) * flo.per_iteration / lo + w * fhi.per_iteration / hi
        return (1 - w) * flo.overhead + w * fhi.overhead, per_sample * batch

    def terms(self, spec: JobSpec, vm: VMType, gpus: int, cpu: int | None = None) -> tuple[float, float, str | None]:
        """(overhead, per-iteration time, reason) for the spec's batch size on ``gpus`` GPUs of ``vm``'s model, at
        a CPU-thread count (default: the predictor's own setting)."""
        key = data_key(spec)
        setting: str | int = self.cpu_threads if cpu is None else cpu
        memo = (key, spec.batch_size, vm.gpu.name, vm.gpu.measured_gflops, vm.name, vm.gpus, gpus, setting)
        hit = self._answers.get(memo)
        if hit is None:
            hit = self._answer(key, spec.batch_size, vm, gpus, setting)
            self._answers[memo] = hit
        return hit

    def how(self, spec: JobSpec, vm: VMType, gpus: int, cpu: int | None = None) -> str:
        """``measured`` where the job's GPU type, count and batch size were run, ``interpolated`` where the answer
        lies between runs, ``batch``/``batch_below`` where ``extrapolate_batch`` holds a measured time beyond the
        range, ``unsupported`` where there is no answer (``cpu`` as in ``terms``)."""
        if self.terms(spec, vm, gpus, cpu)[2] is not None:
            return "unsupported"
        fits = self.fits(data_key(spec), cpu)[cast(str, measured_gpu_name(vm.gpu))]
        if gpus not in fits:
            return "interpolated"
        sizes = fits[gpus]
        b = spec.batch_size
        return ("measured" if b in sizes else "batch" if b > max(sizes) else "batch_below" if b < min(sizes)
                else "interpolated")

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        return source(self.describe(), self.how(spec, vm, gpus))

    def run_sources(self, rows: pd.DataFrame) -> list[str]:
        """``how`` for each row of a runs table, at its own CPU-thread count."""
        return [self.how(s, c.vm, c.gpus, int(cpu))
                for s, c, cpu in zip(row_specs(rows), row_configs(rows), rows["cpu_threads"])]

    def _answer(self, key: Key, batch: int, vm: VMType, gpus: int, cpu: str | int
                ) -> tuple[float, float, str | None]:
        what = f"{key[0]}/{key[1]}" + ("" if key[2] < 0 else f" depth {key[2]}")
        if gpus < 1 or gpus > vm.gpus:
            return INFEASIBLE, INFEASIBLE, f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        gname = measured_gpu_name(vm.gpu)
        if gname is None:
            return INFEASIBLE, INFEASIBLE, f"GPU model {vm.gpu.name} was never measured"
        fits = self.fits(key, cpu).get(gname)
        if not fits:
            return INFEASIBLE, INFEASIBLE, f"{what} was never measured on {gname}"
        counts = sorted(fits)
        if gpus > counts[-1] or gpus < counts[0]:
            return INFEASIBLE, INFEASIBLE, (
                f"{what} on {gname} was measured with {counts[0]}..{counts[-1]} GPUs; {gpus} is not extrapolated")
        if gpus in fits:
            r = self._at_count(fits[gpus], batch)
            return (*r, None) if isinstance(r, tuple) else (INFEASIBLE, INFEASIBLE, f"{what} on {gname}x{gpus}: {r}")
        lo = max(c for c in counts if c < gpus)
        hi = min(c for c in counts if c > gpus)
        rlo, rhi = self._at_count(fits[lo], batch), self._at_count(fits[hi], batch)
        for c, r in ((lo, rlo), (hi, rhi)):
            if not isinstance(r, tuple):
                return INFEASIBLE, INFEASIBLE, (
                    f"{what} on {gname}: {gpus} GPUs would interpolate {lo} and {hi} GPUs, but with {c} GPUs {r}")
        assert isinstance(rlo, tuple) and isinstance(rhi, tuple)
        w = (gpus - lo) / (hi - lo)
        return (1 - w) * rlo[0] + w * rhi[0], (1 - w) * rlo[1] + w * rhi[1], None
