"""Small hand-built snapshots for policy tests: two VM types, explicit runtime arrays, no engine needed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from sim.catalogue import configurations, gpu
from sim.model import ClusterRules, Job, JobSpec, JobView, NodeView, Snapshot, VMType

SMALL = VMType("small", gpu("K80"), 1, 3.6)
BIG = VMType("big", gpu("K80"), 2, 7.2)
VMS = (SMALL, BIG)
CONFIGS = configurations(VMS)
SPEC = JobSpec("resnet50", "pytorch", 100, 64, name="T")


def job(
    jid: int,
    estimates: Sequence[float],
    deadline: float = 1e9,
    submit: float = 0.0,
    weight: float = 0.01,
    done: float = 0.0,
    node: int | None = None,
    config: int | None = None,
    since: float | None = None,
) -> JobView:
    """A job view with explicit per-configuration runtimes (inf = unsupported)."""
    est = np.asarray(estimates, dtype=float)
    est.setflags(write=False)
    return JobView(Job(jid, SPEC, submit, deadline, weight), est, done=done, node=node, config=config, since=since)


def snapshot(
    waiting: Iterable[JobView] = (),
    running: Iterable[JobView] = (),
    nodes: Sequence[NodeView] | int = 2,
    time: float = 0.0,
    vm_types: tuple[VMType, ...] = VMS,
    restart_overhead: float = 0.0,
) -> Snapshot:
    """A snapshot; ``nodes`` is a node count (all empty, unrestricted) or explicit node views."""
    if isinstance(nodes, int):
        nodes = [NodeView(i) for i in range(nodes)]
    nodes = tuple(nodes)
    return Snapshot(
        time=time,
        trigger="arrival",
        configs=configurations(vm_types),
        vm_types=vm_types,
        nodes=nodes,
        waiting=tuple(waiting),
        running=tuple(running),
        empty_nodes=tuple(n.index for n in nodes if n.vm is None),
        rules=ClusterRules(restart_overhead=restart_overhead),
    )
