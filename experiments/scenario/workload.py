"""The workload of a scenario: Poisson arrivals of a job mix or a trace file, deadlines and tardiness weights."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from experiments.scenario.fields import NonNeg, PositiveFloat, PositiveInt, StrictModel
from sim.model import JobSpec
from sim.traces.base import DEFAULT_FORMAT

__all__ = ["WorkloadSpec", "JobTypeSpec", "TraceSpec"]


class JobTypeSpec(StrictModel):
    """A job type in the mix: a catalogue name (``J1``) alone, or a full spec; ``weight`` is its share of the mix."""

    name: str
    application: str | None = None
    framework: Literal["pytorch", "tensorflow"] | None = None
    iterations: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    depth: PositiveInt | None = None
    weight: PositiveFloat = 1.0

    @model_validator(mode="after")
    def _complete(self) -> JobTypeSpec:
        given = [self.application, self.framework, self.iterations, self.batch_size]
        if any(x is not None for x in given) and any(x is None for x in given):
            missing = [n for n, x in zip(("application", "framework", "iterations", "batch_size"), given) if x is None]
            raise ValueError(f"expected a full job spec or only a catalogue name, found {', '.join(missing)} missing")
        return self


def _mix_tag(v: Any) -> str | None:
    if isinstance(v, dict):
        return "<weights>"
    if isinstance(v, list):
        return "<specs>"
    return None


Range = Annotated[list[NonNeg], Field(min_length=2, max_length=2)]


class TraceSpec(BaseModel):
    """A trace file in a registered format (``sim.traces``); further keys are that format's reader options."""

    model_config = ConfigDict(extra="allow", frozen=True)
    path: str
    format: str = DEFAULT_FORMAT

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _trace_tag(v: Any) -> str | None:
    if isinstance(v, str):
        return "<path>"
    if isinstance(v, (dict, TraceSpec)):  # a mapping when validating, the model when serialising
        return "<file>"
    return None


TraceEntry = Annotated[
    Annotated[str, Tag("<path>")] | Annotated[TraceSpec, Tag("<file>")],
    Discriminator(
        _trace_tag,
        custom_error_type="capsim_choice",
        custom_error_message="expected a file path or a mapping {path, format, <reader options>}",
    ),
]


class WorkloadSpec(StrictModel):
    """Poisson arrivals of a job mix (or a trace file), deadlines and tardiness weights."""

    jobs: PositiveInt | None = None
    mean_interarrival: PositiveFloat = 30.0
    mix: (
        Annotated[
            Annotated[dict[str, PositiveFloat], Field(min_length=1), Tag("<weights>")]
            | Annotated[list[JobTypeSpec], Field(min_length=1), Tag("<specs>")],
            Discriminator(
                _mix_tag,
                custom_error_type="capsim_choice",
                custom_error_message="expected a mapping {J1: weight, ...} or a list of job specs",
            ),
        ]
        | None
    ) = None
    deadline_factor: Range = [1.0, 3.0]
    weight_range: Range = [0.003, 0.015]
    trace: TraceEntry | None = None

    @field_validator("deadline_factor", "weight_range")
    @classmethod
    def _ordered(cls, v: list[float]) -> list[float]:
        if v[0] > v[1]:
            raise ValueError(f"expected [low, high] with low ≤ high, found {v}")
        return v

    def job_mix(self) -> tuple[tuple[JobSpec, float], ...]:
        """The job types of the mix with their weights (every catalogue job type, weight 1, when unset)."""
        from sim import catalogue

        known = catalogue.job_types()
        mix = self.mix
        if mix is None:
            return tuple((s, 1.0) for s in known.values())
        if isinstance(mix, dict):
            return tuple((known[k], float(w)) for k, w in mix.items())
        out = []
        for j in mix:
            if j.application is None or j.framework is None or j.iterations is None or j.batch_size is None:
                out.append((known[j.name], j.weight))  # the model holds a full spec or only a catalogue name
            else:
                spec = JobSpec(j.application, j.framework, j.iterations, j.batch_size, name=j.name, depth=j.depth)
                out.append((spec, j.weight))
        return tuple(out)

    def trace_spec(self) -> TraceSpec | None:
        """The trace as path, format and reader options (a bare path is a file of the default format)."""
        t = self.trace
        return TraceSpec(path=t) if isinstance(t, str) else t
