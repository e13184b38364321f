"""The catalogues shipped as data files: GPU specifications, the paper's VM types and job types."""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from importlib import resources
from typing import Iterable, Mapping

from sim.model import CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["gpu_models", "gpu", "vm_types", "vm_type", "job_types", "configurations"]


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("sim").joinpath("data", name).read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return list(csv.DictReader(lines))


def _opt(value: str) -> float | None:
    return float(value) if value.strip() else None


@lru_cache(maxsize=None)
def gpu_models() -> dict[str, GPUModel]:
    """All GPU models with known specifications, by name."""
    out = {}
    for r in _rows("gpus.csv"):
        out[r["name"]] = GPUModel(
            name=r["name"],
            sms=int(r["sms"]),
            boost_mhz=float(r["boost_mhz"]),
            fp32_tflops=float(r["fp32_tflops"]),
            memory_gb=float(r["memory_gb"]),
            bandwidth_gbs=float(r["bandwidth_gbs"]),
            fp16_tensor_tflops=_opt(r["fp16_tensor_tflops"]),
            dies_per_board=int(r["dies_per_board"]),
            measured_gflops=_opt(r["measured_gflops"]),
        )
    return out


def gpu(name: str) -> GPUModel:
    """The GPU model called ``name``; a clear error lists the known ones otherwise."""
    models = gpu_models()
    if name not in models:
        raise CapsimError(f"unknown GPU model {name!r}: known models are {', '.join(sorted(models))}")
    return models[name]


@lru_cache(maxsize=None)
def vm_types() -> dict[str, VMType]:
    """The paper's VM catalogue, by VM type name, in catalogue order."""
    return {
        r["name"]: VMType(
            name=r["name"],
            gpu=gpu(r["gpu"]),
            gpus=int(r["gpus"]),
            price_per_hour=float(r["price_per_hour"]),
            boot_time=float(r["boot_time"]),
            provider=r["provider"],
        )
        for r in _rows("vm_catalogue.csv")
    }


def vm_type(name: str) -> VMType:
    types = vm_types()
    if name not in types:
        raise CapsimError(f"unknown VM type {name!r}: the catalogue has {', '.join(types)}")
    return types[name]


@lru_cache(maxsize=None)
def job_types() -> dict[str, JobSpec]:
    """The paper's job types J1–J6 as job specs (iterations = inputs × epochs / batch size, rounded up)."""
    return {
        r["name"]: JobSpec(
            application=r["application"],
            framework=r["framework"],
            iterations=math.ceil(int(r["inputs"]) * int(r["epochs"]) / int(r["batch_size"])),
            batch_size=int(r["batch_size"]),
            name=r["name"],
        )
        for r in _rows("job_types.csv")
    }


def configurations(types: Iterable[VMType], max_gpus: Mapping[str, int] | None = None) -> tuple[Config, ...]:
    """Every (VM type, GPU count) pair with 1..n_v GPUs, in catalogue order then GPU count; ``max_gpus`` raises a VM
    type's largest count (a job spread over several VMs of that type, a gang)."""
    caps = max_gpus or {}
    return tuple(Config(v, g) for v in types for g in range(1, max(v.gpus, caps.get(v.name, 0)) + 1))
