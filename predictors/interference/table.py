"""Gavel's measured co-location pairs as an interference model (``table``): how much two job types slow each other
when they share a GPU of Gavel's V100, P100 or K80.

Gavel's ``simulation_throughputs.json`` (MIT, ``predictors/data/gavel/ATTRIBUTION.md``) gives, per GPU model and job
type at a scale factor (GPUs), the isolated throughput and, for every other job type at the same scale factor, both
jobs' throughputs when they share the GPUs. A job's slowdown next to another is its isolated throughput over its
throughput in the pair; a measured 0 means the pair cannot share that GPU model (``inf``). Only single-GPU pairs are
non-zero in Gavel's file. A job type or GPU model the file does not list cannot share either.

The GPU utilisation of a job is inferred from the same measurements (Gavel measured no utilisation): on a GPU the
pair saturates, ``u_A x_A + u_B x_B = 1``, where ``x`` is each job's throughput in the pair over its throughput
alone and ``u`` the share of the GPU the job keeps busy alone; the ``u`` of every job type on a GPU model is the
bounded least-squares solution (``0 <= u <= 1``) over all its measured pairs.
"""

from __future__ import annotations

import ast
import json
import math
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
from scipy.optimize import lsq_linear

from predictors.interference.base import Interference, register
from sim.model import CapsimError, JobSpec, VMType

__all__ = ["PairTable", "MeasuredPairs", "gavel_pairs", "read_pairs"]


class PairTable:
    """Measured throughputs of jobs alone and in pairs: ``alone[(gpu, job type, GPUs)]`` and ``pairs[(gpu, A, B,
    GPUs)] = (A's, B's)`` in iterations per second (0: cannot share); ``source`` names the file in messages."""

    def __init__(self, alone: dict[tuple[str, str, int], float],
                 pairs: dict[tuple[str, str, str, int], tuple[float, float]], source: str):
        self.alone = alone
        self.pairs = pairs
        self.source = source
        self.job_types = frozenset(k[1] for k in alone)
        self.gpus = frozenset(k[0] for k in alone)

    def job_type(self, spec: JobSpec) -> str:
        """The table's job type of a spec: ``"<application> (batch size <b>)"``, or the application alone."""
        named = f"{spec.application} (batch size {spec.batch_size})"
        return spec.application if named not in self.job_types and spec.application in self.job_types else named

    def slowdowns(self, gpu: str, a: str, b: str, gpus: int) -> tuple[float, float]:
        """(A's, B's) slowdown sharing ``gpus`` GPUs of model ``gpu``; ``(inf, inf)`` where not measured or 0."""
        ta, tb = self.pairs.get((gpu, a, b, gpus), (0.0, 0.0))
        ia, ib = self.alone.get((gpu, a, gpus), 0.0), self.alone.get((gpu, b, gpus), 0.0)
        if min(ta, tb, ia, ib) <= 0:
            return math.inf, math.inf
        return ia / ta, ib / tb

    def utilisation(self, gpu: str, gpus: int) -> dict[str, float]:
        """Each job type's inferred utilisation alone on ``gpus`` GPUs of ``gpu`` (module docstring); empty where
        no pair was measured."""
        return _utilisation(self, gpu, gpus)


def read_pairs(path: str | Path, source: str | None = None) -> PairTable:
    """A pair table from a file in Gavel's layout (``{gpu: {"('<type>', <GPUs>)": {"null": rate, "('<other>',
    <GPUs>)": [rate, other's rate]}}}``; the ``*_unconsolidated`` worker types are skipped)."""
    name = source or str(path)
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CapsimError(f"{name}: cannot read the pair throughputs: {e}") from None
    alone: dict[tuple[str, str, int], float] = {}
    pairs: dict[tuple[str, str, str, int], tuple[float, float]] = {}
    try:
        for worker, jobs in raw.items():
            if "unconsolidated" in worker:
                continue
            gpu = worker.upper()
            for key, entry in jobs.items():
                a, n = ast.literal_eval(key)
                for other, rate in entry.items():
                    if other == "null":
                        alone[(gpu, str(a), int(n))] = float(rate)
                        continue
                    b, m = ast.literal_eval(other)
                    if int(m) == int(n):
                        pairs[(gpu, str(a), str(b), int(n))] = (float(rate[0]), float(rate[1]))
    except (AttributeError, ValueError, SyntaxError, TypeError, IndexError, KeyError):
        raise CapsimError(f"{name}: expected Gavel's layout {{gpu: {{\"('<job type>', <GPUs>)\": {{'null': rate, "
                          f"\"('<other>', <GPUs>)\": [rate, rate]}}}}}}") from None
    return PairTable(alone, pairs, name)


@cache
def gavel_pairs() -> PairTable:
    """Gavel's measured pairs, shipped with capsim."""
    path = resources.files("predictors").joinpath("data", "gavel", "simulation_throughputs.json")
    return read_pairs(Path(str(path)), "gavel")


_UTILISATION: dict[tuple[int, str, int], dict[str, float]] = {}


def _utilisation(table: PairTable, gpu: str, gpus: int) -> dict[str, float]:
    key = (id(table), gpu, gpus)
    if key not in _UTILISATION:
        types = sorted(t for (g, t, n) in table.alone if g == gpu and n == gpus)
        index = {t: i for i, t in enumerate(types)}
        rows = []
        for (g, a, b, n), (ta, tb) in sorted(table.pairs.items()):
            if g != gpu or n != gpus or a not in index or b not in index or min(ta, tb) <= 0:
                continue
            row = np.zeros(len(types))
            row[index[a]] += ta / table.alone[(g, a, n)]
            row[index[b]] += tb / table.alone[(g, b, n)]
            rows.append(row)
        if not rows:
            _UTILISATION[key] = {}
        else:
            matrix = np.array(rows)
            fit = lsq_linear(matrix, np.ones(len(rows)), bounds=(0.0, 1.0))
            used = np.count_nonzero(matrix, axis=0) > 0
            _UTILISATION[key] = {t: float(fit.x[i]) for t, i in index.items() if used[i]}
    return _UTILISATION[key]


@register("table")
class MeasuredPairs(Interference):
    """Slowdowns read from measured pair throughputs: Gavel's (``simulation_throughputs.json``) by default, or a
    file in Gavel's layout (``path``). See the module docstring."""

    def __init__(self, path: str | None = None):
        self.path = path
        self._table: PairTable | None = None

    @property
    def data(self) -> PairTable:
        if self._table is None:
            self._table = read_pairs(self.path) if self.path is not None else gavel_pairs()
        return self._table

    def slowdowns(self, a: JobSpec, b: JobSpec, vm: VMType, gpus: int) -> tuple[float, float]:
        t = self.data
        return t.slowdowns(vm.gpu.name, t.job_type(a), t.job_type(b), gpus)

    def shares(self, spec: JobSpec, vm: VMType, gpus: int) -> bool:
        t = self.data
        return t.alone.get((vm.gpu.name, t.job_type(spec), gpus), 0.0) > 0

    def utilisation(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        t = self.data
        return t.utilisation(vm.gpu.name, gpus).get(t.job_type(spec), math.nan)
