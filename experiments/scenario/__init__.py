"""Scenario files: the cluster, the workload, the predictors and the policies of one experiment.

A scenario is YAML validated by pydantic models (unknown keys are errors). ``load_scenario`` reads a file and raises
one CapsimError listing every problem; ``Scenario`` then builds the simulator's objects (VM types, node slots,
cluster, jobs, predictors) for a given seed. The parts: ``loading`` (YAML and problem reports), ``fields`` (the base
model and number types), ``vms``, ``servers``, ``cluster``, ``workload``, ``components`` (policies and predictors),
``spec`` (the ``Scenario`` model and its resolved configuration behind run ids), ``checks`` (validation beyond the
models) and ``sweep`` (sweep files); this module is the public face of the scenario side.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from experiments.scenario.checks import semantic_problems, validate_scenario
from experiments.scenario.cluster import ClusterSpec
from experiments.scenario.components import (
    PolicySpec,
    PredictorSpec,
    build_policy,
    registered_policies,
    select_policies,
)
from experiments.scenario.loading import Source, raise_problems, read_yaml
from experiments.scenario.spec import Scenario, parse_seeds
from experiments.scenario.workload import TraceSpec, WorkloadSpec

__all__ = [
    "Scenario",
    "ClusterSpec",
    "WorkloadSpec",
    "TraceSpec",
    "PolicySpec",
    "PredictorSpec",
    "load_scenario",
    "default_scenario_path",
    "validate_scenario",
    "semantic_problems",
    "parse_seeds",
    "registered_policies",
    "build_policy",
    "select_policies",
]


def default_scenario_path() -> Path:
    """The embedded default scenario (the paper's catalogue and jobs, 5 nodes, 50 jobs, every policy)."""
    return Path(str(resources.files("experiments.scenario").joinpath("default.yaml")))


def load_scenario(path: str | Path | None = None) -> Scenario:
    """Read and validate a scenario file (the embedded default when ``path`` is None)."""
    p = Path(path) if path is not None else default_scenario_path()
    src: Source = read_yaml(p, "scenario file")
    sc, problems = validate_scenario(src.data, str(p), p.resolve().parent)
    raise_problems(src, problems)
    assert sc is not None
    return sc
