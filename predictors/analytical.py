"""Paleo-style analytical predictor: layer FLOPs and bytes over the GPU's peak, times a fitted efficiency.

Per iteration on each of ``n`` GPUs (data parallel, the job's batch size split evenly):
``t = Σ_layers (FLOPs / peak + bytes / bandwidth) / efficiency + fixed + all-reduce(gradient bytes)``, with parallel
branches combined by ``branch_overlap`` (0: kernels run one after another, the sum; 1: only the critical path).
The all-reduce of ``S = 4 × parameters`` bytes over links of ``interconnect_gbs`` GB/s is a ring
``2(n−1)/n · S/B`` or a tree ``2⌈log2 n⌉ · S/B``. The efficiency ("platform percent of peak") is fitted per
framework × GPU model together with ``fixed``, a per-iteration cost that does not shrink with the per-GPU batch
(kernel launches, framework and input pipeline), by least squares in relative error of
``measured time per iteration − all-reduce = fixed + modelled time at efficiency 1 / efficiency``, using at each measured (GPU count, batch size) only the runs at the fastest CPU-thread setting
(the model describes the GPU, not a starved input pipeline); ``efficiency_by="application"`` fits one per application
× framework × GPU instead. GPUs never measured use ``default_efficiency`` (default: the median over the measured GPUs
of the same framework, or application). Job runtime = iterations × t. Networks without a layer graph (DeepSpeech) are unsupported.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from predictors.base import Predictor, register
from predictors.measured import select_cpu
from predictors.measurements import NO_DEPTH, data_key, runs
from predictors.networks import NETWORKS, layer_costs, network, parameters, time_on_graph
from sim.catalogue import gpu_models
from sim.model import INFEASIBLE, CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["AnalyticalPredictor", "graph_name", "check_specs", "allreduce_time"]


def graph_name(application: str) -> str | None:
    """The layer graph answering for an application (the ResNet depth variants use ResNet-50's with fewer modules)."""
    return "resnet50" if application == "resnet" else application if application in NETWORKS else None


def check_specs(gpu: GPUModel) -> None:
    """A clear error for a GPU model without the specifications the analytical predictors need."""
    missing = [f for f in ("sms", "boost_mhz", "fp32_tflops", "bandwidth_gbs") if not getattr(gpu, f)]
    if missing:
        raise CapsimError(f"GPU model {gpu.name}: no specs for {', '.join(missing)}; add them to the GPU table (gpus.csv)")


def _cpu_sensitivity(d: pd.DataFrame) -> float:
    """Median over (GPU, GPU count, batch, depth) groups of (time per iteration at the fewest threads) / (fastest)."""
    tpi = d["runtime_s"] / d["iterations"]
    means = tpi.groupby([d["gpu"], d["gpus"], d["batch_size"], d["depth"], d["cpu_threads"]]).mean()
    ratios = [m.iloc[0] / m.min() for _, m in means.groupby(level=[0, 1, 2, 3]) if len(m) > 1]
    return float(np.median(ratios)) if ratios else 1.0


def _fit_efficiency(pairs: np.ndarray) -> tuple[float, float]:
    """(efficiency, fixed) minimising the relative error of ``y = fixed + ideal / efficiency`` over (ideal, y) pairs."""
    ideal, y = pairs[:, 0], pairs[:, 1]
    a = np.c_[np.ones(len(y)), ideal] / y[:, None]
    fixed, inv = np.linalg.lstsq(a, np.ones(len(y)), rcond=None)[0] if len(set(ideal)) > 1 else (0.0, -1.0)
    if fixed < 0 or inv <= 0:
        fixed, inv = 0.0, float(np.median(y / ideal))
    return float(1.0 / inv), float(fixed)


def allreduce_time(bytes_: float, gpus: int, link_gbs: float, algorithm: str) -> float:
    """Seconds to all-reduce ``bytes_`` across ``gpus`` GPUs over links of ``link_gbs`` GB/s."""
    if gpus <= 1:
        return 0.0
    steps = 2 * (gpus - 1) / gpus if algorithm == "ring" else 2 * math.ceil(math.log2(gpus))
    return steps * bytes_ / (link_gbs * 1e9)


@register("analytical")
class AnalyticalPredictor(Predictor):
    """Layer-graph FLOPs/bytes model with efficiencies fitted per framework × GPU (module docstring)."""

    def __init__(self, interconnect_gbs: float = 10.0, allreduce: str = "ring", branch_overlap: float = 0.0,
                 default_efficiency: float | None = None, efficiency_by: str = "framework",
                 cpu_threads: str | int | None = "max", data: pd.DataFrame | None = None):
        if allreduce not in ("ring", "tree"):
            raise CapsimError(f"predictor 'analytical': allreduce must be 'ring' or 'tree', got {allreduce!r}")
        if interconnect_gbs <= 0 or not 0 <= branch_overlap <= 1:
            raise CapsimError("predictor 'analytical': need interconnect_gbs > 0 and 0 <= branch_overlap <= 1")
        self.link, self.allreduce, self.overlap = float(interconnect_gbs), allreduce, float(branch_overlap)
        if efficiency_by not in ("framework", "application"):
            raise CapsimError(f"predictor 'analytical': efficiency_by must be 'framework' or 'application', got {efficiency_by!r}")
        self.default_efficiency, self.efficiency_by = default_efficiency, efficiency_by
        if cpu_threads not in ("max", None) and not (isinstance(cpu_threads, int) and cpu_threads > 0):
            raise CapsimError(f"predictor 'analytical': cpu_threads must be 'max', null or a positive integer, got {cpu_threads!r}")
        self.cpu_threads = cpu_threads
        self._data = data
        self._input: dict[tuple[str, str], tuple[float, int]] | None = None
        self._eff: dict[tuple[str, str], tuple[float, float]] | None = None
        self._cache: dict[tuple, float] = {}

    def ideal_time(self, net: str, depth: int | None, batch_per_gpu: float, gpu: GPUModel) -> float:
        """Seconds per iteration on one GPU at efficiency 1 (no all-reduce)."""
        key = (net, depth, batch_per_gpu, gpu.name)
        if key not in self._cache:
            g = network(net, depth)
            c = layer_costs(g)
            per_layer = (c["flops"] * batch_per_gpu / (gpu.fp32_tflops * 1e12)
                         + (c["act"] * batch_per_gpu + 12.0 * c["weights"]) / (gpu.bandwidth_gbs * 1e9))
            self._cache[key] = time_on_graph(g, dict(zip(c["name"], per_layer)), self.overlap)
        return self._cache[key]

    def comm_time(self, net: str, depth: int | None, gpus: int) -> float:
        return allreduce_time(4.0 * parameters(network(net, depth)), gpus, self.link, self.allreduce)

    def input_costs(self) -> dict[tuple[str, str], tuple[float, int]]:
        """(CPU seconds per sample, largest measured thread count) per input-bound (application, framework)."""
        if self._input is None:
            df = runs() if self._data is None else self._data
            c = df["runtime_s"] / df["iterations"] * df["cpu_threads"] / df["batch_size"]
            self._input = {}
            for (a, f), d in df.groupby(["application", "framework"]):
                if _cpu_sensitivity(d) >= 1.2:
                    self._input[(a, f)] = (float(c[d.index].min()), int(d["cpu_threads"].max()))
        return self._input

    def input_time(self, application: str, framework: str, batch: int, cpu: float | None) -> float:
        """Seconds per iteration the input pipeline needs (0 without a CPU count or a fitted cost)."""
        cost = self.input_costs().get((application, framework))
        if cost is None or cpu is None:
            return 0.0
        return batch * cost[0] / (cost[1] if cpu == "max" else float(cpu))

    def _group(self, application: str, framework: str) -> str:
        return framework if self.efficiency_by == "framework" else f"{application}/{framework}"

    def efficiencies(self) -> dict[tuple[str, str], tuple[float, float]]:
        """Fitted (efficiency, fixed s/iteration) per (framework or application/framework, GPU name)."""
        if self._eff is None:
            df = runs() if self._data is None else self._data
            gpus = gpu_models()
            ratios: dict[tuple[str, str], list[float]] = {}
            for (app, fw, depth), dd in df.groupby(["application", "framework", "depth"]):
                net = graph_name(app)
                if net is None or (net != "resnet50" and depth != NO_DEPTH):
                    continue
                floor = self.input_time(app, fw, 1, 1.0) * dd["batch_size"] / dd["cpu_threads"]
                dd = dd[floor < 0.8 * dd["runtime_s"] / dd["iterations"]]
                for (gname, n, b), d in select_cpu(dd, "best").groupby(["gpu", "gpus", "batch_size"]):
                    self._add_ratios(ratios, self._group(app, fw), net, depth, gpus[gname], int(n), int(b), d)
            self._eff = {k: _fit_efficiency(np.array(v)) for k, v in ratios.items() if v}
        return self._eff

    def _add_ratios(self, ratios: dict, group: str, net: str, depth: int, gpu: GPUModel, n: int, b: int,
                    d: pd.DataFrame) -> None:
        dep = None if depth == NO_DEPTH else int(depth)
        ideal = self.ideal_time(net, dep, b / n, gpu)
        per_it = (d["runtime_s"] / d["iterations"]).to_numpy(float) - self.comm_time(net, dep, n)
        ratios.setdefault((group, gpu.name), []).extend((ideal, y) for y in per_it[per_it > 0])

    def efficiency(self, spec: JobSpec, gpu: GPUModel) -> tuple[float, float]:
        """(efficiency, fixed seconds per iteration) of the spec's framework (or application) on ``gpu``."""
        _, fw, _ = data_key(spec)
        group = self._group(spec.application, fw)
        eff = self.efficiencies()
        if (group, gpu.name) in eff:
            return eff[(group, gpu.name)]
        same = [v for (g, _), v in eff.items() if g == group] or list(eff.values())
        fixed = float(np.median([v[1] for v in same]))
        if self.default_efficiency is not None:
            return float(self.default_efficiency), fixed
        return float(np.median([v[0] for v in same])), fixed

    def per_iteration(self, spec: JobSpec, gpu: GPUModel, gpus: int, cpu: str | float | None = "default") -> float:
        """Seconds per iteration: GPU time, all-reduce, and the input-pipeline floor at ``cpu`` threads."""
        net = graph_name(spec.application)
        depth = spec.depth if spec.application == "resnet" else None
        eff, fixed = self.efficiency(spec, gpu)
        t = self.ideal_time(net, depth, spec.batch_size / gpus, gpu) / eff + fixed + self.comm_time(net, depth, gpus)
        _, fw, _ = data_key(spec)
        return max(t, self.input_time(spec.application, fw, spec.batch_size, self.cpu_threads if cpu == "default" else cpu))

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        data_key(spec)
        if graph_name(spec.application) is None:
            return f"no layer graph for {spec.application} (known: {', '.join(NETWORKS)})"
        if gpus < 1 or gpus > vm.gpus:
            return f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        if spec.application == "resnet" and spec.depth is None:
            return "a ResNet variant needs its depth"
        check_specs(vm.gpu)
        return None

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int, cpu: str | float | None = "default") -> float:
        """Job seconds; ``cpu`` overrides the assumed CPU-thread count (for scoring runs made at a known count)."""
        if self.support(spec, vm, gpus) is not None:
            return INFEASIBLE
        return spec.iterations * self.per_iteration(spec, vm.gpu, gpus, cpu)

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        return per_iteration_table(self, specs, configs)


