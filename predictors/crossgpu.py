"""Cross-GPU scaling of measured throughputs by GPU specifications, calibrated on the GPUs that were measured.

A model's speed on a GPU is taken to follow a power law of two datasheet figures, the same for every model::

    speed(model, gpu) = c_model × tensor_tflops(gpu)^a × bandwidth_gbs(gpu)^b

``tensor_tflops`` is the dense FP16 tensor-core peak where the GPU has tensor cores (training runs its matrix work
there, in TF32 or mixed precision), else the FP32 peak (P100, K80). A measured rate on a reference GPU ``r`` scales to
any GPU ``d`` with specs by ``(tensor_d/tensor_r)^a × (bw_d/bw_r)^b``; the model's constant cancels. The exponents ``a``
and ``b`` are fitted by least squares in log space, with one intercept per model, on the **peak single-GPU samples per
second** (the best of batch size × rate over the batch sizes measured on one GPU) of every model measured on two or more
GPUs of the shipped tables (``CALIBRATION``). Measurements of one network on one dataset count as one model across
tables (``SAME_MODEL``: ElasticFlow's ``resnet50``, Pollux's ``imagenet`` and Gavel's ResNet-50 are ResNet-50 on
ImageNet).

``leave_one_gpu_out`` states the error: each measured GPU in turn is held out, the exponents refitted on the others,
and each model measured on it predicted from the remaining measured GPU nearest in speed (what the ``cloud``
predictor does for a GPU nobody measured). ``capsim predict crossgpu`` prints the tables.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np

from sim.catalogue import gpu_models
from sim.model import CapsimError, GPUModel

__all__ = ["SAME_MODEL", "CALIBRATION", "FEATURES", "DEFAULT_FEATURES", "Scaling", "model_of", "peak_speeds",
           "fit_scaling", "leave_one_gpu_out", "default_scaling", "format_table"]

SAME_MODEL: Mapping[str, str] = {
    "resnet50": "ResNet-50", "imagenet": "ResNet-50", "ResNet-50": "ResNet-50",
    "cifar10": "ResNet-18", "ResNet-18": "ResNet-18",
    "deepspeech2": "DeepSpeech2",
    "bert": "BERT-like", "Transformer": "BERT-like",
}
"""Application names of the shipped tables → the model they measure, where tables name one model differently.
Pollux's ``cifar10`` is ResNet-18 on CIFAR-10, as Gavel's ResNet-18. ``BERT-like`` groups ElasticFlow's ``bert``,
Pollux's ``bert`` (fine-tuning on SQuAD) and Gavel's Transformer (translation): different workloads, grouped only to
test how far one transformer's speed tells another's (``leave_one_gpu_out``); they calibrate nothing."""

CALIBRATION: tuple[str, ...] = ("ResNet-50", "ResNet-18", "DeepSpeech2", "LM", "CycleGAN", "A3C")
"""The models the exponents are fitted on: every model of the shipped tables measured on two GPUs or more with the
same network and data on each (so not ``BERT-like``), except Gavel's Recommendation, which is not GPU-bound (its V100
is measured at half its P100's speed, 23,278 against 45,453 samples/s)."""

FEATURES: Mapping[str, tuple[str, ...]] = {
    "tensor+bandwidth": ("tensor_tflops", "bandwidth_gbs"),
    "tensor": ("tensor_tflops",),
    "fp32+bandwidth": ("fp32_tflops", "bandwidth_gbs"),
    "fp32": ("fp32_tflops",),
    "bandwidth": ("bandwidth_gbs",),
}
"""The datasheet figures a scaling may use; ``tensor+bandwidth`` is the one the ``cloud`` predictor uses (the others
are compared in ``docs/predictors.md``)."""

DEFAULT_FEATURES = "tensor+bandwidth"

_JOB = re.compile(r"^(.*) \(batch size (\d+)\)$")


