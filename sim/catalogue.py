"""The catalogues shipped as data files: GPU specifications, the paper's VM types and job types, and the cloud
catalogue (AWS, Azure and GCP GPU VM types with on-demand and spot list prices, each provider's billing rule)."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import NamedTuple

from sim.model import Billing, CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["gpu_models", "gpu", "vm_types", "vm_type", "job_types", "configurations", "Provider", "cloud_providers",
           "cloud_vm_types", "select_vm_types", "CLOUD_PRICES", "spot_variant", "with_spot", "SPOT_SUFFIX",
           "TRACE_GPUS", "trace_gpu"]

SPOT_SUFFIX = "-spot"
"""A spot variant's name is its on-demand type's name plus this suffix (``p4d.24xlarge-spot``)."""

CLOUD_PRICES = "clouds/vm_types.csv"
"""The shipped cloud price file, under ``sim/data`` (a verbatim copy of the source; see its README)."""


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("sim").joinpath("data", *name.split("/")).read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return list(csv.DictReader(lines))


def _opt(value: str) -> float | None:
    return float(value) if value.strip() else None


@cache
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


@cache
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
    """The VM type called ``name`` in the paper's catalogue, else in the cloud catalogue."""
    types = vm_types()
    if name in types:
        return types[name]
    cloud = cloud_vm_types()
    if name in cloud:
        return cloud[name]
    raise CapsimError(f"unknown VM type {name!r}: the catalogue has {', '.join(types)}, and the cloud catalogue "
                      f"{len(cloud)} types of {', '.join(cloud_providers())} (docs/clouds.md)")


class Provider(NamedTuple):
    """A cloud provider's billing rule and the boot time assumed for its VM types."""

    name: str
    billing: Billing
    boot_time: float


@cache
def cloud_providers() -> dict[str, Provider]:
    """The providers of the cloud catalogue, by name."""
    return {
        r["provider"]: Provider(r["provider"], Billing(float(r["billing_increment"]), float(r["billing_minimum"])),
                                float(r["boot_time"]))
        for r in _rows("clouds/providers.csv")
    }


@cache
def cloud_vm_types() -> dict[str, VMType]:
    """The cloud catalogue by VM type name, in file order: GPU VM types of AWS, Azure and GCP in one region each,
    with on-demand and spot list prices, billed by their provider's rule."""
    providers = cloud_providers()
    out = {}
    for r in _rows(CLOUD_PRICES):
        p = providers[r["provider"]]
        out[r["name"]] = VMType(
            name=r["name"],
            gpu=gpu(r["gpu"]),
            gpus=int(r["gpus"]),
            price_per_hour=float(r["price_per_hour"]),
            boot_time=p.boot_time,
            provider=p.name,
            billing=p.billing,
            spot_price_per_hour=_opt(r["spot_price_per_hour"]),
            region=r["region"],
        )
    return out


def _one_or_many(value: object) -> tuple | None:
    if value is None:
        return None
    return tuple(value) if isinstance(value, (list, tuple, set, frozenset)) else (value,)


def select_vm_types(provider: str | None = None, region: str | None = None, gpu: str | Iterable[str] | None = None,
                    gpus: int | Iterable[int] | None = None, boot_time: float | None = None) -> tuple[VMType, ...]:
    """The cloud catalogue's VM types matching every filter given (a provider, a region, GPU models, GPU counts), in
    catalogue order; ``boot_time`` replaces the provider's assumed boot time. A filter no type matches is an error
    naming what the catalogue has."""
    types = list(cloud_vm_types().values())
    where = []
    if provider is not None:
        if provider not in cloud_providers():
            raise CapsimError(f"unknown cloud provider {provider!r}: the cloud catalogue has "
                              f"{', '.join(cloud_providers())}")
        types = [v for v in types if v.provider == provider]
        where.append(f"of {provider}")
    if region is not None:
        regions = list(dict.fromkeys(v.region for v in types))
        if region not in regions:
            raise CapsimError(f"no VM type {' '.join(where) or 'in the cloud catalogue'} is in region {region!r}; "
                              f"the regions are {', '.join(regions)}")
        types = [v for v in types if v.region == region]
        where.append(f"in {region}")
    models = _one_or_many(gpu)
    if models is not None:
        have = list(dict.fromkeys(v.gpu.name for v in types))
        bad = [m for m in models if m not in have]
        if bad:
            raise CapsimError(f"no VM type {' '.join(where) or 'in the cloud catalogue'} has GPU "
                              f"{', '.join(map(repr, bad))}; the GPUs are {', '.join(have)}")
        types = [v for v in types if v.gpu.name in models]
        where.append(f"with {'/'.join(models)}")
    counts = _one_or_many(gpus)
    if counts is not None:
        have_n = sorted({v.gpus for v in types})
        types = [v for v in types if v.gpus in counts]
        if not types:
            raise CapsimError(f"no VM type {' '.join(where) or 'in the cloud catalogue'} has "
                              f"{' or '.join(map(str, counts))} GPUs; the GPU counts are {', '.join(map(str, have_n))}")
    if boot_time is not None:
        types = [replace(v, boot_time=float(boot_time)) for v in types]
    return tuple(types)


