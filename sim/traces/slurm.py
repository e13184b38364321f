"""Slurm job logs of SenseTime's Helios (Hu et al., SC 2021) and Shanghai AI Lab's Acme (Hu et al., NSDI 2024).

Both list one job per row with ``job_id, user, vc (Helios) or type (Acme), gpu_num, cpu_num, node_num, state,
submit_time, start_time, end_time, duration, queue``: submission and start as date-times (Acme's with a zone),
``duration`` = end − start in seconds, ``state`` one of ``COMPLETED``, ``CANCELLED``, ``FAILED``, ``TIMEOUT``,
``NODE_FAIL``. Neither names its GPU model (each cluster is homogeneous), so a job's run is taken as measured on the
trace's own hardware. Acme also comes as a third party's lossy conversion of Kalos's completed jobs
(``converted_kalos_trace.csv``: ``arrival_time`` in s, ``num_iteration`` = 2 × duration, ``gpu_workers`` ×
``gpu_per_worker`` GPUs; ``sim/data/traces/acme/README.md``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from sim.model import CapsimError
from sim.traces.base import TRACE_FORMATS, Servers
from sim.traces.production import (
    ProductionTrace,
    beside,
    check_quantile,
    demand,
    epoch_seconds,
    numbers,
    pick_layout,
    read_csv,
)
from sim.traces.report import Cleaning

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HeliosTrace", "AcmeTrace", "SlurmTrace", "SERVER_GPUS"]

SERVER_GPUS = 8
"""GPUs per server assumed for Helios and Acme (both papers describe 8-GPU nodes; the logs do not say)."""
SUCCESS = "COMPLETED"
_SLURM = ("job_id", "gpu_num", "state", "submit_time", "start_time", "duration")


def _demand_servers(table: pd.DataFrame, gpu: str, quantile: float) -> tuple[Servers, ...]:
    """8-GPU servers for the demand the jobs record ``quantile`` of the time, and at least their largest job."""
    gpus = table["measured_gpus"].to_numpy(dtype=float)
    need = demand(table["submit_time"].to_numpy(dtype=float), table["duration"].to_numpy(dtype=float), gpus, quantile)
    return (Servers(gpu, SERVER_GPUS, max(1, math.ceil(max(need, gpus.max(initial=0)) / SERVER_GPUS))),)


class SlurmTrace(ProductionTrace):
    """The reading both Slurm logs share; ``group`` is the column a subclass may select on (``vc`` or ``type``)."""

    group: ClassVar[str] = "vc"
    selection: ClassVar[str] = "vc"
    gpu_name: ClassVar[str] = "slurm"

    def _selected(self) -> list[str] | None:
        v = getattr(self, self.selection)
        return None if v is None else [v] if isinstance(v, str) else list(v)

    def _check_selection(self, value: object) -> None:
        if value is not None and not (isinstance(value, str) or (isinstance(value, list) and value
                                                                 and all(isinstance(v, str) for v in value))):
            raise CapsimError(f"trace format {self.name!r}: {self.selection} must be a name or a list of names, got "
                              f"{value!r}")

    def _slurm(self, raw: pd.DataFrame, path: Path) -> Cleaning:
        """The cleaning of a Slurm log up to the shared selections."""
        import pandas as pd

        submit = epoch_seconds(raw["submit_time"])
        start = epoch_seconds(raw["start_time"])
        table = pd.DataFrame({
            "submit_time": submit - (np.nanmin(submit) if np.isfinite(submit).any() else 0.0),
            "duration": numbers(raw["duration"]), "measured_gpus": numbers(raw["gpu_num"]),
            "started": np.isfinite(start), "name": raw["job_id"].astype(str),
            "state": raw["state"].fillna("").astype(str).to_numpy(),
            self.group: raw[self.group].fillna("").astype(str).to_numpy() if self.group in raw.columns else "",
        })
        c = Cleaning(table, str(path))
        c.drop(raw.duplicated().to_numpy(), "rows equal in every column to an earlier row (duplicates)")
        c.drop(np.isnan(c.table["submit_time"].to_numpy()), "jobs without a readable submission time")
        c.drop(~(c.table["measured_gpus"].to_numpy() > 0), "jobs asking for no GPU (CPU jobs)")
        c.drop(~c.table["started"].to_numpy(), "jobs that never started (no start time)")
        c.drop(~(c.table["duration"].to_numpy() > 0), "jobs whose duration is missing, zero or negative")
        wanted = self._selected()
        if wanted is not None:
            have = set(c.table[self.group])
            unknown = [w for w in wanted if w not in have]
            if unknown:
                raise CapsimError(f"{path}: no {self.group} {unknown[0]!r} among the GPU jobs (the file has "
                                  f"{', '.join(sorted(have)[:30])})")
            c.keep_only(c.table[self.group].isin(wanted).to_numpy(),
                        f"jobs of a {self.group} other than {', '.join(wanted)}")
        if self.failed == "drop":
            c.drop(c.table["state"].to_numpy() != SUCCESS, "jobs that did not complete (state CANCELLED, FAILED, "
                                                           "TIMEOUT or NODE_FAIL)")
        return c

    def _finish(self, c: Cleaning) -> pd.DataFrame:
        self._select(c)
        t = c.table
        return self._done(c, {"submit_time": t["submit_time"], "duration": t["duration"], "name": t["name"],
                              "state": t["state"], self.group: t[self.group]}, t["measured_gpus"].astype(int))


@TRACE_FORMATS.register("helios")
class HeliosTrace(SlurmTrace):
    """A Helios cluster's ``cluster_log.csv`` (module docstring). ``vc`` keeps one virtual cluster or a list; the
    shared options are ``ProductionTrace``'s (``failed: drop`` keeps only ``COMPLETED`` jobs). ``hardware``: the
    kept virtual clusters' largest daily GPU count in ``capacity`` (the cluster's ``cluster_gpu_number.csv``, by
    default beside the log), in 8-GPU servers."""

    file_kind = "Helios cluster_log.csv"
    example = (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "10,uA,vc6YE,8,48,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:00:12,2020-04-01 02:00:12,7200,2\n"
        "11,uB,vcEwI,0,4,1,COMPLETED,2020-04-01 00:01:00,2020-04-01 00:01:00,2020-04-01 00:11:00,600,0\n"
        "12,uB,vcEwI,1,6,1,FAILED,2020-04-01 00:02:00,2020-04-01 00:02:30,2020-04-01 00:03:30,60,30\n"
        "13,uC,vc6YE,2,12,1,CANCELLED,2020-04-01 00:05:00,,2020-04-01 00:06:00,0,60\n"
        "14,uC,vcEwI,16,96,2,CANCELLED,2020-04-01 00:07:00,2020-04-01 00:08:00,2020-04-01 03:08:00,10800,60\n"
    )
    example_jobs = 3
    group = "vc"
    selection = "vc"
    gpu_name = "helios"

    def __init__(self, vc: str | list[str] | None = None, capacity: str | None = None, start: float | None = None,
                 end: float | None = None, sample: int | None = None, seed: int = 0, failed: str = "keep",
                 elastic: bool = False):
        self._check_selection(vc)
        if capacity is not None and not isinstance(capacity, str):
            raise CapsimError(f"trace format 'helios': capacity must be a file name, got {capacity!r}")
        self.vc, self.capacity = vc, capacity
        self._common(start, end, sample, seed, failed, elastic)

    def read(self, path: Path) -> pd.DataFrame:
        raw = read_csv(path, self.file_kind, dtype={"job_id": str, "vc": str, "state": str, "user": str})
        pick_layout(path, list(raw.columns), {"cluster_log": _SLURM + ("vc",)})
        return self._finish(self._slurm(raw, path))

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        found = beside(path, self.capacity, "cluster_gpu_number.csv")
        if found is None:
            raise CapsimError(f"trace format 'helios': no cluster_gpu_number.csv beside {path}; name the cluster's "
                              f"capacity file with the option capacity")
        cap = read_csv(found, "a Helios cluster_gpu_number.csv")
        vcs = [c for c in cap.columns if c not in ("date", "total")]
        wanted = self._selected() or vcs
        unknown = [v for v in wanted if v not in vcs]
        if unknown:
            raise CapsimError(f"{found}: no column for virtual cluster {unknown[0]!r} (it has {', '.join(vcs)})")
        gpus = sum(int(np.nanmax(numbers(cap[v]))) for v in wanted)
        return (Servers(self.gpu_name, SERVER_GPUS, max(1, math.ceil(gpus / SERVER_GPUS))),)


@TRACE_FORMATS.register("acme")
class AcmeTrace(SlurmTrace):
    """Acme's Seren or Kalos job trace (``trace_seren.csv``, ``trace_kalos.csv``), or the converted Kalos subset
    (module docstring), told apart by their header. ``type`` keeps one workload type (``Pretrain``, ``SFT``,
    ``Evaluation``, ...; in the converted file only ``Pretrain`` and ``Other`` are told apart) or a list; shared
    options: ``ProductionTrace`` (the converted file holds completed jobs only). ``hardware``: 8-GPU servers for
    the demand the trace records (each job running from its submission for its duration) ``quantile`` of the time
    (1: its peak), and at least its largest job; the logs do not give the clusters' sizes."""

    file_kind = "Acme job trace (CSV)"
    example = (
        "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time\n"
        "dlc1,u1,2,16,128,Pretrain,COMPLETED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:30+08:00,"
        "2023-03-01 01:18:30+08:00,3600,8,57600\n"
        "dlc2,u2,1,1,8,Evaluation,FAILED,2023-03-01 00:20:00+08:00,2023-03-01 00:20:01+08:00,"
        "2023-03-01 00:21:01+08:00,60,1,60\n"
        "dlc3,u2,1,0,8,Other,COMPLETED,2023-03-01 00:21:00+08:00,2023-03-01 00:21:00+08:00,"
        "2023-03-01 00:22:00+08:00,60,0,0\n"
        "dlc4,u3,1,8,64,SFT,CANCELLED,2023-03-01 00:25:00+08:00,2023-03-01 00:40:00+08:00,"
        "2023-03-01 02:40:00+08:00,7200,900,57600\n"
    )
    example_jobs = 3
    group = "type"
    selection = "type"
    gpu_name = "acme"
    _LAYOUTS = {"raw": _SLURM + ("type",),
                "converted": ("job_id", "arrival_time", "num_iteration", "iteration_networking_time", "gpu_workers",
                              "gpu_per_worker")}

    def __init__(self, type: str | list[str] | None = None, start: float | None = None, end: float | None = None,
                 sample: int | None = None, seed: int = 0, failed: str = "keep", elastic: bool = False,
                 quantile: float = 1.0):
        self._check_selection(type)
        check_quantile(self.name, quantile)
        self.type, self.quantile = type, quantile
        self._common(start, end, sample, seed, failed, elastic)

    def read(self, path: Path) -> pd.DataFrame:
        raw = read_csv(path, self.file_kind, dtype={"job_id": str, "type": str, "state": str, "user": str})
        if pick_layout(path, list(raw.columns), self._LAYOUTS) == "raw":
            return self._finish(self._slurm(raw, path))
        return self._finish(self._converted(raw, path))

    def _converted(self, raw: pd.DataFrame, path: Path) -> Cleaning:
        """The converted Kalos subset as a Slurm log: duration = num_iteration / 2, type from the network time."""
        import pandas as pd

        convert = pd.DataFrame({
            "job_id": raw["job_id"], "gpu_num": numbers(raw["gpu_workers"]) * numbers(raw["gpu_per_worker"]),
            "state": SUCCESS, "submit_time": pd.to_datetime(numbers(raw["arrival_time"]), unit="s", utc=True)
            .astype(str), "start_time": "1970-01-01", "duration": numbers(raw["num_iteration"]) / 2.0,
            "type": np.where(numbers(raw["iteration_networking_time"]) == 0.75, "Pretrain", "Other"),
        })
        bad = np.isnan(numbers(raw["arrival_time"]))
        convert.loc[bad, "submit_time"] = ""
        return self._slurm(convert, path)

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        return _demand_servers(self.read(path), self.gpu_name, self.quantile)
