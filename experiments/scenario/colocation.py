"""A scenario's co-location option: whether two jobs may share a GPU, and the interference models that say how fast
they then run (``docs/sharing.md``). Off unless the scenario names it; a scenario without it keeps its run ids."""

from __future__ import annotations

import json
from typing import Any

from pydantic import field_validator

from experiments.scenario.components import PredictorSpec
from experiments.scenario.fields import StrictModel

__all__ = ["InterferenceSpec", "ColocationSpec", "build_interference"]

InterferenceSpec = PredictorSpec
"""An interference model is named as a predictor is: its registry ``kind`` plus its parameters."""


def _spec(v: Any) -> Any:
    return {"kind": v} if isinstance(v, str) else v


class ColocationSpec(StrictModel):
    """Two jobs may share one GPU (``ClusterRules.jobs_per_gpu`` 2). ``interference`` is how fast co-located jobs
    really run (the truth; default ``table``, Gavel's measured pairs) and ``estimator`` what the policies are told
    (default: the same). Each is a kind (``learned``) or a mapping ``{kind: ..., <parameters>}``."""

    interference: InterferenceSpec = InterferenceSpec(kind="table")
    estimator: InterferenceSpec | None = None

    @field_validator("interference", "estimator", mode="before")
    @classmethod
    def _kind_alone(cls, v: Any) -> Any:
        return _spec(v)

    def models(self) -> tuple[Any, Any]:
        """(what the policies are told, the truth), the estimator shared with the truth when they are the same."""
        truth = build_interference(self.interference)
        told = self.estimator
        return (truth if told is None or told == self.interference else build_interference(told)), truth


_BUILT: dict[str, Any] = {}


def build_interference(spec: InterferenceSpec) -> Any:
    """Build an interference model, reusing one built earlier in this process from the same spec (fits cost)."""
    from predictors import interference

    key = json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    if key not in _BUILT:
        if len(_BUILT) >= 8:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = interference.build(spec.kind, **spec.params)
    return _BUILT[key]
