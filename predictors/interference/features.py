"""What the learned interference model knows of a job before it runs: features of its layer graph and of the GPU.

Per job (one iteration on one GPU): log10 of its FLOPs (forward and backward), of its parameters, of the bytes of its
layers' outputs, its arithmetic intensity (FLOPs over those bytes plus its weights' bytes, log10) and log10 of its
batch. Per GPU: log10 of its fp32 TFLOP/s and memory bandwidth, and the job's ideal compute time over its ideal
memory time there (log10: above 0 the job is compute-bound on that GPU). The costs per sample come from capsim's
layer graphs (``predictors.networks``: AlexNet, VGG-19, ResNet-50, the CIFAR ResNet) or, for Gavel's job types that
have none, from ``predictors/data/gavel/job_costs.csv`` (its header says which rows are estimates by hand).
"""

from __future__ import annotations

import csv
import math
from functools import cache
from importlib import resources

import numpy as np

from predictors.networks import F32, graph_depth, graph_name, network, parameters
from sim.model import GPUModel, JobSpec

__all__ = ["JOB_FEATURES", "GPU_FEATURES", "job_costs", "job_features", "gpu_features", "family"]

JOB_FEATURES = ("log_flops", "log_parameters", "log_activations", "log_intensity", "log_batch")
GPU_FEATURES = ("log_tflops", "log_bandwidth", "log_balance")


@cache
def _gavel_costs() -> dict[str, tuple[float, float, float, int | None]]:
    text = resources.files("predictors").joinpath("data", "gavel", "job_costs.csv").read_text(encoding="utf-8")
    rows = csv.DictReader([ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")])
    return {r["family"]: (float(r["flops"]), float(r["parameters"]), float(r["activations"]),
                          int(r["batch"]) if r["batch"] else None) for r in rows}


@cache
def _graph_costs(net: str, depth: int | None) -> tuple[float, float, float]:
    g = network(net, depth)
    layers = [g.nodes[n]["layer"] for n in g if g.nodes[n]["layer"] is not None]
    flops = sum(lay.flops_fwd + lay.flops_bwd for lay in layers)
    acts = sum(F32 * float(np.prod(lay.shape)) for lay in layers)
    return float(flops), parameters(g), float(acts)


def family(spec: JobSpec) -> str:
    """The job's network family: Gavel's job type without its batch, or the application."""
    return spec.application


def job_costs(spec: JobSpec) -> tuple[float, float, float, int] | None:
    """(FLOPs, parameters, activation bytes) per sample and the batch of one iteration, or None when capsim has
    neither a layer graph nor a row of ``job_costs.csv`` for the job's network."""
    net = graph_name(spec.application)
    if net is not None and not (spec.application == "resnet" and spec.depth is None):
        flops, params, acts = _graph_costs(net, graph_depth(spec))
        return flops, params, acts, spec.batch_size
    row = _gavel_costs().get(spec.application)
    if row is None:
        return None
    flops, params, acts, batch = row
    return flops, params, acts, batch or spec.batch_size


@cache
def job_features(spec: JobSpec) -> np.ndarray | None:
    """The job's features (``JOB_FEATURES``), or None when its costs are unknown."""
    costs = job_costs(spec)
    if costs is None:
        return None
    flops, params, acts, batch = costs
    moved = batch * acts + F32 * params
    return np.array([math.log10(batch * flops), math.log10(params), math.log10(batch * acts),
                     math.log10(batch * flops / moved), math.log10(batch)])


def gpu_features(job: np.ndarray, gpu: GPUModel) -> np.ndarray:
    """The GPU's features for a job (``GPU_FEATURES``): its speed, bandwidth, and the job's compute-to-memory time."""
    tflops, bandwidth = gpu.fp32_tflops, gpu.bandwidth_gbs
    balance = job[3] - math.log10(tflops * 1e12 / (bandwidth * 1e9))
    return np.array([math.log10(tflops), math.log10(bandwidth), balance])
