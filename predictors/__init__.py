"""The oracles: runtime of a job on a VM configuration. Importing this package registers the built-in predictors."""

from predictors import (  # noqa: F401
    analytical,
    cloud,
    hybrid,
    interference,
    measured,
    noisy,
    regression,
    table,
    throughput,
    trace,
    wave,
)
from predictors.base import Predictor, build, register, registry

__all__ = ["Predictor", "build", "register", "registry"]
