"""Microsoft Philly (Jeon et al., USENIX ATC 2019): per-job tables derived from the public Philly trace.

Three layouts, told apart by their header (``sim/data/traces/philly/README.md`` has their sources and defects):

- ``pollux``: ``timestamp, duration, num_gpus, gpu_time, cluster``, the 82,247-job table of Pollux's artefact
  (``philly_jobs_pollux.csv.gz``): submission time, run time on the job's GPUs, virtual cluster; unsorted, 65 exact
  duplicates, no status.
- ``raw``: ``jobid, vc, user, status, submitted_time, start_time, end_time, num_gpus, attempts``, the per-job
  table the folder's README derives from the raw ``cluster_job_log`` (run time = last attempt's end − first
  attempt's start; status Pass, Killed or Failed; jobs without attempts or an end).
- ``elasticflow``: ``job_id, submit_time, model_name, ddl, batch_size, num_gpu, duration, iteration, ...``,
  ElasticFlow's copy of VC 103959 with a generated model, batch size, iterations and deadline per job.

Philly names no GPU model: the trace says 2-GPU servers with 12 GB GPUs and 8-GPU servers with 24 GB ones. A job's
duration is taken as measured on the trace's own hardware (``measured_gpu`` empty).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim.model import CapsimError
from sim.traces.base import TRACE_FORMATS, Servers
from sim.traces.production import (
    ProductionTrace,
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

__all__ = ["PhillyTrace"]

LAYOUTS = {
    "pollux": ("timestamp", "duration", "num_gpus", "cluster"),
    "raw": ("jobid", "vc", "status", "submitted_time", "start_time", "end_time", "num_gpus"),
    "elasticflow": ("job_id", "submit_time", "model_name", "ddl", "batch_size", "num_gpu", "duration", "iteration"),
}
SMALL, LARGE = Servers("philly-12GB", 2, 0), Servers("philly-24GB", 8, 0)
"""Philly's two kinds of server (the model of their GPUs was never published)."""
FAILED = ("Killed", "Failed")


