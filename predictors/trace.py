"""A runtime model for jobs replayed from production traces, which record a run time and rarely what the job was.

A trace job carries what the trace measured (``JobSpec.measured``): it ran ``seconds`` on ``gpus`` GPUs of model
``gpu`` (or of the trace's own hardware, when the trace names no model). The model declares, as assumptions:

1. **The measured run is the truth on its own configuration**: the same GPU count on the same GPU model takes the
   measured time (on a trace's own, unnamed hardware: on every GPU, unless ``gpu`` names the model it was).
2. **Other GPU counts follow a named scaling law** of the speedup ``S(n)`` on ``n`` GPUs, runtime ∝ 1 / S(n):
   ``linear`` (S(n) = n: perfect data parallelism, the optimistic bound), ``amdahl`` (S(n) = 1 / (s + (1 − s) / n)
   with a serial share ``s``), or ``measured`` (the shipped throughput tables' ratio rate(n) / rate(m) for a job
   whose model and batch size the tables measured, on the configuration's GPU model where they did, else on the
   first GPU model that measured both counts; Amdahl for every other job).
3. **Other GPU models follow the cross-GPU scaling of the ``cloud`` predictor** (``predictors.crossgpu``: a power
   law of datasheet tensor TFLOPS and memory bandwidth, calibrated on the measured GPUs): a run measured on GPU r
   takes ``factor(r, d)`` times less on GPU d. A GPU model whose specifications were never published (Alibaba's
   G1–G3, Philly's) scales to nothing but itself.
4. A job asking for a fraction of a GPU (``gpu_share``) takes its measured time on the whole GPU it is given;
   GPU models outside its ``gpu_models`` are unsupported.

The serial share's default, ``SERIAL`` = 0.13, is the median of least-squares Amdahl fits of the shipped tables'
multi-GPU measurements (82 GPU model × job type series of ElasticFlow's A100/T4 and Gavel's V100/P100/K80 tables;
quartiles 0.06 and 0.26, ``fitted_serial_shares``). Each parameter is a scenario field (``predictor.scaling``,
``predictor.serial``, ``predictor.gpu``), so a sweep shows how much a result depends on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar

import numpy as np

from predictors.base import Predictor, register
from predictors.crossgpu import default_scaling
from predictors.throughput import TABLES, ThroughputTable
from predictors.uncertainty.provenance import expected_error
from sim.catalogue import trace_gpu
from sim.contracts import Source
from sim.model import INFEASIBLE, CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["TraceRuntime", "SCALINGS", "SERIAL", "Series", "fitted_serial_shares", "scaling_series", "serial_share",
           "speedup"]

SCALINGS = ("linear", "amdahl", "measured")
"""The scaling laws across GPU counts (module docstring)."""
SERIAL = 0.13
"""The default Amdahl serial share: the median fit over the shipped throughput tables (``fitted_serial_shares``)."""


def speedup(law: str, serial: float, n: np.ndarray | float) -> np.ndarray:
    """S(n) of a scaling law: ``n`` for ``linear``, ``1 / (s + (1 − s) / n)`` for ``amdahl``."""
    n = np.asarray(n, dtype=float)
    return n if law == "linear" else 1.0 / (serial + (1.0 - serial) / n)


Series = dict[tuple[str, str, str], dict[int, float]]
"""Multi-GPU throughput series: ``{(table, GPU model, job type): {GPU count: rate}}``."""


def scaling_series(tables: Sequence[str] = ("elasticflow", "gavel")) -> Series:
    """Every (table, GPU model, job type) series the tables measured on 1 GPU and on more (``fitted_serial_shares``
    fits them, ``predictors.evaluation.trace_scaling_errors`` scores the scaling laws on them)."""
    out: Series = {}
    for name in tables:
        series: dict[tuple[str, str], dict[int, float]] = {}
        for (gpu, job, n), rate in TABLES[name]().rates.items():
            if rate > 0:
                series.setdefault((gpu, job), {})[n] = rate
        for (gpu, job), rates in sorted(series.items()):
            if 1 in rates and any(n > 1 for n in rates):
                out[(name, gpu, job)] = rates
    return out


def serial_share(rates: dict[int, float]) -> float:
    """The least-squares Amdahl serial share of one series, clipped to [0, 1]: ``1/S(n) − 1/n = s (1 − 1/n)``
    fitted through the origin, S(n) = rate(n) / rate(1)."""
    counts = np.array(sorted(n for n in rates if n > 1), dtype=float)
    s = np.array([rates[int(n)] / rates[1] for n in counts])
    x, y = 1 - 1 / counts, 1 / s - 1 / counts
    return min(1.0, max(0.0, float((x * y).sum() / (x * x).sum())))


def fitted_serial_shares(tables: Sequence[str] = ("elasticflow", "gavel")) -> np.ndarray:
    """``serial_share`` of every series of ``scaling_series``."""
    return np.array([serial_share(r) for r in scaling_series(tables).values()])


@cache
def _merged(tables: tuple[str, ...]) -> ThroughputTable:
    rates: dict[tuple[str, str, int], float] = {}
    for name in reversed(tables):
        rates.update(TABLES[name]().rates)
    return ThroughputTable(rates, "+".join(tables))


@register("trace")
class TraceRuntime(Predictor):
    """Runtimes of trace jobs from their measured run (module docstring): ``scaling`` across GPU counts (``linear``,
    ``amdahl`` with ``serial``, or ``measured`` from ``tables``), the ``cloud`` predictor's cross-GPU scaling across
    GPU models, ``gpu`` the model a run was measured on when the trace names none (None: the trace's own hardware,
    every GPU at the measured speed). ``base`` answers for jobs without a measured run (None: they are unsupported).
    """

    test_params: ClassVar[dict[str, Any]] = {"base": {"kind": "measured"}}

    def __init__(self, scaling: str = "amdahl", serial: float = SERIAL, gpu: str | None = None,
                 tables: Sequence[str] = ("elasticflow", "gavel"), base: Predictor | None = None):
        if scaling not in SCALINGS:
            raise CapsimError(f"predictor 'trace': scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")
        if isinstance(serial, bool) or not isinstance(serial, (int, float)) or not 0 <= serial <= 1:
            raise CapsimError(f"predictor 'trace': serial must be a share in [0, 1], got {serial!r}")
        if gpu is not None and (not isinstance(gpu, str) or not _has_specs(trace_gpu(gpu))):
            raise CapsimError(f"predictor 'trace': gpu must name a GPU model with published specifications (e.g. "
                              f"V100, A100-40GB, H100), got {gpu!r}")
        tables = (tables,) if isinstance(tables, str) else tuple(tables)
        bad = [t for t in tables if t not in TABLES]
        if bad or not tables:
            raise CapsimError(f"predictor 'trace': unknown table(s) {bad or 'none given'}: shipped tables are "
                              f"{', '.join(sorted(TABLES))}")
        if base is not None and not isinstance(base, Predictor):
            raise CapsimError(f"predictor 'trace': base must be a predictor or a mapping with 'kind', got {base!r}")
        self.scaling, self.serial, self.gpu, self.tables, self.base = scaling, float(serial), gpu, tables, base
        self._rows: dict[tuple, tuple[np.ndarray, tuple[str | None, ...]]] = {}

    # ----- the model, one factor row per kind of job -----------------------------------------------------------

    def _count_factor(self, spec: JobSpec, m: int, counts: np.ndarray, gpus: Sequence[GPUModel]) -> np.ndarray:
        """runtime(n) / runtime(m) for each configuration's count n (and GPU model, for ``measured``)."""
        amdahl = speedup("amdahl" if self.scaling != "linear" else "linear", self.serial, counts)
        base = float(speedup("amdahl" if self.scaling != "linear" else "linear", self.serial, m))
        out = base / amdahl
        if self.scaling == "measured" and spec.application:
            data = _merged(self.tables)
            job = data.job_type(spec.application, spec.batch_size)
            if job in data.job_types:
                models = [g.name for g in gpus] + sorted({k[0] for k in data.rates if k[1] == job})
                for k, n in enumerate(counts.tolist()):
                    ratio = next((data.rate(g, job, m) / data.rate(g, job, int(n)) for g in (gpus[k].name, *models)
                                  if data.rate(g, job, int(n)) > 0 and data.rate(g, job, m) > 0), None)
                    if ratio is not None:
                        out[k] = ratio
        return out

    def _type_factor(self, ref: str | None, dest: GPUModel) -> tuple[float, str | None]:
        """runtime on ``dest`` / runtime on ``ref`` (1 on the trace's own hardware), or the reason it is unknown."""
        ref = ref if ref is not None else self.gpu
        if ref is None or ref == dest.name:
            return 1.0, None
        origin = trace_gpu(ref)
        for g in (origin, dest):
            if not _has_specs(g):
                return INFEASIBLE, (f"the run was measured on {ref} and this is {dest.name}: {g.name}'s "
                                    f"specifications are not published, so no scaling reaches it")
        return 1.0 / default_scaling().factor(origin, dest), None

    def _row(self, spec: JobSpec, configs: Sequence[Config]) -> tuple[np.ndarray, tuple[str | None, ...]]:
        """Runtime per second measured on each configuration (inf where unsupported), and the reasons."""
        m = spec.measured
        assert m is not None
        key = (m.gpus, m.gpu, spec.gpu_models, spec.application if self.scaling == "measured" else "",
               spec.batch_size if self.scaling == "measured" else 0, tuple(configs))
        hit = self._rows.get(key)
        if hit is not None:
            return hit
        gpus = [c.vm.gpu for c in configs]
        counts = np.array([c.gpus for c in configs], dtype=float)
        row = self._count_factor(spec, m.gpus, counts, gpus)
        why: list[str | None] = [None] * len(configs)
        types: dict[str, tuple[float, str | None]] = {}
        for k, g in enumerate(gpus):
            if spec.gpu_models is not None and g.name not in spec.gpu_models:
                row[k], why[k] = INFEASIBLE, f"the job may run only on {'|'.join(sorted(spec.gpu_models))}"
                continue
            if g.name not in types:
                types[g.name] = self._type_factor(m.gpu, g)
            f, why[k] = types[g.name]
            row[k] *= f
        if len(self._rows) > 4096:
            self._rows.clear()
        self._rows[key] = out = (row, tuple(why))
        return out

    # ----- the predictor contract ------------------------------------------------------------------------------

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.runtimes([spec], [Config(vm, gpus)])[0, 0])

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        if spec.measured is None:
            if self.base is None:
                return "the job has no measured run (not a trace job) and the trace model has no base predictor"
            return self.base.support(spec, vm, gpus)
        return self._row(spec, [Config(vm, gpus)])[1][0]

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """``measured`` on the run's own configuration (its error unknown: a trace has no repeats); ``scaled`` on
        another GPU model, with the ``cloud`` predictor's measured cross-GPU scaling error (the same scaling; a count
        change on top of it is not counted in); ``gpus`` for another count on the same model, with the scaling law's
        error measured by leaving one throughput series out (``predictors.evaluation.trace_scaling_errors``: at the
        default serial share; NaN at another); the base's source for jobs without a measured run."""
        m = spec.measured
        if m is None:
            return self.base.source(spec, vm, gpus) if self.base is not None else Source("unsupported")
        if self.support(spec, vm, gpus) is not None:
            return Source("unsupported")
        ref = m.gpu if m.gpu is not None else self.gpu
        if ref is not None and trace_gpu(ref).name != vm.gpu.name:
            return Source("scaled", expected_error("cloud", "scaled"))
        return Source("measured") if gpus == m.gpus else Source("gpus", expected_error(self.describe(), "gpus"))

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        out = np.full((len(specs), len(configs)), INFEASIBLE)
        if not specs or not configs:
            return out
        other = [i for i, s in enumerate(specs) if s.measured is None]
        if other and self.base is not None:
            out[other] = self.base.runtimes([specs[i] for i in other], configs)
        groups: dict[tuple, list[int]] = {}
        for i, s in enumerate(specs):
            if s.measured is not None:
                key = (s.measured.gpus, s.measured.gpu, s.gpu_models,
                       (s.application, s.batch_size) if self.scaling == "measured" else None)
                groups.setdefault(key, []).append(i)
        for idx in groups.values():
            row = self._row(specs[idx[0]], configs)[0]
            seconds = np.array([_seconds(specs[i]) for i in idx], dtype=float)
            out[idx] = seconds[:, None] * row[None, :]
        return out


def _has_specs(g: GPUModel) -> bool:
    tensor = g.fp16_tensor_tflops or g.fp32_tflops
    return bool(tensor > 0 and g.bandwidth_gbs > 0 and math.isfinite(tensor) and math.isfinite(g.bandwidth_gbs))


def _seconds(spec: JobSpec) -> float:
    assert spec.measured is not None
    return spec.measured.seconds
