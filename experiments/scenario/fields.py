"""The base model every scenario model derives from (unknown keys are errors, instances frozen) and the strict,
finite number types of scenario fields."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

__all__ = ["StrictModel", "NonNeg", "PositiveFloat", "PositiveInt"]

# Numbers are strict (a YAML 1.1 boolean such as `yes` or a quoted "30" is not a number) and finite.
NonNeg = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
PositiveFloat = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
PositiveInt = Annotated[int, Strict(), Field(gt=0)]


class StrictModel(BaseModel):
    """A scenario model: unknown keys are errors and a validated instance is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)
