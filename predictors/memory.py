"""Does a training job fit in its GPUs' memory? The guard of the predictors that answer beyond the measurements.

Data-parallel training keeps a whole replica of the network on every GPU and gives each GPU ``⌈batch / GPUs⌉``
samples. Its footprint per GPU, in fp32, from the network's layer graph (``predictors.networks``):

``RESERVE_GIB + STATE_COPIES × 4 B × parameters + samples per GPU × peak activation bytes per sample``

- ``RESERVE_GIB`` (0.25 GiB): the CUDA context and the cuDNN/cuBLAS handles, which hold memory before any tensor.
- ``STATE_COPIES`` (3): the weights, their gradients and the momentum of SGD, the optimiser of the reference ImageNet
  trainers the runs used.
- Activations: the tensors a backward pass needs, kept from the forward pass — the input of every convolution, fully
  connected, batch-norm and max-pool layer, the output of every ReLU and of the loss — each tensor counted once
  however many layers need it (an add, a padding or an average pool needs none). The peak is read along the
  backward sweep: at layer i the kept tensors of the layers up to i plus the gradients in flight (of i's output and
  of its inputs); the largest over i. Workspaces and allocator slack are not counted: the estimate is what training
  cannot do without, so a configuration it refuses does not fit, while one near the edge it accepts may not.

``GPUModel.memory_gb`` is read as GiB per GPU (per die for the two-die K80 and M60 boards, as their rows are).

A measured run proves that its configuration fits, and vouches for others: with a footprint ``c + s × b``
(``c, s ≥ 0``), a run of ``b0`` samples per GPU that fitted in ``M0`` GiB proves that ``b`` samples fit in ``M`` GiB
whenever ``M ≥ M0 × max(1, b / b0)``. Runs vouch for the same application, framework and depth (for a variable depth,
also a deeper network's runs vouch for a shallower one). A configuration fits if the estimate is within the GPU's
memory or a run vouches for it; an application without a layer graph (DeepSpeech) fits only where a run vouches.

Validated on the shipped runs (``docs/predictors.md``, *GPU memory*): the estimate alone judges every measured run to
fit (the tightest at 90 % of its GPU's memory: ResNet-50/TensorFlow, 16 samples on the 2 GB Quadro P600), and it
refuses VGG-19 on the P600 at the batches measured elsewhere, which nobody ran there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from predictors.measurements import NO_DEPTH, data_key
from predictors.networks import F32, graph_depth, graph_name, network, parameters
from sim.catalogue import gpu_models
from sim.model import JobSpec, VMType

if TYPE_CHECKING:
    import pandas as pd

    from predictors.base import TrainablePredictor

__all__ = ["Footprint", "MemoryGuard", "footprint", "activation_bytes", "per_gpu_batch", "guard", "RESERVE_GIB",
           "STATE_COPIES", "GIB"]

GIB = 2.0 ** 30
RESERVE_GIB = 0.25
STATE_COPIES = 3
KEEPS_INPUT = frozenset({"conv", "fc", "bn", "maxpool", "loss"})
"""Layers whose backward pass needs their input (the weight gradient; batch-norm statistics; max-pool positions)."""
KEEPS_OUTPUT = frozenset({"relu", "loss"})
"""Layers whose backward pass needs their own output."""


def per_gpu_batch(batch: int, gpus: int) -> int:
    """Samples on the most loaded GPU when ``batch`` is split over ``gpus``."""
    return -(-int(batch) // int(gpus))


@cache
def activation_bytes(net: str, depth: int | None = None) -> float:
    """Peak bytes of activations and their gradients per sample over a training step (module docstring)."""
    g = network(net, depth)
    size = {n: float(np.prod(g.nodes[n]["layer"].shape)) for n in g if g.nodes[n]["layer"] is not None}
    size["input"] = float(np.prod(g.graph["input_shape"]))
    size["output"] = 0.0
    kept: set[str] = set()
    for n in g:
        layer = g.nodes[n]["layer"]
        if layer is None:
            continue
        if layer.kind in KEEPS_INPUT:
            kept.update(g.predecessors(n))
        if layer.kind in KEEPS_OUTPUT:
            kept.add(n)
    held = peak = 0.0
    for n in nx.topological_sort(g):
        held += size[n] if n in kept else 0.0
        if g.nodes[n]["layer"] is not None:
            peak = max(peak, held + size[n] + sum(size[p] for p in g.predecessors(n)))
    return F32 * peak


@dataclass(frozen=True)
class Footprint:
    """Estimated bytes per GPU: the reserve, the model state (weights, gradients, momentum), the activations."""

    reserve: float
    state: float
    activations: float

    @property
    def total(self) -> float:
        return self.reserve + self.state + self.activations

    def describe(self) -> str:
        return (f"{self.total / GIB:.2f} GiB ({self.state / GIB:.2f} weights, gradients and momentum, "
                f"{self.activations / GIB:.2f} activations, {self.reserve / GIB:.2f} CUDA context)")


def footprint(spec: JobSpec, gpus: int) -> Footprint | None:
    """The estimated footprint per GPU of ``spec`` on ``gpus`` GPUs, or None without a layer graph."""
    net = graph_name(spec.application)
    if net is None or (spec.application == "resnet" and spec.depth is None):
        return None
    depth = graph_depth(spec)
    state = STATE_COPIES * F32 * parameters(network(net, depth))
    acts = per_gpu_batch(spec.batch_size, gpus) * activation_bytes(net, depth)
    return Footprint(RESERVE_GIB * GIB, state, acts)


class MemoryGuard:
    """Judges configurations against the footprint estimate and the runs of one runs table (module docstring)."""

    def __init__(self, runs: pd.DataFrame):
        mem = {n: g.memory_gb for n, g in gpu_models().items()}
        per_gpu = -(-runs["batch_size"] // runs["gpus"])
        seen = runs.assign(per_gpu=per_gpu, memory=runs["gpu"].map(mem)).dropna(subset=["memory"])
        self.vouchers: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
        for (a, f, d), x in seen.groupby(["application", "framework", "depth"]):
            pairs = {(int(b), float(m)) for b, m in zip(x["per_gpu"], x["memory"])}
            self.vouchers[(str(a), str(f), int(str(d)))] = sorted(pairs)
        self._memo: dict[tuple, str | None] = {}

    def vouched(self, spec: JobSpec, memory_gb: float) -> tuple[float, tuple[int, float] | None]:
        """(the most samples per GPU the runs vouch for in ``memory_gb``, the run that vouches most: (samples per
        GPU, GiB)); (0, None) if none does."""
        a, f, d = data_key(spec)
        best: tuple[float, tuple[int, float] | None] = (0.0, None)
        for (a2, f2, d2), pairs in self.vouchers.items():
            if (a2, f2) != (a, f) or not (d2 == d or (d != NO_DEPTH and d2 != NO_DEPTH and d2 > d)):
                continue
            for b0, m0 in pairs:
                if m0 <= memory_gb and b0 * memory_gb / m0 > best[0]:
                    best = (b0 * memory_gb / m0, (b0, m0))
        return best

    def reason(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        """None if the job fits on ``gpus`` GPUs of ``vm``, else why not, in one line."""
        if gpus < 1:
            return None
        key = (data_key(spec), spec.batch_size, gpus, vm.gpu.name, vm.gpu.memory_gb)
        if key not in self._memo:
            self._memo[key] = self._reason(spec, vm, gpus)
        return self._memo[key]

    def _reason(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        mem = float(vm.gpu.memory_gb)
        b = per_gpu_batch(spec.batch_size, gpus)
        fp = footprint(spec, gpus)
        if fp is not None and fp.total <= mem * GIB:
            return None
        cap, run = self.vouched(spec, mem)
        if b <= cap:
            return None
        a, f, d = data_key(spec)
        what = f"{a}/{f}" + ("" if d == NO_DEPTH else f" depth {d}")
        where = f"{b} samples per GPU on a {vm.gpu.name} ({mem:g} GiB)"
        if fp is not None:
            return f"does not fit in GPU memory: {what} at {where} needs about {fp.describe()}"
        runs = (f"its runs vouch for at most {math.floor(cap)} (from {run[0]} per GPU in {run[1]:g} GiB)" if run
                else "no run of it had as little memory")
        return f"may not fit in GPU memory: {what} at {where}: {runs}, and it has no layer graph to estimate from"


_GUARDS: dict[str, MemoryGuard] = {}


def guard(predictor: TrainablePredictor) -> MemoryGuard:
    """The memory guard of a trainable predictor's training runs, built once per process and training data (by
    content hash) and shared by every predictor trained on them."""
    runs = predictor.training_runs()
    key = predictor.fingerprint_
    if key not in _GUARDS:
        if len(_GUARDS) >= 64:
            _GUARDS.pop(next(iter(_GUARDS)))
        _GUARDS[key] = MemoryGuard(runs)
    return _GUARDS[key]
