"""The MILP policy: joint capacity planning and scheduling at each decision, solved by HiGHS, CBC or Gurobi via PuLP.

The formulation, its reductions and its assumptions are documented in ``docs/milp.md``; the symbols used below
(x, y, h, p_j, Δ, wait) follow that document. ``build_model`` turns a Snapshot into a reduced ``Model`` (plain data
plus the PuLP problem); ``solve`` runs one solver on it; ``MILP.decide`` turns the answer into a Plan or falls back.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar

import numpy as np
import pulp

from optim.base import Policy, build, register
from sim.model import Assignment, CapsimError, DecisionInfo, JobView, Plan, Snapshot

__all__ = ["MILP", "Model", "Placement", "build_model", "solve", "waiting_penalty", "SolveOutcome"]

log = logging.getLogger(__name__)

SOLVERS = ("highs", "cbc", "gurobi")
HIGHS_DEFAULTS: dict[str, Any] = {
    # root restarts, RENS and RINS cost more time on these models than their incumbents save (docs/milp.md)
    "mip_allow_restart": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_rins": False,
}
_licence_reported = False


@dataclass(frozen=True, slots=True)
class Placement:
    """One candidate for x: job ``job`` on node ``node`` with config index ``config`` (VM ``vm``, ``gpus`` GPUs).

    ``span`` is wait + runtime: the seconds from now until the job ends there (the VM's horizon if it is the last).
    ``cost`` is its objective coefficient: the job's tardiness cost if it runs there.
    """

    job: int
    node: int
    config: int
    vm: str
    gpus: int
    span: float
    cost: float


@dataclass
class Model:
    """A reduced instance and its PuLP problem. ``x``/``y``/``h`` map keys to PuLP variables."""

    snapshot: Snapshot
    preempt: bool
    placements: list[Placement]
    penalties: dict[int, float]
    pinned: dict[int, tuple[str, float]]
    pinned_area: dict[int, float]
    on_node: dict[int, list[JobView]]
    kept_nodes: list[int]
    classes: dict[tuple, list[int]]
    node_class: dict[int, tuple]
    jobs: dict[int, JobView]
    constant: float = 0.0
    problem: pulp.LpProblem | None = None
    x: list[pulp.LpVariable] = field(default_factory=list)
    y: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)
    h: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)
    z: dict[int, pulp.LpVariable] = field(default_factory=dict)

    @property
    def size(self) -> tuple[int, int]:
        return self.problem.numVariables(), self.problem.numConstraints()


WAIT_ESTIMATES = ("mean", "earliest")


def next_decision_delay(snapshot: Snapshot, how: str = "mean") -> float:
    """Δ: the delay a job that waits now should expect before capacity frees up for it.

    ``earliest``: the earliest estimated completion of a running job (the next decision the model can count on).
    ``mean``: the mean over the running jobs' estimated completions; in a busy system several waiting jobs compete
    for the first capacity to free up, so a single job's expected wait is longer than the earliest completion.
    """
    now = snapshot.time
    ends = [
        max(0.0, snapshot.nodes[r.node].ready_at - now) + r.remaining(r.config)
        for r in snapshot.running
        if r.config is not None and r.node is not None
    ]
    finite = [e for e in ends if math.isfinite(e)]
    if not finite:
        return 0.0
    return min(finite) if how == "earliest" else sum(finite) / len(finite)


def standalone_cost(
    jv: JobView, start: float, price: np.ndarray, boot: np.ndarray, usable: np.ndarray, overhead: float = 0.0
) -> float:
    """S_j(start): cheapest whole-VM rental plus tardiness of running ``jv`` alone from ``start`` on a usable config."""
    t = (1.0 - jv.done) * jv.estimates + overhead
    span = boot + t
    total = price * span + jv.job.weight * np.maximum(0.0, start + span - jv.job.deadline)
    total = np.where(usable & np.isfinite(t), total, np.inf)
    return float(total.min()) if total.size else math.inf


def waiting_penalty(
    jv: JobView,
    snapshot: Snapshot,
    delta: float,
    usable: np.ndarray,
    overhead: float = 0.0,
    urgency: float = 0.0,
    epsilon: float = 1e-3,
) -> float:
    """p_j: what leaving ``jv`` waiting now costs: S_j(now + Δ), plus REFERENCE §4's urgency term, plus ε·S_j(now).

    S_j is non-decreasing in the start time, so p_j > S_j(now): starting a job alone on an empty node beats leaving
    it waiting, and waiting is never free. It stays finite when the job has no usable config (then it just waits).
    """
    price = np.array([c.vm.price_per_second for c in snapshot.configs])
    boot = np.array([c.vm.boot_time for c in snapshot.configs])
    now = snapshot.time
    s_now = standalone_cost(jv, now, price, boot, usable, overhead)
    if not math.isfinite(s_now):
        return 1.0
    s_later = standalone_cost(jv, now + delta, price, boot, usable, overhead)
    t = (1.0 - jv.done) * jv.estimates[usable] + overhead
    t_max = float(t[np.isfinite(t)].max())
    late = max(0.0, now + t_max - jv.job.deadline)
    return s_later + urgency * jv.job.weight * late + epsilon * s_now + 1e-9


def _dominated(times: list[tuple[int, int, float]]) -> set[int]:
    """Configs of one VM type (index, gpus, runtime) beaten by one with no more GPUs and no longer runtime."""
    out: set[int] = set()
    best = math.inf
    for k, _, t in sorted(times, key=lambda r: (r[1], r[2])):
        if t >= best:
            out.add(k)
        else:
            best = t
    return out


def pareto_configs(
    runtime: np.ndarray, snapshot: Snapshot, candidates: list[int], covers: dict[tuple[str, str], bool]
) -> list[int]:
    """Candidates not beaten by another that is no slower, no dearer (whole VM and GPU share), uses no more GPUs,
    and whose VM type every slot accepting this one also accepts; strictly better in one of these."""
    if len(candidates) < 2:
        return candidates
    cs = [snapshot.configs[k] for k in candidates]
    boot = np.array([c.vm.boot_time for c in cs])
    price = np.array([c.vm.price_per_second for c in cs])
    g = np.array([c.gpus for c in cs], dtype=float)
    share = g / np.array([c.vm.gpus for c in cs], dtype=float)
    t = boot + runtime[candidates]
    crit = np.stack([t, price * t, price * share * t, g], axis=1)
    names = [c.vm.name for c in cs]
    cov = np.array([[covers[a, b] for b in names] for a in names])
    le = (crit[None, :, :] <= crit[:, None, :] + 1e-12).all(axis=2)
    lt = (crit[None, :, :] < crit[:, None, :] - 1e-12).any(axis=2)
    beaten = (le & lt & cov).any(axis=1)
    return [k for k, b in zip(candidates, beaten) if not b]


def build_model(
    snapshot: Snapshot,
    preempt: bool = False,
    urgency: float = 0.0,
    dominance: str = "safe",
    extra_constraints: Callable[[Model], None] | None = None,
    wait_estimate: str = "mean",
) -> Model:
    """Reduce the snapshot (infeasible and dominated configs, symmetric empty slots) and write the MILP with PuLP.

    Running jobs are first brought to the decision time (``JobView.at``): their remaining work counts the time they
    have already run.
    """
    snapshot = replace(snapshot, running=tuple(r.at(snapshot.time) for r in snapshot.running))
    model = reduce_snapshot(snapshot, preempt, urgency, dominance, wait_estimate)
    write_problem(model)
    if extra_constraints is not None:
        extra_constraints(model)
    return model


def _candidates(
    snapshot: Snapshot, jobs: list[JobView], urgency: float, dominance: str, wait_estimate: str
) -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, float]]:
    """Per job: configs kept after the reductions, those kept by the exact rule alone, and the waiting penalty p_j."""
    nodes, configs = snapshot.nodes, snapshot.configs
    vm_of = [c.vm.name for c in configs]
    covers = {
        (a.name, b.name): all(nv.accepts(b.name) for nv in nodes if nv.accepts(a.name))
        for a in snapshot.vm_types
        for b in snapshot.vm_types
    }
    accepted_any = np.array([any(nv.accepts(vm) for nv in nodes) for vm in vm_of], dtype=bool)
    delta = next_decision_delay(snapshot, wait_estimate)
    cands: dict[int, list[int]] = {}
    exact: dict[int, list[int]] = {}
    penalties: dict[int, float] = {}
    for jv in jobs:
        est = jv.estimates
        by_vm: dict[str, list[tuple[int, int, float]]] = {}
        for k in np.flatnonzero(np.isfinite(est) & accepted_any):
            by_vm.setdefault(vm_of[k], []).append((int(k), configs[k].gpus, float(est[k])))
        keep = sorted(k for rows in by_vm.values() for k in {r[0] for r in rows} - _dominated(rows))
        exact[jv.id] = keep
        if dominance == "pareto":
            keep = pareto_configs((1.0 - jv.done) * est, snapshot, keep, covers)
        if jv.running and jv.config is not None and jv.config not in keep:
            keep.append(jv.config)
        cands[jv.id] = sorted(keep)
        overhead = snapshot.restart_overhead if jv.running else 0.0
        penalties[jv.id] = waiting_penalty(jv, snapshot, delta, accepted_any, overhead, urgency)
    return cands, exact, penalties


def _slot_classes(
    snapshot: Snapshot,
    free_nodes: list[int],
    on_node: dict[int, list[JobView]],
    jobs: list[JobView],
    cands: dict[int, list[int]],
) -> tuple[dict[tuple, list[int]], dict[int, tuple], list[int]]:
    """Interchangeable free slots (same allowed set, same idle VM and readiness, no running job) grouped in classes.

    Returns the kept members of each class (as many as jobs could use them), every free slot's class, and the
    slots that are unique (they carry running jobs that may move).
    """
    now = snapshot.time
    vm_of = [c.vm.name for c in snapshot.configs]
    classes: dict[tuple, list[int]] = {}
    unique: list[int] = []
    for n in free_nodes:
        nv = snapshot.nodes[n]
        if n in on_node:
            unique.append(n)
            continue
        key = (nv.allowed, nv.vm.name if nv.vm else None, max(0.0, nv.ready_at - now) if nv.vm else 0.0)
        classes.setdefault(key, []).append(n)
    kept: dict[tuple, list[int]] = {}
    for key, members in classes.items():
        allowed = key[0]
        usable = sum(1 for jv in jobs if any(allowed is None or vm_of[k] in allowed for k in cands[jv.id]))
        kept[key] = members[:usable]
    node_class = {n: key for key, members in classes.items() for n in members}
    return kept, node_class, unique


def reduce_snapshot(
    snapshot: Snapshot, preempt: bool, urgency: float, dominance: str, wait_estimate: str = "mean"
) -> Model:
    """The model's data: pinned slots, kept slots and their classes, candidate placements and waiting penalties."""
    now = snapshot.time
    configs = snapshot.configs
    vm_of = [c.vm.name for c in configs]
    gpus_of = [c.gpus for c in configs]
    vm_by_name = {v.name: v for v in snapshot.vm_types}
    overhead = snapshot.restart_overhead
    nodes = snapshot.nodes

    movable = list(snapshot.running) if preempt else []
    jobs = list(snapshot.waiting) + movable
    on_node: dict[int, list[JobView]] = {}
    for r in snapshot.running:
        on_node.setdefault(r.node, []).append(r)

    # node slots: pinned (running jobs stay, non-preemptive), or free to choose a VM
    pinned: dict[int, tuple[str, float]] = {}
    pinned_area: dict[int, float] = {}
    free_nodes: list[int] = []
    for nv in nodes:
        if nv.index in on_node and not preempt:
            horizon = max(max(0.0, nv.ready_at - now) + r.remaining(r.config) for r in on_node[nv.index])
            pinned[nv.index] = (nv.vm.name, horizon)
            pinned_area[nv.index] = sum(
                snapshot.configs[r.config].gpus * (max(0.0, nv.ready_at - now) + r.remaining(r.config))
                for r in on_node[nv.index]
            ) / nv.vm.gpus
        else:
            free_nodes.append(nv.index)

    def wait(n: int, vm: str) -> float:
        nv = nodes[n]
        if nv.vm is not None and nv.vm.name == vm:
            return max(0.0, nv.ready_at - now)
        return vm_by_name[vm].boot_time

    cands, exact, penalties = _candidates(snapshot, jobs, urgency, dominance, wait_estimate)
    kept_classes, node_class, unique = _slot_classes(snapshot, free_nodes, on_node, jobs, cands)
    kept_nodes = sorted(unique + [n for c in kept_classes.values() for n in c] + list(pinned))

    placements: list[Placement] = []
    for jv in jobs:
        w, d = jv.job.weight, jv.job.deadline
        rem = 1.0 - jv.done
        for n in kept_nodes:
            nv = nodes[n]
            if n in pinned:
                vm_fixed = pinned[n][0]
                cap = nv.vm.gpus - nv.used_gpus
            ks = cands[jv.id]
            if nv.vm is not None and dominance == "pareto":
                # a VM that is already there keeps every exact option: sharing it is what the heuristic would lose
                ks = sorted(set(ks) | {k for k in exact[jv.id] if vm_of[k] == nv.vm.name})
            for k in ks:
                vm = vm_of[k]
                if not nv.accepts(vm):
                    continue
                if n in pinned and (vm != vm_fixed or gpus_of[k] > cap):
                    continue
                t = rem * float(jv.estimates[k])
                if jv.running and not (n == jv.node and k == jv.config):
                    t += overhead
                span = wait(n, vm) + t
                cost = w * max(0.0, now + span - d)
                placements.append(Placement(jv.id, n, k, vm, gpus_of[k], span, cost))

    return Model(
        snapshot=snapshot,
        preempt=preempt,
        placements=placements,
        penalties=penalties,
        pinned=pinned,
        pinned_area=pinned_area,
        on_node=on_node,
        kept_nodes=kept_nodes,
        classes=kept_classes,
        node_class=node_class,
        jobs={jv.id: jv for jv in jobs},
    )


def write_problem(model: Model) -> None:
    """Write the PuLP problem of a reduced model: objective and constraints (1)–(5) of docs/milp.md.

    Interchangeable empty slots get no ordering constraint: the solvers' own symmetry handling does better without
    one (docs/milp.md, "Symmetric slots").
    """
    snapshot, placements, pinned = model.snapshot, model.placements, model.pinned
    now, nodes = snapshot.time, snapshot.nodes
    vm_by_name = {v.name: v for v in snapshot.vm_types}
    penalties, kept_nodes = model.penalties, model.kept_nodes
    pinned_area, on_node = model.pinned_area, model.on_node
    prob = pulp.LpProblem("capsim_decision", pulp.LpMinimize)
    x = [prob.add_variable(f"x_{i}", 0, 1, pulp.LpBinary) for i in range(len(placements))]
    used_vms: dict[int, set[str]] = {}
    for pl in placements:
        used_vms.setdefault(pl.node, set()).add(pl.vm)
    for n, (vm, _) in pinned.items():
        used_vms.setdefault(n, set()).add(vm)
    y: dict[tuple[int, str], pulp.LpVariable] = {}
    h: dict[tuple[int, str], pulp.LpVariable] = {}
    vm_pos = {v.name: i for i, v in enumerate(snapshot.vm_types)}
    for n in kept_nodes:
        for vm in sorted(used_vms.get(n, ())):
            lb = pinned[n][1] if n in pinned else 0.0
            h[n, vm] = prob.add_variable(f"h_{n}_{vm_pos[vm]}", lowBound=lb)
            if n not in pinned:
                y[n, vm] = prob.add_variable(f"y_{n}_{vm_pos[vm]}", 0, 1, pulp.LpBinary)

    z = {j: prob.add_variable(f"z_{j}", 0, 1) for j in model.jobs}
    constant = 0.0
    for n, (vm, horizon) in pinned.items():
        for r in on_node[n]:
            constant += r.job.weight * max(0.0, now + max(0.0, nodes[n].ready_at - now) + r.remaining(r.config)
                                           - r.job.deadline)
    obj = pulp.LpAffineExpression(
        [(h[key], vm_by_name[key[1]].price_per_second) for key in h]
        + [(x[i], pl.cost) for i, pl in enumerate(placements) if pl.cost != 0.0]
        + [(z[j], penalties[j]) for j in z],
        constant=constant,
    )
    prob += obj

    by_job: dict[int, list[int]] = {}
    by_node_vm: dict[tuple[int, str], list[int]] = {}
    by_job_node_vm: dict[tuple[int, int, str], list[int]] = {}
    for i, pl in enumerate(placements):
        by_job.setdefault(pl.job, []).append(i)
        by_node_vm.setdefault((pl.node, pl.vm), []).append(i)
        by_job_node_vm.setdefault((pl.job, pl.node, pl.vm), []).append(i)

    for j, zj in z.items():
        terms = [(x[i], 1.0) for i in by_job.get(j, [])] + [(zj, 1.0)]
        prob += pulp.LpAffineExpression(terms) == 1, f"one_{j}"
    for n in kept_nodes:
        ys = [y[n, vm] for vm in sorted(used_vms.get(n, ())) if (n, vm) in y]
        if len(ys) > 1:
            prob += pulp.LpAffineExpression([(v, 1.0) for v in ys]) <= 1, f"vm_{n}"
    for (n, vm), idx in by_node_vm.items():
        n_v = float(vm_by_name[vm].gpus)
        terms = [(x[i], float(placements[i].gpus)) for i in idx]
        if n in pinned:
            cap = nodes[n].vm.gpus - nodes[n].used_gpus
            prob += pulp.LpAffineExpression(terms) <= cap, f"cap_{n}_{vm_pos[vm]}"
        else:
            terms.append((y[n, vm], -n_v))
            prob += pulp.LpAffineExpression(terms) <= 0, f"cap_{n}_{vm_pos[vm]}"
        area = [(x[i], placements[i].gpus * placements[i].span / n_v) for i in idx] + [(h[n, vm], -1.0)]
        prob += pulp.LpAffineExpression(area) <= -pinned_area.get(n, 0.0), f"area_{n}_{vm_pos[vm]}"
    for (j, n, vm), idx in by_job_node_vm.items():
        terms = [(x[i], placements[i].span) for i in idx] + [(h[n, vm], -1.0)]
        prob += pulp.LpAffineExpression(terms) <= 0, f"hor_{j}_{n}_{vm_pos[vm]}"

    model.problem, model.x, model.y, model.h, model.z, model.constant = prob, x, y, h, z, constant


class _HiGHS(pulp.HiGHS):
    """PuLP's highspy interface plus a warm start: hand HiGHS the variables' current values before it runs."""

    def __init__(self, warmStart: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.warm = warmStart

    def callSolver(self, lp: pulp.LpProblem) -> None:
        if self.warm:
            import highspy

            values = [0.0] * lp.numVariables()
            for var in lp.variables():
                values[var.index] = float(var.varValue or 0.0)
            start = highspy.HighsSolution()
            start.col_value = values
            start.value_valid = True
            lp.solverModel.setSolution(start)
        lp.solverModel.run()


def make_solver(
    name: str,
    time_limit: float | None,
    gap: float | None,
    threads: int,
    warm_start: bool,
    path: str | None = None,
    msg: bool = False,
    options: dict[str, Any] | None = None,
) -> pulp.LpSolver:
    """The PuLP solver object for ``name`` (highs, cbc, gurobi) with the policy's options.

    ``options`` go to the solver as they are: HiGHS option names, Gurobi parameters, or CBC command-line options.
    They override ``HIGHS_DEFAULTS``, which docs/milp.md justifies by measurement.
    """
    options = dict(options or {})
    if name == "highs":
        options = {**HIGHS_DEFAULTS, **options}
        return _HiGHS(msg=msg, timeLimit=time_limit, gapRel=gap, threads=threads, warmStart=warm_start, **options)
    if name == "cbc":
        return pulp.COIN_CMD(
            path=path or pulp.PULP_CBC_CMD.pulp_cbc_path,
            msg=msg,
            timeLimit=time_limit,
            gapRel=gap,
            threads=threads,
            warmStart=warm_start,
            options=[f"{k} {v}" for k, v in options.items()],
        )
    if name == "gurobi":
        return pulp.GUROBI(
            msg=msg, timeLimit=time_limit, gapRel=gap, warmStart=warm_start, manageEnv=True, Threads=threads,
            **options,
        )
    raise CapsimError(f"milp policy: unknown solver {name!r}; choose one of {', '.join(SOLVERS)}")


@dataclass(frozen=True, slots=True)
class SolveOutcome:
    """What one solver run produced: ``status`` is optimal, time_limit (incumbent kept) or a failure status."""

    status: str
    objective: float | None = None
    gap: float | None = None
    reason: str | None = None

    @property
    def usable(self) -> bool:
        return self.status in ("optimal", "time_limit")


def _finite_gap(gap: float) -> float | None:
    """The solver's relative gap, 0 for a pure LP (HiGHS reports inf there), None if unknown."""
    gap = float(gap)
    return gap if math.isfinite(gap) else None


def _read_highs(prob: pulp.LpProblem) -> SolveOutcome:
    import highspy

    m = prob.solverModel
    st = m.getModelStatus()
    info = m.getInfo()
    has_sol = info.primal_solution_status == 2
    S = highspy.HighsModelStatus
    if st == S.kOptimal:
        return SolveOutcome("optimal", gap=_finite_gap(info.mip_gap) or 0.0)
    if st in (S.kInfeasible, S.kUnboundedOrInfeasible):
        return SolveOutcome("infeasible", reason=f"HiGHS: {m.modelStatusToString(st)}")
    if st == S.kUnbounded:
        return SolveOutcome("unbounded", reason="HiGHS: unbounded")
    if has_sol:
        return SolveOutcome("time_limit", gap=_finite_gap(info.mip_gap), reason=f"HiGHS: {m.modelStatusToString(st)}")
    return SolveOutcome("no_solution", reason=f"HiGHS: {m.modelStatusToString(st)} without an incumbent")


def _read_gurobi(prob: pulp.LpProblem) -> SolveOutcome:
    import gurobipy as gp

    m = prob.solverModel
    st = m.Status
    if st == gp.GRB.OPTIMAL:
        return SolveOutcome("optimal", gap=float(m.MIPGap) if m.IsMIP else 0.0)
    if st in (gp.GRB.INFEASIBLE, gp.GRB.INF_OR_UNBD):
        return SolveOutcome("infeasible", reason=f"Gurobi status {st}")
    if st == gp.GRB.UNBOUNDED:
        return SolveOutcome("unbounded", reason="Gurobi: unbounded")
    if m.SolCount >= 1:
        return SolveOutcome("time_limit", gap=_finite_gap(m.MIPGap), reason=f"Gurobi status {st}")
    return SolveOutcome("no_solution", reason=f"Gurobi status {st} without an incumbent")


def _read_cbc(prob: pulp.LpProblem) -> SolveOutcome:
    if prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionOptimal:
        return SolveOutcome("optimal")
    if prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return SolveOutcome("time_limit", reason="CBC stopped on its time limit with an incumbent (gap unknown)")
    if prob.status == pulp.LpStatusInfeasible:
        return SolveOutcome("infeasible", reason="CBC: infeasible")
    if prob.status == pulp.LpStatusUnbounded:
        return SolveOutcome("unbounded", reason="CBC: unbounded")
    return SolveOutcome("no_solution", reason=f"CBC: {pulp.LpStatus[prob.status]} without an incumbent")


def _licence_error(e: BaseException) -> bool:
    return getattr(e, "errno", None) == 10010 or "size-limited" in str(e)


def solve(
    model: Model,
    solver: str = "highs",
    time_limit: float | None = 10.0,
    gap: float | None = 0.01,
    threads: int = 1,
    warm_start: bool = False,
    path: str | None = None,
    msg: bool = False,
    options: dict[str, Any] | None = None,
) -> SolveOutcome:
    """Solve ``model`` in place (variable values set) and say how it went; never raises for solver trouble."""
    if not model.placements and not model.h:
        return SolveOutcome("optimal", model.constant + sum(model.penalties.values()), 0.0, "nothing can start")
    try:
        s = make_solver(solver, time_limit, gap, threads, warm_start, path, msg, options)
    except CapsimError:
        raise
    except Exception as e:  # noqa: BLE001  (any solver set-up failure is a fallback, not a crash)
        return SolveOutcome("error", reason=f"{type(e).__name__}: {e}")
    try:
        if not s.available():
            return SolveOutcome("missing_solver", reason=f"solver {solver!r} is not available ({path or 'default'})")
        started = time.perf_counter()
        model.problem.solve(s)
        reader = {"highs": _read_highs, "cbc": _read_cbc, "gurobi": _read_gurobi}[solver]
        out = reader(model.problem)
        if out.status == "infeasible" and time_limit and time.perf_counter() - started >= time_limit:
            # the model is feasible by construction (everyone may wait); CBC says "infeasible" when cut off early
            out = SolveOutcome("no_solution", reason=f"{solver} stopped on its time limit ({out.reason})")
    except Exception as e:  # noqa: BLE001
        if _licence_error(e):
            return SolveOutcome("licence", reason=f"Gurobi licence too small: {e}")
        return SolveOutcome("error", reason=f"{type(e).__name__}: {e}")
    finally:
        if solver == "gurobi":
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
    if out.usable:
        try:
            obj = pulp.value(model.problem.objective)
        except Exception:  # noqa: BLE001
            obj = None
        if obj is None or not math.isfinite(obj):
            return SolveOutcome("no_solution", reason="solver reported a solution without values")
        return SolveOutcome(out.status, float(obj), out.gap, out.reason)
    return out


def _report_licence_once(reason: str, fallback: str) -> None:
    global _licence_reported
    if _licence_reported:
        return
    _licence_reported = True
    message = (
        f"capsim milp: Gurobi's licence is too small for this decision's model ({reason}). Decisions that exceed it "
        f"use the fallback policy {fallback!r}. Point GRB_LICENSE_FILE to a full licence or use solver: highs."
    )
    log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def chosen(model: Model) -> list[Placement]:
    """The placements the current variable values select (x = 1)."""
    return [pl for pl, v in zip(model.placements, model.x) if (v.varValue or 0.0) > 0.5]


def to_plan(model: Model, info: DecisionInfo) -> Plan:
    """Turn the selected placements into a Plan: VMs per node, starts, and (with preemption) moves and preemptions."""
    snap = model.snapshot
    picks = chosen(model)
    vm_after: dict[int, str] = {n: vm for n, (vm, _) in model.pinned.items()}
    for pl in picks:
        vm_after[pl.node] = pl.vm
    vms: dict[int, str | None] = {}
    for nv in snap.nodes:
        now_vm = nv.vm.name if nv.vm is not None else None
        after = vm_after.get(nv.index)
        if after != now_vm:
            vms[nv.index] = after
    start, move = [], []
    placed = set()
    for pl in picks:
        jv = model.jobs[pl.job]
        placed.add(pl.job)
        if not jv.running:
            start.append(Assignment(pl.job, pl.node, pl.gpus))
        elif (pl.node, pl.config) != (jv.node, jv.config):
            move.append(Assignment(pl.job, pl.node, pl.gpus))
    preempt = tuple(r.id for r in snap.running if model.preempt and r.id not in placed)
    return Plan(vms=vms, start=tuple(start), move=tuple(move), preempt=preempt, info=info)


def set_warm_start(model: Model, plan: Plan) -> int:
    """Set variable values from a baseline plan (mapped onto kept slots); returns how many jobs it placed."""
    snap = model.snapshot
    for v in model.x:
        v.setInitialValue(0)
    for v in model.y.values():
        v.setInitialValue(0)
    for v in model.z.values():
        v.setInitialValue(1)
    for (n, _), v in model.h.items():
        v.setInitialValue(model.pinned[n][1] if n in model.pinned else 0.0)
    index = {(pl.job, pl.node, pl.config): i for i, pl in enumerate(model.placements)}
    config_index = {(c.vm.name, c.gpus): k for k, c in enumerate(snap.configs)}
    spare = {key: [n for n in members] for key, members in model.classes.items()}
    placed = 0
    wanted: list[tuple[int, int, int]] = []
    if model.preempt:
        wanted += [(r.id, r.node, r.config) for r in snap.running]
    for a in plan.start:
        vm = plan.vms.get(a.node) or (snap.nodes[a.node].vm.name if snap.nodes[a.node].vm else None)
        wanted.append((a.job_id, a.node, config_index.get((vm, a.gpus), -1)))
    for job, node, k in wanted:
        key = model.node_class.get(node)
        if key is not None:
            if not spare[key]:
                continue
            node = node if node in spare[key] else spare[key][0]
            spare[key].remove(node)
        i = index.get((job, node, k))
        if i is None:
            continue
        pl = model.placements[i]
        model.x[i].setInitialValue(1)
        model.z[job].setInitialValue(0)
        if (node, pl.vm) in model.y:
            model.y[node, pl.vm].setInitialValue(1)
        hv = model.h[node, pl.vm]
        hv.setInitialValue(max(hv.varValue or 0.0, pl.span))
        placed += 1
    return placed


@register("milp")
class MILP(Policy):
    """Joint capacity planning and scheduling by one MILP per decision (docs/milp.md); falls back on failure.

    Options: ``solver`` (highs, cbc, gurobi), ``time_limit`` (s), ``gap`` (relative), ``threads``, ``warm_start``
    (from the fallback's plan), ``fallback`` (a policy name, default edf), ``preempt`` (running jobs may be moved,
    resized or sent back), ``urgency`` (REFERENCE §4's extra waiting charge factor, default 0), ``wait_estimate``
    (Δ in the waiting penalty: ``mean`` or ``earliest`` running completion, see ``next_decision_delay``), ``dominance``
    (``safe``: exact reductions only; ``pareto``: also drop configs beaten across VM types, faster but a heuristic),
    ``solver_path`` (a CBC binary), ``solver_options`` (passed to the solver as they are), ``extra_constraints``
    (a callable adding constraints to the Model: research and tests only).
    """

    may_preempt: ClassVar[bool] = False
    may_share: ClassVar[bool] = True

    def __init__(
        self,
        solver: str = "highs",
        time_limit: float = 10.0,
        gap: float = 0.01,
        threads: int = 1,
        warm_start: bool = True,
        fallback: str = "edf",
        preempt: bool = False,
        urgency: float = 0.0,
        dominance: str = "safe",
        wait_estimate: str = "mean",
        solver_path: str | None = None,
        solver_options: dict[str, Any] | None = None,
        extra_constraints: Callable[[Model], None] | None = None,
        msg: bool = False,
    ):
        if solver not in SOLVERS:
            raise CapsimError(f"milp policy: unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
        if fallback == "milp":
            raise CapsimError("milp policy: fallback must be another policy (e.g. edf), not milp itself")
        if time_limit is not None and time_limit <= 0:
            raise CapsimError(f"milp policy: time_limit must be positive seconds, got {time_limit}")
        if gap is not None and not 0 <= gap < 1:
            raise CapsimError(f"milp policy: gap is a relative gap in [0, 1), got {gap}")
        self.solver = solver
        self.time_limit = time_limit
        self.gap = gap
        self.threads = int(threads)
        self.warm_start = bool(warm_start)
        self.fallback = fallback
        self.fallback_policy = build(fallback)
        self.preempt = bool(preempt)
        self.may_preempt = self.preempt  # type: ignore[misc]
        self.urgency = float(urgency)
        if dominance not in ("pareto", "safe"):
            raise CapsimError(f"milp policy: dominance must be 'pareto' or 'safe', got {dominance!r}")
        self.dominance = dominance
        if wait_estimate not in WAIT_ESTIMATES:
            raise CapsimError(f"milp policy: wait_estimate must be one of {', '.join(WAIT_ESTIMATES)}, "
                              f"got {wait_estimate!r}")
        self.wait_estimate = wait_estimate
        self.solver_path = solver_path
        self.solver_options = dict(solver_options or {})
        self.extra_constraints = extra_constraints
        self.msg = msg

    def describe(self) -> str:
        return f"milp[{self.solver}{',preempt' if self.preempt else ''}]"

    def _fall_back(self, snapshot: Snapshot, status: str, reason: str | None, size: tuple[int, int] | None) -> Plan:
        plan = self.fallback_policy.decide(snapshot)
        info = DecisionInfo(
            status=status,
            solver=self.solver,
            variables=size[0] if size else None,
            constraints=size[1] if size else None,
            fallback=self.fallback,
            reason=reason,
        )
        return Plan(plan.vms, plan.start, plan.move, plan.preempt, plan.keep_idle, info)

    def decide(self, snapshot: Snapshot) -> Plan:
        if not snapshot.waiting and not (self.preempt and snapshot.running):
            return Plan(info=DecisionInfo(status="nothing_to_decide"))
        try:
            model = build_model(snapshot, self.preempt, self.urgency, self.dominance, self.extra_constraints,
                                self.wait_estimate)
        except CapsimError:
            raise
        except Exception as e:  # noqa: BLE001  (a modelling failure must not lose jobs)
            return self._fall_back(snapshot, "error", f"building the model failed: {type(e).__name__}: {e}", None)
        size = model.size
        if not model.placements:
            return Plan(info=DecisionInfo(status="no_candidates", solver=self.solver, variables=0, constraints=0))
        warm = False
        if self.warm_start:
            warm = set_warm_start(model, self.fallback_policy.decide(snapshot)) > 0 or self.preempt
        out = solve(
            model, self.solver, self.time_limit, self.gap, self.threads, warm, self.solver_path, self.msg,
            self.solver_options,
        )
        if not out.usable:
            if out.status == "licence":
                _report_licence_once(out.reason or "", self.fallback)
            return self._fall_back(snapshot, out.status, out.reason, size)
        info = DecisionInfo(
            status=out.status,
            solver=self.solver,
            objective=out.objective,
            gap=out.gap,
            variables=size[0],
            constraints=size[1],
            reason=out.reason,
        )
        plan = to_plan(model, info)
        kept_running = len(snapshot.running) - len(plan.preempt)
        if snapshot.waiting and kept_running == 0 and not plan.start and not plan.move:
            return self._fall_back(snapshot, "no_progress", "the solution left every job waiting", size)
        return plan
