"""Trace formats: one reader per file format, chosen by ``workload.trace.format`` (``csv`` by default).

Importing this package registers the built-in readers. A new format is one module here with a ``TraceReader``
subclass registered under its name, imported below, plus its tests (the conformance tests in
``tests/sim/test_traces.py`` cover every registered reader through its ``example``).
"""

from sim.traces import alibaba, alibaba2020, elasticflow, gavel, native, philly, slurm  # noqa: F401  (registers them)
from sim.traces.base import (
    COLUMNS,
    DEFAULT_FORMAT,
    MEASURED,
    REQUIRED,
    TRACE_FORMATS,
    Servers,
    TraceReader,
    alias,
    build,
    read_trace,
    register,
    registry,
)

__all__ = ["TraceReader", "Servers", "TRACE_FORMATS", "DEFAULT_FORMAT", "REQUIRED", "MEASURED", "COLUMNS", "read_trace",
           "register", "alias", "registry", "build"]
