"""A predictor that answers from an explicit table: for hand-built scenarios, traces with known runtimes, tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from predictors.base import Predictor, Source, register
from sim.model import INFEASIBLE, CapsimError, JobSpec, VMType


@register("table")
class TablePredictor(Predictor):
    """Runtimes given per (job name, VM type name, GPUs); configurations not in the table are unsupported.

    ``table`` maps ``"JOBNAME/VMTYPE/GPUS"`` (e.g. ``"J1/NC6/1"``) to seconds (YAML: ``{kind: table, table:
    {J1/NC6/1: 3600}}``). A job spec's ``name`` is its key.
    """

    test_params: ClassVar[Mapping[str, Any]] = {
        "table": {f"J{j}/{v}/{g}": 600.0 * j / g for j in range(1, 7) for v, n in (("NC6", 1), ("NV12", 2))
                  for g in range(1, n + 1)},
    }

    def __init__(self, table: Mapping[str, float]):
        self.table = table
        bad = [k for k, v in table.items() if not isinstance(k, str) or isinstance(v, bool)
               or not isinstance(v, (int, float)) or not v > 0] if isinstance(table, Mapping) else None
        if bad is None or bad:
            raise CapsimError(f"predictor 'table': table must map 'JOB/VMTYPE/GPUS' to seconds > 0, got "
                              f"{table if bad is None else {k: table[k] for k in bad[:3]}!r}")

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.table.get(f"{spec.name}/{vm.name}/{gpus}", INFEASIBLE))

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        key = f"{spec.name}/{vm.name}/{gpus}"
        return None if key in self.table else f"the runtime table has no entry {key!r}"

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """``table``: the runtime given (no error is stated for it)."""
        return Source("table" if self.support(spec, vm, gpus) is None else "unsupported")