def model_of(job_type: str) -> tuple[str, int]:
    """(model, batch size) of a table's job type: ``"imagenet (batch size 3200)"`` → ``("ResNet-50", 3200)``; a type
    named without a batch size (Gavel's ``A3C``) has batch 1."""
    m = _JOB.match(job_type)
    app, batch = (m.group(1), int(m.group(2))) if m else (job_type, 1)
    return SAME_MODEL.get(app, app), batch


def peak_speeds(rates: Mapping[tuple[str, str, int], float]) -> dict[tuple[str, str], float]:
    """``{(model, GPU model): peak single-GPU samples/s}`` over the batch sizes measured on one GPU."""
    out: dict[tuple[str, str], float] = {}
    for (gpu, job_type, n), rate in rates.items():
        if n != 1 or not rate > 0:
            continue
        model, batch = model_of(job_type)
        key = (model, gpu)
        out[key] = max(out.get(key, 0.0), rate * batch)
    return out


@dataclass(frozen=True)
class Scaling:
    """A fitted power law ``speed ∝ Π spec^exponent`` over ``features`` (datasheet columns of ``sim/data/gpus.csv``)."""

    features: tuple[str, ...]
    exponents: tuple[float, ...]
    models: tuple[str, ...] = ()
    """The models it was fitted on."""

    def log_speed(self, g: GPUModel) -> float:
        """log of the GPU's relative speed (the model's constant left out)."""
        return sum(e * math.log(_spec(g, f)) for f, e in zip(self.features, self.exponents))

    def factor(self, origin: GPUModel, dest: GPUModel) -> float:
        """Speed on ``dest`` over speed on ``origin``: a rate measured on ``origin`` times this is the rate on
        ``dest`` (a runtime divides by it)."""
        return math.exp(self.log_speed(dest) - self.log_speed(origin))

    def describe(self) -> str:
        return " × ".join(f"{f}^{e:.2f}" for f, e in zip(self.features, self.exponents))


def _spec(g: GPUModel, feature: str) -> float:
    v = (g.fp16_tensor_tflops or g.fp32_tflops) if feature == "tensor_tflops" else getattr(g, feature)
    if v is None or not v > 0:
        raise CapsimError(f"GPU {g.name!r} has no {feature} in sim/data/gpus.csv; cross-GPU scaling needs it")
    return float(v)


def fit_scaling(speeds: Mapping[tuple[str, str], float], features: Iterable[str] = FEATURES[DEFAULT_FEATURES],
                models: Iterable[str] = CALIBRATION, gpus: Mapping[str, GPUModel] | None = None) -> Scaling:
    """Least-squares exponents of ``log speed = c_model + Σ e_f log spec_f`` over the ``models`` measured on two or
    more GPUs in ``speeds``."""
    gpus = gpus or gpu_models()
    features = tuple(features)
    by_model: dict[str, list[tuple[str, float]]] = {}
    for (model, g), s in sorted(speeds.items()):
        if model in models and g in gpus:
            by_model.setdefault(model, []).append((g, s))
    used = [m for m in sorted(by_model) if len(by_model[m]) >= 2]
    rows, ys = [], []
    for i, m in enumerate(used):
        for g, s in by_model[m]:
            onehot = [1.0 if j == i else 0.0 for j in range(len(used))]
            rows.append(onehot + [math.log(_spec(gpus[g], f)) for f in features])
            ys.append(math.log(s))
    if len(rows) <= len(used) + len(features) - 1:
        raise CapsimError(f"cross-GPU scaling: too few measurements to fit {len(features)} exponents "
                          f"({len(rows)} speeds of {len(used)} models)")
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
    return Scaling(features, tuple(float(c) for c in coef[len(used):]), tuple(used))


def nearest(scaling: Scaling, dest: GPUModel, candidates: Iterable[GPUModel]) -> GPUModel | None:
    """The candidate GPU whose speed under ``scaling`` is closest to ``dest``'s (ties: by name)."""
    best = None
    for g in candidates:
        key = (abs(scaling.log_speed(g) - scaling.log_speed(dest)), g.name)
        if best is None or key < best[0]:
            best = (key, g)
    return best[1] if best is not None else None


