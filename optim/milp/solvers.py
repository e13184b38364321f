"""Solver adapters: HiGHS (through highspy, with a warm start), CBC and Gurobi through PuLP, each one's status and
gap read into a ``SolveOutcome``, and Gurobi's size-limited licence reported once. ``solve`` never raises for solver
trouble: the policy falls back instead.

Two kinds of limit stop a solver early. A work limit (``node_limit``: branch-and-bound nodes) is deterministic: the
same model stops at the same point on any machine under any load, status ``work_limit``. A wall-clock ``time_limit``
is not: where it stops depends on the machine's speed and load, status ``time_limit`` (docs/milp.md, "Limits and
reproducibility")."""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pulp

from optim.highs import new_highs, quiet_banner, use_threads
from optim.milp.model import Model
from sim.model import CapsimError

__all__ = ["SOLVERS", "HIGHS_DEFAULTS", "LIMITS", "SolveOutcome", "make_solver", "solve", "report_licence_once"]

log = logging.getLogger("optim.milp")

SOLVERS = ("highs", "cbc", "gurobi")
HIGHS_DEFAULTS: dict[str, Any] = {
    # root restarts, RENS and RINS cost more time on these models than their incumbents save (docs/milp.md)
    "mip_allow_restart": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_rins": False,
    # presolve's probing: on decisions of real runs at 50-100 slots it takes 5-20x the rest of the solve (docs/milp.md)
    "presolve_rule_off": 1 << 15,
}
_licence_reported = False


class _HiGHS(pulp.HiGHS):
    """PuLP's highspy interface plus a warm start: hand HiGHS the variables' current values before it runs."""

    def __init__(self, warmStart: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.warm = warmStart

    def callSolver(self, lp: pulp.LpProblem) -> None:
        use_threads(int(self.threads or 1))
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
    node_limit: int | None = None,
) -> pulp.LpSolver:
    """The PuLP solver object for ``name`` (highs, cbc, gurobi) with the policy's options.

    ``node_limit`` is each solver's own branch-and-bound node limit (HiGHS ``mip_max_nodes``, CBC ``maxNodes``,
    Gurobi ``NodeLimit``). ``options`` go to the solver as they are: HiGHS option names, Gurobi parameters, or CBC
    command-line options. They override ``HIGHS_DEFAULTS``, which docs/milp.md justifies by measurement.
    """
    options = dict(options or {})
    if name == "highs":
        quiet_banner()
        nodes = {} if node_limit is None else {"mip_max_nodes": int(node_limit)}
        options = {**HIGHS_DEFAULTS, **nodes, **options}
        return _HiGHS(msg=msg, timeLimit=time_limit, gapRel=gap, threads=threads, warmStart=warm_start, **options)
    if name == "cbc":
        return pulp.COIN_CMD(
            path=path or pulp.PULP_CBC_CMD.pulp_cbc_path,
            msg=msg,
            timeLimit=time_limit,
            gapRel=gap,
            threads=threads,
            warmStart=warm_start,
            maxNodes=node_limit,
            options=[f"{k} {v}" for k, v in options.items()],
        )
    if name == "gurobi":
        nodes = {} if node_limit is None else {"NodeLimit": int(node_limit)}
        return pulp.GUROBI(
            msg=msg, timeLimit=time_limit, gapRel=gap, warmStart=warm_start, manageEnv=True, Threads=threads,
            **{**nodes, **options},
        )
    raise CapsimError(f"milp policy: unknown solver {name!r}; choose one of {', '.join(SOLVERS)}")


LIMITS = ("work_limit", "time_limit")
"""Statuses of a solver stopped early by a limit: deterministic (nodes) or wall-clock."""


@dataclass(frozen=True, slots=True)
class SolveOutcome:
    """What one solver run produced: ``status`` is optimal, one of ``LIMITS`` (stopped early; ``incumbent`` says
    whether it had a solution to keep) or a failure status."""

    status: str
    objective: float | None = None
    gap: float | None = None
    reason: str | None = None
    incumbent: bool = True

    @property
    def usable(self) -> bool:
        return self.status == "optimal" or (self.status in LIMITS and self.incumbent)


def _finite_gap(gap: float) -> float | None:
    """The solver's relative gap, 0 for a pure LP (HiGHS reports inf there), None if unknown."""
    gap = float(gap)
    return gap if math.isfinite(gap) else None


def _read_highs(prob: pulp.LpProblem) -> SolveOutcome:
    return _highs_outcome(prob.solverModel)


