"""What a valid plan is: the rules the engine checks before it applies a policy's ``Plan``.

``check_plan`` checks every rule before anything changes and raises ``PlanRejected`` naming the first one broken
(the engine adds the policy's name and the time). The rules, in the order they are checked:

1. ``vms`` names existing nodes (0..N-1); each gets ``None`` (stop its VM) or a VM type of the cluster that the
   node's slot allows and that can be started now (not a spot type in ``Snapshot.unavailable``). A fixed server
   keeps its VM: ``None`` or its own type there changes nothing.
2. ``keep_idle`` names existing nodes.
3. ``preempt`` and ``move`` are only for a policy that declares ``may_preempt``, and name running jobs.
4. A node whose VM the plan stops or changes keeps no job: every job running there is moved or preempted.
5. ``start`` names waiting jobs: not unknown ones, not ones yet to arrive, not running ones (a job the same plan
   preempts is not waiting yet).
6. No job appears twice across ``preempt``, ``move`` and ``start``.
7. Every job started or moved goes to an existing node that has a VM once the plan's ``vms`` are applied, on
   between 1 and that VM's number of GPUs, in a configuration the estimator does not mark infeasible (``inf``).
   A gang (``Assignment.gang``) is only for a policy that declares ``may_gang`` on a cluster with ``gang``; its
   parts name distinct nodes hosting the same VM type, and its configuration is that type with all its GPUs.
8. No node then uses more GPUs than its VM has, counting the jobs that stay there.
9. A node hosts more than one job (a gang's part counts as one, a co-located pair as one) only for a policy that
   declares ``may_share``.
10. A job started or moved onto the GPUs of another (``Assignment.partner``, co-location) needs a policy that declares
    ``may_colocate`` and a cluster whose ``jobs_per_gpu`` is 2; it is not a gang; its partner is another job that
    runs after the plan on the same node with the same GPU count and no other partner (staying, or started or moved
    there by the plan without a partner of its own) on whole GPUs (not a MIG slice), named by one assignment only; and
    the pair may share those GPUs (``Snapshot.colocation`` gives them finite slowdowns: their memory fits, they can run
    together). A co-located job takes no GPU of its own.
11. MIG (``ClusterRules.mig``): ``layouts`` and ``Assignment.slice`` need a cluster with MIG. A layout names a GPU of
    an existing node whose VM after the plan is an A100 or H100, is valid (``sim.model.layout_problem``), and is given
    to a GPU that holds no job after the plan. A job on a slice is not a gang or a partner, takes one GPU, and names a
    slice of that GPU's layout after the plan that no other job holds and on which it fits (its speed there is above
    0). A partitioned GPU counts as used: whole-GPU jobs take only whole GPUs (rule 8).

Node indices and GPU counts may be any integer type (``int``, numpy integers); a ``bool`` or ``float`` is not one.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING, Any

from sim.model import CapsimError, Plan, VMType
from sim.vocabulary.mig import PROFILES, layout_problem, mig_capable

if TYPE_CHECKING:
    from sim.contracts import Policy
    from sim.state import World

__all__ = ["PlanRejected", "Placed", "check_plan"]

Placed = tuple[tuple[tuple[int, int], ...], int]
"""Where a checked assignment runs: its ``(node, GPUs)`` parts as plain ints (the first node first) and the index of
its configuration in ``Cluster.configs``."""


class PlanRejected(CapsimError):
    """A plan broke one of the rules; the message names the rule."""


def _as_index(x: Any) -> int | None:
    """``x`` as a Python ``int`` if it is an integer (``int`` or a numpy integer, not a ``bool``), else ``None``."""
    if x.__class__ is int:
        return x
    if isinstance(x, (bool, float, str)) or x is None:
        return None
    try:
        return int(x.__index__())
    except (AttributeError, TypeError):
        return None


def check_plan(plan: Plan, world: World, policy: Policy) -> list[Placed | None]:
    """Raise ``PlanRejected`` if ``plan`` breaks a rule (see the module docstring) in the current ``world``; else
    return, for each assignment of ``plan.move`` then ``plan.start``, where it was checked to run (``Placed``; None
    for one on a partner's GPUs or a MIG slice), so the engine applies what was checked without reading it again."""
    nodes = world.nodes
    last = len(nodes) - 1

    # 1. vms: existing nodes, known VM types the slot allows. ``changes``: nodes whose VM stops or changes type.
    changes: dict[int, VMType | None] = {}
    for key, name in plan.vms.items():
        n = key if key.__class__ is int else _as_index(key)
        if n is None or not 0 <= n <= last:
            raise PlanRejected(f"vms names node {key!r}, but the cluster has nodes 0..{last}")
        node = nodes[n]
        new = None
        if node.slot.fixed and (name is None or node.vm is not None and name == node.vm.name):
            continue
        if name is not None:
            new = world.vm_types.get(name)
            if new is None:
                raise PlanRejected(f"vms puts unknown VM type {name!r} on node {n}; the cluster has "
                                   f"{list(world.vm_types)}")
            allowed = node.slot.allowed
            if allowed is not None and name not in allowed:
                raise PlanRejected(f"vms puts VM type {name!r} on node {n}, which only allows {sorted(allowed)}")
        if node.vm is not new and (node.vm is None or new is None or node.vm.name != new.name):
            changes[n] = new
            if new is not None and new.name in world.unavailable:
                raise PlanRejected(f"vms starts a {new.name!r} VM on node {n}, but its spot market has none to give "
                                   f"now (Snapshot.unavailable)")

    # 2. keep_idle: existing nodes.
    for key in plan.keep_idle:
        n = key if key.__class__ is int else _as_index(key)
        if n is None or not 0 <= n <= last:
            raise PlanRejected(f"keep_idle names node {key!r}, but the cluster has nodes 0..{last}")

    # 3. preempt and move: declared, running jobs, each once (6). ``leaving``: (jobs, GPUs) leaving each node.
    seen: set[int] = set()
    leaving: dict[int, list[int]] = {}
    if plan.preempt or plan.move:
        if not policy.may_preempt:
            raise PlanRejected("it preempts or moves running jobs but does not declare may_preempt")
        for jid in chain(plan.preempt, (a.job_id for a in plan.move)):
            if jid not in world.running:
                raise PlanRejected(f"preempt/move names job {jid!r}, which is not running")
            if jid in seen:
                raise PlanRejected(f"job {jid} appears in two assignments")
            seen.add(jid)
            for n, gn in world.jobs[jid].parts:  # (a job has one part a node: ``gn`` is its ``gpus_on(n)``)
                out = leaving.get(n)
                if out is None:
                    leaving[n] = [1, gn]
                else:
                    out[0] += 1
                    out[1] += gn

    # 4. A VM stopped or changed keeps no job.
    for n, new in changes.items():
        for jid in nodes[n].jobs:
            if jid not in seen:
                what = f"stops the VM of node {n}" if new is None else f"changes the VM of node {n} to {new.name}"
                raise PlanRejected(f"it {what} while job {jid} runs there without being moved or preempted")

    # 5. start: waiting jobs, each once (6).
    for a in plan.start:
        jid = a.job_id
        if jid not in world.waiting:
            raise PlanRejected(f"start names job {jid!r}, which is {'not waiting' if jid in world.jobs else 'unknown'}")
        if jid in seen:
            raise PlanRejected(f"job {jid} appears in two assignments")
        seen.add(jid)
    if not plan.start and not plan.move:
        if plan.layouts and world.mig is None:
            raise PlanRejected("it cuts GPUs into MIG slices (layouts), but the cluster has no MIG")
        if plan.layouts:
            _slices(plan, (), world, changes, seen)
        return []

    # 7. Each placement: an existing node with a VM after the plan, a GPU count that VM has, a feasible estimate.
    # ``load``: node -> [GPUs used, jobs hosted, VM] after the plan, starting from the jobs that stay.
    load: dict[int, list] = {}
    vm: VMType | None
    g: int | None
    placed = plan.move + plan.start if plan.move else plan.start
    shared = world.colocation is not None
    cut = world.mig is not None
    if cut:
        load = _slices(plan, placed, world, changes, seen)
    elif plan.layouts:
        raise PlanRejected("it cuts GPUs into MIG slices (layouts), but the cluster has no MIG")
    checked: list[Placed | None] = []
    config_index = world.config_index
    for a in placed:
        if a.partner is not None:
            _partner(a, placed, world, policy, changes, seen)
            checked.append(None)
            continue
        if a.slice is not None:
            if not cut:
                raise PlanRejected(f"job {a.job_id} is put on MIG slice {a.slice!r}, but the cluster has no MIG")
            checked.append(None)
            continue  # rule 11, checked with the layouts
        if a.gang:
            vm, g, parts = _gang(a, world, changes, policy)
        else:
            n = a.node if a.node.__class__ is int else _as_index(a.node)
            if n is None or not 0 <= n <= last:
                raise PlanRejected(f"job {a.job_id} is assigned to node {a.node!r}, but the cluster has nodes "
                                   f"0..{last}")
            vm = changes[n] if n in changes else nodes[n].vm
            if vm is None:
                raise PlanRejected(f"job {a.job_id} is started on node {n}, which has no VM after the plan")
            g = a.gpus if a.gpus.__class__ is int else _as_index(a.gpus)
            if g is None or not 1 <= g <= vm.gpus:
                raise PlanRejected(f"job {a.job_id} asks for {a.gpus!r} GPUs on node {n}, whose {vm.name} has "
                                   f"{vm.gpus}")
            parts = ((n, g),)
        k = config_index[(vm.name, g)]
        if not math.isfinite(world.jobs[a.job_id].est[k]):
            raise PlanRejected(f"job {a.job_id} is put on {vm.name}x{g}, a configuration the estimator marks "
                               f"infeasible")
        checked.append((parts, k))
        shares = parts
        for n, gn in shares:
            slot = load.get(n)
            if slot is None:
                node = nodes[n]
                if n in changes:
                    slot = load[n] = [0, 0, vm]
                elif shared or cut:
                    slot = load[n] = [*_staying(node, n, seen), vm]
                elif n in leaving:
                    jobs_out, gpus_out = leaving[n]
                    slot = load[n] = [node.used - gpus_out, len(node.jobs) - jobs_out, vm]
                else:
                    slot = load[n] = [node.used, len(node.jobs), vm]
            slot[0] += gn
            slot[1] += 1

    # 8 and 9. GPUs within the VM; several jobs on one VM only when sharing is declared.
    for n, (used, count, vm) in load.items():
        if used > vm.gpus:
            raise PlanRejected(f"node {n} would use {used} GPUs, more than its {vm.name} has ({vm.gpus})")
        if count > 1 and not policy.may_share:
            raise PlanRejected(f"node {n} would host {count} jobs, but the policy does not declare may_share")
    return checked


def _staying(node: Any, n: int, seen: set[int]) -> tuple[int, int]:
    """(GPUs, jobs) the jobs staying on ``node`` hold after the plan where GPUs may be shared: a job whose partner
    stays holds no GPU of its own, and a pair counts as one job."""
    used = count = 0
    for j, s in node.jobs.items():
        if j in seen:
            continue
        mate = s.partner
        if mate is None or mate.job.id in seen or j < mate.job.id:
            used += s.gpus_on(n)
            count += 1
    return used, count


def _partner(a: Any, placed: tuple[Any, ...], world: World, policy: Policy, changes: dict[int, VMType | None],
             seen: set[int]) -> None:
    """Rule 10 for assignment ``a``, which names a partner (module docstring)."""
    jid = a.job_id
    if world.colocation is None:
        raise PlanRejected(f"job {jid} is started on the GPUs of job {a.partner!r}, but the cluster lets no two jobs "
                           f"share a GPU (jobs_per_gpu 1)")
    if not policy.may_colocate:
        raise PlanRejected(f"job {jid} is started on the GPUs of job {a.partner!r}, but the policy does not declare "
                           f"may_colocate")
    if a.gang:
        raise PlanRejected(f"job {jid} is spread over several nodes and names a partner: co-located jobs share one "
                           f"node")
    p = a.partner if a.partner.__class__ is int else _as_index(a.partner)
    n = a.node if a.node.__class__ is int else _as_index(a.node)
    g = a.gpus if a.gpus.__class__ is int else _as_index(a.gpus)
    if p is None or p == jid or p not in world.jobs:
        raise PlanRejected(f"job {jid} names partner {a.partner!r}, which is not another job")
    if sum(1 for b in placed if b.partner is not None and b.partner == p) > 1:
        raise PlanRejected(f"job {p} is named as the partner of two jobs: a GPU holds at most two")
    mine = next((b for b in placed if b.job_id == p), None)
    if mine is not None:
        if mine.partner is not None or mine.gang:
            raise PlanRejected(f"job {jid}'s partner {p} is itself co-located or a gang in the plan")
        if mine.slice is not None:
            raise PlanRejected(f"job {jid}'s partner {p} is put on a MIG slice: a slice holds one job")
        where, count = mine.node, mine.gpus
    else:
        mate = world.jobs[p]
        if p not in world.running or p in seen:
            raise PlanRejected(f"job {jid}'s partner {p} does not run after the plan")
        if mate.partner is not None and mate.partner.job.id not in seen:
            raise PlanRejected(f"job {jid}'s partner {p} already shares its GPUs with job {mate.partner.job.id}")
        if len(mate.parts) > 1:
            raise PlanRejected(f"job {jid}'s partner {p} is a gang: co-located jobs run on one node")
        if mate.slice is not None:
            raise PlanRejected(f"job {jid}'s partner {p} runs on a MIG slice: a slice holds one job")
        where, count = mate.node, mate.gpus
    if where != n or count != g:
        raise PlanRejected(f"job {jid} is put on node {a.node!r} with {a.gpus!r} GPUs, but its partner {p} runs on "
                           f"node {where} with {count}: co-located jobs share the same GPUs")
    assert n is not None and g is not None
    vm = changes[n] if n in changes else world.nodes[n].vm
    if vm is None:
        raise PlanRejected(f"job {jid} is started on node {n}, which has no VM after the plan")
    k = world.config_index.get((vm.name, g))
    if k is None or not math.isfinite(world.jobs[jid].est[k]):
        raise PlanRejected(f"job {jid} is put on {vm.name}x{g}, a configuration the estimator marks infeasible")
    if not math.isfinite(world.colocation.slowdowns(world.jobs[jid].job.spec, world.jobs[p].job.spec, k)[0]):
        raise PlanRejected(f"jobs {jid} and {p} may not share the GPUs of {vm.name}x{g} (Snapshot.colocation: "
                           f"their memory does not fit or they cannot run together)")


def _gang(a: Any, world: World, changes: dict[int, VMType | None], policy: Policy) -> tuple[VMType, int, tuple]:
    """The VM type, total GPUs and ``(node, GPUs)`` parts of a gang assignment, or ``PlanRejected`` (rule 7)."""
    jid = a.job_id
    if not policy.may_gang:
        raise PlanRejected(f"job {jid} is spread over several nodes, but the policy does not declare may_gang")
    if not world.cluster.rules.gang:
        raise PlanRejected(f"job {jid} is spread over several nodes, but the cluster does not allow gangs")
    nodes = world.nodes
    last = len(nodes) - 1
    first: VMType | None = None
    parts: list[tuple[int, int]] = []
    named: set[int] = set()
    total = 0
    for node, gpus in chain(((a.node, a.gpus),), a.gang):
        n = node if node.__class__ is int else _as_index(node)
        if n is None or not 0 <= n <= last:
            raise PlanRejected(f"job {jid} is assigned to node {node!r}, but the cluster has nodes 0..{last}")
        vm = changes[n] if n in changes else nodes[n].vm
        if vm is None:
            raise PlanRejected(f"job {jid} is started on node {n}, which has no VM after the plan")
        if first is not None and vm is not first and vm.name != first.name:
            raise PlanRejected(f"job {jid} is spread over {first.name} and {vm.name}: a gang runs on one VM type")
        first = vm
        g = gpus if gpus.__class__ is int else _as_index(gpus)
        if g is None or not 1 <= g <= vm.gpus:
            raise PlanRejected(f"job {jid} asks for {gpus!r} GPUs on node {n}, whose {vm.name} has {vm.gpus}")
        if n in named:
            raise PlanRejected(f"job {jid} names node {n} twice in its gang")
        named.add(n)
        parts.append((n, g))
        total += g
    assert first is not None
    if (first.name, total) not in world.config_index:
        raise PlanRejected(f"job {jid} is spread over {total} GPUs of {first.name}, more than the cluster's "
                           f"configurations of that type reach")
    return first, total, tuple(parts)


def _slices(plan: Plan, placed: tuple[Any, ...], world: World, changes: dict[int, VMType | None],
            seen: set[int]) -> dict[int, list]:
    """Rule 11 (MIG): the plan's layouts and its jobs on slices; return, for every node the plan repartitions or
    places a job on, [GPUs used after the plan by partitioned GPUs and whole-GPU jobs staying, jobs staying and
    started on slices, VM] (``check_plan``'s ``load`` before its whole-GPU jobs)."""
    nodes = world.nodes
    last = len(nodes) - 1
    after: dict[int, list] = {}  # node -> layouts of its GPUs after the plan

    def layouts(n: int) -> list:
        got = after.get(n)
        if got is None:
            node = nodes[n]
            vm = changes[n] if n in changes else node.vm
            if vm is None:
                raise PlanRejected(f"it puts MIG slices on node {n}, which has no VM after the plan")
            kept = node.layouts if n not in changes and node.layouts is not None else [()] * vm.gpus
            got = after[n] = list(kept)
        return got

    busy: dict[int, set[int]] = {}  # node -> GPUs holding a job that stays
    held: dict[int, set[tuple[int, str, int]]] = {}  # node -> slices held after the plan
    given = plan.layouts or {}
    touched = {_as_index(k[0]) for k in given if isinstance(k, tuple)}
    touched.update(_as_index(m) for a in placed for m, _ in a.parts)
    for n in touched:
        if n is None or not 0 <= n <= last:
            continue  # rule 7 names it
        busy[n], held[n] = set(), set()
        for j, st in nodes[n].jobs.items():
            if j not in seen and n not in changes:
                busy[n].update(d for devs in st.devices for d in devs)
                if st.slice is not None:
                    held[n].add((st.slice.device, st.slice.profile, st.slice.start))
    for key, layout in given.items():
        n, d = (_as_index(k) for k in key) if isinstance(key, tuple) and len(key) == 2 else (None, None)
        if n is None or d is None or not 0 <= n <= last:
            raise PlanRejected(f"layouts names GPU {key!r}; expected (node, GPU) with nodes 0..{last}")
        gpus = layouts(n)
        vm = changes[n] if n in changes else nodes[n].vm
        assert vm is not None
        if not mig_capable(vm.gpu):
            raise PlanRejected(f"layouts cuts a GPU of node {n} into MIG slices, but its {vm.name} has "
                               f"{vm.gpu.name} GPUs (MIG: A100 and H100 only)")
        if not 0 <= d < len(gpus):
            raise PlanRejected(f"layouts names GPU {d} of node {n}, whose {vm.name} has GPUs 0..{len(gpus) - 1}")
        why = layout_problem(layout)
        if why is not None:
            raise PlanRejected(f"layouts gives GPU {d} of node {n} an invalid MIG layout {layout!r}: {why}")
        if d in busy[n] and tuple(layout) != tuple(gpus[d]):
            raise PlanRejected(f"layouts repartitions GPU {d} of node {n}, where a job still runs after the plan "
                               f"(a GPU is repartitioned only with all its slices idle)")
        gpus[d] = tuple(layout)
    mig = world.mig
    assert mig is not None
    counts = {n: sum(1 for j in nodes[n].jobs if j not in seen) if n not in changes else 0 for n in busy}
    for a in placed:
        cut = a.slice
        if cut is None:
            continue
        jid = a.job_id
        if a.gang or a.partner is not None or a.gpus != 1:
            raise PlanRejected(f"job {jid} is put on MIG slice {cut!r} with a gang, a partner or {a.gpus!r} GPUs: a "
                               f"job on a slice takes one GPU's slice alone")
        n = _as_index(a.node)
        if n is None or not 0 <= n <= last:
            raise PlanRejected(f"job {jid} is assigned to node {a.node!r}, but the cluster has nodes 0..{last}")
        gpus = layouts(n)
        vm = changes[n] if n in changes else nodes[n].vm
        assert vm is not None
        if cut.profile not in PROFILES or not 0 <= cut.device < len(gpus) or \
                (cut.profile, cut.start) not in gpus[cut.device]:
            raise PlanRejected(f"job {jid} is put on MIG slice {cut.label()} of node {n}, which is not in that GPU's "
                               f"layout after the plan ({gpus[cut.device] if 0 <= cut.device < len(gpus) else 'none'})")
        if (cut.device, cut.profile, cut.start) in held[n]:
            raise PlanRejected(f"job {jid} is put on MIG slice {cut.label()} of node {n}, which another job holds")
        held[n].add((cut.device, cut.profile, cut.start))
        k = world.config_index.get((vm.name, 1))
        spec = world.jobs[jid].job.spec
        if k is None or not math.isfinite(world.jobs[jid].est[k]) or \
                not mig.speed(spec, vm.gpu, cut.profile) > 0:
            raise PlanRejected(f"job {jid} does not fit on MIG slice {cut.label(vm.gpu)} of {vm.name} (its speed there "
                               f"is 0 or the estimator marks {vm.name}x1 infeasible)")
        counts[n] += 1
    out = {}
    for n in busy:
        vm = changes[n] if n in changes else nodes[n].vm
        if vm is None:
            continue
        gpus = after.get(n) or (list(nodes[n].layouts or ()) if n not in changes else [])
        whole = {d for j, st in nodes[n].jobs.items() if j not in seen and n not in changes and st.slice is None
                 for devs in st.devices for d in devs}
        out[n] = [sum(1 for lay in gpus if lay) + len(whole - {d for d, lay in enumerate(gpus) if lay}), counts[n], vm]
    return out
