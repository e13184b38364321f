"""Where an answer comes from, and how far off answers of that kind are: the expected-error table.

Every predictor says which source answered a configuration (``Predictor.source``): a measured configuration, an
interpolation between measured ones, or an extrapolation in batch size, GPU count, GPU type or depth, a cross-GPU
scaling of a measured rate, a table. The expected relative error of each (predictor, kind of answer) is what
``capsim predict evaluate`` measured for it on the protocol that asks that kind of question (``PROTOCOL_OF``): the
mean over the protocol's cells of the mean ``|predicted − measured| / measured`` of the test runs the predictor
answered with that source. The cross-GPU scaling of the ``cloud`` predictor is scored by its leave-one-GPU-out test
(``predictors.crossgpu``), in runtime terms. The figures ship as ``predictors/data/expected_errors.csv``, written by
``capsim predict evaluate --ship`` and never typed in; ``expected_error`` reads them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.contracts import Source
from sim.model import JobSpec, VMType

if TYPE_CHECKING:
    import pandas as pd

    from predictors.base import TrainablePredictor

__all__ = ["KINDS", "PROTOCOL_OF", "ERROR_COLUMNS", "shipped_path", "shipped", "expected_error", "source",
           "app_ranges", "kind_of", "question_kinds", "crossgpu_errors", "format_table"]

KINDS: dict[str, str] = {
    "measured": "a configuration that was measured (run, or its rate is in a measured table)",
    "interpolated": "between measured batch sizes or GPU counts",
    "batch": "batch-size extrapolation above the measured range",
    "batch_below": "batch-size extrapolation below the measured range",
    "gpus": "GPU-count extrapolation beyond the measured counts",
    "compute": "GPU-type extrapolation (a GPU never measured)",
    "depth": "depth extrapolation beyond the measured depths",
    "scaled": "cross-GPU scaling of a rate measured on another GPU",
    "table": "an explicit runtime table",
    "model": "a model that does not say which kind of answer it gave",
    "unsupported": "no answer: the predictor does not support the configuration",
}
"""Every kind of answer a predictor gives, with what it means."""

PROTOCOL_OF: dict[str, str] = {
    "measured": "interpolation", "interpolated": "between", "batch": "batch",
    "batch_below": "batch_below", "gpus": "gpus", "compute": "compute", "depth": "depth", "scaled": "crossgpu",
}
"""The evaluation protocol whose test runs ask each kind of question (``crossgpu``: the cross-GPU scaling's
leave-one-GPU-out test)."""

ERROR_COLUMNS = ["predictor", "source", "protocol", "error", "cells", "runs"]
"""Columns of the expected-error table: the predictor (its ``describe()`` label), the kind of answer, the protocol it
was measured on, the expected relative error, and how many cells and test runs it rests on."""


def shipped_path() -> Path:
    """Where the shipped expected-error table lives (inside the installed package)."""
    return Path(str(resources.files("predictors").joinpath("data", "expected_errors.csv")))


@cache
def shipped() -> dict[tuple[str, str], float]:
    """``{(predictor label, kind): expected relative error}`` from the shipped table (empty if it is missing)."""
    import csv

    path = shipped_path()
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(r["predictor"], r["source"]): float(r["error"]) for r in csv.DictReader(f) if r["error"]}


def expected_error(predictor: str, kind: str) -> float:
    """The expected relative error of answers of ``kind`` by the predictor labelled ``predictor``; NaN if the
    evaluation never measured it."""
    return shipped().get((predictor, kind), math.nan)


def source(label: str, kind: str) -> Source:
    """A ``Source`` of ``kind`` with the shipped expected error of the predictor labelled ``label``."""
    return Source(kind, expected_error(label, kind))


def app_ranges(p: TrainablePredictor, key: tuple[str, str, bool]) -> dict[str, Any] | None:
    """What ``p``'s training runs measured of one application (``predictors.regression.ranges_of``), None if it
    has no runs; computed once per training table."""
    from predictors.measurements import NO_DEPTH
    from predictors.regression import ranges_of

    def make() -> dict[str, Any] | None:
        d = p.training_runs()
        sel = (d["application"] == key[0]) & (d["framework"] == key[1])
        sel &= (d["depth"] != NO_DEPTH) if key[2] else (d["depth"] == NO_DEPTH)
        return ranges_of(d[sel]) if sel.any() else None

    return p.shared(("ranges", key), make)


def _kind(r: dict[str, Any] | None, gpu: str, n: int, batch: int, depth: int) -> str:
    """The kind of a question against what was measured of an application (``None``: nothing): the extrapolation it
    needs (``predictors.regression.question``), else ``measured`` where that very configuration was run and
    ``interpolated`` where it lies between runs."""
    from predictors.regression import question

    if r is None:
        return "model"
    kind = question(r, gpu, n, batch, depth)[0]
    if kind != "inside":
        return kind
    return "measured" if (gpu, n, batch, depth) in r["configs"] else "interpolated"


def kind_of(p: TrainablePredictor, spec: JobSpec, vm: VMType, gpus: int) -> str:
    """The kind of question a configuration asks of ``p``'s training runs (``_kind``); ``model`` where the
    application has no runs."""
    from predictors.measurements import NO_DEPTH, data_key, measured_gpu_name

    a, f, d = data_key(spec)
    return _kind(app_ranges(p, (a, f, d != NO_DEPTH)), measured_gpu_name(vm.gpu) or vm.gpu.name, gpus,
                 spec.batch_size, d)


def question_kinds(p: TrainablePredictor, rows: pd.DataFrame) -> list[str]:
    """``kind_of`` for each row of a runs table (its application, GPU, count, batch and depth)."""
    from predictors.measurements import NO_DEPTH

    return [_kind(app_ranges(p, (str(a), str(f), int(d) != NO_DEPTH)), str(g), int(n), int(b), int(d))
            for a, f, g, n, b, d in zip(rows["application"], rows["framework"], rows["gpu"], rows["gpus"],
                                        rows["batch_size"], rows["depth"])]


def crossgpu_errors() -> dict[str, Any]:
    """The cross-GPU scaling's expected error in runtime terms: the mean over its leave-one-GPU-out predictions of
    the calibrating models of ``|measured speed / predicted speed − 1|`` (a runtime is iterations over a speed)."""
    from predictors.crossgpu import CALIBRATION, leave_one_gpu_out, shipped_speeds

    rows = [r for r in leave_one_gpu_out(shipped_speeds()) if r["calibrates"]]
    errs = np.array([abs(r["measured"] / r["predicted"] - 1.0) for r in rows])
    models = {r["model"] for r in rows} & set(CALIBRATION)
    return {"predictor": "cloud", "source": "scaled", "protocol": PROTOCOL_OF["scaled"], "error": float(errs.mean()),
            "cells": len(models), "runs": len(rows)}


def format_table(table: pd.DataFrame, predictors: Sequence[str] | None = None) -> str:
    """Markdown: one row per kind of answer, one column per predictor, the expected error in %, the protocol."""
    t = table if predictors is None else table[table["predictor"].isin(predictors)]
    names = list(dict.fromkeys(t["predictor"]))
    kinds = [k for k in KINDS if k in set(t["source"])]
    lines = ["| kind of answer | protocol | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for k in kinds:
        cells = []
        for n in names:
            hit = t[(t["predictor"] == n) & (t["source"] == k)]
            cells.append("-" if hit.empty or not np.isfinite(hit["error"].iloc[0])
                         else f"{100 * float(hit['error'].iloc[0]):.1f} %")
        lines.append(f"| {KINDS[k]} | {PROTOCOL_OF.get(k, '-')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
