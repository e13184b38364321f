"""Layer graphs of the measured networks, built from the layer specs in ``predictors/data/networks/*.csv``.

Each graph is a networkx DiGraph from ``input`` to ``output``; a node is one layer with per-sample forward and
backward FLOPs and activation bytes, plus weight count. Multiply-adds count as two FLOPs; the backward pass of a conv
or FC layer is two multiply-add passes (input gradient and weight gradient). Bytes are fp32: forward reads the input
and weights and writes the output; backward reads the output gradient, the input and the weights and writes the input
and weight gradients. The residual shortcut of a ResNet module is a parallel branch into an ``add`` node.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

import networkx as nx
import numpy as np

from sim.model import CapsimError, JobSpec

__all__ = ["Layer", "network", "layer_costs", "parameters", "time_on_graph", "NETWORKS", "GRAPHS", "graph_name",
           "graph_depth", "conv_cost", "fc_cost"]

NETWORKS = ("alexnet", "vgg19", "resnet50", "resnet_cifar")
GRAPHS = {"alexnet": "alexnet", "vgg19": "vgg19", "resnet50": "resnet50", "resnet": "resnet_cifar"}
"""Application → layer graph (``resnet``: the variable-depth runs, a CIFAR-10 ResNet)."""
F32 = 4
INPUT = (3, 224, 224)
"""Input shape of a network whose CSV has no ``input`` row (``input,<side>,,,<channels>,`` sets it)."""


def graph_name(application: str) -> str | None:
    """The layer graph answering for an application, or None."""
    return GRAPHS.get(application)


def graph_depth(spec: JobSpec) -> int | None:
    """Modules per stage of the spec's network: its depth for the variable-depth ResNet, else the standard one."""
    return spec.depth if spec.application == "resnet" else None


@dataclass(frozen=True)
class Layer:
    """Per-sample costs of one layer (weights are per layer, not per sample)."""

    kind: str
    flops_fwd: float
    flops_bwd: float
    act_fwd: float
    act_bwd: float
    weights: float
    shape: tuple[int, int, int]


def conv_cost(c_in: int, h: int, w: int, k: int, s: int, p: int, c_out: int) -> Layer:
    """A k×k convolution with stride s and padding p from (c_in, h, w) to c_out channels."""
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    macs = ho * wo * c_out * k * k * c_in
    n_in, n_out = c_in * h * w, c_out * ho * wo
    return Layer("conv", 2.0 * macs, 4.0 * macs, F32 * (n_in + n_out), F32 * (2 * n_out + 2 * n_in),
                 k * k * c_in * c_out + c_out, (c_out, ho, wo))


def fc_cost(n_in: int, n_out: int) -> Layer:
    """A fully connected layer from n_in to n_out units."""
    return Layer("fc", 2.0 * n_in * n_out, 4.0 * n_in * n_out, F32 * (n_in + n_out), F32 * (2 * n_out + 2 * n_in),
                 n_in * n_out + n_out, (n_out, 1, 1))


def _elementwise(kind: str, shape: tuple[int, int, int], fwd: float, bwd: float, weights: float = 0) -> Layer:
    n = float(np.prod(shape))
    return Layer(kind, fwd * n, bwd * n, F32 * 2 * n, F32 * 3 * n, weights, shape)


def _pool(kind: str, shape: tuple[int, int, int], k: int, s: int, p: int) -> Layer:
    c, h, w = shape
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    n_in, n_out = c * h * w, c * ho * wo
    return Layer(kind, float(k * k * n_out), float(k * k * n_out + n_in), F32 * (n_in + n_out),
                 F32 * (2 * n_in + n_out), 0, (c, ho, wo))


def _rows(name: str) -> list[dict[str, str]]:
    if name not in NETWORKS:
        raise CapsimError(f"no layer graph for network {name!r}: known networks are {', '.join(NETWORKS)}")
    text = resources.files("predictors").joinpath("data", "networks", f"{name}.csv").read_text(encoding="utf-8")
    return list(csv.DictReader([ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]))


