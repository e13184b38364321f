"""Trace formats: one reader per file format, chosen by ``workload.trace.format`` (``csv`` by default).

Importing this package registers the built-in readers. A new format is one module here with a ``TraceReader``
subclass registered under its name, imported below, plus its tests (the conformance tests in
``tests/sim/test_traces.py`` cover every registered reader through its ``example``).
"""

from sim.traces import elasticflow, gavel, native  # noqa: F401  (registers elasticflow, gavel, csv)
from sim.traces.base import (
    COLUMNS,
    DEFAULT_FORMAT,
    REQUIRED,
    TRACE_FORMATS,
    TraceReader,
    alias,
    build,
    read_trace,
    register,
    registry,
)

__all__ = ["TraceReader", "TRACE_FORMATS", "DEFAULT_FORMAT", "REQUIRED", "COLUMNS", "read_trace", "register", "alias",
           "registry", "build"]
