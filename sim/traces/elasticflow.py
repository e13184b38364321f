"""ElasticFlow's trace format (Gu et al., ASPLOS'23): Microsoft ITP job arrivals with GPU counts and deadlines.

One CSV file per cluster, header ``job_id, submission_time, num_iteration, model_name, deadline, batch_size, num_gpu,
duration`` (the older names ``submit_time``, ``iteration``, ``ddl`` of ElasticFlow's testbed and Philly traces are read
too): real arrivals (s since collection began), GPU counts and durations, and a generated model, global batch size,
iteration count and absolute deadline (``sim/data/elasticflow/README.md``). Jobs keep their arrival, GPU count
(``JobSpec.gpus``), iterations, model, batch size and deadline; the tardiness weight comes from the scenario's
``weight_range`` (``[w, w]`` for a fixed weight).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sim.model import CapsimError
from sim.traces.base import TRACE_FORMATS, TraceReader

if TYPE_CHECKING:
    import pandas as pd

_SOURCE = ("submission_time", "model_name", "num_iteration", "batch_size", "num_gpu", "deadline")
_OLD_NAMES = {"submit_time": "submission_time", "iteration": "num_iteration", "ddl": "deadline"}
"""The older column names of the testbed and Philly traces shipped with ElasticFlow (``elasticVpollux_e.csv``,
``philly_103959.csv``), read the same way."""


@TRACE_FORMATS.register("elasticflow")
class ElasticFlowTrace(TraceReader):
    """ElasticFlow's CSV traces.

    ``framework`` is the framework every job is taken to use (ElasticFlow measured PyTorch). ``elastic`` False keeps
    each job's GPU count as requested (a gang of ``num_gpu`` GPUs); True leaves the count to the policy (``gpus``
    empty: any count the runtime predictor supports, ElasticFlow's premise), the request kept as
    ``requested_gpus``. ``limit`` keeps only the first ``limit`` jobs of the file (a slice for quick runs).
    Kept beside the trace table: ``requested_gpus``, and the measured run (``duration`` s on ``measured_gpus`` =
    ``num_gpu`` GPUs of the trace's cluster) that a runtime model for trace jobs (``predictors.trace``) may scale.
    """

    file_kind = "ElasticFlow CSV"
    example = (
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
        "a1,3715485,3249,deepspeech2,3716178,32,1,1075\n"
        "b2,3717550,48266,inception3,3720405,64,8,3604\n"
        "c3,3721209,24851,deepspeech2,3729427,64,16,15533\n"
    )
    example_jobs = 3

    def __init__(self, framework: str = "pytorch", elastic: bool = False, limit: int | None = None):
        if framework not in ("pytorch", "tensorflow"):
            raise CapsimError(f"trace format 'elasticflow': framework must be 'pytorch' or 'tensorflow', got "
                              f"{framework!r}")
        if not isinstance(elastic, bool):
            raise CapsimError(f"trace format 'elasticflow': elastic must be true or false, got {elastic!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise CapsimError(f"trace format 'elasticflow': limit must be a whole number >= 1 (or omitted), got "
                              f"{limit!r}")
        self.framework = framework
        self.elastic = elastic
        self.limit = limit

    def read(self, path: Path) -> pd.DataFrame:
        import pandas as pd

        try:
            raw = pd.read_csv(path, nrows=self.limit, dtype={"job_id": str, "model_name": str})
        except Exception as e:  # noqa: BLE001 (any parsing failure is the user's file)
            raise CapsimError(f"{path}: cannot read the ElasticFlow trace CSV: {e}") from None
        raw = raw.rename(columns={o: n for o, n in _OLD_NAMES.items() if o in raw.columns and n not in raw.columns})
        missing = [c for c in _SOURCE if c not in raw.columns]
        if missing:
            raise CapsimError(f"{path}: missing column(s) {missing}; an ElasticFlow trace has "
                              f"job_id, {', '.join(_SOURCE)}, duration")
        table = pd.DataFrame({
            "submit_time": raw["submission_time"],
            "application": raw["model_name"],
            "framework": self.framework,
            "iterations": raw["num_iteration"],
            "batch_size": raw["batch_size"],
            "name": raw["job_id"] if "job_id" in raw.columns else "",
            "deadline": raw["deadline"],
            "gpus": None if self.elastic else raw["num_gpu"],
            "requested_gpus": raw["num_gpu"],
        })
        if "duration" in raw.columns:
            table["duration"] = raw["duration"]
            table["measured_gpus"] = raw["num_gpu"]
        return table
