"""Paleo-style analytical predictor: layer FLOPs and bytes over the GPU's peak, times a fitted efficiency.

Per iteration on each of ``n`` GPUs (data parallel, the job's batch size split evenly):
``t = Σ_layers (FLOPs / peak + bytes / bandwidth) / efficiency + fixed + all-reduce(gradient bytes)``, with parallel
branches combined by ``branch_overlap`` (0: kernels run one after another, the sum; 1: only the critical path).
The all-reduce of ``S = 4 × parameters`` bytes over links of ``interconnect_gbs`` GB/s is a ring
``2(n−1)/n · S/B`` or a tree ``2⌈log2 n⌉ · S/B``. The efficiency ("platform percent of peak") is fitted per
framework × GPU model together with ``fixed``, a per-iteration cost that does not shrink with the per-GPU batch
(kernel launches, framework), by least squares in relative error of ``measured time per iteration − all-reduce =
fixed + modelled time at efficiency 1 / efficiency``, using at each measured (GPU count, batch size) only the runs at
the fastest CPU-thread setting and leaving out input-bound runs (the model describes the GPU, not a starved input
pipeline); ``efficiency_by="application"`` fits one per application × framework × GPU instead. GPUs never measured
use ``default_efficiency`` (default: the median over the measured GPUs of the same group).

The input pipeline is a floor: ``t = max(t_gpu, input)``, for the applications whose runs are CPU-bound (the fewest
threads at least 20 % slower than the fastest setting in the median group). ``input = c × samples / threads``, with
``c`` the smallest ``time per iteration × threads / samples`` over the runs and ``samples`` the global batch or the
per-GPU batch, whichever makes ``c`` agree better across GPU counts (PyTorch's loader feeds all GPUs from one pool of
workers; TensorFlow's benchmark pipeline feeds each GPU). Job runtime = iterations × t. Networks: the layer graphs of
``predictors.networks``; the variable-depth ``resnet`` runs are the CIFAR-10 ResNet with ``depth`` modules per stage.
DeepSpeech has no layer graph: unsupported. A job that would not fit in its GPUs' memory (``predictors.memory``) is
unsupported, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd

from predictors.base import TrainablePredictor, register
from predictors.measured import select_cpu
from predictors.measurements import NO_DEPTH, data_key, row_configs, row_specs
from predictors.memory import guard
from predictors.networks import GRAPHS, graph_depth, graph_name, layer_costs, network, parameters, time_on_graph
from predictors.structured import input_scaling
from predictors.uncertainty.provenance import QuestionSources
from sim.catalogue import gpu_models
from sim.model import INFEASIBLE, CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["AnalyticalPredictor", "graph_name", "graph_depth", "check_specs", "allreduce_time", "InputCost"]

InputCost = tuple[float, int, bool]
"""(CPU seconds per sample, largest measured thread count, whether the samples are per GPU)."""


def check_specs(gpu: GPUModel) -> None:
    """A clear error for a GPU model without the specifications the analytical predictors need."""
    missing = [f for f in ("sms", "boost_mhz", "fp32_tflops", "bandwidth_gbs") if not getattr(gpu, f)]
    if missing:
        raise CapsimError(f"GPU model {gpu.name}: no specs for {', '.join(missing)}; "
                          "add them to the GPU table (gpus.csv)")


def _cpu_sensitivity(d: pd.DataFrame) -> float:
    """Median over (GPU, GPU count, batch, depth) groups of (time per iteration at the fewest threads) / (fastest)."""
    tpi = d["runtime_s"] / d["iterations"]
    means = tpi.groupby([d["gpu"], d["gpus"], d["batch_size"], d["depth"], d["cpu_threads"]]).mean()
    ratios = [m.iloc[0] / m.min() for _, m in means.groupby(level=[0, 1, 2, 3]) if len(m) > 1]
    return float(np.median(ratios)) if ratios else 1.0


def _input_cost(d: pd.DataFrame) -> InputCost:
    """The input cost of one CPU-bound application (module docstring), per sample of the global or per-GPU batch."""
    scaling = input_scaling(d)
    per_gpu = scaling[True][1] < scaling[False][1]
    return scaling[per_gpu][0], int(d["cpu_threads"].max()), per_gpu


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
class AnalyticalPredictor(QuestionSources, TrainablePredictor):
    """Layer-graph FLOPs/bytes model with efficiencies fitted per framework × GPU (module docstring).

    ``interconnect_gbs``: the links' bandwidth (GB/s); ``allreduce``: ``ring`` or ``tree``; ``branch_overlap``: how
    far parallel branches overlap (0: they add, 1: the longest counts); ``default_efficiency``: the efficiency of a GPU
    never measured (None: the median of the measured ones in its group); ``efficiency_by``: fit it per ``framework`` or
    per ``application``; ``cpu_threads``: the CPU threads a job gets for its input pipeline (``max``, a number, or
    None for no input floor)."""

    fit_params = ("interconnect_gbs", "allreduce", "branch_overlap", "efficiency_by")

    def __init__(self, interconnect_gbs: float = 10.0, allreduce: str = "ring", branch_overlap: float = 0.0,
                 default_efficiency: float | None = None, efficiency_by: str = "framework",
                 cpu_threads: str | int | None = "max"):
        if allreduce not in ("ring", "tree"):
            raise CapsimError(f"predictor 'analytical': allreduce must be 'ring' or 'tree', got {allreduce!r}")
        if efficiency_by not in ("framework", "application"):
            raise CapsimError("predictor 'analytical': efficiency_by must be 'framework' or 'application', "
                              f"got {efficiency_by!r}")
        if cpu_threads not in ("max", None) and not (isinstance(cpu_threads, int) and cpu_threads > 0):
            raise CapsimError("predictor 'analytical': cpu_threads must be 'max', null or a positive integer, "
                              f"got {cpu_threads!r}")
        self.interconnect_gbs, self.allreduce = interconnect_gbs, allreduce
        self.branch_overlap, self.default_efficiency = branch_overlap, default_efficiency
        self.efficiency_by, self.cpu_threads = efficiency_by, cpu_threads
        self.check_param("interconnect_gbs", float, above=0.0)
        self.check_param("branch_overlap", float, low=0.0, high=1.0)
        self.check_param("default_efficiency", float, above=0.0, optional=True)
        self._ideal: dict[tuple, float] = {}

    def ideal_time(self, net: str, depth: int | None, batch_per_gpu: float, gpu: GPUModel) -> float:
        """Seconds per iteration on one GPU at efficiency 1 (no all-reduce)."""
        key = (net, depth, batch_per_gpu, gpu.name)
        if key not in self._ideal:
            g = network(net, depth)
            c = layer_costs(g)
            per_layer = (c["flops"] * batch_per_gpu / (gpu.fp32_tflops * 1e12)
                         + (c["act"] * batch_per_gpu + 12.0 * c["weights"]) / (gpu.bandwidth_gbs * 1e9))
            self._ideal[key] = time_on_graph(g, dict(zip(c["name"], per_layer)), self.branch_overlap)
        return self._ideal[key]

    def comm_time(self, net: str, depth: int | None, gpus: int) -> float:
        return allreduce_time(4.0 * parameters(network(net, depth)), gpus, self.interconnect_gbs, self.allreduce)

    def input_costs(self) -> dict[tuple[str, str], InputCost]:
        """The input cost of every input-bound (application, framework) of the training runs."""
        def make() -> dict[tuple[str, str], InputCost]:
            out = {}
            for (a, f), d in self.training_runs().groupby(["application", "framework"]):
                if _cpu_sensitivity(d) >= 1.2:
                    out[(str(a), str(f))] = _input_cost(d)
            return out

        return self.shared("input", make)

    def input_time(self, application: str, framework: str, batch: int, gpus: int, cpu: str | float | None) -> float:
        """Seconds per iteration the input pipeline needs (0 without a CPU count or a fitted cost)."""
        cost = self.input_costs().get((application, framework))
        if cost is None or cpu is None:
            return 0.0
        samples = batch / gpus if cost[2] else batch
        return samples * cost[0] / (cost[1] if cpu == "max" else float(cpu))

    def _group(self, application: str, framework: str) -> str:
        return framework if self.efficiency_by == "framework" else f"{application}/{framework}"

    def efficiencies(self) -> dict[tuple[str, str], tuple[float, float]]:
        """Fitted (efficiency, fixed s/iteration) per (framework or application/framework, GPU name)."""
        return self.shared("efficiency", self._fit_efficiencies)

    def _fit_efficiencies(self) -> dict[tuple[str, str], tuple[float, float]]:
        gpus = gpu_models()
        ratios: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for key, dd in self.training_runs().groupby(["application", "framework", "depth"]):
            app, fw, depth = cast(tuple[str, str, int], key)  # pandas-stubs types a group key as Hashable
            net = graph_name(str(app))
            if net is None or (app != "resnet" and depth != NO_DEPTH):
                continue
            floor = np.array([self.input_time(str(app), str(fw), b, n, c)
                              for b, n, c in zip(dd["batch_size"], dd["gpus"], dd["cpu_threads"])])
            dd = dd[floor < 0.8 * dd["runtime_s"] / dd["iterations"]]
            dep = None if depth == NO_DEPTH else int(depth)
            for cell, d in select_cpu(dd, "best").groupby(["gpu", "gpus", "batch_size"]):
                gname, n, b = cast(tuple[str, int, int], cell)  # pandas-stubs types a group key as Hashable
                ideal = self.ideal_time(net, dep, b / n, gpus[gname])
                per_it = (d["runtime_s"] / d["iterations"]).to_numpy(float) - self.comm_time(net, dep, int(n))
                ratios.setdefault((self._group(str(app), str(fw)), gname), []).extend(
                    (ideal, y) for y in per_it[per_it > 0])
        return {k: _fit_efficiency(np.array(v)) for k, v in ratios.items() if v}

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

    def per_iteration(self, spec: JobSpec, gpu: GPUModel, gpus: int, cpu: str | float | None) -> float:
        """Seconds per iteration: GPU time, all-reduce, and the input-pipeline floor at ``cpu`` threads."""
        net = graph_name(spec.application)
        assert net is not None
        depth = graph_depth(spec)
        eff, fixed = self.efficiency(spec, gpu)
        t = self.ideal_time(net, depth, spec.batch_size / gpus, gpu) / eff + fixed + self.comm_time(net, depth, gpus)
        _, fw, _ = data_key(spec)
        return max(t, self.input_time(spec.application, fw, spec.batch_size, gpus, cpu))

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        """The reason the model cannot answer, or the job would not fit in its GPUs' memory; None if supported."""
        return self.model_support(spec, vm, gpus) or guard(self).reason(spec, vm, gpus)

    def model_support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        """The reason the model cannot answer (no layer graph, GPU count, specs), memory aside; None if it can."""
        data_key(spec)
        if graph_name(spec.application) is None:
            return f"no layer graph for {spec.application} (known: {', '.join(GRAPHS)})"
        if gpus < 1 or gpus > vm.gpus:
            return f"{gpus} GPUs requested on {vm.name}, which has {vm.gpus}"
        if spec.application == "resnet" and spec.depth is None:
            return "a ResNet variant needs its depth"
        check_specs(vm.gpu)
        return None

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        if self.support(spec, vm, gpus) is not None:
            return INFEASIBLE
        return spec.iterations * self.per_iteration(spec, vm.gpu, gpus, self.cpu_threads)

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        return per_iteration_table(self, specs, configs)

    def predict_runs(self, rows: pd.DataFrame) -> np.ndarray:
        """Each row at its own CPU-thread count (runs that did run: no memory question)."""
        out = np.full(len(rows), np.nan)
        for i, (s, c, cpu) in enumerate(zip(row_specs(rows), row_configs(rows), rows["cpu_threads"])):
            if self.model_support(s, c.vm, c.gpus) is None:
                out[i] = s.iterations * self.per_iteration(s, c.vm.gpu, c.gpus, float(cpu))
        return out


def per_iteration_table(pred: AnalyticalPredictor, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
    """Vectorised runtimes ``iterations × per_iteration``: one evaluation per distinct spec shape and configuration,
    the same product as ``runtime``."""
    index: dict[tuple, int] = {}
    rows = np.empty(len(specs), dtype=np.intp)
    firsts: list[JobSpec] = []
    for i, s in enumerate(specs):
        shape = (s.application, s.framework, s.depth, s.batch_size)
        if shape not in index:
            index[shape] = len(firsts)
            firsts.append(s)
        rows[i] = index[shape]
    per_it = np.full((len(firsts), len(configs)), INFEASIBLE)
    for j, s in enumerate(firsts):
        for k, c in enumerate(configs):
            if pred.support(s, c.vm, c.gpus) is None:
                per_it[j, k] = pred.per_iteration(s, c.vm.gpu, c.gpus, pred.cpu_threads)
    its = np.fromiter((s.iterations for s in specs), dtype=float, count=len(specs))
    out = its[:, None] * per_it[rows]
    out[~np.isfinite(out)] = INFEASIBLE
    return out