@TRACE_FORMATS.register("philly")
class PhillyTrace(ProductionTrace):
    """Philly's per-job tables (module docstring). ``vc`` keeps one virtual cluster (or a list of them); the shared
    options (``start``, ``end``, ``sample``, ``seed``, ``failed``, ``elastic``) are those of
    ``sim.traces.production.ProductionTrace``. ``failed: drop`` needs the ``raw`` layout, the only one with a status.

    ``hardware``: each virtual cluster gets the servers that hold its jobs' demand as the trace records it (every
    job running from its submission for its duration, before any queueing) ``quantile`` of the time (1: its peak):
    8-GPU servers for the demand of its jobs of more than 2 GPUs (at least its largest job), 2-GPU servers for the
    rest; the cluster is the sum over the kept virtual clusters, replayed pooled (a job may run on any of them).
    """

    file_kind = "Philly job table (CSV, may be gzip-compressed)"
    example = (
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n"
        "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n"
        "2017-10-09 06:16:03,2766.0,2,5532.0,6214e9\n"
    )
    example_jobs = 3

    def __init__(self, vc: str | list[str] | None = None, start: float | None = None, end: float | None = None,
                 sample: int | None = None, seed: int = 0, failed: str = "keep", elastic: bool = False,
                 quantile: float = 1.0):
        if vc is not None and not (isinstance(vc, str) or (isinstance(vc, list) and vc
                                                          and all(isinstance(v, str) for v in vc))):
            raise CapsimError(f"trace format 'philly': vc must be a virtual cluster's name or a list of them, got "
                              f"{vc!r}")
        check_quantile(self.name, quantile)
        self.vc, self.quantile = vc, quantile
        self._common(start, end, sample, seed, failed, elastic)

    def read(self, path: Path) -> pd.DataFrame:

        raw = read_csv(path, self.file_kind, dtype={"cluster": str, "vc": str, "job_id": str, "jobid": str})
        layout = pick_layout(path, list(raw.columns), LAYOUTS)
        c = Cleaning(self._normalise(raw, layout), str(path))
        c.drop(raw.duplicated().to_numpy(), "rows equal in every column to an earlier row (duplicates)")
        t = c.table
        c.drop(np.isnan(t["submit_time"].to_numpy()), "rows without a readable submission time")
        if layout == "raw":
            t = c.table
            c.drop(t["started"].isna().to_numpy(), "jobs that never started (no attempt, or no start time)")
            c.drop(np.isnan(c.table["duration"].to_numpy()), "jobs still running when the trace was collected (no "
                                                              "end time)")
        t = c.table
        c.drop(~(t["duration"].to_numpy() > 0), "jobs whose run time is missing, zero or negative")
        c.drop(~(t["measured_gpus"].to_numpy() >= 1), "jobs without a GPU count")
        self._vcs(c, path)
        if self.failed == "drop":
            if layout != "raw":
                raise CapsimError(f"{path}: failed: drop needs a status, which the {layout!r} layout of Philly's "
                                  f"table does not have (the raw layout does; see the folder's README)")
            c.drop(c.table["status"].isin(FAILED).to_numpy(), "jobs that were killed or failed (status)")
        self._select(c)
        t = c.table
        columns = {"submit_time": t["submit_time"], "duration": t["duration"], "name": t["name"],
                   "application": t.get("application", ""), "framework": t.get("framework", ""), "vc": t["vc"]}
        columns.update({col: t[col] for col in ("iterations", "batch_size", "deadline", "status") if col in t.columns})
        return self._done(c, columns, t["measured_gpus"].astype(int))

    def _normalise(self, raw: pd.DataFrame, layout: str) -> pd.DataFrame:
        """The file's rows as arrival (s after its first), duration (s), GPUs, VC and a name (the job id, else the VC
        and the file's data row)."""
        import pandas as pd

        rows = np.arange(1, len(raw) + 1)
        if layout == "pollux":
            t = epoch_seconds(raw["timestamp"])
            d = numbers(raw["duration"])
            vc = raw["cluster"].astype(str)
            table = pd.DataFrame({"vc": vc, "duration": d, "measured_gpus": numbers(raw["num_gpus"])})
        elif layout == "raw":
            t = epoch_seconds(raw["submitted_time"])
            start, stop = epoch_seconds(raw["start_time"]), epoch_seconds(raw["end_time"])
            vc = raw["vc"].astype(str)
            table = pd.DataFrame({"vc": vc, "duration": stop - start, "measured_gpus": numbers(raw["num_gpus"]),
                                  "started": np.where(np.isnan(start), np.nan, 1.0), "status": raw["status"]})
        else:
            t = numbers(raw["submit_time"])
            vc = pd.Series(["103959"] * len(raw))
            table = pd.DataFrame({"vc": vc, "duration": numbers(raw["duration"]),
                                  "measured_gpus": numbers(raw["num_gpu"]), "application": raw["model_name"],
                                  "framework": "pytorch", "iterations": raw["iteration"],
                                  "batch_size": raw["batch_size"], "deadline": raw["ddl"]})
        origin = np.nanmin(t) if np.isfinite(t).any() else math.nan
        table.insert(0, "submit_time", t - origin)
        if "deadline" in table.columns:
            table["deadline"] = numbers(table["deadline"]) - origin
        ids = raw["jobid"] if layout == "raw" else raw["job_id"] if layout == "elasticflow" else None
        table["name"] = [f"{v}#{r}" for v, r in zip(vc, rows)] if ids is None else ids.astype(str).to_numpy()
        return table

    def _vcs(self, c: Cleaning, path: Path) -> None:
        if self.vc is None:
            return
        wanted = [self.vc] if isinstance(self.vc, str) else list(self.vc)
        have = set(c.table["vc"])
        unknown = [v for v in wanted if v not in have]
        if unknown:
            from difflib import get_close_matches

            hint = get_close_matches(unknown[0], sorted(have), n=1)
            mean = f"; did you mean {hint[0]!r}?" if hint else ""
            raise CapsimError(f"{path}: no virtual cluster {unknown[0]!r}{mean} (the file has "
                              f"{', '.join(sorted(have))})")
        c.keep_only(c.table["vc"].isin(wanted).to_numpy(), f"jobs of virtual clusters other than "
                                                           f"{', '.join(wanted)}")

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        t = self.read(path)
        large = small = 0
        for _, jobs in t.groupby("vc", sort=True):
            arrival = jobs["submit_time"].to_numpy(dtype=float)
            duration = jobs["duration"].to_numpy(dtype=float)
            gpus = jobs["measured_gpus"].to_numpy(dtype=float)
            big = gpus > SMALL.gpus
            n8 = math.ceil(max(demand(arrival[big], duration[big], gpus[big], self.quantile),
                               gpus[big].max(initial=0)) / LARGE.gpus)
            rest = demand(arrival, duration, gpus, self.quantile) - n8 * LARGE.gpus
            large += n8
            small += max(0 if n8 else 1, math.ceil(rest / SMALL.gpus))
        return tuple(Servers(s.gpu, s.gpus, n) for s, n in ((SMALL, small), (LARGE, large)) if n)
