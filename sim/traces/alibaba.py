"""Alibaba PAI's GPU cluster traces: v2023 (Weng et al., USENIX ATC 2023, "openb" pod lists and node lists) and the
spot-GPU trace v2026 (Duan et al., ASPLOS 2026), whose jobs name their GPU model.

v2023 pod lists: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time,
deletion_time, scheduled_time`` (seconds from the trace's start). A pod arrives at ``creation_time`` and runs from
``scheduled_time`` to ``deletion_time``; it asks for ``num_gpu`` GPUs, or for ``gpu_milli``/1000 of one GPU (a
fractional request, GPU sharing), restricted to the GPU models ``gpu_spec`` lists (``|``-separated; empty: any). The
node lists (``sn, cpu_milli, memory_mib, gpu, model``) give the cluster: GPUs and GPU model per node.

v2026 jobs: ``job_name, organization, gpu_model, cpu_request, gpu_request, worker_num, submit_time, duration,
job_type`` (``gpu_request`` GPUs per worker; ``job_type`` HP or Spot); nodes ``gpu_model, gpu_capacity_num,
cpu_num, node_name``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim.model import CapsimError
from sim.traces.base import TRACE_FORMATS, Servers
from sim.traces.production import ProductionTrace, beside, numbers, pick_layout, read_csv
from sim.traces.report import Cleaning

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AlibabaPai2023", "AlibabaSpot2026", "node_servers"]

_POD_TIMES = ("creation_time", "deletion_time", "scheduled_time")
_NODES = {"v2023": ("sn", "gpu", "model"), "v2026": ("node_name", "gpu_capacity_num", "gpu_model")}


def node_servers(path: Path, kind: str) -> tuple[Servers, ...]:
    """The GPU servers of a node list (either layout), grouped by GPU model and GPUs per node, in first-seen order;
    nodes without GPUs are left out."""
    nodes = read_csv(path, kind, dtype={"model": str, "gpu_model": str})
    layout = pick_layout(path, list(nodes.columns), _NODES)
    _, gpu_col, model_col = _NODES[layout]
    gpus = numbers(nodes[gpu_col])
    models = nodes[model_col].fillna("").astype(str).str.strip().to_numpy()
    counts: dict[tuple[str, int], int] = {}
    for g, m, row in zip(gpus, models, range(2, len(nodes) + 2)):
        if not (g >= 0) or g != int(g):
            raise CapsimError(f"{path}: line {row}, column {gpu_col!r}: expected a whole number of GPUs, found {g!r}")
        if g > 0:
            if not m:
                raise CapsimError(f"{path}: line {row}, column {model_col!r}: a node with {int(g)} GPUs names no GPU "
                                  f"model")
            counts[(m, int(g))] = counts.get((m, int(g)), 0) + 1
    if not counts:
        raise CapsimError(f"{path}: no node with GPUs")
    return tuple(Servers(m, g, n) for (m, g), n in counts.items())


@TRACE_FORMATS.register("alibaba_pai_2023")
class AlibabaPai2023(ProductionTrace):
    """Alibaba PAI's v2023 pod lists (module docstring); any of the 24 ``openb_pod_list_*`` files with times.

    A pod's run time is ``deletion_time − scheduled_time``. Pods without GPUs (CPU-only), pods never scheduled
    (``Pending``) and pods whose run time is missing, zero or negative are left out and counted; ``Running`` pods are
    kept with their ``deletion_time`` as their end (every one has one, alibaba/clusterdata#218), and counted.
    ``failed: drop`` leaves out pods whose phase is ``Failed``. A fractional request keeps its share
    (``gpu_share``). ``nodes`` names the node list (relative to the trace's folder; default
    ``openb_node_list_gpu_node.csv`` there), which ``hardware`` reads. Shared options: ``ProductionTrace``.
    """

    file_kind = "Alibaba PAI v2023 pod list (CSV, may be gzip-compressed)"
    example = (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
        "openb-pod-0001,6000,12288,1,460,,LS,Succeeded,427061,430000,427061\n"
        "openb-pod-0002,8000,30000,0,0,,BE,Succeeded,427100,430000,427105\n"
        "openb-pod-0003,6000,12288,2,1000,,LS,Failed,500000,500900,500003\n"
        "openb-pod-0004,6000,12288,1,1000,,LS,Pending,600000,601000,\n"
    )
    example_jobs = 3

    def __init__(self, nodes: str | None = None, start: float | None = None, end: float | None = None,
                 sample: int | None = None, seed: int = 0, failed: str = "keep", elastic: bool = False):
        if nodes is not None and not isinstance(nodes, str):
            raise CapsimError(f"trace format 'alibaba_pai_2023': nodes must be a file name, got {nodes!r}")
        self.nodes = nodes
        self._common(start, end, sample, seed, failed, elastic)

    def read(self, path: Path) -> pd.DataFrame:
        import pandas as pd

        raw = read_csv(path, self.file_kind, dtype={"name": str, "gpu_spec": str, "qos": str, "pod_phase": str})
        if "num_gpu" in raw.columns and not set(_POD_TIMES) & set(raw.columns):
            raise CapsimError(f"{path}: the pods have no times (no {', '.join(_POD_TIMES)}): the multigpu* variants "
                              f"of the trace list requests only, so they cannot be replayed in time; use default, "
                              f"cpu*, gpushare* or gpuspec*")
        pick_layout(path, list(raw.columns), {"v2023 pods": ("name", "num_gpu", "gpu_milli", "pod_phase")
                                              + _POD_TIMES})
        gpus = numbers(raw["num_gpu"])
        milli = numbers(raw["gpu_milli"])
        created, scheduled, deleted = (numbers(raw[c]) for c in ("creation_time", "scheduled_time", "deletion_time"))
        phase = raw["pod_phase"].fillna("").astype(str).to_numpy()
        share = np.where((gpus == 1) & (milli > 0) & (milli < 1000), milli / 1000.0, np.nan)
        table = pd.DataFrame({
            "submit_time": created, "duration": deleted - scheduled, "name": raw["name"], "phase": phase,
            "gpus_asked": gpus, "gpu_share": share, "gpu_models": raw["gpu_spec"].fillna("").astype(str),
            "qos": raw["qos"],
        })
        c = Cleaning(table, str(path))
        c.drop(np.isnan(created), "pods without a creation time")
        c.drop(~(c.table["gpus_asked"].to_numpy() > 0), "pods asking for no GPU (CPU-only)")
        c.drop(c.table["phase"].to_numpy() == "Pending", "pods never scheduled (Pending)")
        c.drop(~(c.table["duration"].to_numpy() > 0), "pods whose run time (deletion − scheduled) is missing, zero "
                                                      "or negative")
        c.note(int((c.table["phase"] == "Running").sum()), "pods still Running at collection",
               "kept, their deletion_time taken as the end (alibaba/clusterdata#218)")
        if self.failed == "drop":
            c.drop(c.table["phase"].to_numpy() == "Failed", "pods that failed (phase Failed)")
        c.note(int(c.table["gpu_share"].notna().sum()), "pods asking for a fraction of one GPU",
               "kept with their share (gpu_share); run on a whole GPU until GPUs are shared")
        self._select(c)
        t = c.table
        return self._done(c, {"submit_time": t["submit_time"], "duration": t["duration"], "name": t["name"],
                              "gpu_share": t["gpu_share"], "gpu_models": t["gpu_models"], "phase": t["phase"],
                              "qos": t["qos"]}, t["gpus_asked"].astype(int))

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        nodes = beside(path, self.nodes, "openb_node_list_gpu_node.csv")
        if nodes is None:
            raise CapsimError(f"trace format 'alibaba_pai_2023': no node list beside {path}; name it with the option "
                              f"nodes (e.g. openb_node_list_gpu_node.csv)")
        return node_servers(nodes, "an Alibaba node list (CSV)")


@TRACE_FORMATS.register("alibaba_spot_2026")
class AlibabaSpot2026(ProductionTrace):
    """Alibaba's spot-GPU trace v2026 (module docstring): a job of ``worker_num`` workers of ``gpu_request`` GPUs
    each, on the GPU model it names, for ``duration`` seconds. Its ``job_type`` (HP: high priority with strict SLOs,
    or Spot: preemptible) is kept; the option ``job_type`` keeps only one of them. Jobs without GPUs or with a
    missing, zero or negative duration are left out and counted. ``nodes`` names the node table (default
    ``node_info_df.csv`` beside the trace). Shared options: ``ProductionTrace`` (the trace records no failures)."""

    file_kind = "Alibaba spot-GPU v2026 job table (CSV)"
    example = (
        "job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,submit_time,duration,job_type\n"
        "job-a,org1,A10,8,1,1,0,3600,HP\n"
        "job-b,org2,A100-SXM4-80GB,32,1,4,120,7200,Spot\n"
        "job-c,org2,H800,64,8,2,90,600,Spot\n"
    )
    example_jobs = 3

    def __init__(self, job_type: str | None = None, nodes: str | None = None, start: float | None = None,
                 end: float | None = None, sample: int | None = None, seed: int = 0, elastic: bool = False):
        if job_type not in (None, "HP", "Spot"):
            raise CapsimError(f"trace format 'alibaba_spot_2026': job_type must be 'HP' or 'Spot' (or omitted), got "
                              f"{job_type!r}")
        if nodes is not None and not isinstance(nodes, str):
            raise CapsimError(f"trace format 'alibaba_spot_2026': nodes must be a file name, got {nodes!r}")
        self.job_type, self.nodes = job_type, nodes
        self._common(start, end, sample, seed, "keep", elastic)

    def read(self, path: Path) -> pd.DataFrame:
        import pandas as pd

        raw = read_csv(path, self.file_kind, dtype={"job_name": str, "gpu_model": str, "job_type": str})
        pick_layout(path, list(raw.columns), {"v2026 jobs": ("job_name", "gpu_model", "gpu_request", "worker_num",
                                                             "submit_time", "duration", "job_type")})
        per, workers = numbers(raw["gpu_request"]), numbers(raw["worker_num"])
        table = pd.DataFrame({"submit_time": numbers(raw["submit_time"]), "duration": numbers(raw["duration"]),
                              "name": raw["job_name"], "measured_gpu": raw["gpu_model"].fillna("").astype(str),
                              "asked": per * workers, "job_type": raw["job_type"]})
        c = Cleaning(table, str(path))
        c.drop(np.isnan(c.table["submit_time"].to_numpy()), "jobs without a submission time")
        c.drop(~(c.table["asked"].to_numpy() > 0), "jobs asking for no GPU")
        c.drop(~(c.table["duration"].to_numpy() > 0), "jobs whose duration is missing, zero or negative")
        if self.job_type is not None:
            c.keep_only(c.table["job_type"].to_numpy() == self.job_type, f"jobs of type other than {self.job_type}")
        self._select(c)
        t = c.table
        whole, share = self._whole(c, t["asked"].to_numpy(), "jobs asking for a non-whole number of GPUs")
        return self._done(c, {"submit_time": t["submit_time"], "duration": t["duration"], "name": t["name"],
                              "measured_gpu": t["measured_gpu"], "gpu_share": share, "job_type": t["job_type"]},
                          whole)

    def hardware(self, path: Path) -> tuple[Servers, ...]:
        nodes = beside(path, self.nodes, "node_info_df.csv")
        if nodes is None:
            raise CapsimError(f"trace format 'alibaba_spot_2026': no node table beside {path}; name it with the "
                              f"option nodes (node_info_df.csv)")
        return node_servers(nodes, "an Alibaba node table (CSV)")
