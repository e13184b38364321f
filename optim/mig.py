"""MIG slices in capacity planning: a layer that cuts A100/H100 GPUs into slices for the waiting jobs a slice serves
more cheaply than a whole GPU, then lets a base policy place the rest on whole GPUs (``docs/sharing.md``, "MIG
slices").

At each decision, with the cluster's slice speeds (``Snapshot.mig``):

1. **Jobs that may take a slice**: waiting jobs on one GPU (``JobSpec.gpus`` None or 1), by deadline. A job's slice
   time is its estimate on the VM type with one GPU over its speed on the slice.
2. **Free slices first**: a slice of a running VM's layout that no job holds. Its cost is its share of the rent for the
   job's time on it (its compute share of one GPU's part of the VM's price, as the engine splits cost), or, if larger,
   the whole VM's rent for the time the VM would be held beyond its running jobs' expected ends (from now on an idle
   or new VM), split evenly among the jobs a GPU cut in this decision takes; plus the job's tardiness.
3. **Idle GPUs are cut** as MISO chooses partitions (Li et al., SoCC'22): among NVIDIA's 78 maximal layouts, the one
   other than the single 7g slice (the whole GPU, which the base policy gives) that maximises the summed speed of the
   waiting jobs matched to its slices (each job, in deadline order, to the free
   slice where it goes fastest, the smaller slice on a tie; of layouts as fast, the one using the least compute, so a
   fractional request gets the smallest slice that fits); repartitioning costs ``ClusterRules.mig_reconfigure_time``
   before the slices run. Idle GPUs of running VMs first, then, with ``rent``, a new VM of the MIG type cheapest per
   GPU on an empty node when at least ``min_jobs`` jobs take a slice of it.
4. A job takes a slice only where that costs less than running it alone on whole GPUs (``standalone_cost``: the
   cheapest whole-VM rental plus tardiness from now); the rest, and every other job, go to the base policy, which sees
   the cut GPUs as used and the new slice jobs as running.
5. While jobs are left for the base policy, a cut GPU that holds no job and took none now is made whole again (it is
   ready after the reconfiguration time).

The base policy is any plan-deciding policy that does not preempt (``greedy`` by default; ``milp`` with ``preempt``
false, its default: the slices are this layer's, the MILP plans whole GPUs around them); without MIG (no
``Snapshot.mig``) this layer is the base policy alone.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from optim.base import Policy, build, register
from optim.common import config_table, standalone_cost
from sim.model import Assignment, CapsimError, JobView, Layout, Plan, Slice, Snapshot, VMType
from sim.vocabulary.mig import PROFILES, maximal_layouts, mig_capable

__all__ = ["MigSlicing", "choose_layout"]

_WHOLE: Layout = (("7g", 0),)


def choose_layout(speeds: list[dict[str, float]]) -> tuple[Layout, list[tuple[int, tuple[str, int]]]]:
    """MISO's choice for one GPU: the maximal layout maximising the summed speed of the jobs (``speeds[i]``: job i's
    speed per profile, in priority order) each matched to the free slice where it goes fastest (the smaller on a
    tie); returns it and the (job, slice) matches. Of layouts as fast, the one whose matched slices use the least
    compute (the rest stays free), then the one listed first."""
    best: tuple[float, int, Layout, list[tuple[int, tuple[str, int]]]] = (-1.0, 0, (), [])
    for layout in maximal_layouts():
        if layout == _WHOLE:
            continue  # one 7g slice is the whole GPU, later: a job wanting it goes to the base policy
        free = list(layout)
        matched, total, compute = [], 0.0, 0
        for i, sp in enumerate(speeds):
            if not free:
                break
            pick = max(free, key=lambda s: (sp.get(s[0], 0.0), -PROFILES[s[0]].compute, -s[1]))
            v = sp.get(pick[0], 0.0)
            if v > 0:
                free.remove(pick)
                matched.append((i, pick))
                total += v
                compute += PROFILES[pick[0]].compute
        if total > best[0] + 1e-12 or (total > best[0] - 1e-12 and compute < best[1]):
            best = (total, compute, layout, matched)
    return best[2], best[3]


_CUTS = tuple(p for p in PROFILES if p != "7g")
"""The profiles a cut GPU's jobs may take (a 7g slice is the whole GPU, the base policy's)."""


@lru_cache(maxsize=4096)
def _choose(speeds: tuple[tuple[float, ...], ...]) -> tuple[Layout, list[tuple[int, tuple[str, int]]]]:
    """``choose_layout`` for speeds given per job in ``PROFILES`` order, cached (a trace's jobs share few specs)."""
    return choose_layout([dict(zip(PROFILES, sp)) for sp in speeds])


class _Lazy(dict[Any, Any]):
    """A dict whose missing values are computed by ``make(key)`` when first read."""

    def __init__(self, make: Any):
        super().__init__()
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(key)
        return value


@register("mig")
class MigSlicing(Policy):
    """MIG slices for the jobs a slice serves more cheaply, chosen as MISO does, then ``base`` (a registered policy
    kind, built with ``params``) for the rest; ``rent``: open new MIG VMs to cut when at least ``min_jobs`` jobs take
    their slices."""

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = True
    may_gang: ClassVar[bool] = True
    may_colocate: ClassVar[bool] = True  # its base's pairs on whole GPUs, where the cluster allows co-location
    needs_mig: ClassVar[bool] = True
    """Only a MIG cluster gives it anything to do (elsewhere it is its base): default policy lists skip it there."""

    def __init__(self, base: str = "greedy", params: dict[str, Any] | None = None, rent: bool = True,
                 min_jobs: int = 2):
        self.base = base
        self.params = params
        self.rent = rent
        self.min_jobs = min_jobs
        self._base = build(base, **(params or {}))
        if self._base.may_preempt and self._base.get_params().get("preempt", True) is not False:
            raise CapsimError(f"policy mig: base {base!r} preempts; MIG slicing wraps a policy that places waiting "
                              f"jobs only (e.g. greedy, insertion, or milp without preempt)")
        if not (isinstance(min_jobs, int) and min_jobs >= 1):
            raise CapsimError(f"policy mig: min_jobs must be a whole number >= 1, got {min_jobs!r}")

    def decide(self, s: Snapshot) -> Plan:
        if s.mig is None:
            return self._base.decide(s)
        placed, views, layouts, vms, cuts = self._slices(s)
        cut_nodes = set(cuts)
        if not placed and not layouts:
            return self._base.decide(s)
        taken = {a.job_id for a in placed}
        busy = {a.node for a in placed}
        nodes = list(s.nodes)
        for n, extra in cuts.items():
            nv = nodes[n]
            vm = nv.vm or s.vm_type(vms[n])
            nodes[n] = replace(nv, vm=vm, used_gpus=max(0, min(vm.gpus, nv.used_gpus + extra)))
        # the base sees the new slice jobs running (a policy may read a node's room from its running jobs)
        rest = replace(s, waiting=tuple(jv for jv in s.waiting if jv.id not in taken), nodes=tuple(nodes),
                       running=s.running + tuple(views),
                       empty_nodes=tuple(n for n in s.empty_nodes if n not in vms),
                       idle_nodes=tuple(n for n in s.idle_nodes if n not in cut_nodes and n not in busy))
        plan = self._base.decide(rest) if rest.waiting or rest.idle_nodes else Plan()
        own = {n: vms.get(n) or getattr(s.nodes[n].vm, "name", None) for n in cut_nodes | busy}
        own.update({key[0]: getattr(s.nodes[key[0]].vm, "name", None) for key in layouts if key[0] not in own})
        lost = {n for n, name in plan.vms.items() if n in own and name != own[n]}
        if lost:  # the base changes a VM this layer cuts: the base's plan stands, these jobs wait
            placed = [a for a in placed if a.node not in lost]
            layouts = {key: lay for key, lay in layouts.items() if key[0] not in lost}
            vms = {n: name for n, name in vms.items() if n not in lost}
        return Plan(vms={**plan.vms, **vms}, start=plan.start + tuple(placed), move=plan.move, preempt=plan.preempt,
                    keep_idle=plan.keep_idle, info=plan.info, layouts=layouts)

    def _slices(self, s: Snapshot) -> tuple[list[Assignment], list[JobView], dict[tuple[int, int], Layout],
                                            dict[int, str], dict[int, int]]:
        """The slice placements with the views of their jobs once running, the new layouts, new VMs and, per node,
        the change in cut GPUs (module docstring)."""
        mig = s.mig
        assert mig is not None
        table = config_table(s.configs)
        now = s.time
        jobs = sorted((jv for jv in s.waiting if jv.job.spec.gpus in (None, 1)), key=lambda jv: jv.job.deadline)
        if not jobs:
            return [], [], {}, {}, {}
        usable = np.ones(len(s.configs), dtype=bool)
        by_id = {jv.id: jv for jv in jobs}
        alone = _Lazy(lambda i: standalone_cost(by_id[i], now, table, usable))  # computed for the jobs priced only
        on_node: dict[int, list[JobView]] = {}
        held: set[tuple[int, Slice]] = set()
        for jv in s.running:
            if jv.node is not None:
                on_node.setdefault(jv.node, []).append(jv)
                if jv.slice is not None:
                    held.add((jv.node, jv.slice))
        ends = _Lazy(lambda n: max([now, *(now + jv.remaining_at(now) for jv in on_node.get(n, ()))]))
        placed: list[Assignment] = []
        views: list[JobView] = []
        left = list(jobs)

        def cost(jv: JobView, vm: VMType, node: int, compute: int, speed: float, begin: float,
                 sharers: int = 1) -> float:
            k = table.index.get((vm.name, 1))
            if k is None or not speed > 0:
                return math.inf
            t = (1.0 - jv.done) * float(jv.estimates[k]) / speed
            if not math.isfinite(t):
                return math.inf
            finish = begin + t
            share = vm.price_per_second / vm.gpus * compute / 7 * (finish - now)
            extension = vm.price_per_second * max(0.0, finish - ends[node]) / sharers
            return max(share, extension) + jv.job.weight * max(0.0, finish - jv.job.deadline)

        def take(jv: JobView, node: int, cut: Slice, vm: VMType, begin: float) -> None:
            placed.append(Assignment(jv.id, node, 1, slice=cut))
            views.append(replace(jv, node=node, config=table.index[(vm.name, 1)], since=begin,
                                 pace=1.0 / mig.speed(jv.job.spec, vm.gpu, cut.profile), slice=cut))
            held.add((node, cut))
            left.remove(jv)

        # 2. free slices of running VMs
        for nv in s.nodes:
            host = nv.vm
            if host is None or not nv.layouts:
                continue
            for d, layout in enumerate(nv.layouts):
                if not layout:
                    continue
                ready = max(now, nv.ready_at, nv.devices_ready[d] if d < len(nv.devices_ready) else now)
                for profile, start in layout:
                    cut = Slice(d, start, profile)
                    if (nv.index, cut) in held or not left:
                        continue
                    c = PROFILES[profile].compute
                    gain = {jv.id: cost(jv, host, nv.index, c, mig.speed(jv.job.spec, host.gpu, profile), ready)
                            - alone[jv.id] for jv in left}
                    best = min(left, key=lambda jv: gain[jv.id])
                    if gain[best.id] < 0:
                        take(best, nv.index, cut, host, ready)
        # 3. idle GPUs of running VMs, then new VMs
        layouts: dict[tuple[int, int], Layout] = {}
        cut_nodes: dict[int, int] = {}
        vms: dict[int, str] = {}
        reconf = s.rules.mig_reconfigure_time
        refused: set[tuple[str, float, float, int]] = set()
        for nv in s.nodes:
            if nv.vm is None or not mig_capable(nv.vm.gpu):
                continue
            for d in nv.idle_gpus:
                if not left or (nv.layouts and nv.layouts[d]):
                    continue
                begin = max(now, nv.ready_at) + reconf
                # a cut's prices depend on the GPU only through its node's VM, start and running jobs' ends: a GPU
                # like one that took no job, for the same waiting jobs (none taken since), takes none either
                key = (nv.vm.name, begin, ends[nv.index], len(placed))
                if key in refused:
                    continue
                got = self._cut(s, nv.vm, nv.index, d, begin, left, cost, alone)
                if not got:
                    refused.add(key)
                    continue
                layouts[(nv.index, d)] = got[0]
                cut_nodes[nv.index] = cut_nodes.get(nv.index, 0) + 1
                for jv, cut in got[1]:
                    take(jv, nv.index, cut, nv.vm, begin)
        if self.rent:
            types = [v for v in s.vm_types if mig_capable(v.gpu) and (v.name, 1) in table.index]
            unrented: set[tuple[str, tuple[int, ...]]] = set()
            for n in s.empty_nodes:
                if len(left) < self.min_jobs:
                    break
                fits = [v for v in types if s.nodes[n].accepts(v.name)]
                if not fits:
                    continue
                vm = min(fits, key=lambda v: (v.price_per_second / v.gpus, v.name))
                begin = now + vm.boot_time + reconf
                order = (vm.name, tuple(jv.id for jv in left))  # an empty node is priced by its VM and the queue
                if order in unrented:
                    continue
                unrented.add(order)
                got_any = []
                for d in range(vm.gpus):
                    got = self._cut(s, vm, n, d, begin, left, cost, alone)
                    if not got:
                        break
                    got_any.append((d, got))
                    for jv, _ in got[1]:
                        left.remove(jv)
                count = sum(len(g[1]) for _, g in got_any)
                for _, g in got_any:
                    left.extend(jv for jv, _ in g[1])
                if count < self.min_jobs:
                    continue
                vms[n] = vm.name
                for d, (layout, matches) in got_any:
                    layouts[(n, d)] = layout
                    cut_nodes[n] = cut_nodes.get(n, 0) + 1
                    for jv, cut in matches:
                        take(jv, n, cut, vm, begin)
                left.sort(key=lambda jv: jv.job.deadline)
        # 5. cut GPUs left idle are made whole again while jobs wait for the base policy
        if len(placed) < len(s.waiting):
            used = {(a.node, a.slice.device) for a in placed if a.slice is not None}
            for nv in s.nodes:
                for d in nv.idle_gpus:
                    if nv.layouts and nv.layouts[d] and (nv.index, d) not in layouts and (nv.index, d) not in used:
                        layouts[(nv.index, d)] = ()
                        cut_nodes[nv.index] = cut_nodes.get(nv.index, 0) - 1
        return placed, views, layouts, vms, cut_nodes

    def _cut(self, s: Snapshot, vm: VMType, node: int, d: int, begin: float, left: list[JobView], cost: Any,
             alone: dict[int, float]) -> tuple[Layout, list[tuple[JobView, Slice]]] | None:
        """The layout MISO's rule gives GPU ``d`` of ``node`` for the first 7 waiting jobs, and the matched jobs whose
        slice there costs less than running alone; None if no job would take a slice."""
        mig = s.mig
        assert mig is not None
        group = left[:7]
        if not any(cost(jv, vm, node, PROFILES[p].compute, mig.speed(jv.job.spec, vm.gpu, p), begin, 7) < alone[jv.id]
                   for jv in group for p in _CUTS):
            return None  # no slice could serve any of them even were the cut shared by 7: a lower bound on its cost
        out: list[tuple[JobView, Slice]] = []
        layout: Layout = ()
        for _ in range(2):  # once more with the jobs a slice served, which may then get larger ones
            speeds = [{p: mig.speed(jv.job.spec, vm.gpu, p) for p in PROFILES} for jv in group]
            layout, matches = _choose(tuple(tuple(sp.values()) for sp in speeds))
            out = [(group[i], Slice(d, start, p)) for i, (p, start) in matches
                   if cost(group[i], vm, node, PROFILES[p].compute, speeds[i][p], begin, len(matches))
                   < alone[group[i].id]]
            if len(out) == len(matches):
                break
            group = [jv for jv, _ in out]
        return (layout, out) if out else None