def _highs_outcome(m: Any) -> SolveOutcome:
    import highspy

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
    why = m.modelStatusToString(st)
    if st == S.kNotset:
        return SolveOutcome("no_solution", reason=f"HiGHS did not run ({why})")
    # the remaining stops (node, leaf, solution or iteration limits) are deterministic, unlike the clock
    limit = "time_limit" if st == S.kTimeLimit else "work_limit"
    if has_sol:
        return SolveOutcome(limit, gap=_finite_gap(info.mip_gap), reason=f"HiGHS: {why}")
    return SolveOutcome(limit, reason=f"HiGHS: {why} without an incumbent", incumbent=False)


def _objective_mismatch(h: Any) -> str | None:
    """Why HiGHS's answer cannot be trusted, or None: the objective it reports must be what its column values cost.

    HiGHS 1.16 can evaluate a warm start in presolve's reduced space, where it is worth less than in the model, then
    report the reduced-space objective (and a gap of 0) while handing back the start's own column values
    (docs/milp.md, "Solvers, options and failure handling")."""
    lp = h.getLp()
    values = np.asarray(h.getSolution().col_value, dtype=float)
    cost = np.asarray(lp.col_cost_, dtype=float)
    if len(values) != len(cost):
        return f"HiGHS returned {len(values)} column values for {len(cost)} columns"
    reported = float(h.getInfo().objective_function_value)
    priced = float(lp.offset_) + float(cost @ values)
    if abs(priced - reported) <= _OBJECTIVE_TOL * max(1.0, abs(reported), abs(priced)):
        return None
    return f"HiGHS reported objective {reported:.9g} but its column values cost {priced:.9g}"


_OBJECTIVE_TOL = 1e-6
"""Relative tolerance between HiGHS's reported objective and the cost of its column values (rounding only)."""


def _rejected(mismatch: str, again: SolveOutcome) -> SolveOutcome:
    """The outcome of the solve run again without the warm start, its reason saying why the first was rejected."""
    note = f"warm_start_rejected: {mismatch}; solved again without the start"
    return replace(again, reason=f"{note}; {again.reason}" if again.reason else note)


def _highs_direct(
    model: Model,
    time_limit: float | None,
    gap: float | None,
    threads: int,
    warm_start: bool,
    msg: bool,
    options: dict[str, Any] | None,
    node_limit: int | None = None,
) -> SolveOutcome:
    """Hand the model's arrays to highspy in one call (no PuLP variables), with the options PuLP would set, and
    read back the column values and the objective as PuLP sums it."""
    import highspy

    lp = model.lp
    h = new_highs(threads, msg)
    if gap is not None:
        h.setOptionValue("mip_rel_gap", gap)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    nodes = {} if node_limit is None else {"mip_max_nodes": int(node_limit)}
    for key, value in {**HIGHS_DEFAULTS, **nodes, **(options or {})}.items():
        h.setOptionValue(key, value)
    n = len(lp.names)
    counts = [len(rc) for rc in lp.row_cols]
    rows = np.repeat(np.arange(len(counts)), counts)
    cols = np.fromiter((c for rc in lp.row_cols for c in rc), dtype=np.int64, count=int(sum(counts)))
    vals = np.fromiter((v for rv in lp.row_vals for v in rv), dtype=float, count=int(sum(counts)))
    order = np.argsort(cols, kind="stable")
    hlp = highspy.HighsLp()
    hlp.num_col_, hlp.num_row_ = n, len(counts)
    hlp.col_cost_, hlp.col_lower_, hlp.col_upper_ = lp.cost, lp.lower, lp.upper
    hlp.row_lower_, hlp.row_upper_ = lp.row_lower, lp.row_upper
    hlp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    hlp.a_matrix_.num_col_, hlp.a_matrix_.num_row_ = n, len(counts)
    hlp.a_matrix_.start_ = np.concatenate(([0], np.cumsum(np.bincount(cols, minlength=n)))).astype(np.int32)
    hlp.a_matrix_.index_ = rows[order].astype(np.int32)
    hlp.a_matrix_.value_ = vals[order]
    hlp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                        for i in lp.integer.tolist()]
    h.passModel(hlp)
    if warm_start and model.start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = model.start.tolist()
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    out = _highs_outcome(h)
    if out.usable:
        mismatch = _objective_mismatch(h)
        if mismatch is not None:
            if not (warm_start and model.start is not None):
                return SolveOutcome("error", reason=mismatch)
            return _rejected(mismatch, _highs_direct(model, time_limit, gap, threads, False, msg, options, node_limit))
        values = list(h.getSolution().col_value)
        model.values = np.array(values, dtype=float)
        obj = lp.constant
        for c in lp.obj_order:
            obj += values[c] * float(lp.cost[c])
        model.objective = obj
    return out


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
    limit = "time_limit" if st == gp.GRB.TIME_LIMIT else "work_limit"  # node, work, iteration, solution limits
    if m.SolCount >= 1:
        return SolveOutcome(limit, gap=_finite_gap(m.MIPGap), reason=f"Gurobi status {st}")
    if st == gp.GRB.INTERRUPTED:
        return SolveOutcome("no_solution", reason=f"Gurobi status {st} without an incumbent")
    return SolveOutcome(limit, reason=f"Gurobi status {st} without an incumbent", incumbent=False)


