"""The trace reader contract and the registry of trace formats.

A reader turns one file format into capsim's trace table; ``sim.workload.validate_trace`` checks every cell of it
(once, when a scenario is loaded) and ``sim.workload.trace_jobs`` turns it into jobs (drawing missing deadlines and
weights from the seed). So a reader knows its format and
nothing of jobs, predictors or seeds, and every format gets the same checks and the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from sim.contracts import Component
from sim.model import CapsimError
from sim.registry import Registry

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TraceReader", "Servers", "TRACE_FORMATS", "DEFAULT_FORMAT", "REQUIRED", "MEASURED", "COLUMNS", "read_trace",
           "register", "alias", "registry", "build"]

REQUIRED = ("submit_time", "application", "framework", "iterations", "batch_size")
"""The columns of a job known by its work: submission time (s), network, ``pytorch``/``tensorflow``, iterations,
batch."""
MEASURED = ("submit_time", "duration")
"""The columns of a job known by what a production trace measured: submission time (s) and run time (s) on its GPU
count (``measured_gpus``, else ``gpus``); a trace table has ``REQUIRED`` or ``MEASURED``."""
COLUMNS = REQUIRED + ("name", "deadline", "weight", "gpus", "priority", "duration", "measured_gpus", "measured_gpu",
                      "gpu_share", "gpu_models")
"""``REQUIRED`` plus the optional ones: a label, an absolute deadline (s), a tardiness weight ($ per s late), the
GPUs the job asks for (``JobSpec.gpus``; empty: the policy chooses), a fairness weight (``Job.priority``, 1 if
empty); and what a production trace measured (``JobSpec.measured``): the run time (s), the GPU count it was measured
on (empty: ``gpus``) and the GPU model (empty: the trace's own, unnamed hardware); the share of each GPU the job asks
for (``JobSpec.gpu_share``, empty: whole GPUs) and the GPU models it may run on, separated by ``|`` (empty: any)."""
DEFAULT_FORMAT = "csv"
"""The format of a trace given as a bare path."""


class TraceReader(Component):
    """Reads one trace file format into capsim's trace table.

    A subclass provides one hook:

    - ``read(path) -> pandas.DataFrame`` (required): one row per job, in the file's order, with the ``REQUIRED``
      columns and any of the optional ones in ``COLUMNS`` (a missing or empty deadline or weight is drawn from the
      run's seed). Cells may be left as the file gives them: ``sim.workload.validate_trace`` checks every cell (and
      that there is at least one row) and names the row (counted from 1 in the order returned: a CSV's data rows
      after its header, a headerless file's lines) and the column. Further columns a format carries (requested GPUs,
      a priority, ...) may be kept; they are ignored until the model uses them. It raises a ``CapsimError`` naming the
      file for what only the format can see: an unreadable or empty file, a malformed line, a column named twice, a
      value it cannot map to the table. It may depend on nothing but its parameters and the file.

    Per-format options are constructor parameters (the ``Component`` contract: stored under their own names, with
    defaults), given in YAML next to the path: ``trace: {path: jobs.txt, format: gavel, framework: pytorch}``;
    scenario validation rejects names not in ``param_names()``.

    A reader of a production trace, whose files hold rows no replay can use (duplicates, jobs that never ran, times
    missing), also provides:

    - a report of what it did with them: ``sim.traces.report.Cleaning`` drops, sorts and filters the table, counts
      every row it touches under the rule that touched it, and leaves the ``TraceReport`` in the table's
      ``attrs["report"]``; no row is dropped silently. ``sim.workload`` adds what only the cluster can tell (jobs
      larger than the cluster) and the command line prints the report once.
    - ``hardware(path) -> tuple[Servers, ...]`` (optional): the servers the trace's jobs ran on, for a fixed cluster
      built from the trace's own hardware (``cluster.servers: trace``).

    ``file_kind`` names the file in messages ("expected a CSV file ..."). ``example`` is a small file in this format
    holding ``example_jobs`` jobs (``companions``: the files it needs beside it, by name): the conformance tests read
    it, so every registered format is tested as it lands.
    """

    name: ClassVar[str] = "trace"
    family: ClassVar[str] = "trace format"
    file_kind: ClassVar[str] = "trace"
    example: ClassVar[str] = ""
    example_jobs: ClassVar[int] = 0
    companions: ClassVar[Mapping[str, str]] = {}

    def read(self, path: Path) -> pd.DataFrame:
        raise NotImplementedError(self)

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        """The servers the trace ran on (the trace at ``path``, and files beside it the reader's options name)."""
        raise CapsimError(f"trace format {self.name!r} does not describe the hardware its jobs ran on; give the "
                          f"cluster's servers or node slots instead")


@dataclass(frozen=True, order=True)
class Servers:
    """``count`` servers, each with ``gpus`` GPUs of model ``gpu``, as a trace's cluster had them. ``gpu`` is the
    trace's own name (``G2``, ``V100M32``, ``philly``); ``sim.catalogue.trace_gpu`` gives its model."""

    gpu: str
    gpus: int
    count: int


TRACE_FORMATS: Registry[TraceReader] = Registry("trace format")
"""Every registered trace format; importing ``sim.traces`` registers the built-in ones."""
register = TRACE_FORMATS.register
"""Class decorator adding a trace reader under ``name`` (the YAML ``workload.trace.format``)."""
alias = TRACE_FORMATS.alias
registry = TRACE_FORMATS.kinds
"""Every registered trace format (``aliases=False``: each once)."""
build = TRACE_FORMATS.build
"""Build the reader of the registered format ``kind`` with its ``params`` (reader options)."""


def read_trace(path: str | Path, format: str = DEFAULT_FORMAT, **options: Any) -> pd.DataFrame:
    """The trace table of the file at ``path`` read as ``format`` with the reader's ``options``."""
    return build(format, **options).read(Path(path))
