"""The trace reader contract and the registry of trace formats.

A reader turns one file format into capsim's trace table; ``sim.workload.validate_trace`` checks every cell of it
(once, when a scenario is loaded) and ``sim.workload.trace_jobs`` turns it into jobs (drawing missing deadlines and
weights from the seed). So a reader knows its format and
nothing of jobs, predictors or seeds, and every format gets the same checks and the same messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from sim.contracts import Component
from sim.registry import Registry

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TraceReader", "TRACE_FORMATS", "DEFAULT_FORMAT", "REQUIRED", "COLUMNS", "read_trace"]

REQUIRED = ("submit_time", "application", "framework", "iterations", "batch_size")
"""The columns every trace table has: submission time (s), network, ``pytorch``/``tensorflow``, iterations, batch."""
COLUMNS = REQUIRED + ("name", "deadline", "weight", "gpus", "priority", "duration")
"""``REQUIRED`` plus the optional ones: a label, an absolute deadline (s), a tardiness weight ($ per s late), the
GPUs the job asks for (``JobSpec.gpus``; empty: the policy chooses) and a fairness weight (``Job.priority``, 1 if
empty)."""
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

    ``file_kind`` names the file in messages ("expected a CSV file ..."). ``example`` is a small file in this format
    holding ``example_jobs`` jobs: the conformance tests read it, so every registered format is tested as it lands.
    """

    name: ClassVar[str] = "trace"
    file_kind: ClassVar[str] = "trace"
    example: ClassVar[str] = ""
    example_jobs: ClassVar[int] = 0

    def read(self, path: Path) -> pd.DataFrame:
        raise NotImplementedError(self)


TRACE_FORMATS: Registry[TraceReader] = Registry("trace format", "sim.traces")
"""Every registered trace format; importing ``sim.traces`` registers the built-in ones."""


def read_trace(path: str | Path, format: str = DEFAULT_FORMAT, **options: Any) -> pd.DataFrame:
    """The trace table of the file at ``path`` read as ``format`` with the reader's ``options``."""
    return TRACE_FORMATS.build(format, **options).read(Path(path))