def _read_cbc(prob: pulp.LpProblem, limit: str | None) -> SolveOutcome:
    """CBC's answer; ``limit`` is the limit that can have stopped it early (None when it had none)."""
    if prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionOptimal:
        return SolveOutcome("optimal")
    if prob.status == pulp.LpStatusOptimal and prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return SolveOutcome(limit or "time_limit", reason="CBC stopped on a limit with an incumbent (gap unknown)")
    if prob.status == pulp.LpStatusInfeasible and limit is not None:
        # the model is feasible by construction (everyone may wait); CBC says "infeasible" when cut off early
        return SolveOutcome(limit, reason="CBC stopped on a limit without an incumbent", incumbent=False)
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
    time_limit: float | None = None,
    gap: float | None = 0.01,
    threads: int = 1,
    warm_start: bool = False,
    path: str | None = None,
    msg: bool = False,
    options: dict[str, Any] | None = None,
    node_limit: int | None = None,
) -> SolveOutcome:
    """Solve ``model`` in place (variable values set) and say how it went; never raises for solver trouble.
    ``node_limit`` (branch-and-bound nodes) stops it deterministically, ``time_limit`` (wall-clock s) does not."""
    lp = model.lp
    if lp is None:
        raise ValueError("solve: the model has no problem written; build it with build_model")
    if not model.placements and not lp.h:
        return SolveOutcome("optimal", model.constant + sum(model.penalties.values()), 0.0, "nothing can start")
    if solver == "highs" and model.problem is None:
        return _solve_direct(model, time_limit, gap, threads, warm_start, msg, options, node_limit)
    problem = model.problem
    if problem is None:
        from optim.milp.formulation import write_problem

        problem = write_problem(model)
    try:
        s = make_solver(solver, time_limit, gap, threads, warm_start, path, msg, options, node_limit)
    except CapsimError:
        raise
    except Exception as e:  # noqa: BLE001  (any solver set-up failure is a fallback, not a crash)
        return SolveOutcome("error", reason=f"{type(e).__name__}: {e}")
    mismatch: str | None = None
    try:
        if not s.available():
            return SolveOutcome("missing_solver", reason=f"solver {solver!r} is not available ({path or 'default'})")
        started = time.perf_counter()
        problem.solve(s)
        if solver == "cbc":
            clock = time_limit is not None and (node_limit is None or time.perf_counter() - started >= time_limit)
            out = _read_cbc(problem, "time_limit" if clock else ("work_limit" if node_limit is not None else None))
        else:
            out = (_read_highs if solver == "highs" else _read_gurobi)(problem)
            mismatch = _objective_mismatch(problem.solverModel) if solver == "highs" and out.usable else None
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
    if mismatch is not None:
        if not warm_start:
            return SolveOutcome("error", reason=mismatch)
        again = solve(model, solver, time_limit, gap, threads, False, path, msg, options, node_limit)
        return _rejected(mismatch, again)
    if out.usable:
        try:
            obj = pulp.value(problem.objective)
        except Exception:  # noqa: BLE001
            obj = None
        return _finish(out, obj)
    return out


def _solve_direct(model: Model, time_limit: float | None, gap: float | None, threads: int, warm_start: bool,
                  msg: bool, options: dict[str, Any] | None, node_limit: int | None) -> SolveOutcome:
    try:
        out = _highs_direct(model, time_limit, gap, threads, warm_start, msg, options, node_limit)
    except Exception as e:  # noqa: BLE001
        return SolveOutcome("error", reason=f"{type(e).__name__}: {e}")
    return _finish(out, model.objective) if out.usable else out


def _finish(out: SolveOutcome, obj: float | None) -> SolveOutcome:
    if obj is None or not math.isfinite(obj):
        return SolveOutcome("no_solution", reason="solver reported a solution without values")
    return SolveOutcome(out.status, float(obj), out.gap, out.reason)


def report_licence_once(reason: str, fallback: str) -> None:
    """Warn (log and ``RuntimeWarning``) the first time a decision exceeds Gurobi's licence; later ones stay quiet."""
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
