"""The MILP policy (docs/milp.md), by concern:

- ``model``: the data of one decision (``Placement``, ``Model``);
- ``waiting``: Δ and the waiting penalty p_j;
- ``reductions``: dominated configurations, interchangeable slots, candidate placements;
- ``formulation``: variables, objective and constraints written with PuLP (``build_model``);
- ``solvers``: HiGHS, CBC and Gurobi adapters, their status and gap, licence errors (``solve``);
- ``solution``: a solved model as a Plan, a Plan as a warm start;
- ``policy``: ``MILP``, registered as ``milp``.
"""

from optim.milp.formulation import LinearProgram, build_model, write_lp, write_problem
from optim.milp.model import Model, Placement
from optim.milp.policy import MILP
from optim.milp.reductions import pareto_configs, reduce_snapshot
from optim.milp.solution import chosen, set_warm_start, to_plan
from optim.milp.solvers import HIGHS_DEFAULTS, SOLVERS, SolveOutcome, make_solver, solve
from optim.milp.waiting import WAIT_ESTIMATES, next_decision_delay, waiting_penalties, waiting_penalty

__all__ = [
    "MILP", "Model", "Placement", "LinearProgram", "build_model", "write_lp", "write_problem", "reduce_snapshot",
    "pareto_configs", "solve", "make_solver", "SolveOutcome", "SOLVERS", "HIGHS_DEFAULTS", "chosen", "to_plan",
    "set_warm_start", "WAIT_ESTIMATES", "next_decision_delay", "waiting_penalty", "waiting_penalties",
]