def leave_one_gpu_out(speeds: Mapping[tuple[str, str], float], features: Iterable[str] = FEATURES[DEFAULT_FEATURES],
                      models: Iterable[str] = CALIBRATION) -> list[dict]:
    """For every measured GPU: refit the scaling without it, then predict each model measured on it and on another
    GPU from the nearest remaining one. One row per (model, held-out GPU): reference, measured and predicted peak
    samples/s, and the relative error predicted/measured − 1."""
    gpus = gpu_models()
    features = tuple(features)
    models = tuple(models)
    measured = sorted({g for _, g in speeds if g in gpus})
    out = []
    for held in measured:
        rest = {k: v for k, v in speeds.items() if k[1] != held}
        scaling = fit_scaling(rest, features, models, gpus)
        for (model, g), s in sorted(speeds.items()):
            if g != held:
                continue
            refs = [gpus[h] for (m, h), _ in rest.items() if m == model and h in gpus]
            ref = nearest(scaling, gpus[held], refs)
            if ref is None:
                continue
            pred = rest[(model, ref.name)] * scaling.factor(ref, gpus[held])
            out.append({"model": model, "held_out": held, "reference": ref.name, "measured": s, "predicted": pred,
                        "error": pred / s - 1.0, "calibrates": model in models})
    return out


@cache
def shipped_speeds() -> dict[tuple[str, str], float]:
    """Peak single-GPU speeds of every model in the shipped tables (ElasticFlow's A100 and T4, Gavel's)."""
    from predictors.throughput import elasticflow_table, gavel_table

    rates = dict(gavel_table().rates)
    rates.update(elasticflow_table().rates)
    return peak_speeds(rates)


@cache
def default_scaling() -> Scaling:
    """The scaling the ``cloud`` predictor uses: ``tensor+bandwidth`` fitted on ``CALIBRATION`` over the shipped
    tables."""
    return fit_scaling(shipped_speeds())


def format_table(rows: list[dict]) -> str:
    """Markdown: per model, each held-out GPU's error, and the mean absolute error."""
    lines = ["| model | held-out GPU ← reference | measured | predicted | error |", "|---|---|---|---|---|"]
    per_model: dict[str, list[float]] = {}
    for r in rows:
        lines.append(f"| {r['model']}{'' if r['calibrates'] else ' (not calibrating)'} | {r['held_out']} ← "
                     f"{r['reference']} | {r['measured']:,.1f} | {r['predicted']:,.1f} | {r['error']:+.0%} |")
        per_model.setdefault(r["model"], []).append(abs(r["error"]))
    lines += ["", "| model | GPUs | mean absolute error | worst |", "|---|---|---|---|"]
    for m, errs in per_model.items():
        lines.append(f"| {m} | {len(errs)} | {np.mean(errs):.0%} | {max(errs):.0%} |")
    return "\n".join(lines)


UNMEASURED = ("H100", "L40S", "A100-80GB", "A10", "A10G", "L4")
"""GPUs of the cloud catalogue that no shipped table measured (V100 and T4 were, for some models)."""


def compare_features(speeds: Mapping[tuple[str, str], float]) -> str:
    """Markdown: each candidate feature set's exponents, mean leave-one-GPU-out error over the calibrating models,
    and the speed it implies for the unmeasured GPUs relative to the A100-40GB."""
    gpus = gpu_models()
    head = "| features | exponents | mean abs. error | " + " | ".join(UNMEASURED) + " |"
    lines = [head, "|" + "---|" * (3 + len(UNMEASURED))]
    for name, feats in FEATURES.items():
        fit = fit_scaling(speeds, feats)
        errs = [abs(r["error"]) for r in leave_one_gpu_out(speeds, feats) if r["calibrates"]]
        ratios = " | ".join(f"{fit.factor(gpus['A100-40GB'], gpus[g]):.2f}" for g in UNMEASURED)
        lines.append(f"| `{name}` | {fit.describe()} | {np.mean(errs):.0%} | {ratios} |")
    return "\n".join(lines)
