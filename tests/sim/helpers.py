"""Small hand-built worlds for the engine tests: two VM types, two job specs, explicit runtimes."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from optim.base import Policy
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.model import Assignment, ClusterRules, Job, JobSpec, Plan, Snapshot, VMType

K80 = gpu("K80")
SMALL = VMType("small", K80, 1, 3.6)          # $0.001 per second
BIG = VMType("big", K80, 2, 7.2)              # $0.002 per second
SLOW = VMType("slow", K80, 1, 3.6, boot_time=20.0)
A = JobSpec("alexnet", "pytorch", 100, 32, name="A")
B = JobSpec("alexnet", "pytorch", 50, 32, name="B")

RUNTIMES = {
    "A/small/1": 100.0, "A/big/1": 100.0, "A/big/2": 50.0, "A/slow/1": 100.0,
    "B/small/1": 50.0, "B/big/1": 50.0, "B/big/2": 30.0, "B/slow/1": 50.0,
}


def table(**overrides: float) -> TablePredictor:
    return TablePredictor({**RUNTIMES, **{k.replace("_", "/"): v for k, v in overrides.items()}})


def cluster(n: int = 1, types: tuple[VMType, ...] = (SMALL, BIG), **kw) -> Cluster:
    return Cluster(types, tuple(NodeSlot() for _ in range(n)), rules=ClusterRules(**kw))


def job(i: int, spec: JobSpec, submit: float, deadline: float = 1e9, weight: float = 0.01) -> Job:
    return Job(i, spec, submit, deadline, weight)


class FirstFit(Policy):
    """Queue order; each waiting job takes a free node (no VM, or an idle VM) with ``vm`` x ``gpus``."""

    name = "firstfit"

    def __init__(self, vm: str = "small", gpus: int = 1):
        self.vm, self.gpus = vm, gpus

    def decide(self, s: Snapshot) -> Plan:
        free = [n.index for n in s.nodes if (n.vm is None or n.used_gpus == 0) and n.accepts(self.vm)]
        vms, start = {}, []
        for jv, n in zip(s.waiting, free):
            vms[n] = self.vm
            start.append(Assignment(jv.id, n, self.gpus))
        return Plan(vms=vms, start=tuple(start))


class Scripted(Policy):
    """Answers each decision with ``script(snapshot)``; records every snapshot it saw. ``preempt``, ``share`` and
    ``gang``, when given, declare the capabilities on a subclass made for the instance (capabilities are class
    attributes)."""

    name = "scripted"
    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False

    def __new__(cls, *args: object, **kwargs: object) -> Scripted:
        given = (("may_preempt", "preempt"), ("may_share", "share"), ("may_gang", "gang"))
        flags = {flag: kwargs[k] for flag, k in given if kwargs.get(k) is not None}
        return super().__new__(type(cls.__name__, (cls,), flags) if flags else cls)

    def __init__(self, script: Callable[[Snapshot], Plan], *, preempt: bool | None = None, share: bool | None = None,
                 gang: bool | None = None):
        self.script, self.preempt, self.share, self.gang = script, preempt, share, gang
        self.seen: list[Snapshot] = []

    def decide(self, s: Snapshot) -> Plan:
        self.seen.append(s)
        return self.script(s)


def preempt_job0_at_10(s: Snapshot) -> Plan:
    """One node: job 1 arriving at t=10 preempts job 0; whoever waits takes the node when it is idle again."""
    if s.time == 10.0 and s.trigger == "arrival":
        return Plan(preempt=(0,), start=(Assignment(1, 0, 1),))
    if s.waiting and s.nodes[0].used_gpus == 0:
        return Plan(vms={0: "small"}, start=(Assignment(s.waiting[0].id, 0, 1),))
    return Plan()
