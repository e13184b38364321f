"""Cross-GPU wave scaling (Habitat-style): a measured runtime on an origin GPU scaled to a destination GPU.

The origin answer is the ``measured`` predictor's fixed overhead + per-iteration time for the same job, GPU count and
batch size on ``origin`` (default M60). The per-iteration time is split across the network's layers in proportion to
their modelled time on the origin (``analytical`` layer costs at efficiency 1); each layer's share is scaled by
``(BW_o/BW_d)^γ · (clk_o/clk_d)^(1−γ) · (SM_o/SM_d)^(1−γ)`` with ``γ = 1 − 0.5·I/R`` if ``I ≤ R`` else ``0.5·R/I``,
``I`` the layer's FLOPs per byte and ``R`` the destination's peak FLOP/s per byte/s. The fixed overhead is kept.
Networks without a layer graph (DeepSpeech) use one ``gamma_default`` for the whole iteration if given, else are
unsupported. Destinations need SM count, clock and bandwidth (a clear error otherwise). With ``input_floor`` (default)
the scaled time per iteration is never below the input-pipeline floor of the ``analytical`` predictor (applications
whose runs are CPU-bound, at the thread count the origin answer was read at): a faster GPU does not decode faster.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from predictors.analytical import AnalyticalPredictor, check_specs, graph_name, per_iteration_table
from predictors.base import Predictor, register
from predictors.measured import MeasuredPredictor
from predictors.measurements import data_key
from predictors.networks import layer_costs, network
from sim.catalogue import gpu_models
from sim.model import INFEASIBLE, CapsimError, Config, GPUModel, JobSpec, VMType

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
class WavePredictor(Predictor):
    """Measured runs on ``origin`` scaled to any GPU with specs, layer by layer (module docstring)."""

    def __init__(self, origin: str = "M60", gamma_default: float | None = None, base: Predictor | None = None,
                 input_floor: bool = True):
        models = gpu_models()
        if origin not in models:
            raise CapsimError(f"predictor 'wave': unknown origin GPU {origin!r}: known models are {', '.join(models)}")
        if gamma_default is not None and not 0 <= gamma_default <= 1:
            raise CapsimError(f"predictor 'wave': gamma_default must lie in [0, 1], got {gamma_default}")
        self.origin = models[origin]
        self.gamma_default = gamma_default
        self.base = base if base is not None else MeasuredPredictor()
        if not isinstance(self.base, MeasuredPredictor):
            raise CapsimError("predictor 'wave': base must be a 'measured' predictor (it supplies the origin runs)")
        self._factor: dict[tuple, float] = {}
        self._floor = AnalyticalPredictor(data=self.base._data) if input_floor else None

    def factor(self, spec: JobSpec, gpus: int, dest: GPUModel) -> float | None:
        """Per-iteration time multiplier origin → ``dest`` for the spec's network at its per-GPU batch."""
        check_specs(dest)
        net = graph_name(spec.application)
        key = (net, spec.depth, spec.batch_size / gpus, dest.name)
        if key not in self._factor:
            if net is None:
                if self.gamma_default is None:
                    return None
                self._factor[key] = float(scale_factor(self.gamma_default, self.origin, dest))
            else:
                c = layer_costs(network(net, spec.depth if spec.application == "resnet" else None))
                b = spec.batch_size / gpus
                flops, bytes_ = c["flops"] * b, c["act"] * b + 12.0 * c["weights"]
                share = flops / (self.origin.fp32_tflops * 1e12) + bytes_ / (self.origin.bandwidth_gbs * 1e9)
                ridge = dest.fp32_tflops * 1e12 / (dest.bandwidth_gbs * 1e9)
                s = scale_factor(gamma(flops / bytes_, ridge), self.origin, dest)
                self._factor[key] = float((share * s).sum() / share.sum())
        return self._factor[key]

    def _origin_vm(self, gpus: int) -> VMType:
        return VMType(name=f"wave-origin-{self.origin.name}", gpu=self.origin, gpus=gpus, price_per_hour=0.0)

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        if gpus < 1 or gpus > vm.gpus:
            return f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        why = self.base.support(spec, self._origin_vm(gpus), gpus)
        if why is not None:
            return f"origin {self.origin.name}: {why}"
        if self.factor(spec, gpus, vm.gpu) is None:
            return f"no layer graph for {spec.application} and no gamma_default"
        return None

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        if self.support(spec, vm, gpus) is not None:
            return INFEASIBLE
        overhead, per_it, _ = self.base.answer(spec, self._origin_vm(gpus), gpus)
        per_it = per_it * self.factor(spec, gpus, vm.gpu)
        if self._floor is not None:
            cpu = "max" if self.base.cpu_threads == "best" else self.base.cpu_threads
            per_it = max(per_it, self._floor.input_time(spec.application, data_key(spec)[1], spec.batch_size, cpu))
        return overhead + spec.iterations * per_it

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        return per_iteration_table(self, specs, configs, affine=True)
