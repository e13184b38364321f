"""The greedy heuristic (docs/reference.md §4): pressure order, D* setups, best-fit sharing, then shrink and hand out
GPUs.

Used where the MILP is too slow. Jobs are taken by pressure (now + fastest remaining time − deadline, highest first).
Each gets its D* setup (GPU model and count). It goes first on an open VM of that GPU model with enough free GPUs (best
fit), else on an empty slot with the largest VM of that GPU model. After every job is placed, each newly opened VM
shrinks to the smallest VM of its GPU model that still holds its jobs. Any GPUs still idle go, one at a time, to the
new job on that VM that speeds up the most.

Spot VMs (``VMType.spot``): a job's D* is taken on its expected runtime on each spot configuration
(``sim.risk.expected_view``: the revocations' expected lost work and restarts), so it rents spot where the discount
outweighs that; a job then goes only onto VMs of its setup's market (spot or on demand) as well as GPU model. A job
larger than one VM (a gang, on a cluster that allows gangs) takes whole empty nodes of its VM type, then the free
GPUs of open VMs of that type, most free first; its VMs are neither shrunk nor given to others' speed-ups.

Where GPUs may be shared (``Snapshot.colocation``), a job may instead join a running job alone on its GPUs, at the
estimator's slowdowns, when that costs less than running it alone (``optim.colocate``): before its D* placement, each
job in pressure order looks for the cheapest such pair; a running job takes one partner per decision.

``construct`` is that procedure; given a random generator it becomes the randomised greedy of the published
heuristics (docs/heuristics.md §H4): adjacent queue swaps, a setup drawn among the first entries of the D* ranking, a
node drawn among the best-fitting ones (``optim.heuristics`` builds on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from optim.base import Policy, register
from optim.colocate import HostIndex, best_host, earliest_free, hosts, queue_behind
from optim.common import ConfigTable, config_table, d_star, d_star_ranking
from optim.queue import JobColumns, order
from optim.room import NodeIndex, Room
from optim.spot.fleet import check_spot_rule, uniform_progress_snapshot
from sim.model import Assignment, Config, JobView, Plan, Snapshot, VMType
from sim.risk import expected_view

__all__ = ["Greedy", "construct", "pick_prefix", "pressure_order"]


@register("greedy")
class Greedy(Policy):
    """Pressure-ordered best-fit list scheduling with GPU sharing (no preemption), and co-location where the cluster
    allows it. ``spot_rule: uniform_progress`` narrows each waiting job to the market Uniform Progress allows it
    (``optim.spot.fleet``)."""

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = True
    may_gang: ClassVar[bool] = True
    may_colocate: ClassVar[bool] = True

    def __init__(self, spot_rule: str | None = None):
        self.spot_rule = spot_rule
        check_spot_rule(self.name, spot_rule)
        self._index: NodeIndex | None = None
        self._columns = JobColumns(_pressure_columns)

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting:
            return Plan()
        if self.spot_rule is not None:
            snapshot = uniform_progress_snapshot(snapshot)
        table = config_table(snapshot.configs)
        if self._index is None or self._index.table is not table:
            self._index = NodeIndex(table)
        return construct(snapshot, index=self._index, queue=pressure_order(snapshot, self._columns))


def pick_prefix(n: int, fraction: float, rng: np.random.Generator) -> int:
    """The published ``random_select``: a uniform index among the first round(fraction·n) of n ranked entries
    (the first one when that rounds to 0)."""
    return int(rng.integers(max(1, min(n, round(fraction * n)))))


def construct(
    snapshot: Snapshot,
    rng: np.random.Generator | None = None,
    alpha: float = 0.05,
    swap: float = 0.05,
    beta: float = 0.2,
    queue: Sequence[JobView] | None = None,
    index: NodeIndex | None = None,
    colocate: bool = True,
) -> Plan:
    """The greedy plan; with ``rng``, randomised as the published RandomGreedy (docs/heuristics.md §H4).

    ``alpha``: the setup is drawn among the first round(alpha·|D*|) entries of the D* ranking; ``swap``: after the
    pressure sort, each adjacent pair swaps with probability 0.5 + swap when the first job's weight is larger, else
    0.5 − swap; ``beta``: the node is drawn among the first round(beta·n) of the n fitting open nodes by leftover.
    ``queue`` is ``pressure_order(snapshot)`` when the caller has it already; ``index`` a ``NodeIndex`` of the
    snapshot's cluster kept across decisions (a fresh one otherwise); ``colocate``: a waiting job may join a running
    one on its GPUs where the cluster lets jobs share (false for a caller that does not declare ``may_colocate``).
    """
    if not snapshot.waiting:
        return Plan()
    now = snapshot.time
    table = config_table(snapshot.configs)
    configs = snapshot.configs
    cfg = table.index
    if index is None or index.table is not table:
        index = NodeIndex(table)
    index.follow(snapshot.nodes, snapshot.node_changes)
    room = Room(index, pack=True)  # free nodes (no VM, or an idle one) and the free GPUs of VMs that run jobs
    opened: dict[int, list[tuple[JobView, int]]] = {}
    vm_of: dict[int, VMType] = {}
    """The VM each node opened or given to a gang here will host."""
    gangs: dict[int, tuple[tuple[int, int], ...]] = {}
    spot = table.any_spot

    queue = list(queue if queue is not None else pressure_order(snapshot))
    if rng is not None:
        _swap_adjacent(queue, rng, swap)
    placed: dict[int, tuple[int, int]] = {}
    paired: list[Assignment] = []
    free_hosts = HostIndex(snapshot, hosts(snapshot) if colocate else [])
    later = earliest_free(snapshot) if free_hosts else now
    behind = None  # the queue behind the hosts, projected when a job first has a partner to weigh
    for jv in queue:
        if room.empty() and not free_hosts:
            break  # nothing left to place a job on
        partners = free_hosts.for_job(jv) if free_hosts else []
        if room.empty() and not partners:
            continue
        mask = _reachable(table, room) if not room.empty() else np.zeros(len(configs), dtype=bool)
        pair = None
        if partners:
            behind = behind if behind is not None else queue_behind(snapshot, snapshot.waiting)
            pair = best_host(snapshot, jv, partners, table, mask, later, behind)
        if pair is not None:
            host = pair[0]
            free_hosts.remove(host)
            paired.append(Assignment(jv.id, host.node, host.gpus, partner=host.view.id))
            continue
        if room.empty():
            continue
        view = expected_view(jv, snapshot) if spot else jv
        if rng is None:
            k = d_star(view, now, table, mask)
        else:
            ranking = d_star_ranking(view, now, table, mask)
            k = ranking[pick_prefix(len(ranking), alpha, rng)] if ranking else None
        if k is None:
            continue
        want = configs[k]
        if want.gpus > want.vm.gpus:
            parts = _gang(room, want, vm_of)
            if parts:
                gangs[jv.id] = parts
            continue
        fits = _fitting(jv, want.vm, want.gpus, room, table, single=rng is None)
        if fits:
            node, vm = fits[0] if rng is None else fits[pick_prefix(len(fits), beta, rng)]
        else:
            new_node, new_vm = _new_node(snapshot, jv, want.vm, want.gpus, room, cfg)
            if new_node is None or new_vm is None:
                continue
            node, vm = new_node, new_vm
            room.take(node)
            room.set_spare(vm.name, node, vm.gpus, vm.gpus)
            vm_of[node] = vm
            opened[node] = []
        room.set_spare(vm.name, node, room.spare_of(vm.name, node) - want.gpus, vm.gpus)
        placed[jv.id] = (node, want.gpus)
        if node in opened:
            opened[node].append((jv, want.gpus))

    for node, jobs in opened.items():
        _shrink_and_share(snapshot, node, jobs, vm_of, cfg, placed)

    start = tuple(Assignment(j, n, g) for j, (n, g) in placed.items())
    start += tuple(Assignment(j, parts[0][0], parts[0][1], gang=parts[1:]) for j, parts in gangs.items())
    start += tuple(paired)
    vms = {n: vm_of[n].name for n in sorted(vm_of) if snapshot.nodes[n].vm != vm_of[n]}
    return Plan(vms=vms, start=start)


def pressure_order(snapshot: Snapshot, columns: JobColumns | None = None) -> list[JobView]:
    """The waiting jobs by pressure (now + fastest remaining time − deadline), highest first; then by submission
    time and id. ``columns`` keeps each waiting job's fastest remaining time, deadline and so on across decisions
    (``optim.queue``)."""
    waiting = snapshot.waiting
    c = (columns or JobColumns(_pressure_columns)).of(waiting)
    pressure = (snapshot.time + c[:, 0]) - c[:, 1]
    return [waiting[i] for i in order([-pressure, c[:, 2], c[:, 3]])]


def _pressure_columns(jv: JobView) -> tuple[float, float, float, float]:
    """A waiting job's fastest remaining time, deadline, submission time and id."""
    return (float(np.min((1.0 - jv.done) * jv.estimates)), jv.job.deadline, jv.job.submit_time, jv.id)


