"""The greedy heuristic of REFERENCE §4: pressure order, D* setups, best-fit sharing, then shrink and hand out GPUs.

Used where the MILP is too slow. Jobs are taken by pressure (now + fastest remaining time − deadline, highest first).
Each gets its D* setup (GPU model and count). It goes first on an open VM of that GPU model with enough free GPUs (best
fit), else on an empty slot with the largest VM of that GPU model. After every job is placed, each newly opened VM
shrinks to the smallest VM of its GPU model that still holds its jobs. Any GPUs still idle go, one at a time, to the
new job on that VM that speeds up the most.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import Policy, register
from optim.common import config_table, d_star
from sim.model import Assignment, JobView, Plan, Snapshot, VMType

__all__ = ["Greedy"]


@register("greedy")
class Greedy(Policy):
    """Pressure-ordered best-fit list scheduling with GPU sharing (no preemption)."""

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = True

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting:
            return Plan()
        now = snapshot.time
        table = config_table(snapshot.configs)
        configs = snapshot.configs
        cfg = table.index
        # node state after the plan so far: VM, free GPUs, and whether it is newly opened here
        vm_of: dict[int, VMType] = {nv.index: nv.vm for nv in snapshot.nodes if nv.vm is not None and nv.used_gpus}
        free = {n: vm_of[n].gpus - snapshot.nodes[n].used_gpus for n in vm_of}
        empty = [nv.index for nv in snapshot.nodes if nv.index not in vm_of]
        opened: dict[int, list[tuple[JobView, int]]] = {}

        def pressure(jv: JobView) -> float:
            return now + float(np.min((1.0 - jv.done) * jv.estimates)) - jv.job.deadline

        placed: dict[int, tuple[int, int]] = {}
        for jv in sorted(snapshot.waiting, key=lambda j: (-pressure(j), j.job.submit_time, j.id)):
            mask = self._reachable(snapshot, table, vm_of, free, empty)
            k = d_star(jv, now, table, mask)
            if k is None:
                continue
            want = configs[k]
            node, vm = self._best_fit(jv, want.vm.gpu.name, want.gpus, vm_of, free, cfg)
            if node is None:
                node, vm = self._new_node(snapshot, jv, want.vm.gpu.name, want.gpus, empty, cfg)
                if node is None:
                    continue
                empty.remove(node)
                vm_of[node], free[node] = vm, vm.gpus
                opened[node] = []
            free[node] -= want.gpus
            placed[jv.id] = (node, want.gpus)
            if node in opened:
                opened[node].append((jv, want.gpus))

        for node, jobs in opened.items():
            self._shrink_and_share(snapshot, node, jobs, vm_of, cfg, placed)

        start = tuple(Assignment(j, n, g) for j, (n, g) in placed.items())
        vms = {n: vm_of[n].name for n in opened if snapshot.nodes[n].vm != vm_of[n]}
        return Plan(vms=vms, start=start)

    @staticmethod
    def _reachable(snapshot, table, vm_of, free, empty) -> np.ndarray:
        """Configs some open VM of the same GPU model can take now, or some empty slot can host."""
        mask = np.zeros(len(snapshot.configs), dtype=bool)
        for n in empty:
            mask |= table.accepted_by(snapshot.nodes[n].allowed)
        room: dict[str, int] = {}
        for n, vm in vm_of.items():
            room[vm.gpu.name] = max(room.get(vm.gpu.name, 0), free[n])
        for k, c in enumerate(snapshot.configs):
            if c.gpus <= room.get(c.vm.gpu.name, 0):
                mask[k] = True
        return mask

    @staticmethod
    def _best_fit(jv, gpu, g, vm_of, free, cfg):
        """The open VM of GPU model ``gpu`` with the fewest free GPUs that still fit ``g`` and support the job."""
        best = None
        for n, vm in vm_of.items():
            k = cfg.get((vm.name, g))
            if vm.gpu.name != gpu or free[n] < g or k is None or not np.isfinite(jv.estimates[k]):
                continue
            if best is None or (free[n], n) < (free[best[0]], best[0]):
                best = (n, vm)
        return best if best is not None else (None, None)

    @staticmethod
    def _new_node(snapshot, jv, gpu, g, empty, cfg):
        """The first empty slot that accepts the largest VM of GPU model ``gpu`` able to run the job with ``g``."""
        types = sorted(
            (v for v in snapshot.vm_types if v.gpu.name == gpu and v.gpus >= g),
            key=lambda v: (-v.gpus, v.price_per_hour),
        )
        for vm in types:
            k = cfg.get((vm.name, g))
            if k is None or not np.isfinite(jv.estimates[k]):
                continue
            for n in empty:
                if snapshot.nodes[n].accepts(vm.name):
                    return n, vm
        return None, None

    @staticmethod
    def _shrink_and_share(snapshot, node, jobs, vm_of, cfg, placed) -> None:
        """Shrink a new VM to the smallest of its GPU model that holds its jobs; give idle GPUs to the best speed-up."""
        nv = snapshot.nodes[node]
        used = sum(g for _, g in jobs)
        vm = vm_of[node]
        for cand in sorted(snapshot.vm_types, key=lambda v: (v.gpus, v.price_per_hour)):
            if cand.gpu.name != vm.gpu.name or cand.gpus < used or not nv.accepts(cand.name):
                continue
            ks = [cfg.get((cand.name, g)) for _, g in jobs]
            if all(k is not None and np.isfinite(jv.estimates[k]) for (jv, _), k in zip(jobs, ks)):
                vm = cand
                break
        vm_of[node] = vm
        idle = vm.gpus - used
        gpus = {jv.id: g for jv, g in jobs}
        while idle > 0:
            best, gain = None, 1.0
            for jv, _ in jobs:
                g = gpus[jv.id]
                now_k, more_k = cfg.get((vm.name, g)), cfg.get((vm.name, g + 1))
                if more_k is None or now_k is None:
                    continue
                ratio = float(jv.estimates[now_k]) / float(jv.estimates[more_k])
                if np.isfinite(ratio) and ratio > gain:
                    best, gain = jv, ratio
            if best is None:
                break
            gpus[best.id] += 1
            idle -= 1
        for jv, _ in jobs:
            placed[jv.id] = (node, gpus[jv.id])