class _Builder:
    def __init__(self) -> None:
        self.g = nx.DiGraph()
        self.g.add_node("input", layer=None)
        self.n = 0

    def add(self, layer: Layer, after: str) -> str:
        self.n += 1
        name = f"{self.n}:{layer.kind}"
        self.g.add_node(name, layer=layer)
        self.g.add_edge(after, name)
        return name

    def bottleneck(self, at: str, shape: tuple[int, int, int], out: int, stride: int, project: bool
                   ) -> tuple[str, tuple]:
        c, h, w = shape
        mid = out // 4
        cur, s = at, shape
        for k, st, p, co, last in ((1, 1, 0, mid, False), (3, stride, 1, mid, False), (1, 1, 0, out, True)):
            conv = conv_cost(s[0], s[1], s[2], k, st, p, co)
            cur = self.add(conv, cur)
            s = conv.shape
            cur = self.add(_elementwise("bn", s, 5, 8, 2 * s[0]), cur)
            if not last:
                cur = self.add(_elementwise("relu", s, 1, 1), cur)
        short = at
        if project:
            sc = conv_cost(c, h, w, 1, stride, 0, out)
            short = self.add(sc, at)
            short = self.add(_elementwise("bn", sc.shape, 5, 8, 2 * out), short)
        add = self.add(_elementwise("add", s, 1, 1), cur)
        self.g.add_edge(short, add)
        return self.add(_elementwise("relu", s, 1, 1), add), s

    def basic(self, at: str, shape: tuple[int, int, int], out: int, stride: int) -> tuple[str, tuple]:
        """A basic module (3x3 conv, BN, ReLU, 3x3 conv, BN, add, ReLU) with an identity shortcut, zero-padded and
        subsampled (an elementwise node) where the width or the resolution changes."""
        cur, s = at, shape
        for st, last in ((stride, False), (1, True)):
            conv = conv_cost(s[0], s[1], s[2], 3, st, 1, out)
            cur = self.add(conv, cur)
            s = conv.shape
            cur = self.add(_elementwise("bn", s, 5, 8, 2 * s[0]), cur)
            if not last:
                cur = self.add(_elementwise("relu", s, 1, 1), cur)
        short = at if s == shape else self.add(_elementwise("pad", s, 1, 1), at)
        add = self.add(_elementwise("add", s, 1, 1), cur)
        self.g.add_edge(short, add)
        return self.add(_elementwise("relu", s, 1, 1), add), s


@cache
def network(name: str, depth: int | None = None) -> nx.DiGraph:
    """The layer graph of ``name``; for the ResNets, ``depth`` d (if given) puts d modules in every stage. The
    graph's ``input_shape`` attribute is the per-sample input (channels, height, width)."""
    b = _Builder()
    cur, shape = "input", INPUT
    b.g.graph["input_shape"] = shape
    for r in _rows(name):
        kind = r["type"]
        k, s, p = (int(r[c]) if r[c] else 0 for c in ("kernel", "stride", "pad"))
        out = int(r["out"]) if r["out"] else 0
        if kind == "input":
            shape = b.g.graph["input_shape"] = (out, k, k)
            continue
        if kind == "basic":
            blocks = depth if depth is not None else int(r["blocks"])
            for i in range(blocks):
                cur, shape = b.basic(cur, shape, out, s if i == 0 else 1)
            continue
        if kind == "conv":
            layer = conv_cost(shape[0], shape[1], shape[2], k, s, p, out)
        elif kind == "fc":
            layer = fc_cost(int(np.prod(shape)), out)
        elif kind in ("maxpool", "avgpool"):
            layer = _pool(kind, shape, k, s, p)
        elif kind == "relu":
            layer = _elementwise("relu", shape, 1, 1)
        elif kind == "bn":
            layer = _elementwise("bn", shape, 5, 8, 2 * shape[0])
        elif kind == "loss":
            c = shape[0]
            layer = Layer("loss", 4.0 * c - 1, c + 1.0, F32 * 2 * c, F32 * 2 * c, 0, shape)
        elif kind == "stage":
            blocks = depth if depth is not None else int(r["blocks"])
            for i in range(blocks):
                cur, shape = b.bottleneck(cur, shape, out, s if i == 0 else 1, i == 0)
            continue
        else:
            raise CapsimError(f"predictors/data/networks/{name}.csv: unknown layer type {kind!r}")
        cur = b.add(layer, cur)
        shape = layer.shape
    b.g.add_edge(cur, "output")
    b.g.nodes["output"]["layer"] = None
    return b.g


def layer_costs(g: nx.DiGraph) -> dict[str, np.ndarray]:
    """Arrays over the layers (topological order) of the graph: flops/act per sample (fwd+bwd), weights, kind."""
    layers = [(n, g.nodes[n]["layer"]) for n in nx.topological_sort(g) if g.nodes[n]["layer"] is not None]
    return {
        "name": np.array([n for n, _ in layers]),
        "flops": np.array([lay.flops_fwd + lay.flops_bwd for _, lay in layers]),
        "act": np.array([lay.act_fwd + lay.act_bwd for _, lay in layers]),
        "weights": np.array([float(lay.weights) for _, lay in layers]),
    }


def parameters(g: nx.DiGraph) -> float:
    """Trainable parameters of the network (what a data-parallel all-reduce moves, × 4 bytes)."""
    return float(sum(g.nodes[n]["layer"].weights for n in g if g.nodes[n]["layer"] is not None))


def time_on_graph(g: nx.DiGraph, times: dict[str, float], overlap: float) -> float:
    """Iteration time from per-layer times: the critical path plus ``1 − overlap`` of the time off it."""
    total = sum(times.values())
    if overlap <= 0:
        return total
    longest: dict[str, float] = {}
    for n in nx.topological_sort(g):
        prev = max((longest[p] for p in g.predecessors(n)), default=0.0)
        longest[n] = prev + times.get(n, 0.0)
    crit = longest["output"]
    return crit + (1 - overlap) * (total - crit)

