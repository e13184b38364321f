"""Alibaba PAI's GPU cluster trace v2020 (Weng et al., "MLaaS in the Wild", NSDI 2022): job and task tables.

The job table (``job_name, inst_id, user, status, start_time, end_time``) gives each job's submission time
(``start_time``) and status (``Terminated``, the only success, ``Failed``, ``Running``, ``Waiting``); the task table
(``job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type``) its tasks:
``inst_num`` instances asking ``plan_gpu`` percent of one GPU each, on GPU model ``gpu_type``, run from their
``start_time`` to their ``end_time`` (seconds). The release ships them as headerless CSV files in ``tar.gz``
archives, with the column names in ``.header`` files; a subset written by pandas has a header row. Both are read.
The machine table (``machine, gpu_type, cap_cpu, cap_mem, cap_gpu``) gives the cluster.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim.model import CapsimError
from sim.traces.base import TRACE_FORMATS, Servers
from sim.traces.production import ProductionTrace, beside, numbers, read_csv
from sim.traces.report import Cleaning

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AlibabaPai2020", "JOB_COLUMNS", "TASK_COLUMNS", "MACHINE_COLUMNS"]

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
                "plan_gpu", "gpu_type")
MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
_TEXT = {"job_name": str, "task_name": str, "status": str, "gpu_type": str, "user": str, "inst_id": str,
         "machine": str}


def _table(path: Path, columns: tuple[str, ...], kind: str) -> pd.DataFrame:
    """A v2020 table with or without its header row (the release's archives have none)."""
    import gzip
    import tarfile

    try:
        if path.name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(path) as tar:
                member = next((m for m in tar.getmembers() if m.isfile()), None)
                f = tar.extractfile(member) if member is not None else None
                first = f.readline().decode("utf-8", "replace") if f is not None else ""
        else:
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                first = fh.readline()
    except FileNotFoundError:
        raise CapsimError(f"{path}: no such file (expected {kind})") from None
    except (OSError, tarfile.TarError) as e:
        raise CapsimError(f"{path}: cannot read {kind}: {e}") from None
    header = [h.strip() for h in first.strip().split(",")]
    if header == list(columns):
        return read_csv(path, kind, dtype=_TEXT)
    if header and header[0] in columns:
        missing = [c for c in columns if c not in header]
        raise CapsimError(f"{path}: header {header} lacks {missing}; expected {kind} with columns {', '.join(columns)}")
    return read_csv(path, kind, header=False, names=columns, dtype=_TEXT)


@TRACE_FORMATS.register("alibaba_pai_2020")
class AlibabaPai2020(ProductionTrace):
    """Alibaba PAI v2020 (module docstring): the trace file is the job table; ``tasks`` names the task table
    (default: ``pai_task_table.csv``, ``.csv.gz`` or ``.tar.gz`` beside it, the first found) and ``machines`` the
    machine table for ``hardware`` (default ``pai_machine_spec.tar.gz`` beside it).

    A job asks for the GPUs of its tasks, Σ ``inst_num × plan_gpu / 100`` (``plan_gpu`` is percent of one GPU per
    instance, alibaba/clusterdata#129): whole GPUs rounded up, and ``gpu_share`` the part of each it uses when the
    sum is not whole (half a GPU: one GPU at share 0.5). It ran on its GPU tasks' ``gpu_type`` (the type of its
    largest GPU task when they differ, counted) from its first task's start to its last task's end. Jobs without
    tasks or GPUs, never started (``Waiting``), still ``Running`` (no end) or whose run time is missing, zero or
    negative are left out and counted; ``failed: drop`` leaves out ``Failed`` jobs. Shared options:
    ``ProductionTrace``.
    """

    file_kind = "Alibaba PAI v2020 job table (CSV or tar.gz, with or without its header)"
    example = (
        "job_name,inst_id,user,status,start_time,end_time\n"
        "j1,i1,u1,Terminated,1000,5000\n"
        "j2,i2,u1,Failed,1200,1900\n"
        "j3,i3,u2,Terminated,1500,9000\n"
    )
    example_jobs = 3
    example_tasks = (
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
        "j1,worker,1,Terminated,1010,4990,600,29,50,T4\n"
        "j2,worker,2,Failed,1210,1890,600,29,100,V100\n"
        "j3,ps,1,Terminated,1510,8990,600,29,,\n"
        "j3,worker,4,Terminated,1520,8990,800,29,100,V100M32\n"
    )
    companions = {"pai_task_table.csv": example_tasks}

    def __init__(self, tasks: str | None = None, machines: str | None = None, start: float | None = None,
                 end: float | None = None, sample: int | None = None, seed: int = 0, failed: str = "keep",
                 elastic: bool = False):
        for name, v in (("tasks", tasks), ("machines", machines)):
            if v is not None and not isinstance(v, str):
                raise CapsimError(f"trace format 'alibaba_pai_2020': {name} must be a file name, got {v!r}")
        self.tasks, self.machines = tasks, machines
        self._common(start, end, sample, seed, failed, elastic)

    def _tasks_path(self, path: Path) -> Path:
        if self.tasks is not None:
            found = beside(path, self.tasks, None)
        else:
            found = next((p for p in (beside(path, None, n) for n in ("pai_task_table.csv", "pai_task_table.csv.gz",
                                                                          "pai_task_table.tar.gz")) if p), None)
        if found is None:
            raise CapsimError(f"trace format 'alibaba_pai_2020': no task table beside {path}; name it with the "
                              f"option tasks (pai_task_table.tar.gz)")
        return found

    def read(self, path: Path) -> pd.DataFrame:
        import pandas as pd

        jobs = _table(path, JOB_COLUMNS, "an Alibaba PAI v2020 job table")
        tasks = _table(self._tasks_path(path), TASK_COLUMNS, "an Alibaba PAI v2020 task table")
        gpu = numbers(tasks["inst_num"]) * np.nan_to_num(numbers(tasks["plan_gpu"])) / 100.0
        t0, t1 = numbers(tasks["start_time"]), numbers(tasks["end_time"])
        tasks = tasks.assign(gpu=gpu, t0=t0, t1=t1, nan=np.isnan(t0) | np.isnan(t1))
        by_job = tasks.groupby("job_name", sort=False)
        demand = by_job["gpu"].sum()
        first, last = by_job["t0"].min(), by_job["t1"].max()
        has_nan = by_job["nan"].any()
        gpu_tasks = tasks[tasks["gpu"] > 0]
        types = gpu_tasks.groupby("job_name", sort=False)["gpu_type"].nunique()
        main = gpu_tasks.sort_values("gpu", ascending=False, kind="stable").drop_duplicates("job_name")
        main_type = main.set_index("job_name")["gpu_type"]
        names = jobs["job_name"]
        submit = numbers(jobs["start_time"])
        table = pd.DataFrame({
            "submit_time": submit - np.nanmin(submit) if np.isfinite(submit).any() else submit,
            "name": names, "status": jobs["status"].fillna("").astype(str).to_numpy(),
            "has_tasks": names.isin(demand.index).to_numpy(),
            "demand": names.map(demand).to_numpy(dtype=float),
            "duration": (names.map(last) - names.map(first)).to_numpy(dtype=float),
            "times_missing": names.map(has_nan).fillna(False).to_numpy(dtype=bool),
            "types": names.map(types).fillna(0).to_numpy(dtype=float),
            "measured_gpu": names.map(main_type).fillna("").astype(str).to_numpy(),
        })
        c = Cleaning(table, str(path))
        t = c.table
        c.drop(np.isnan(t["submit_time"].to_numpy()), "jobs without a submission time")
        c.drop(~c.table["has_tasks"].to_numpy(), "jobs without a task in the task table")
        c.drop(~(c.table["demand"].to_numpy() > 0), "jobs asking for no GPU (CPU-only)")
        c.drop(c.table["status"].to_numpy() == "Waiting", "jobs never started (Waiting)")
        c.drop(c.table["status"].to_numpy() == "Running", "jobs still Running at collection (no end)")
        c.drop(c.table["times_missing"].to_numpy() | ~(c.table["duration"].to_numpy() > 0),
               "jobs whose run time (first task start to last task end) is missing, zero or negative")
        if self.failed == "drop":
            c.drop(c.table["status"].to_numpy() == "Failed", "jobs that failed (status Failed)")
        c.note(int((c.table["types"] > 1).sum()), "jobs whose GPU tasks ran on several GPU models",
               "kept, measured on the model of their largest GPU task")
        self._select(c)
        t = c.table
        whole, share = self._whole(c, t["demand"].to_numpy(), "jobs asking for a non-whole number of GPUs (plan_gpu)")
        return self._done(c, {"submit_time": t["submit_time"], "duration": t["duration"], "name": t["name"],
                              "measured_gpu": t["measured_gpu"], "gpu_share": share, "status": t["status"]}, whole)

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        found = beside(path, self.machines, "pai_machine_spec.tar.gz") or beside(path, None, "pai_machine_spec.csv")
        if found is None:
            raise CapsimError(f"trace format 'alibaba_pai_2020': no machine table beside {path}; name it with the "
                              f"option machines (pai_machine_spec.tar.gz)")
        m = _table(found, MACHINE_COLUMNS, "an Alibaba PAI v2020 machine table")
        gpus = numbers(m["cap_gpu"])
        counts: dict[tuple[str, int], int] = {}
        for model, g in zip(m["gpu_type"].fillna("").astype(str), gpus):
            if g > 0 and math.isfinite(g):
                counts[(model, int(g))] = counts.get((model, int(g)), 0) + 1
        if not counts:
            raise CapsimError(f"{found}: no machine with GPUs")
        return tuple(Servers(model, g, n) for (model, g), n in counts.items())
