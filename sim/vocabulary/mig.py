"""MIG (Multi-Instance GPU): the slices an A100 or H100 can be cut into, which layouts of slices are valid, and how
fast a training job runs on each slice (``docs/sharing.md``, "MIG slices"; data in ``sim/data/mig``).

A MIG GPU has 8 memory slices (0-7) and 7 compute slices. A slice (a GPU instance) of profile ``p`` takes a run of
``PROFILES[p].memory`` memory slices beginning at one of ``PROFILES[p].starts``; a layout is valid when no two of its
slices overlap (NVIDIA's placement rule, the same on A100-40GB, A100-80GB and H100-80GB). Profiles are named here by
compute slices, GPU-neutrally: ``1g``, ``1g2m`` (1 compute slice, 2 memory slices), ``2g``, ``3g``, ``4g``, ``7g``;
``Slice.label(gpu)`` gives NVIDIA's name on a GPU (``3g.20gb`` on an A100-40GB, ``3g.40gb`` on the 80-GB parts).

Speeds (``SliceSpeeds``) are fractions of the whole GPU's: MISO's measurements on an A100-40GB (8 models, nearest
batch size) and MIGPerf's on an A100-80GB (ResNet-50, BERT-base; used on the 80-GB parts and H100), 0 where the
measured job did not run on the slice (too little memory: MISO's reading of its missing cells). A job no table
measured runs at the per-profile median of MISO's measurements: an assumption, stated in the docs.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from statistics import median
from typing import Protocol

from sim.vocabulary.resources import GPUModel

__all__ = ["Profile", "PROFILES", "Slice", "Layout", "mig_capable", "layout_problem", "maximal_layouts",
           "parse_layout", "parse_label", "fits_beside", "SliceSpeeds", "slice_speeds", "profile_for_share"]


class _Spec(Protocol):
    """What the slice speeds read of a job spec (``sim.model.JobSpec``)."""

    @property
    def application(self) -> str: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def gpu_share(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Profile:
    """A GPU-instance profile: ``compute`` of the 7 compute slices, ``memory`` of the 8 memory slices, beginning at
    one of ``starts``."""

    key: str
    compute: int
    memory: int
    starts: tuple[int, ...]


PROFILES: dict[str, Profile] = {p.key: p for p in (
    Profile("1g", 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    Profile("1g2m", 1, 2, (0, 2, 4, 6)),
    Profile("2g", 2, 2, (0, 2, 4)),
    Profile("3g", 3, 4, (0, 4)),
    Profile("4g", 4, 4, (0,)),
    Profile("7g", 7, 8, (0,)),
)}
"""NVIDIA's placement table (MIG User Guide, ``nvidia-smi mig -lgipp``), by GPU-neutral key; the media-engine 1g
variant is left out."""

_NVIDIA = {"1g": (1, 1), "1g2m": (1, 2), "2g": (2, 2), "3g": (3, 4), "4g": (4, 4), "7g": (7, 8)}


def _gb_per_memory_slice(gpu: GPUModel) -> int:
    return 5 if gpu.memory_gb < 80 else 10


def mig_capable(gpu: GPUModel) -> bool:
    """Whether ``gpu`` can be partitioned into MIG slices (the A100s and H100s)."""
    return gpu.name.startswith(("A100", "H100"))


@dataclass(frozen=True, slots=True, order=True)
class Slice:
    """One slice of a MIG GPU: GPU ``device`` of its VM, profile ``profile`` (a ``PROFILES`` key) at memory slice
    ``start``."""

    device: int
    start: int
    profile: str

    @property
    def compute(self) -> int:
        return PROFILES[self.profile].compute

    def label(self, gpu: GPUModel | None = None) -> str:
        """``device/profile@start`` with NVIDIA's profile name on ``gpu`` (the neutral key without one)."""
        name = self.profile
        if gpu is not None:
            c, m = _NVIDIA[self.profile]
            name = f"{c}g.{m * _gb_per_memory_slice(gpu)}gb"
        return f"{self.device}/{name}@{self.start}"


def parse_label(label: str, gpu: GPUModel) -> Slice:
    """The slice a record names (``Slice.label(gpu)``: ``device/3g.20gb@4``)."""
    device, _, rest = label.partition("/")
    name, _, start = rest.partition("@")
    compute, _, memory = name.partition("g.")
    slices = int(memory.removesuffix("gb")) // _gb_per_memory_slice(gpu)
    key = next(k for k, cm in _NVIDIA.items() if cm == (int(compute), slices))
    return Slice(int(device), int(start), key)


Layout = tuple[tuple[str, int], ...]
"""One GPU's slices as ``(profile, start)`` pairs ordered by start; ``()``: the GPU is whole (MIG off)."""


def layout_problem(layout: Iterable[tuple[str, int]]) -> str | None:
    """Why ``layout`` is not a valid MIG layout of one GPU (an unknown profile, a start the profile may not take, two
    slices overlapping), or None if it is valid."""
    used = [False] * 8
    for item in layout:
        try:
            profile, start = item
        except (TypeError, ValueError):
            return f"expected (profile, start) pairs, found {item!r}"
        p = PROFILES.get(profile)
        if p is None:
            return f"unknown MIG profile {profile!r}; expected one of {list(PROFILES)}"
        if start not in p.starts:
            return f"profile {profile} may begin at memory slice {list(p.starts)}, not {start!r}"
        for m in range(start, start + p.memory):
            if used[m]:
                return f"{profile}@{start} overlaps another slice at memory slice {m}"
            used[m] = True
    return None


def fits_beside(layout: Layout, profile: str, start: int) -> bool:
    """Whether slice ``profile@start`` can be added to the valid ``layout``."""
    return layout_problem((*layout, (profile, start))) is None


