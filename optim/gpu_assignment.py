"""Which server of a heterogeneous cluster runs which job: heterogeneity-agnostic (``even``) or by speed-up
(``gpu_priority``), the two rules Takayama et al. compare on MLPerf (``docs/mlperf.md``).

Both give a job a whole server to itself ("one application per machine"): a free node (one hosting no job), all its
GPUs (or the GPU count the job asks for; or the most the estimator answers for); no sharing, no preemption, no gangs.
Like Gavel's policies they schedule the servers they are given (``plans_capacity`` false): on an empty slot of a
rented cluster they start a VM of an allowed type with a finite estimate for the job (``even``: the first in
catalogue order; ``gpu_priority``: the fastest).

- ``even``: jobs in arrival order; each takes the next free server in a round robin over the node indices, whatever
  its GPU type, so every server gets the same share of jobs of every kind.
- ``gpu_priority``: a job's speed-up is its estimated time on the slowest GPU type over that on the fastest (types
  ranked by their mean estimate over the waiting jobs). A free server of the slowest type takes the waiting job with
  the smallest speed-up (the one that loses least there); a server of any faster type the job whose time it cuts most
  relative to the slowest type. With P100 and V100 servers: the jobs that gain most from a V100 take the V100s.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import Policy, register
from sim.model import Assignment, JobView, NodeView, Plan, Snapshot

__all__ = ["Even", "GPUPriority"]


class _Assigner(Policy):
    """What both rules share: free servers, a job's configuration on a server, starting a VM on an empty slot."""

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = False
    may_gang: ClassVar[bool] = False
    plans_capacity: ClassVar[bool] = False

    def _index(self, s: Snapshot) -> dict[tuple[str, int], int]:
        return {(c.vm.name, c.gpus): k for k, c in enumerate(s.configs)}

    @staticmethod
    def _gpus(jv: JobView, vm_name: str, vm_gpus: int, index: dict[tuple[str, int], int]) -> int:
        """The GPUs the job takes on a server of that type: the count it asks for, else all of them, else the most
        the estimator answers for (0 if none)."""
        if jv.job.spec.gpus is not None:
            return jv.job.spec.gpus
        for g in range(vm_gpus, 0, -1):
            k = index.get((vm_name, g))
            if k is not None and np.isfinite(jv.estimates[k]):
                return g
        return 0

    def _estimate(self, jv: JobView, vm_name: str, vm_gpus: int, index: dict[tuple[str, int], int]) -> float:
        """The job's estimated runtime on a server of that type with the GPUs it takes there; inf if none."""
        k = index.get((vm_name, self._gpus(jv, vm_name, vm_gpus, index)))
        return float(jv.estimates[k]) if k is not None else np.inf

    def _open(self, s: Snapshot, node: NodeView, jv: JobView, index: dict[tuple[str, int], int],
              fastest: bool) -> str | None:
        """The VM type to start on an empty slot for ``jv``: the first allowed one with a finite estimate, or the
        fastest (``fastest``); None if none can run it."""
        best, best_t = None, np.inf
        for v in s.vm_types:
            if not node.accepts(v.name):
                continue
            t = self._estimate(jv, v.name, v.gpus, index)
            if np.isfinite(t) and (best is None or (fastest and t < best_t)):
                best, best_t = v.name, t
                if not fastest:
                    break
        return best

    @staticmethod
    def _free(s: Snapshot) -> list[int]:
        return sorted(set(s.empty_nodes) | set(s.idle_nodes))


@register("even")
class Even(_Assigner):
    """Heterogeneity-agnostic: arrival order, the next free server in a round robin (module docstring)."""

    def __init__(self) -> None:
        self._next = 0

    def decide(self, snapshot: Snapshot) -> Plan:
        free = self._free(snapshot)
        if not snapshot.waiting or not free:
            return Plan()
        index = self._index(snapshot)
        n_nodes = len(snapshot.nodes)
        vms: dict[int, str] = {}
        start: list[Assignment] = []
        for jv in sorted(snapshot.waiting, key=lambda j: (j.job.submit_time, j.job.id)):
            for step in range(n_nodes):
                n = (self._next + step) % n_nodes
                if n not in free:
                    continue
                node = snapshot.nodes[n]
                name = node.vm.name if node.vm is not None else self._open(snapshot, node, jv, index, fastest=False)
                if name is None:
                    continue
                gpus = snapshot.vm_type(name).gpus
                if not np.isfinite(self._estimate(jv, name, gpus, index)):
                    continue
                if node.vm is None:
                    vms[n] = name
                start.append(Assignment(jv.id, n, self._gpus(jv, name, gpus, index)))
                free.remove(n)
                self._next = (n + 1) % n_nodes
                break
            if not free:
                break
        return Plan(vms=vms, start=tuple(start))


@register("gpu_priority")
class GPUPriority(_Assigner):
    """The jobs that gain most from the faster GPU types take them (module docstring)."""

    def decide(self, snapshot: Snapshot) -> Plan:
        free = self._free(snapshot)
        if not snapshot.waiting or not free:
            return Plan()
        index = self._index(snapshot)
        types = [v for v in snapshot.vm_types if any(nv.accepts(v.name) for nv in snapshot.nodes)]
        waiting = sorted(snapshot.waiting, key=lambda j: (j.job.submit_time, j.job.id))
        est = np.array([[self._estimate(jv, v.name, v.gpus, index) for v in types] for jv in waiting])
        with np.errstate(invalid="ignore"):
            mean = np.array([np.mean(c[np.isfinite(c)]) if np.isfinite(c).any() else np.inf for c in est.T])
        rank = {v.name: r for r, v in enumerate(sorted(types, key=lambda v: (mean[types.index(v)], v.name)))}
        slowest = len(types) - 1
        slow_col = [types.index(v) for v in types if rank[v.name] == slowest][0]
        fast_col = [types.index(v) for v in types if rank[v.name] == 0][0]
        with np.errstate(invalid="ignore", divide="ignore"):
            speedup = est[:, slow_col] / est[:, fast_col]
        speedup = np.where(np.isfinite(speedup), speedup, 1.0)
        taken: set[int] = set()
        vms: dict[int, str] = {}
        start: list[Assignment] = []
        occupied = [n for n in free if snapshot.nodes[n].vm is not None]
        occupied.sort(key=lambda n: (rank.get(snapshot.nodes[n].vm.name, slowest), n))  # type: ignore[union-attr]
        for n in occupied:
            vm = snapshot.nodes[n].vm
            assert vm is not None
            col = types.index(vm) if vm in types else None
            best, key = None, None
            for i in range(len(waiting)):
                if i in taken or col is None or not np.isfinite(est[i, col]):
                    continue
                gain = speedup[i] if rank[vm.name] == slowest else est[i, slow_col] / est[i, col]
                k = -gain if rank[vm.name] == slowest else gain
                if best is None or k > key:
                    best, key = i, k
            if best is not None:
                taken.add(best)
                start.append(Assignment(waiting[best].id, n, self._gpus(waiting[best], vm.name, vm.gpus, index)))
        for n in (n for n in free if snapshot.nodes[n].vm is None):
            for i, jv in enumerate(waiting):
                if i in taken:
                    continue
                name = self._open(snapshot, snapshot.nodes[n], jv, index, fastest=True)
                if name is None:
                    continue
                vms[n] = name
                taken.add(i)
                start.append(Assignment(jv.id, n, self._gpus(jv, name, snapshot.vm_type(name).gpus, index)))
                break
        return Plan(vms=vms, start=tuple(start))
