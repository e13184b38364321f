"""Readable names for scenario fields swept in a grid, declared once: report headers, plot axes and panel titles.

A grid names fields by dotted path (``workload.mean_interarrival``); tables and figures show ``mean inter-arrival
(s)`` and ``mean inter-arrival = 30 s`` instead. A field not declared here keeps its dotted path, so a new scenario
field is readable at once and gets a nicer name by adding one line below.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sim.metrics import label_with_unit

__all__ = ["FieldLabel", "FIELDS", "MISSING", "field_label", "field_value", "field_equals", "is_missing", "same_value"]


@dataclass(frozen=True)
class FieldLabel:
    """How a scenario field reads in a table or on an axis: a short ``label`` and the ``unit`` of its values."""

    label: str
    unit: str = ""


FIELDS: dict[str, FieldLabel] = {
    "cluster.nodes": FieldLabel("node slots"),
    "cluster.billing_quantum": FieldLabel("billing quantum", "s"),
    "cluster.restart_overhead": FieldLabel("restart overhead", "s"),
    "cluster.decision_interval": FieldLabel("decision interval", "s"),
    "cluster.vm_types": FieldLabel("VM types"),
    "cluster.vm_types.provider": FieldLabel("provider"),
    "cluster.vm_types.region": FieldLabel("region"),
    "cluster.spot": FieldLabel("spot VMs"),
    "cluster.spot.revocation_rate": FieldLabel("spot revocation rate", "per hour"),
    "cluster.checkpoint_interval": FieldLabel("checkpoint interval", "s"),
    "cluster.max_gang_gpus": FieldLabel("largest gang", "GPUs"),
    "workload.jobs": FieldLabel("jobs"),
    "workload.mean_interarrival": FieldLabel("mean inter-arrival", "s"),
    "workload.deadline_factor": FieldLabel("deadline factor"),
    "workload.weight_range": FieldLabel("tardiness weight", "$/s"),
    "workload.mix": FieldLabel("job mix"),
    "workload.trace": FieldLabel("trace"),
    "estimator.mape": FieldLabel("estimator MAPE"),
    "estimator.bias": FieldLabel("estimator bias"),
    "estimator.base.mape": FieldLabel("estimator MAPE"),
    "estimator.window": FieldLabel("online window (0: off)", "iterations"),
    "truth.mape": FieldLabel("runtime noise (MAPE)"),
    "truth.bias": FieldLabel("runtime bias"),
    "predictor.mape": FieldLabel("predictor MAPE"),
    "predictor.scaling": FieldLabel("scaling law"),
    "predictor.serial": FieldLabel("serial share"),
    "workload.trace.quantile": FieldLabel("demand quantile"),
}
"""Known scenario fields, by dotted path."""


def field_label(path: str) -> str:
    """``mean inter-arrival (s)``; the dotted path itself for a field not declared in ``FIELDS``."""
    f = FIELDS.get(path)
    return path if f is None else label_with_unit(f.label, f.unit)


MISSING = "none"
"""How a grid value left empty (YAML ``null``: the field's default, e.g. no spot VMs) reads."""


def is_missing(v: Any) -> bool:
    """Whether ``v`` is a grid value left empty (``None``, or the NaN a table stores for it)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def same_value(a: Any, b: Any) -> bool:
    """Whether two grid values are the same grid point: two empty values are (NaN is not equal to itself), numbers
    compare as numbers and anything else as text (``5`` matches ``"5"``, as a value typed in a notebook may be)."""
    if is_missing(a) or is_missing(b):
        return is_missing(a) and is_missing(b)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _number(v: Any) -> str:
    if is_missing(v):
        return MISSING
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:g}"


def field_value(path: str, value: Any, unit: bool = True) -> str:
    """A grid value as text: numbers without trailing zeros, a range ``[1, 3]`` as ``1–3``, the field's unit after
    it (``30 s``) unless ``unit`` is false (a table column whose header names it); a value stored as JSON text (lists,
    mappings) is read back first."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value):
        text = f"{_number(value[0])}–{_number(value[1])}"
    elif isinstance(value, dict):
        text = ", ".join(f"{str(k).replace('_', ' ')} {field_value(f'{path}.{k}', x)}" for k, x in value.items())
    elif isinstance(value, list):
        text = json.dumps(value, separators=(", ", ": "))
    else:
        text = _number(value)
    f = FIELDS.get(path)
    return f"{text} {f.unit}" if unit and f is not None and f.unit and text and text != MISSING else text


def field_equals(path: str, value: Any) -> str:
    """``mean inter-arrival = 30 s`` (``workload.foo = 3`` for an undeclared field)."""
    f = FIELDS.get(path)
    return f"{path if f is None else f.label} = {field_value(path, value)}"
