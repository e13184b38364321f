"""Large decisions solved in groups: when one decision's model would hold more candidate placements than the
policy's ``split_above``, its waiting jobs are decided a group at a time in deadline order, each group's MILP seeing
the VMs and starts of the groups before it as running (docs/milp.md, "Large decisions").

Why: a model has about jobs × free slots × configurations placements. Ordinary decisions have one or a few waiting
jobs; a recorded spot market revokes every VM of a zone at once (up to 40 here) while a burst of arrivals waits, and
the one decision that follows (50 jobs × 39 interchangeable empty slots × 50 configurations: 97,500 placements)
took HiGHS 19 s of presolve and 50 s for the root LP, still 12 % from its bound, with 500 nodes to go.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from optim.common import config_table
from optim.milp.model import Model
from sim.model import Assignment, DecisionInfo, JobView, NodeView, Plan, Snapshot

__all__ = ["GROUP_SHARE", "group_size", "started", "solve_in_groups"]

GROUP_SHARE = 4
"""A group's model is sized to about ``split_above / GROUP_SHARE`` placements: a few groups of the size that
ordinary decisions have, rather than one just under the threshold."""


def group_size(model: Model, target: float) -> int:
    """The most waiting jobs whose model has about ``target`` placements at most (1 at least): the full model's
    placements per job and slot, times jobs, times the slots a group keeps (each class of interchangeable empty slots
    keeps as many as the group has jobs)."""
    jobs, slots = len(model.jobs), len(model.kept_nodes)
    if not jobs or not slots:
        return max(1, jobs)
    per = len(model.placements) / (jobs * slots)
    in_classes = sum(len(members) for members in model.classes.values())
    fixed = slots - in_classes

    def size(b: int) -> float:
        return b * per * (fixed + sum(min(len(members), b) for members in model.classes.values()))

    b = 1
    while b < jobs and size(b + 1) <= target:
        b += 1
    return b


def started(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """The snapshot as the next group sees it: the plan's new VMs booting on their slots and its jobs running there
    from the moment their VM is ready (``since``), so the slot is pinned with its horizon and free GPUs; a job that
    joins a running one's GPUs (``partner``) just leaves the queue. VMs the plan stops are kept: a later group may
    still use them."""
    now = snapshot.time
    vm_by_name = {v.name: v for v in snapshot.vm_types}
    index = config_table(snapshot.configs).index
    nodes: list[NodeView] = list(snapshot.nodes)
    for n, name in plan.vms.items():
        if name is not None:
            vm = vm_by_name[name]
            nodes[n] = replace(nodes[n], vm=vm, ready_at=now + vm.boot_time, used_gpus=0)
    waiting = {jv.id: jv for jv in snapshot.waiting}
    running: list[JobView] = list(snapshot.running)
    for a in plan.start:
        jv = waiting.pop(a.job_id)
        if a.partner is not None:
            continue
        nv = nodes[a.node]
        assert nv.vm is not None, "a start names a slot hosting a VM once the plan is applied"
        nodes[a.node] = replace(nv, used_gpus=nv.used_gpus + a.gpus)
        running.append(replace(jv, node=a.node, config=index[nv.vm.name, a.gpus], since=max(now, nv.ready_at)))
    empty = tuple(nv.index for nv in nodes if nv.vm is None)
    return replace(snapshot, nodes=tuple(nodes), waiting=tuple(waiting.values()), running=tuple(running),
                   empty_nodes=empty, idle_nodes=tuple(n for n in snapshot.idle_nodes if nodes[n].used_gpus == 0),
                   node_changes=None)


def solve_in_groups(snapshot: Snapshot, size: int, decide: Callable[[Snapshot], Plan], placements: int,
                    limit: int) -> Plan:
    """One plan from deciding the waiting jobs ``size`` at a time by earliest deadline (ties by id) with ``decide``
    (the MILP on a snapshot that holds only that group as waiting), each group after the previous ones started; the
    decision's info sums the groups' model sizes, keeps the worst status and says it was split (no objective: the
    groups' objectives each count the running jobs' tardiness, so their sum is no one model's value)."""
    order = sorted(snapshot.waiting, key=lambda jv: (jv.job.deadline, jv.id))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    current = snapshot
    set_vms: dict[int, str] = {}
    stopped: set[int] = set()
    starts: list[Assignment] = []
    infos: list[DecisionInfo] = []
    for group in groups:
        ids = {jv.id for jv in group}
        plan = decide(replace(current, waiting=tuple(jv for jv in current.waiting if jv.id in ids)))
        infos.append(plan.info)
        starts.extend(plan.start)
        for n, name in plan.vms.items():
            if name is None:
                stopped.add(n)
            else:
                set_vms[n] = name
        current = started(current, plan)
    vms: dict[int, str | None] = {n: None for n in stopped if n not in set_vms}
    vms.update(set_vms)
    return Plan(vms=vms, start=tuple(starts), info=_merged(infos, len(groups), size, placements, limit))


_RANK = {"optimal": 0, "no_candidates": 0, "nothing_to_decide": 0, "work_limit": 1, "time_limit": 2}


def _merged(infos: list[DecisionInfo], groups: int, size: int, placements: int, limit: int) -> DecisionInfo:
    worst = max(infos, key=lambda i: _RANK.get(i.status, 3))
    fallbacks = sorted({i.fallback for i in infos if i.fallback})
    note = (f"split: {placements} placements > split_above {limit}, solved as {groups} groups of ≤ {size} waiting "
            f"jobs by deadline")
    reasons = [note] + [f"group {g}: {i.reason}" for g, i in enumerate(infos, 1) if i.reason]
    return DecisionInfo(
        status=worst.status,
        solver=worst.solver,
        gap=max((i.gap for i in infos if i.gap is not None), default=None),
        variables=sum(i.variables or 0 for i in infos),
        constraints=sum(i.constraints or 0 for i in infos),
        fallback=", ".join(fallbacks) or None,
        reason="; ".join(reasons),
    )
