"""A predictor that answers from an explicit table: for hand-built scenarios, traces with known runtimes, tests."""

from __future__ import annotations

from typing import Mapping

from predictors.base import Predictor, register
from sim.model import INFEASIBLE, JobSpec, VMType


@register("table")
class TablePredictor(Predictor):
    """Runtimes given per (job name, VM type name, GPUs); configurations not in the table are unsupported.

    ``runtimes`` maps ``"JOBNAME/VMTYPE/GPUS"`` (e.g. ``"J1/NC6/1"``) to seconds. A job spec's ``name`` is its key.
    """

    def __init__(self, runtimes: Mapping[str, float]):
        self.table = {str(k): float(v) for k, v in runtimes.items()}

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return self.table.get(f"{spec.name}/{vm.name}/{gpus}", INFEASIBLE)

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        key = f"{spec.name}/{vm.name}/{gpus}"
        return None if key in self.table else f"the runtime table has no entry {key!r}"
