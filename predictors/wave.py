"""Cross-GPU wave scaling (Habitat-style): a measured runtime on an origin GPU scaled to a destination GPU.

The origin answer is the ``base`` predictor's fixed overhead + per-iteration time (default: ``measured``; any
``AffinePredictor``) for the same job, GPU count and batch size on ``origin`` (default M60). The per-iteration time
is split across the network's layers in proportion to their modelled time on the origin (``analytical`` layer costs
at efficiency 1); each layer's share is scaled by ``(BW_o/BW_d)^γ · (clk_o/clk_d)^(1−γ) · (SM_o/SM_d)^(1−γ)`` with
``γ = 1 − 0.5·I/R`` if ``I ≤ R`` else ``0.5·R/I``, ``I`` the layer's FLOPs per byte and ``R`` the destination's peak
FLOP/s per byte/s. The fixed overhead is kept. Networks without a layer graph (DeepSpeech) use one ``gamma_default``
for the whole iteration if given, else are unsupported. Destinations need SM count, clock and bandwidth (a clear
error otherwise). With ``input_floor`` (default) the scaled time per iteration is never below the input-pipeline
floor of the ``analytical`` predictor (applications whose runs are CPU-bound, at the thread count the origin answer
was read at): a faster GPU does not decode faster. A job that would not fit in the destination's memory
(``predictors.memory``) is unsupported, with the reason (the origin ran it; a smaller GPU may not hold it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from predictors.analytical import AnalyticalPredictor, check_specs, graph_depth, graph_name
from predictors.base import AffinePredictor, Predictor, TrainablePredictor, register
from predictors.measured import MeasuredPredictor
from predictors.measurements import data_key
from predictors.memory import guard
from predictors.networks import layer_costs, network
from predictors.uncertainty.provenance import QuestionSources
from sim.catalogue import gpu_models
from sim.model import INFEASIBLE, CapsimError, GPUModel, JobSpec, VMType

__all__ = ["WavePredictor", "gamma", "scale_factor"]


def gamma(intensity: np.ndarray | float, ridge: float) -> np.ndarray:
    """Habitat's memory-boundedness γ ∈ [0, 1] from arithmetic intensity and the destination's ridge point."""
    i = np.asarray(intensity, dtype=float)
    return np.where(i <= ridge, 1.0 - 0.5 * i / ridge, 0.5 * ridge / np.maximum(i, 1e-300))


def scale_factor(g: np.ndarray | float, origin: GPUModel, dest: GPUModel) -> np.ndarray:
    """Time multiplier origin → destination for kernels with memory-boundedness ``g``."""
    g = np.asarray(g, dtype=float)
    return ((origin.bandwidth_gbs / dest.bandwidth_gbs) ** g
            * (origin.boost_mhz / dest.boost_mhz) ** (1 - g) * (origin.sms / dest.sms) ** (1 - g))


@register("wave")
class WavePredictor(QuestionSources, AffinePredictor, TrainablePredictor):
    """Measured runs on ``origin`` scaled to any GPU with specs, layer by layer (module docstring).

    ``fit(runs)`` fits a fresh copy of ``base`` (the origin answers) and, with ``input_floor``, an ``analytical``
    predictor (the input-pipeline floor) on the runs; both are public attributes ``base_`` and ``floor_``.
    """

    def __init__(self, origin: str = "M60", gamma_default: float | None = None, base: Predictor | None = None,
                 input_floor: bool = True):
        models = gpu_models()
        if origin not in models:
            raise CapsimError(f"predictor 'wave': unknown origin GPU {origin!r}: known models are {', '.join(models)}")
        if gamma_default is not None and not 0 <= gamma_default <= 1:
            raise CapsimError(f"predictor 'wave': gamma_default must lie in [0, 1], got {gamma_default}")
        if base is not None and not isinstance(base, AffinePredictor):
            raise CapsimError("predictor 'wave': base must give an overhead and a per-iteration time (e.g. 'measured')")
        self.origin, self.gamma_default, self.base, self.input_floor = origin, gamma_default, base, input_floor
        self.check_param("input_floor", bool)
        self._factor: dict[tuple, float] = {}

    def _fit(self, runs: pd.DataFrame) -> None:
        base = self.base.clone() if self.base is not None else MeasuredPredictor()
        assert isinstance(base, AffinePredictor)
        if isinstance(base, TrainablePredictor):
            base.fit(runs)
        self.base_: AffinePredictor = base
        floor = AnalyticalPredictor()
        self.floor_: AnalyticalPredictor | None = floor if self.input_floor else None
        if self.floor_ is not None:
            floor.fit(runs)

    def fitted_parts(self) -> tuple[AffinePredictor, AnalyticalPredictor | None]:
        """(origin predictor, input-floor predictor), fitted on the shipped runs if never fitted."""
        self.training_runs()
        return self.base_, self.floor_

    def factor(self, spec: JobSpec, gpus: int, dest: GPUModel) -> float | None:
        """Per-iteration time multiplier origin → ``dest`` for the spec's network at its per-GPU batch."""
        check_specs(dest)
        origin = gpu_models()[self.origin]
        net = graph_name(spec.application)
        key = (net, spec.depth, spec.batch_size / gpus, dest.name)
        if key not in self._factor:
            if net is None:
                if self.gamma_default is None:
                    return None
                self._factor[key] = float(scale_factor(self.gamma_default, origin, dest))
            else:
                c = layer_costs(network(net, graph_depth(spec)))
                b = spec.batch_size / gpus
                flops, bytes_ = c["flops"] * b, c["act"] * b + 12.0 * c["weights"]
                share = flops / (origin.fp32_tflops * 1e12) + bytes_ / (origin.bandwidth_gbs * 1e9)
                ridge = dest.fp32_tflops * 1e12 / (dest.bandwidth_gbs * 1e9)
                s = scale_factor(gamma(flops / bytes_, ridge), origin, dest)
                self._factor[key] = float((share * s).sum() / share.sum())
        return self._factor[key]

    def _origin_vm(self, gpus: int) -> VMType:
        return VMType(name=f"wave-origin-{self.origin}", gpu=gpu_models()[self.origin], gpus=gpus, price_per_hour=0.0)

    def terms(self, spec: JobSpec, vm: VMType, gpus: int, cpu: int | None = None) -> tuple[float, float, str | None]:
        """(overhead, per-iteration time, reason); ``cpu`` reads the origin at that CPU-thread count."""
        if gpus < 1 or gpus > vm.gpus:
            return INFEASIBLE, INFEASIBLE, f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        tight = guard(self).reason(spec, vm, gpus) if cpu is None else None  # a row with its threads: a run that ran
        if tight is not None:
            return INFEASIBLE, INFEASIBLE, tight
        base, floor = self.fitted_parts()
        origin_vm = self._origin_vm(gpus)
        overhead, per_it, why = base.terms(spec, origin_vm, gpus, cpu)
        if why is not None:
            return INFEASIBLE, INFEASIBLE, f"origin {self.origin}: {why}"
        f = self.factor(spec, gpus, vm.gpu)
        if f is None:
            return INFEASIBLE, INFEASIBLE, f"no layer graph for {spec.application} and no gamma_default"
        per_it = per_it * f
        if floor is not None:
            threads: str | int | None = cpu
            if threads is None:
                own = getattr(base, "cpu_threads", "best")
                threads = "max" if own == "best" else own
            per_it = max(per_it, floor.input_time(spec.application, data_key(spec)[1], spec.batch_size, gpus, threads))
        return overhead, per_it, None
