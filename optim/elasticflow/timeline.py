"""What ElasticFlow's planners share: a free-GPU timeline, per-job GPU bounds and the job record a plan works on.

A timeline maps times to the GPUs free from that time until the next key (a dict kept in time order, with no key
repeating the value before it after ``merged``). Plans lay jobs onto it one after another, in deadline order.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.elasticflow.vocabulary import LEVELS, SLOT, JobStatus, ReplayJob
from sim.model import CapsimError

__all__ = ["TOP", "Timeline", "PlanJob", "PlanJobs", "merged", "ordered", "gpu_seconds", "elasticflow_cap", "table_cap"]

Timeline = dict[float, int]

TOP = [0] + [1 << (v.bit_length() - 1) for v in range(1, 4097)]
"""The largest power of two at most v, for the free-GPU counts of clusters up to 4,096 GPUs (0 for 0)."""


def merged(d: dict[float, int]) -> dict[float, int]:
    """``d`` without the keys whose value repeats the previous key's (ElasticFlow's ``merge_dict``)."""
    out: dict[float, int] = {}
    last: int | None = None
    for k, v in d.items():
        if v == last:
            continue
        out[k] = v
        last = v
    return out


def ordered(d: dict[float, int]) -> dict[float, int]:
    return dict(sorted(d.items()))


def gpu_seconds(allocations: dict[float, int], end: float) -> float:
    """GPU-seconds of a plan: each allocation held until the next one, the last until ``end``."""
    total = 0.0
    last_t: float | None = None
    last_g = 0
    for t, g in allocations.items():
        if last_t is not None:
            total += last_g * (t - last_t)
        last_t, last_g = t, g
    if last_t is not None:
        total += last_g * (end - last_t)
    return total


def elasticflow_cap(job: ReplayJob, gpu: str) -> int:
    """ElasticFlow's own GPU cap of a job (its ``models.get_max_gpu``): measured scaling limits per model and batch,
    on A100 servers, or the T4 ones (``gpu`` names the cluster's GPU model)."""
    m, b = job.model, job.batch_size
    if gpu.upper().startswith("T4"):
        if m in ("bert", "cifar10"):
            return 16
        if m == "deepspeech2" and b == 320:
            return 32
        return {"yolov3": 4, "ncf": 1}.get(m, 64)
    if m == "deepspeech2":
        return b
    special = {("gpt2", 128): 16, ("gpt2", 256): 32, ("bert", 64): 8, ("inception3", 64): 16,
               ("inception3", 128): 32, ("resnet50", 64): 32, ("vgg16", 64): 32}
    if (m, b) in special:
        return special[(m, b)]
    if m == "bert":
        return 16
    return min(b, 64)


def table_cap(job: ReplayJob) -> int:
    """The GPU cap ElasticFlow's simulator gives every other policy: the largest GPU count its throughput table
    lists, at most 64 and at most the batch size."""
    return min(job.top, 64, job.batch_size)


class PlanJob:
    """A runnable job as a planner works on it: iterations left, deadline, its levels (GPU counts up to its cap)
    and rates, the scheduling slot its plans are aligned to, and the plan so far (GPUs from each time, planned end on
    the slot grid and exact)."""

    __slots__ = ("id", "job", "left", "ddl", "cap", "slot", "levels", "rate", "gpus", "allocations", "end", "real_end",
                 "next_gpus", "marginal", "next_allocations", "next_timeline", "next_end", "next_real_end", "running",
                 "trial", "held", "held_end", "held_list", "held_gs", "seen",
                 "seen_value", "region", "region_allocs", "region_job", "region_value")

    def __init__(self, status: JobStatus, cap: int, slot: int = SLOT):
        job = status.job
        self.id = job.id
        self.job = job
        self.ddl = job.deadline
        self.cap = cap
        self.slot = slot
        self.levels = tuple(g for g in LEVELS if g <= cap)
        self.rate = {g: r for g, r in zip(LEVELS, job.rates)}
        self.update(status)

    def update(self, status: JobStatus) -> PlanJob:
        """This job at a new decision: its progress and GPUs now, no plan yet."""
        self.left = status.left
        self.gpus = status.gpus
        self.running = status.running
        self.allocations: dict[float, int] = {}
        self.end = 0.0
        self.real_end = 0.0
        self.next_gpus = 0
        self.marginal = 0.0
        self.next_allocations: dict[float, int] = {}
        self.next_timeline: dict[float, int] = {}
        self.next_end = 0.0
        self.next_real_end = 0.0
        self.trial = False
        self.held: dict[float, int] | None = None  # the allocations the three below were read from
        self.held_end = 0.0
        self.held_list: list[tuple[float, int]] | None = None
        self.held_gs = 0.0
        self.seen: tuple[object, ...] | None = None  # what the last trial read (optim.elasticflow.trial)
        self.seen_value: float | None = None
        self.region: tuple[object, ...] | None = None  # what the last value on the lists' path was read from
        self.region_allocs: list[tuple[float, int]] | None = None
        self.region_job: tuple[int, float, float] | None = None
        self.region_value = 0.0
        return self


class PlanJobs:
    """The plan records of one run's jobs, built once per job (its cap, levels, rates) and renewed each decision."""

    def __init__(self, cap: Callable[[ReplayJob], int], cluster_gpus: int | None = None, policy: str = "",
                 slot: int = SLOT):
        self._cap = cap
        self._jobs: dict[int, PlanJob] = {}
        self._gpus = cluster_gpus
        self._policy = policy
        self._slot = slot

    def __call__(self, status: JobStatus) -> PlanJob:
        j = self._jobs.get(status.id)
        if j is None:
            cap = self._cap(status.job)
            if self._gpus is not None and min(cap, self._gpus) not in LEVELS:
                # ElasticFlow's elastic planners start a job at min(its cap, the cluster's GPUs) and look that count
                # up in the throughput table, whose columns are LEVELS: its simulator fails there (a KeyError).
                raise CapsimError(
                    f"{self._policy}: job {status.id} may use up to {cap} GPUs and the cluster has {self._gpus}; "
                    f"ElasticFlow's elastic planners then start it on {min(cap, self._gpus)} GPUs, which is not a "
                    f"count of its throughput tables ({', '.join(map(str, LEVELS))}), and its simulator fails "
                    f"there: give the cluster a power-of-two number of GPUs (or at least 64)")
            j = self._jobs[status.id] = PlanJob(status, cap, self._slot)
            return j
        return j.update(status)

    def forget(self, live: set[int]) -> None:
        """Drop the records of jobs that are gone (every so often, to bound memory on long traces)."""
        if len(self._jobs) > 2 * len(live) + 64:
            self._jobs = {i: j for i, j in self._jobs.items() if i in live}