def _swap_adjacent(queue: list[JobView], rng: np.random.Generator, swap: float) -> None:
    """One pass over adjacent pairs (i, i+1), swapping with probability 0.5 ± swap by their weights (§4)."""
    draws = rng.random(max(0, len(queue) - 1))
    for i in range(len(queue) - 1):
        p = 0.5 + swap if queue[i].job.weight > queue[i + 1].job.weight else 0.5 - swap
        if draws[i] < p:
            queue[i], queue[i + 1] = queue[i + 1], queue[i]


def _reachable(table: ConfigTable, room: Room) -> np.ndarray:
    """Configs some open VM of the same GPU model can take now, or some empty slot can host; a gang configuration
    (more GPUs than its VM type has) only where the empty slots and open VMs of its type hold its GPUs."""
    mask = np.zeros(len(table.configs), dtype=bool)
    for allowed in room.classes_with_free():
        mask |= table.accepted_by(allowed)
    most = np.zeros(len(table.gpu_models), dtype=int)
    for name, vm in table.vm_by_name.items():
        i = table.gpu_models[vm.gpu.name]
        most[i] = max(most[i], room.most_spare(name))
    mask |= table.gpus <= most[table.model_index]
    gang = table.vms > 1
    if gang.any():
        cap = np.array([table.vm_by_name[name].gpus * room.free_count(name) + room.spare_total(name)
                        for name in table.vm_names])
        mask[gang] &= table.gpus[gang] <= cap[table.vm_index[gang]]
    return mask