def parse_layout(text: str) -> Layout:
    """A layout from ``"4g@0 2g@4 1g@6"`` (neutral keys), ordered by start."""
    out = []
    for part in text.split():
        profile, _, start = part.partition("@")
        out.append((profile, int(start)))
    return tuple(sorted(out, key=lambda s: s[1]))


@cache
def maximal_layouts() -> tuple[Layout, ...]:
    """The 78 maximal valid layouts (no further slice fits), from the shipped enumeration
    (``sim/data/mig/mig_valid_layouts.csv``), in neutral keys."""
    back = {f"{c}g.{m * 5}gb": key for key, (c, m) in _NVIDIA.items()}
    text = resources.files("sim").joinpath("data", "mig", "mig_valid_layouts.csv").read_text(encoding="utf-8")
    out = []
    for row in csv.DictReader(text.splitlines()):
        out.append(tuple((back[name], int(start)) for name, _, start in
                         (s.partition("@") for s in row["a100_40gb"].split())))
    return tuple(out)


def profile_for_share(share: float) -> str | None:
    """The smallest profile whose compute is at least ``share`` of a GPU (a fractional request, e.g. the Alibaba
    trace's ``gpu_milli`` / 1000), None for a share of a whole GPU or more."""
    if not share < 1.0:
        return None
    for key in ("1g", "2g", "3g", "4g"):
        if PROFILES[key].compute / 7 >= share - 1e-12:
            return key
    return "7g"


_MISO = {"resnet50": "resnet", "resnet": "resnet", "mobilenet": "mobilenet", "mobilenetv2": "mobilenet",
         "transformer": "transformer", "bert": "bert", "cyclegan": "cyclegan", "deepspeech": "deepspeech2",
         "deepspeech2": "deepspeech2", "gnn": "gnn", "embedding": "embedding"}
"""capsim application -> MISO's model (``miso_a100_40gb_mig_speeds.csv``)."""
_MIGPERF = {"resnet50": "resnet50", "bert": "bert-base"}
"""capsim application -> MIGPerf's model (``migperf_a100_80gb_train.csv``, A100-80GB)."""


class SliceSpeeds:
    """How fast a job runs on a slice, as a fraction of its speed on the whole GPU (module docstring); one table,
    which the engine runs jobs by and the policies are shown (``Snapshot.mig``)."""

    def __init__(self) -> None:
        self._miso = _read("miso_a100_40gb_mig_speeds.csv", "mig_profile")
        self._migperf = _read("migperf_a100_80gb_train.csv", "mig_profile", seq="64")
        measured: dict[str, list[float]] = {}
        for (_, profile, _), speed in self._miso.items():
            if speed > 0:
                measured.setdefault(profile, []).append(speed)
        self.medians = {p: (1.0 if p == "7g" else round(median(measured[p if p != "1g2m" else "1g"]), 4))
                        for p in PROFILES}
        """Per profile, the median of MISO's measured fractions: what a job no table measured runs at."""
        self._cache: dict[tuple[str, int, bool, str], float] = {}

    def speed(self, spec: _Spec, gpu: GPUModel, profile: str) -> float:
        """Fraction of the whole GPU's speed at which job ``spec`` trains on a ``profile`` slice of ``gpu`` (0: it
        does not fit there). A job asking a fraction of a GPU (``gpu_share``, e.g. the Alibaba trace's) runs at its
        own pace on any slice with at least that share of the compute, and does not fit a smaller one."""
        share = spec.gpu_share
        if share is not None and share < 1.0:
            return 1.0 if PROFILES[profile].compute / 7 >= share - 1e-12 else 0.0
        big = gpu.memory_gb >= 80
        key = (spec.application, spec.batch_size, big, profile)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._lookup(spec.application, spec.batch_size, big, profile)
        return hit

    def _lookup(self, application: str, batch: int, big: bool, profile: str) -> float:
        if profile == "7g":
            return 1.0
        measured = "1g" if profile == "1g2m" else profile  # 1g's compute and twice its memory
        tables = [(self._migperf, _MIGPERF.get(application))] if big else []
        tables.append((self._miso, _MISO.get(application)))
        for table, model in tables:
            if model is None:
                continue
            batches = sorted({b for (m, _, b) in table if m == model})
            if not batches:
                continue
            near = min(batches, key=lambda b: (abs(math.log(b / max(batch, 1))), b))
            if (model, measured, near) in table:
                return table[(model, measured, near)]
            if profile == "1g2m" and (model, "2g", near) in table:
                return table[(model, "2g", near)] / 2  # fits in 2 memory slices; half of 2g's compute
            if (model, "7g", near) in table and any(p == measured for (_, p, _) in table):
                return 0.0  # the study measured this slice, and this job on the whole GPU only: it did not fit
        return self.medians[profile]


@cache
def slice_speeds() -> SliceSpeeds:
    """The shipped slice speeds (read once per process)."""
    return SliceSpeeds()


def _read(name: str, column: str, seq: str | None = None) -> dict[tuple[str, str, int], float]:
    """(model, neutral profile, batch) -> speed relative to the whole GPU, from a shipped table."""
    text = resources.files("sim").joinpath("data", "mig", name).read_text(encoding="utf-8")
    out = {}
    for row in csv.DictReader(text.splitlines()):
        if seq is not None and row.get("seq_length") not in ("", seq):
            continue
        c = int(row[column].partition("g")[0])
        profile = {1: "1g", 2: "2g", 3: "3g", 4: "4g", 7: "7g"}[c]
        out[(row["model"], profile, int(row["batch_size"]))] = float(row["speed_vs_7g"])
    return out
