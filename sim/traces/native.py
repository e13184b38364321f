"""capsim's own trace format: a CSV file with a header naming the trace table's columns (the default format)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sim.model import CapsimError
from sim.traces.base import REQUIRED, TRACE_FORMATS, TraceReader

if TYPE_CHECKING:
    import pandas as pd


@TRACE_FORMATS.register("csv")
class CsvTrace(TraceReader):
    """A CSV file whose header names the columns of the trace table (``sim.traces.base.COLUMNS``):
    ``submit_time, application, framework, iterations, batch_size`` (or ``submit_time, duration``) and optionally
    ``name, deadline, weight, gpus, priority, duration, measured_gpus, measured_gpu, gpu_share, gpu_models``, in any
    order; other columns are ignored."""

    file_kind = "CSV"
    example = (
        "submit_time,application,framework,iterations,batch_size,name,deadline,weight\n"
        "0,deepspeech,tensorflow,2528,4,J1,1000,0.01\n"
        "30,alexnet,pytorch,6094,256,J4,,\n"
        "12.5,vgg19,pytorch,4063,32,J2,900,\n"
    )
    example_jobs = 3

    def read(self, path: Path) -> pd.DataFrame:
        import csv

        import pandas as pd

        try:
            with open(path, newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), None)
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise CapsimError(f"{path}: cannot read the trace CSV: {e}") from None
        if not header or not any(h.strip() for h in header):
            raise CapsimError(f"{path}: the file is empty; expected a header line naming the columns "
                              f"({', '.join(REQUIRED)}) and one row per job")
        names = [h.strip() for h in header]
        for j, name in enumerate(names):
            if name in names[:j]:
                raise CapsimError(f"{path}: header, column {name!r}: appears twice (columns {names.index(name) + 1} "
                                  f"and {j + 1}); name each column once")
        try:
            return pd.read_csv(path)
        except Exception as e:  # noqa: BLE001 (any parsing failure is the user's file)
            raise CapsimError(f"{path}: cannot read the trace CSV: {e}") from None
