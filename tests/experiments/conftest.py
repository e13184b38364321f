"""Shared helpers: small scenario files built on the table predictor (known runtimes, instant to evaluate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

# Two job types on two VM types with hand-picked runtimes (seconds).
TABLE = {
    "J1/NC6/1": 400.0,
    "J1/NC12/1": 400.0,
    "J1/NC12/2": 250.0,
    "J4/NC6/1": 900.0,
    "J4/NC12/1": 900.0,
    "J4/NC12/2": 500.0,
}


def small_scenario(**over: Any) -> dict[str, Any]:
    """A tiny valid scenario as plain data (2 nodes, 6 jobs, FIFO and EDF, seeds 0-1)."""
    d: dict[str, Any] = {
        "name": "tiny",
        "cluster": {"nodes": 2, "vm_types": ["NC6", "NC12"]},
        "workload": {"jobs": 6, "mean_interarrival": 60, "mix": {"J1": 1, "J4": 1}},
        "predictor": {"kind": "table", "table": dict(TABLE)},
        "policies": [{"kind": "fifo"}, {"kind": "edf"}],
        "seeds": [0, 1],
    }
    for k, v in over.items():
        d[k] = v
    return d


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "tiny.yaml", small_scenario())
