"""Solver adapters: HiGHS (through highspy, with a warm start), CBC and Gurobi through PuLP, each one's status and
gap read into a ``SolveOutcome``, and Gurobi's size-limited licence reported once. ``solve`` never raises for solver
trouble: the policy falls back instead."""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import pulp

from optim.milp.model import Model
from sim.model import CapsimError

__all__ = ["SOLVERS", "HIGHS_DEFAULTS", "SolveOutcome", "make_solver", "solve", "report_licence_once"]

log = logging.getLogger("optim.milp")

SOLVERS = ("highs", "cbc", "gurobi")
HIGHS_DEFAULTS: dict[str, Any] = {
    # root restarts, RENS and RINS cost more time on these models than their incumbents save (docs/milp.md)
    "mip_allow_restart": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_rins": False,
}
_licence_reported = False


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
    problem = model.problem
    if problem is None:
        raise ValueError("solve: the model has no problem written; build it with build_model")
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
        problem.solve(s)
        reader = {"highs": _read_highs, "cbc": _read_cbc, "gurobi": _read_gurobi}[solver]
        out = reader(problem)
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
            obj = pulp.value(problem.objective)
        except Exception:  # noqa: BLE001
            obj = None
        if obj is None or not math.isfinite(obj):
            return SolveOutcome("no_solution", reason="solver reported a solution without values")
        return SolveOutcome(out.status, float(obj), out.gap, out.reason)
    return out


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
