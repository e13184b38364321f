"""The shipped measurements (``predictors/data/polimi/runs.csv``) and how a job spec and a GPU map onto them."""

from __future__ import annotations

from functools import cache
from importlib import resources

import numpy as np
import pandas as pd

from sim.catalogue import gpu_models
from sim.model import CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["runs", "applications", "data_key", "measured_gpu_name", "row_specs", "row_configs", "FRAMEWORKS",
           "NO_DEPTH"]

FRAMEWORKS = ("pytorch", "tensorflow")
NO_DEPTH = -1


@cache
def runs() -> pd.DataFrame:
    """Every measured run, one row each; ``depth`` is ``-1`` for the standard network. Do not mutate."""
    with resources.files("predictors").joinpath("data", "polimi", "runs.csv").open("r", encoding="utf-8") as f:
        df = pd.read_csv(f)
    df["depth"] = df["depth"].fillna(NO_DEPTH).astype(int)
    df["application"] = df["application"].astype(str)
    df["framework"] = df["framework"].astype(str)
    df["gpu"] = df["gpu"].astype(str)
    df["gflops"] = df["gpu"].map({n: g.measured_gflops for n, g in gpu_models().items()}).astype(float)
    return df


@cache
def applications() -> dict[str, tuple[str, ...]]:
    """Measured application → frameworks measured (``unknown`` where the source does not say)."""
    df = runs()
    return {str(a): tuple(sorted(set(g["framework"]))) for a, g in df.groupby("application")}


def data_key(spec: JobSpec) -> tuple[str, str, int]:
    """The (application, framework, depth) whose runs describe ``spec``; a clear error for unknown ones.

    A run table may label an application's framework ``unknown`` (a source that does not say); such runs answer
    for either framework.
    """
    apps = applications()
    if spec.application not in apps:
        raise CapsimError(
            f"job {spec.name or spec}: unknown application {spec.application!r}: the measurements cover "
            f"{', '.join(sorted(apps))}; set JobSpec.application to one of them"
        )
    if spec.framework not in FRAMEWORKS:
        raise CapsimError(
            f"job {spec.name or spec.application}: unknown framework {spec.framework!r}: "
            f"use one of {', '.join(FRAMEWORKS)}"
        )
    fws = apps[spec.application]
    fw = spec.framework if spec.framework in fws else ("unknown" if "unknown" in fws else spec.framework)
    return spec.application, fw, NO_DEPTH if spec.depth is None else int(spec.depth)


@cache
def _measured_names() -> frozenset[str]:
    return frozenset(runs()["gpu"])


def measured_gpu_name(gpu: GPUModel) -> str | None:
    """Name under which ``gpu`` appears in the measurements (by name, else by ``measured_gflops``), or None."""
    names = _measured_names()
    if gpu.name in names:
        return gpu.name
    if gpu.measured_gflops is not None:
        for n, g in gpu_models().items():
            if g.measured_gflops is not None and np.isclose(g.measured_gflops, gpu.measured_gflops) and n in names:
                return n
    return None


def row_specs(rows: pd.DataFrame) -> list[JobSpec]:
    """One job spec per row of a runs table (application, framework, iterations, batch size, depth)."""
    return [JobSpec(a, f, int(i), int(b), depth=None if d == NO_DEPTH else int(d))
            for a, f, i, b, d in zip(rows["application"], rows["framework"], rows["iterations"], rows["batch_size"],
                                     rows["depth"])]


def row_configs(rows: pd.DataFrame) -> list[Config]:
    """One configuration per row of a runs table: ``gpus`` GPUs of a VM with exactly that many of the row's GPU."""
    models = gpu_models()
    vms: dict[tuple[str, int], VMType] = {}
    out = []
    for g, n in zip(rows["gpu"], rows["gpus"]):
        key = (str(g), int(n))
        if key not in vms:
            vms[key] = VMType(name=f"run-{g}x{n}", gpu=models[key[0]], gpus=key[1], price_per_hour=0.0)
        out.append(Config(vms[key], key[1]))
    return out
