"""Runtimes on today's cloud GPUs: measured throughput tables where they answer, cross-GPU scaling elsewhere.

A job's runtime is its iterations over the iterations per second its type achieves on that many GPUs of the VM's GPU
model. The rate is read, in this order:

1. **measured**: a shipped table (``tables``, default ElasticFlow's A100-40GB and T4 tables and Gavel's
   V100/P100/K80 table) lists the job type (``"<model> (batch size <global batch>)"``) on that GPU model and count,
   or the same network on the same data under another table's name at that batch size (``crossgpu.SAME_MODEL``:
   ElasticFlow's ``resnet50`` at batch 64 is Gavel's ``ResNet-50 (batch size 64)``; BERT-like models are not
   merged, they are different workloads);
2. **scaled**: another GPU model measured that job type at that count; the rate of the one nearest in speed is
   scaled by the fitted power law of ``predictors.crossgpu`` (datasheet tensor TFLOPS and memory bandwidth, calibrated
   on the measured GPUs; its leave-one-GPU-out error is in ``docs/predictors.md``);
3. otherwise the configuration is unsupported, with the reason.

So a trace job (ElasticFlow's model name, global batch size, GPU count) runs on an A100-40GB at its measured rate,
on an H100, L4, L40S, A10G, A10 or A100-80GB at the A100-40GB rate scaled to that GPU, and on a T4 or V100 at the
rate measured there if the model was, else scaled. ``explain`` says which answered. The GPU count is the
configuration's, however the GPUs are spread over VMs (a gang), as in the ``throughput`` predictor. GPU memory is
not modelled: a configuration measured on one GPU is taken to fit on every other.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from predictors.base import Predictor, Source, register
from predictors.crossgpu import (
    DEFAULT_FEATURES,
    FEATURES,
    Scaling,
    default_scaling,
    fit_scaling,
    model_of,
    nearest,
    peak_speeds,
)
from predictors.throughput import TABLES, ThroughputTable, runtimes_from_rates
from predictors.uncertainty.provenance import source
from sim.catalogue import gpu_models
from sim.model import INFEASIBLE, CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["CloudPredictor"]


@register("cloud")
class CloudPredictor(Predictor):
    """Measured throughputs, and cross-GPU scaling for the GPUs (or GPU counts) a table lacks (module docstring).

    ``tables`` names shipped throughput tables (``predictors.throughput.TABLES``), read in order (an earlier table's
    rate wins). ``scale`` False answers only what was measured. ``features`` picks the scaling's datasheet figures
    (``predictors.crossgpu.FEATURES``); the exponents are fitted on the tables named here.
    """

    def __init__(self, tables: Sequence[str] = ("elasticflow", "gavel"), scale: bool = True,
                 features: str = DEFAULT_FEATURES):
        tables = tuple(tables) if not isinstance(tables, str) else (tables,)
        bad = [t for t in tables if t not in TABLES]
        if bad or not tables:
            raise CapsimError(f"predictor 'cloud': unknown table(s) {bad or 'none given'}: shipped tables are "
                              f"{', '.join(sorted(TABLES))}")
        if features not in FEATURES:
            raise CapsimError(f"predictor 'cloud': features must be one of {', '.join(FEATURES)}, got {features!r}")
        if not isinstance(scale, bool):
            raise CapsimError(f"predictor 'cloud': scale must be true or false, got {scale!r}")
        self.tables = tables
        self.scale = scale
        self.features = features
        self._data: ThroughputTable | None = None
        self._scaling: Scaling | None = None
        self._answers: dict[tuple[str, str, int], tuple[float, str | None, str]] = {}
        self._twins: dict[str, tuple[str, ...]] | None = None

    @property
    def data(self) -> ThroughputTable:
        """The named tables merged (read on first use)."""
        if self._data is None:
            rates: dict[tuple[str, str, int], float] = {}
            for name in reversed(self.tables):
                rates.update(TABLES[name]().rates)
            self._data = ThroughputTable(rates, "+".join(self.tables))
        return self._data

    @property
    def scaling(self) -> Scaling:
        """The cross-GPU power law, fitted on the tables' peak single-GPU speeds (the shipped default fit when the
        default tables and features are used)."""
        if self._scaling is None:
            if tuple(self.tables) == ("elasticflow", "gavel") and self.features == DEFAULT_FEATURES:
                self._scaling = default_scaling()
            else:
                self._scaling = fit_scaling(peak_speeds(self.data.rates), FEATURES[self.features])
        return self._scaling

    def twins(self, job_type: str) -> tuple[str, ...]:
        """The job type and, after it, the tables' names of the same network and data at the same batch size."""
        if self._twins is None:
            groups: dict[tuple[str, int], list[str]] = {}
            for t in sorted(self.data.job_types):
                model, batch = model_of(t)
                if model != "BERT-like":
                    groups.setdefault((model, batch), []).append(t)
            self._twins = {t: (t, *[u for u in g if u != t]) for g in groups.values() for t in g}
        return self._twins.get(job_type, (job_type,))

    def answer(self, gpu: GPUModel, job_type: str, gpus: int) -> tuple[float, str | None, str]:
        """(iterations/s, reason if unsupported, how it was answered) for a job type on ``gpus`` GPUs of ``gpu``."""
        key = (gpu.name, job_type, gpus)
        hit = self._answers.get(key)
        if hit is not None:
            return hit
        rates = self.data.rates
        source = self.data.source
        names = self.twins(job_type)
        measured = [(t, rates[(gpu.name, t, gpus)]) for t in names if rates.get((gpu.name, t, gpus), 0.0) > 0]
        if measured:
            t, rate = measured[0]
            alias = "" if t == job_type else f" as {t!r}"
            out: tuple[float, str | None, str] = (rate, None, f"measured on {gpus} x {gpu.name}{alias} ({source})")
        elif job_type not in self.data.job_types:
            out = (0.0, f"no table of {source!r} has the job type {job_type!r}", "")
        elif not self.scale:
            out = (0.0, f"{job_type} was not measured on {gpus} x {gpu.name} (scale: false)", "")
        else:
            models = gpu_models()
            refs = {m: t for t in reversed(names) for (m, u, n), r in rates.items()
                    if u == t and n == gpus and r > 0 and m in models}
            ref = nearest(self.scaling, gpu, [models[m] for m in sorted(refs)])
            if ref is None:
                out = (0.0, f"no table of {source!r} measured {job_type} on {gpus} GPUs of any model", "")
            else:
                f = self.scaling.factor(ref, gpu)
                t = refs[ref.name]
                alias = "" if t == job_type else f" as {t!r}"
                out = (rates[(ref.name, t, gpus)] * f, None,
                       f"scaled from {gpus} x {ref.name}{alias} by {f:.3g} ({self.scaling.describe()})")
        self._answers[key] = out
        return out

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        rate, why, _ = self.answer(vm.gpu, self.data.job_type(spec.application, spec.batch_size), gpus)
        return spec.iterations / rate if why is None else INFEASIBLE

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        return self.answer(vm.gpu, self.data.job_type(spec.application, spec.batch_size), gpus)[1]

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """``measured`` (a table's rate; its error is not measured: the tables have no repeats) or ``scaled`` (with
        the cross-GPU scaling's leave-one-GPU-out error); ``unsupported`` where no rate answers."""
        rate, why, how = self.answer(vm.gpu, self.data.job_type(spec.application, spec.batch_size), gpus)
        return source(self.describe(), "unsupported" if why is not None else how.split(" ", 1)[0])

    def explain(self, spec: JobSpec, vm: VMType, gpus: int) -> str:
        """Which rate answers: measured (and in which table), scaled (from which GPU, by what factor), or why none."""
        rate, why, how = self.answer(vm.gpu, self.data.job_type(spec.application, spec.batch_size), gpus)
        return how if why is None else f"unsupported: {why}"

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        """Every spec on every configuration: one rate per (job type, GPU model, count), then iterations / rate."""
        return runtimes_from_rates(specs, configs, self.data.job_type, lambda g, name, n: self.answer(g, name, n)[0])
