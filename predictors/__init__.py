"""The oracles: runtime of a job on a VM configuration. Importing this package registers the built-in predictors."""

from predictors import (  # noqa: F401
    analytical,
    cloud,
    hybrid,
    interference,
    measured,
    regression,
    table,
    throughput,
    trace,
    wave,
)
from predictors.base import Predictor, build, register, registry
from predictors.uncertainty import noisy, online  # noqa: F401  (registers them)

__all__ = ["Predictor", "build", "register", "registry"]