def spot_variant(vm: VMType, revocation_rate: float) -> VMType:
    """The same VM rented on the spot market: named ``<name>-spot``, priced at its spot price, revoked
    ``revocation_rate`` times per hour on average. A type without a spot price has no spot variant (an error)."""
    if vm.spot_price_per_hour is None:
        raise CapsimError(f"VM type {vm.name!r} has no spot price; give spot_price_per_hour to rent it spot")
    if not (isinstance(revocation_rate, (int, float)) and math.isfinite(revocation_rate) and revocation_rate >= 0):
        raise CapsimError(f"VM type {vm.name!r}: a spot revocation rate must be a number >= 0 per hour, got "
                          f"{revocation_rate!r}")
    return replace(vm, name=vm.name + SPOT_SUFFIX, price_per_hour=vm.spot_price_per_hour, spot=True,
                   revocation_rate=float(revocation_rate))


def with_spot(types: Iterable[VMType], revocation_rate: float | Mapping[str, float], only: bool = False
              ) -> tuple[VMType, ...]:
    """``types`` with a spot variant after each type that has a spot price (only the variants, and the types
    without a spot price, with ``only``). ``revocation_rate`` is one rate per hour for all, or a mapping from a VM
    type name or a GPU model name (the type's name first) to its rate, with ``default`` for the others."""
    out: list[VMType] = []
    for v in types:
        if not only or v.spot_price_per_hour is None:
            out.append(v)
        if v.spot_price_per_hour is None or v.spot:
            continue
        if isinstance(revocation_rate, Mapping):
            rate = next((revocation_rate[k] for k in (v.name, v.gpu.name, "default") if k in revocation_rate), None)
            if rate is None:
                raise CapsimError(f"spot: no revocation rate for VM type {v.name!r} ({v.gpu.name}); give one for "
                                  f"its name, its GPU model or 'default'")
        else:
            rate = revocation_rate
        out.append(spot_variant(v, rate))
    return tuple(out)


@cache
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


TRACE_GPUS: Mapping[str, tuple[str, float | None]] = {
    "V100M16": ("V100", 16.0),
    "V100M32": ("V100", 32.0),
    "A100-SXM4-80GB": ("A100-80GB", None),
    "A800-SXM4-80GB": ("A100-80GB", None),
    "H800": ("H100", None),
}
"""GPU names of production traces → (the catalogue model with the same datasheet compute and memory bandwidth, its
memory in GB if it differs). Alibaba's ``V100M16``/``V100M32`` are the 16 and 32 GB V100; the A800 and H800 are the
A100 and H100 sold with NVLink cut to 400 GB/s, the same chips otherwise (their interconnect is not modelled)."""


def trace_gpu(name: str) -> GPUModel:
    """The GPU model a production trace calls ``name``: the catalogue's, an alias of one (``TRACE_GPUS``, renamed so
    that a job's GPU-type constraint still tells them apart), or else a model whose specifications were never
    published (Alibaba's ``G1``–``G3``, Philly's GPUs): every figure NaN, so that nothing can scale to or from it."""
    models = gpu_models()
    if name in models:
        return models[name]
    if name in TRACE_GPUS:
        base, memory = TRACE_GPUS[name]
        model = models[base]
        return replace(model, name=name, memory_gb=model.memory_gb if memory is None else memory)
    nan = math.nan
    return GPUModel(name=name, sms=0, boost_mhz=nan, fp32_tflops=nan, memory_gb=nan, bandwidth_gbs=nan)