def _gang(room: Room, want: Config, vm_of: dict[int, VMType]) -> tuple[tuple[int, int], ...]:
    """Parts ``(node, GPUs)`` of a gang on ``want``'s VM type: whole empty slots first (by index), then the free GPUs
    of open VMs of that type, most free first; empty when they do not hold it. The nodes taken are updated."""
    vm, left = want.vm, want.gpus
    if vm.gpus * room.free_count(vm.name) + room.spare_total(vm.name) < left:
        return ()
    spare = sorted(room.spare_nodes(vm.name, 1), reverse=True)
    slots = list(room.free_in_order(vm.name))
    parts: list[tuple[int, int]] = []
    for n in slots:
        if left <= 0:
            break
        take = min(left, vm.gpus)
        room.take(n)
        room.set_spare(vm.name, n, vm.gpus - take, vm.gpus)
        vm_of[n] = vm
        parts.append((n, take))
        left -= take
    for f, n in spare:
        if left <= 0:
            break
        take = min(left, f)
        room.set_spare(vm.name, n, f - take, vm.gpus)
        parts.append((n, take))
        left -= take
    return tuple(parts)


def _fitting(jv: JobView, want: VMType, g: int, room: Room, table: ConfigTable,
             single: bool) -> list[tuple[int, VMType]]:
    """The open VMs of ``want``'s GPU model and market (spot or on demand) with room for ``g`` GPUs that support the
    job, fewest free GPUs first (only the first one when ``single``)."""
    cfg = table.index
    types = [vm for name, vm in table.vm_by_name.items()
             if vm.gpu.name == want.gpu.name and vm.spot == want.spot and vm.gpus >= g
             and (k := cfg.get((name, g))) is not None and np.isfinite(jv.estimates[k])]
    if single:
        best = min(((f, n, vm) for vm in types for f, n in _first_fit(room, vm, g)), default=None)
        return [] if best is None else [(best[1], best[2])]
    fits = sorted((f, n, vm.name) for vm in types for f, n in room.spare_nodes(vm.name, g))
    return [(n, table.vm_by_name[name]) for _, n, name in fits]


def _first_fit(room: Room, vm: VMType, g: int) -> list[tuple[int, int]]:
    """The best fit (free GPUs, node) among the open VMs of type ``vm`` with at least ``g`` free GPUs, if any."""
    n = room.best_fit(vm.name, g, vm.gpus)
    return [] if n is None else [(room.spare_of(vm.name, n), n)]


def _new_node(snapshot: Snapshot, jv: JobView, want: VMType, g: int, room: Room,
              cfg: dict[tuple[str, int], int]) -> tuple[int | None, VMType | None]:
    """The first empty slot that accepts the largest VM of ``want``'s GPU model and market able to run the job with
    ``g``."""
    types = sorted(
        (v for v in snapshot.vm_types if v.gpu.name == want.gpu.name and v.spot == want.spot and v.gpus >= g),
        key=lambda v: (-v.gpus, v.price_per_hour),
    )
    for vm in types:
        k = cfg.get((vm.name, g))
        if k is None or not np.isfinite(jv.estimates[k]):
            continue
        n = next(room.free_in_order(vm.name), None)
        if n is not None:
            return n, vm
    return None, None


def _shrink_and_share(snapshot, node, jobs, vm_of, cfg, placed) -> None:
    """Shrink a new VM to the smallest of its GPU model that holds its jobs; give idle GPUs to the best speed-up."""
    nv = snapshot.nodes[node]
    used = sum(g for _, g in jobs)
    vm = vm_of[node]
    for cand in sorted(snapshot.vm_types, key=lambda v: (v.gpus, v.price_per_hour)):
        if cand.gpu.name != vm.gpu.name or cand.spot != vm.spot or cand.gpus < used or not nv.accepts(cand.name):
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