def per_iteration_table(pred: Predictor, specs: Sequence[JobSpec], configs: Sequence[Config],
                        affine: bool = False) -> np.ndarray:
    """Vectorised runtimes for predictors linear in iterations, one evaluation per distinct spec shape and config.

    ``affine``: the runtime is ``a + iterations × b`` (evaluated at 1 and 2 iterations), else ``iterations × b``.
    """
    index: dict[tuple, int] = {}
    rows = np.empty(len(specs), dtype=np.intp)
    firsts: list[JobSpec] = []
    for i, s in enumerate(specs):
        k = (s.application, s.framework, s.depth, s.batch_size)
        if k not in index:
            index[k] = len(firsts)
            firsts.append(s)
        rows[i] = index[k]

    def at(its: int) -> np.ndarray:
        table = [[pred.runtime(JobSpec(s.application, s.framework, its, s.batch_size, s.name, s.depth), c.vm, c.gpus)
                  for c in configs] for s in firsts]
        return np.array(table, dtype=float).reshape(len(firsts), len(configs))

    one = at(1)
    its = np.fromiter((s.iterations for s in specs), dtype=float, count=len(specs))
    with np.errstate(invalid="ignore"):
        slope = at(2) - one if affine else one
        out = slope[rows] * its[:, None] + (one - slope)[rows] if affine else slope[rows] * its[:, None]
    out[~np.isfinite(out)] = INFEASIBLE
    return out
