"""Where an answer comes from, and how far off answers of that kind are: the kinds of question a configuration asks
of a table of measured runs (``ranges_of``, ``question``: inside what was measured, or the extrapolation it needs;
``predictors.regression`` chooses a model per kind), and the expected-error table.

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
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd

from predictors.measurements import NO_DEPTH, data_key, measured_gpu_name
from sim.contracts import Source
from sim.model import JobSpec, VMType


class Trained(Protocol):
    """What the kinds of question read of a trainable predictor (``predictors.base.TrainablePredictor``)."""

    def training_runs(self) -> pd.DataFrame: ...

    def shared(self, key: Any, make: Callable[[], Any]) -> Any: ...

    def describe(self) -> str: ...

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None: ...

__all__ = ["KINDS", "PROTOCOL_OF", "ERROR_COLUMNS", "shipped_path", "shipped", "expected_error", "source",
           "ranges_of", "question", "app_ranges", "kind_of", "question_kinds", "QuestionSources", "format_table"]

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


def ranges_of(d: pd.DataFrame) -> dict[str, Any]:
    """What was measured: GPU types, their counts, batch ranges per (GPU type, count) and per type, depths, CPUs,
    and every (GPU type, count, batch, depth) run."""
    t = d["runtime_s"] / d["iterations"]
    rel = t / t.groupby([d["gpu"], d["gpus"], d["batch_size"], d["depth"]]).transform("min")
    # pandas-stubs types an index label (``idxmin``) as Hashable: here it is a CPU-thread count
    best = {g: int(cast(int, r.groupby(d.loc[r.index, "cpu_threads"]).mean().idxmin()))
            for g, r in rel.groupby(d["gpu"])}
    return {
        "counts": {g: sorted(set(x["gpus"])) for g, x in d.groupby("gpu")},
        "batch": {k: (x["batch_size"].min(), x["batch_size"].max()) for k, x in d.groupby(["gpu", "gpus"])},
        "batch_gpu": {g: (x["batch_size"].min(), x["batch_size"].max()) for g, x in d.groupby("gpu")},
        "depth": (d["depth"].min(), d["depth"].max()),
        "cpu_best": best, "cpu_best_all": int(cast(int, rel.groupby(d["cpu_threads"]).mean().idxmin())),
        "cpu_max": int(d["cpu_threads"].max()),
        "configs": set(zip(d["gpu"], d["gpus"], d["batch_size"], d["depth"])),
    }


def question(ranges: dict[str, Any], gpu: str, n: int, batch: int, depth: int) -> tuple[str, str]:
    """(kind of question, why) for one query against what was measured (module docstring)."""
    if gpu not in ranges["counts"]:
        return "compute", f"{gpu} was never measured"
    counts = ranges["counts"][gpu]
    if n < counts[0] or n > counts[-1]:
        return "gpus", f"{n} GPUs beyond the {counts[0]}..{counts[-1]} measured on {gpu}"
    lo_d, hi_d = ranges["depth"]
    if depth != NO_DEPTH and not lo_d <= depth <= hi_d:
        return "depth", f"depth {depth} beyond the measured {lo_d}..{hi_d}"
    lo, hi = ranges["batch"].get((gpu, n), ranges["batch_gpu"][gpu])
    if batch > hi:
        return "batch", f"batch {batch} above the {lo}..{hi} measured on {gpu}x{n}"
    if batch < lo:
        return "batch_below", f"batch {batch} below the {lo}..{hi} measured on {gpu}x{n}"
    return "inside", "within the measured range"


def app_ranges(p: Trained, key: tuple[str, str, bool]) -> dict[str, Any] | None:
    """What ``p``'s training runs measured of one application (``ranges_of``), None if it has
    no runs; computed once per training table."""

    def make() -> dict[str, Any] | None:
        d = p.training_runs()
        sel = (d["application"] == key[0]) & (d["framework"] == key[1])
        sel &= (d["depth"] != NO_DEPTH) if key[2] else (d["depth"] == NO_DEPTH)
        return ranges_of(d[sel]) if sel.any() else None

    return p.shared(("ranges", key), make)


def _kind(r: dict[str, Any] | None, gpu: str, n: int, batch: int, depth: int) -> str:
    """The kind of a question against what was measured of an application (``None``: nothing): the extrapolation it
    needs (``question``), else ``measured`` where that very configuration was run and
    ``interpolated`` where it lies between runs."""
    if r is None:
        return "model"
    kind = question(r, gpu, n, batch, depth)[0]
    if kind != "inside":
        return kind
    return "measured" if (gpu, n, batch, depth) in r["configs"] else "interpolated"


def kind_of(p: Trained, spec: JobSpec, vm: VMType, gpus: int) -> str:
    """The kind of question a configuration asks of ``p``'s training runs (``_kind``); ``model`` where the
    application has no runs."""
    a, f, d = data_key(spec)
    return _kind(app_ranges(p, (a, f, d != NO_DEPTH)), measured_gpu_name(vm.gpu) or vm.gpu.name, gpus,
                 spec.batch_size, d)


def question_kinds(p: Trained, rows: pd.DataFrame) -> list[str]:
    """``kind_of`` for each row of a runs table (its application, GPU, count, batch and depth)."""
    return [_kind(app_ranges(p, (str(a), str(f), int(d) != NO_DEPTH)), str(g), int(n), int(b), int(d))
            for a, f, g, n, b, d in zip(rows["application"], rows["framework"], rows["gpu"], rows["gpus"],
                                        rows["batch_size"], rows["depth"])]


class QuestionSources:
    """For a trainable model (``regression``, ``analytical``, ``wave``): the kind of an answer is the question the
    configuration asks of its training runs (a measured configuration, one between measured ones, or the
    extrapolation it needs), its error the one measured for this predictor on that kind."""

    def source(self: Trained, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        if self.support(spec, vm, gpus) is not None:
            return Source("unsupported")
        return source(self.describe(), kind_of(self, spec, vm, gpus))

    def run_sources(self: Trained, rows: pd.DataFrame) -> list[str]:
        """The kind of answer given to each row of a runs table (how ``capsim predict evaluate`` sorts its errors
        into expected errors): the question each row asks of the training runs."""
        return question_kinds(self, rows)


def format_table(table: pd.DataFrame, predictors: Sequence[str] | None = None) -> str:
    """Markdown: one row per kind of answer, one column per predictor, the expected error in %, the protocols
    that measured it."""
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
        protocols = ", ".join(dict.fromkeys(t.loc[t["source"] == k, "protocol"].astype(str)))
        lines.append(f"| {KINDS[k]} | {protocols or PROTOCOL_OF.get(k, '-')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
