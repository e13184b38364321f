"""The oracles: runtime of a job on a VM configuration. Importing this package registers the built-in predictors."""

from predictors.base import Predictor, build, register, registry
from predictors import table  # noqa: F401
from predictors import analytical, measured, noisy, regression, wave  # noqa: F401
from predictors import throughput  # noqa: F401

__all__ = ["Predictor", "build", "register", "registry"]
