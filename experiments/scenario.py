"""Scenario files: the cluster, the workload, the predictors and the policies of one experiment.

A scenario is YAML validated by pydantic models (unknown keys are errors). ``load_scenario`` reads a file and raises
one CapsimError listing every problem; ``Scenario`` then builds the simulator's objects (VM types, node slots,
cluster, jobs, predictors, policies) for a given seed. The code is split by concern: ``scenario_spec`` (the models
and the resolved configuration behind run ids), ``scenario_build`` (the simulator's objects) and ``scenario_checks``
(validation beyond the models); this module is their public face.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from experiments.loading import Source, raise_problems, read_yaml
from experiments.scenario_build import registered_policies
from experiments.scenario_checks import semantic_problems, validate_scenario
from experiments.scenario_spec import (
    ClusterSpec,
    PolicySpec,
    PredictorSpec,
    Scenario,
    TraceSpec,
    WorkloadSpec,
    parse_seeds,
)

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
]


def default_scenario_path() -> Path:
    """The embedded default scenario (the paper's catalogue and jobs, 5 nodes, 50 jobs, every policy)."""
    return Path(str(resources.files("experiments").joinpath("scenarios", "default.yaml")))


def load_scenario(path: str | Path | None = None) -> Scenario:
    """Read and validate a scenario file (the embedded default when ``path`` is None)."""
    p = Path(path) if path is not None else default_scenario_path()
    src: Source = read_yaml(p, "scenario file")
    sc, problems = validate_scenario(src.data, str(p), p.resolve().parent)
    raise_problems(src, problems)
    assert sc is not None
    return sc
