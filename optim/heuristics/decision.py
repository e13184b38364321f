"""One decision as the heuristics see it, and the one evaluation of a plan's cost they all share.

``Decision`` reads a snapshot once: the waiting jobs (their remaining runtimes, deadlines, weights and waiting
penalties p_j), the slots (pinned by running jobs, or free to take a VM) and the constant tardiness of the running
jobs. ``Schedule`` is a mutable assignment of waiting jobs to (slot, configuration) or to waiting, with the VM each
slot hosts, and keeps its cost up to date one slot at a time.

The cost is the MILP's objective (docs/milp.md) evaluated on the assignment: every VM's rent until its last job
ends, the tardiness of every job started now, the waiting penalty p_j of every job left waiting, plus the running
jobs' tardiness. So the heuristics rank plans by the quantity the MILP minimises, and ``plan_cost`` of the MILP's
own plan is its reported objective. As in the MILP, a job's time on a spot configuration is its expected time under
revocations (``sim.risk.expected_snapshot``), so a spot VM's discount is weighed against the work it is expected to
lose. Non-preemptive: running jobs stay where they are; new jobs may use the free GPUs
of their VMs.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from optim.common import config_table, hosted, where
from optim.milp.reductions import accepted_configs
from optim.milp.waiting import next_decision_delay, waiting_penalties
from sim.model import Assignment, CapsimError, JobView, Plan, Snapshot, VMType
from sim.risk import expected_snapshot

__all__ = ["Decision", "Schedule", "plan_cost"]


class Decision:
    """The data of one non-preemptive decision, as arrays.

    Jobs are the waiting jobs, numbered 0..J-1 in snapshot order; ``t[j, k]`` is job j's remaining runtime on
    configuration k (inf where unsupported or accepted by no slot), ``w``, ``d`` and ``p`` its weight, deadline and
    waiting penalty. Per slot n: ``pinned[n]`` (it runs jobs that stay), ``vm0[n]`` (the VM it hosts now, or None),
    ``horizon[n]`` (a pinned slot's longest remaining span), ``room0[n]`` (a pinned slot's free GPUs), ``ok[n]``
    (configurations it may host) and ``wait[n, k]`` (seconds before a job placed there in k can run: the VM's
    readiness if the slot hosts k's type, else its boot time). ``constant`` is the running jobs' tardiness.
    """

    def __init__(self, snapshot: Snapshot, wait_estimate: str = "mean", urgency: float = 0.0):
        now = snapshot.time
        snapshot = expected_snapshot(snapshot)  # spot at its expected runtime (the work revocations lose)
        snapshot = replace(snapshot, running=tuple(r.at(now) for r in snapshot.running))
        self.snapshot, self.now = snapshot, now
        self.table = table = config_table(snapshot.configs)
        self.vm_by_name = {v.name: v for v in snapshot.vm_types}
        self.jobs: list[JobView] = list(snapshot.waiting)
        self.index = {jv.id: j for j, jv in enumerate(self.jobs)}
        accepted = accepted_configs(snapshot)
        k = len(snapshot.configs)
        est = np.array([jv.estimates for jv in self.jobs], dtype=float).reshape(-1, k)
        done = np.array([jv.done for jv in self.jobs], dtype=float)
        t = (1.0 - done)[:, None] * est
        self.t = np.where(accepted[None, :] & np.isfinite(t), t, np.inf)
        self.w = np.array([jv.job.weight for jv in self.jobs], dtype=float)
        self.d = np.array([jv.job.deadline for jv in self.jobs], dtype=float)
        delta = next_decision_delay(snapshot, wait_estimate)
        self.p = waiting_penalties(self.jobs, snapshot, delta, accepted, None, urgency)
        self.t_min = self.t.min(axis=1) if k else np.zeros(len(self.jobs))

        nodes = snapshot.nodes
        n_nodes = len(nodes)
        on_node: dict[int, list[JobView]] = {}
        for r in snapshot.running:
            on_node.setdefault(where(r)[0], []).append(r)
        self.pinned = np.zeros(n_nodes, dtype=bool)
        self.vm0: list[VMType | None] = [nv.vm for nv in nodes]
        self.horizon = np.zeros(n_nodes)
        self.room0 = np.zeros(n_nodes, dtype=int)
        self.constant = 0.0
        boot = np.array([self.vm_by_name[name].boot_time for name in table.vm_names])
        self.ok = np.zeros((n_nodes, k), dtype=bool)
        self.wait = np.zeros((n_nodes, k))
        for nv in nodes:
            n = nv.index
            per_vm = boot.copy()
            if nv.vm is not None:
                per_vm[table.vm_names.index(nv.vm.name)] = max(0.0, nv.ready_at - now)
            self.wait[n] = per_vm[table.vm_index]
            self.ok[n] = table.accepted_by(nv.allowed)
            if n in on_node:
                vm = hosted(nv)
                ready = max(0.0, nv.ready_at - now)
                ends = [ready + r.remaining_at(now) for r in on_node[n]]
                self.pinned[n] = True
                self.horizon[n] = max(ends)
                self.room0[n] = vm.gpus - nv.used_gpus
                self.ok[n] &= np.asarray(table.vm_of) == vm.name
                for r, end in zip(on_node[n], ends):
                    self.constant += r.job.weight * max(0.0, now + end - r.job.deadline)
        self.free_slots = [n for n in range(n_nodes) if not self.pinned[n]]

    @property
    def n_jobs(self) -> int:
        return len(self.jobs)

    def span(self, j: int, n: int, k: int) -> float:
        """Seconds from now until job j ends if it starts on slot n in configuration k."""
        return float(self.wait[n, k] + self.t[j, k])

    def tardiness(self, j: int, span: float) -> float:
        return float(self.w[j] * max(0.0, self.now + span - self.d[j]))

    def configs_of(self, vm: VMType) -> list[int]:
        """Configuration indices of VM type ``vm``, by GPU count."""
        return [self.table.index[vm.name, g] for g in range(1, vm.gpus + 1) if (vm.name, g) in self.table.index]


class Schedule:
    """An assignment of the decision's waiting jobs to (slot, configuration) or to waiting, with its cost.

    ``vm[n]`` is the VM slot n hosts after the plan (a free slot with no job hosts none), ``on[n]`` maps the jobs
    placed on n to their configuration, ``at[j]`` gives (slot, configuration) of a placed job, ``used[n]`` the GPUs
    its new jobs take. ``cost`` is kept current: Σ per-slot cost (rent until the last job ends plus the new jobs'
    tardiness) + Σ penalties of waiting jobs + the running jobs' tardiness.
    """

    __slots__ = ("dec", "vm", "on", "at", "used", "slot_cost", "cost")

    def __init__(self, dec: Decision):
        self.dec = dec
        n = len(dec.vm0)
        self.vm: list[VMType | None] = [dec.vm0[i] if dec.pinned[i] else None for i in range(n)]
        self.on: list[dict[int, int]] = [{} for _ in range(n)]
        self.at: dict[int, tuple[int, int]] = {}
        self.used = [0] * n
        self.slot_cost = [self._slot_cost(i, self.vm[i], {}) for i in range(n)]
        self.cost = float(sum(self.slot_cost) + dec.p.sum() + dec.constant)

    def copy(self) -> Schedule:
        s = Schedule.__new__(Schedule)
        s.dec, s.vm, s.on, s.at = self.dec, list(self.vm), [dict(o) for o in self.on], dict(self.at)
        s.used, s.slot_cost, s.cost = list(self.used), list(self.slot_cost), self.cost
        return s

    # ----- evaluation ---------------------------------------------------------------------------------------------
    def _slot_cost(self, n: int, vm: VMType | None, jobs: dict[int, int]) -> float:
        """Rent of slot n's VM until its last job ends, plus the tardiness of the new jobs on it."""
        dec = self.dec
        if vm is None or (not jobs and not dec.pinned[n]):
            return 0.0
        h = float(dec.horizon[n])
        tard = 0.0
        for j, k in jobs.items():
            s = float(dec.wait[n, k] + dec.t[j, k])
            h = max(h, s)
            tard += float(dec.w[j] * max(0.0, dec.now + s - dec.d[j]))
        return vm.price_per_second * h + tard

    def room(self, n: int) -> int:
        """Free GPUs of slot n's VM after the plan so far (0 for a free slot with no VM yet)."""
        vm = self.vm[n]
        if vm is None:
            return 0
        return (int(self.dec.room0[n]) if self.dec.pinned[n] else vm.gpus) - self.used[n]

    def fits(self, j: int, n: int, k: int) -> bool:
        """Whether job j may join slot n in configuration k as the slot stands (its VM, its free GPUs)."""
        dec = self.dec
        vm = self.vm[n]
        if not dec.ok[n, k] or not math.isfinite(dec.t[j, k]):
            return False
        if vm is None:
            return True
        return dec.table.vm_of[k] == vm.name and int(dec.table.gpus[k]) <= self.room(n)

    def delta_place(self, j: int, n: int, k: int) -> float:
        """Cost change of placing waiting job j on slot n in configuration k (the slot takes k's VM if it has none)."""
        vm = self.vm[n] or self.dec.vm_by_name[self.dec.table.vm_of[k]]
        jobs = dict(self.on[n])
        jobs[j] = k
        return self._slot_cost(n, vm, jobs) - self.slot_cost[n] - float(self.dec.p[j])

    def delta_remove(self, j: int) -> float:
        """Cost change of sending placed job j back to waiting."""
        n, _ = self.at[j]
        jobs = dict(self.on[n])
        del jobs[j]
        vm = self.vm[n] if (jobs or self.dec.pinned[n]) else None
        return self._slot_cost(n, vm, jobs) - self.slot_cost[n] + float(self.dec.p[j])

    def _without(self, n: int, j: int) -> tuple[VMType | None, dict[int, int]]:
        jobs = dict(self.on[n])
        jobs.pop(j, None)
        return (self.vm[n] if (jobs or self.dec.pinned[n]) else None), jobs

    def _target(self, n: int, jobs: dict[int, int], k: int) -> VMType | None:
        """The VM slot n would host with ``jobs`` plus a job in configuration k, or None if k does not fit there."""
        dec = self.dec
        vmk = dec.vm_by_name[dec.table.vm_of[k]]
        if not jobs and not dec.pinned[n]:
            return vmk
        vm = self.vm[n]
        if vm is None or vm.name != vmk.name:
            return None
        room = (int(dec.room0[n]) if dec.pinned[n] else vm.gpus) - sum(int(dec.table.gpus[c]) for c in jobs.values())
        return vm if int(dec.table.gpus[k]) <= room else None

    def delta_move(self, j: int, n: int, k: int) -> float | None:
        """Cost change of putting job j (placed or waiting) on slot n in configuration k; None if it cannot go there.
        A slot whose only job is j may change its VM to k's."""
        dec = self.dec
        if not dec.ok[n, k] or not math.isfinite(dec.t[j, k]):
            return None
        src = self.at.get(j)
        delta = 0.0
        if src is None:
            delta -= float(dec.p[j])
        elif src[0] != n:
            vm_m, jobs_m = self._without(src[0], j)
            delta += self._slot_cost(src[0], vm_m, jobs_m) - self.slot_cost[src[0]]
        _, jobs = self._without(n, j)
        vm = self._target(n, jobs, k)
        if vm is None:
            return None
        jobs[j] = k
        return delta + self._slot_cost(n, vm, jobs) - self.slot_cost[n]

    def move(self, j: int, n: int, k: int) -> None:
        """Put job j on slot n in configuration k (checked by ``delta_move`` first)."""
        if j in self.at:
            self.remove(j)
        self.place(j, n, k)

    def delta_swap(self, a: int, b: int) -> float | None:
        """Cost change of exchanging two placed jobs on different slots, each taking the other's slot and
        configuration; None if either cannot run in the other's configuration."""
        dec = self.dec
        (na, ka), (nb, kb) = self.at[a], self.at[b]
        if na == nb or not (math.isfinite(dec.t[a, kb]) and math.isfinite(dec.t[b, ka])):
            return None
        jobs_a, jobs_b = dict(self.on[na]), dict(self.on[nb])
        del jobs_a[a], jobs_b[b]
        jobs_a[b], jobs_b[a] = ka, kb
        return (self._slot_cost(na, self.vm[na], jobs_a) - self.slot_cost[na]
                + self._slot_cost(nb, self.vm[nb], jobs_b) - self.slot_cost[nb])

    def swap(self, a: int, b: int) -> None:
        """Exchange two placed jobs (checked by ``delta_swap`` first)."""
        (na, ka), (nb, kb) = self.at[a], self.at[b]
        jobs_a, jobs_b = dict(self.on[na]), dict(self.on[nb])
        del jobs_a[a], jobs_b[b]
        jobs_a[b], jobs_b[a] = ka, kb
        vm_a, vm_b = self.vm[na], self.vm[nb]
        self.set_slot(na, vm_a, {})
        self.set_slot(nb, vm_b, {})
        self.set_slot(na, vm_a, jobs_a)
        self.set_slot(nb, vm_b, jobs_b)

    def delta_replace(self, b: int, q: int) -> float | None:
        """Cost change of waiting job q taking placed job b's slot and configuration while b waits; None if q
        cannot run in that configuration."""
        dec = self.dec
        n, k = self.at[b]
        if not math.isfinite(dec.t[q, k]):
            return None
        jobs = dict(self.on[n])
        del jobs[b]
        jobs[q] = k
        return self._slot_cost(n, self.vm[n], jobs) - self.slot_cost[n] + float(dec.p[b] - dec.p[q])

    def replace(self, b: int, q: int) -> None:
        """Waiting job q takes placed job b's slot and configuration; b waits (checked by ``delta_replace``)."""
        n, k = self.at[b]
        jobs = dict(self.on[n])
        del jobs[b]
        jobs[q] = k
        self.set_slot(n, self.vm[n], jobs)

    def delta_slot(self, n: int, vm: VMType, jobs: dict[int, int]) -> float:
        """Cost change of giving slot n VM ``vm`` with the same jobs in configurations ``jobs``."""
        return self._slot_cost(n, vm, jobs) - self.slot_cost[n]

    # ----- changes ------------------------------------------------------------------------------------------------
    def _refresh(self, n: int) -> None:
        new = self._slot_cost(n, self.vm[n], self.on[n])
        self.cost += new - self.slot_cost[n]
        self.slot_cost[n] = new

    def place(self, j: int, n: int, k: int) -> None:
        """Start waiting job j on slot n in configuration k (opening the slot with k's VM if it has none)."""
        dec = self.dec
        if self.vm[n] is None:
            self.vm[n] = dec.vm_by_name[dec.table.vm_of[k]]
        self.on[n][j] = k
        self.at[j] = (n, k)
        self.used[n] += int(dec.table.gpus[k])
        self.cost -= float(dec.p[j])
        self._refresh(n)

    def remove(self, j: int) -> None:
        """Send placed job j back to waiting; a free slot left with no job closes."""
        dec = self.dec
        n, k = self.at.pop(j)
        del self.on[n][j]
        self.used[n] -= int(dec.table.gpus[k])
        if not self.on[n] and not dec.pinned[n]:
            self.vm[n] = None
        self.cost += float(dec.p[j])
        self._refresh(n)

    def set_slot(self, n: int, vm: VMType | None, jobs: dict[int, int]) -> None:
        """Give slot n VM ``vm`` and exactly ``jobs`` (job → configuration); the jobs must not be elsewhere."""
        dec = self.dec
        for j in list(self.on[n]):
            del self.at[j]
            self.cost += float(dec.p[j])
        self.on[n] = dict(jobs)
        self.vm[n] = vm if (jobs or dec.pinned[n]) else None
        self.used[n] = 0
        for j, k in jobs.items():
            self.at[j] = (n, k)
            self.used[n] += int(dec.table.gpus[k])
            self.cost -= float(dec.p[j])
        self._refresh(n)

    def recompute(self) -> float:
        """The cost from scratch (a check on the incremental one)."""
        dec = self.dec
        waiting = [j for j in range(dec.n_jobs) if j not in self.at]
        slots = sum(self._slot_cost(n, self.vm[n], self.on[n]) for n in range(len(self.vm)))
        return float(slots + dec.p[waiting].sum() + dec.constant)

    def key(self) -> tuple:
        """A hashable identity of the assignment (which jobs run where, in which configuration)."""
        return tuple(sorted((j, n, k) for j, (n, k) in self.at.items()))

    # ----- to and from plans --------------------------------------------------------------------------------------
    def to_plan(self) -> Plan:
        """The Plan of this assignment: VMs of the slots that change (None stops an idle VM left unused), starts."""
        dec = self.dec
        vms: dict[int, str | None] = {}
        for n, vm0 in enumerate(dec.vm0):
            after = self.vm[n]
            if (after.name if after else None) != (vm0.name if vm0 else None):
                vms[n] = after.name if after else None
        start = tuple(Assignment(dec.jobs[j].id, n, int(dec.table.gpus[k])) for j, (n, k) in sorted(self.at.items()))
        return Plan(vms=vms, start=start)

    @classmethod
    def from_plan(cls, dec: Decision, plan: Plan) -> Schedule:
        """The assignment a non-preemptive plan makes; a CapsimError if it breaks a slot's VM or GPU capacity."""
        s = cls(dec)
        for a in plan.start:
            vm0 = dec.vm0[a.node]
            host = plan.vms.get(a.node, vm0.name if vm0 is not None else None)
            k = dec.table.index.get((host, a.gpus)) if host is not None else None
            j = dec.index.get(a.job_id)
            if host is None or k is None or j is None or j in s.at:
                raise CapsimError(f"plan starts job {a.job_id} on node {a.node} with {a.gpus} GPUs of {host}: "
                                  "no such waiting job or configuration")
            if s.vm[a.node] is None:
                s.vm[a.node] = dec.vm_by_name[host]
            if not s.fits(j, a.node, k):
                raise CapsimError(f"plan starts job {a.job_id} on node {a.node} in {dec.table.configs[k].label}, "
                                  "which the node's VM or free GPUs cannot take")
            s.place(j, a.node, k)
        return s


def plan_cost(snapshot: Snapshot, plan: Plan, wait_estimate: str = "mean", urgency: float = 0.0) -> float:
    """The MILP's objective (docs/milp.md) of a non-preemptive plan: rent, tardiness, waiting penalties, and the
    running jobs' tardiness. The one evaluation every heuristic ranks its plans by."""
    return Schedule.from_plan(Decision(snapshot, wait_estimate, urgency), plan).cost
