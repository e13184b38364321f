"""The MILP policy: joint capacity planning and scheduling at each decision, solved by HiGHS, CBC or Gurobi via PuLP.

``build_model`` (reductions + formulation) turns the Snapshot into a ``Model``; ``solve`` runs one solver on it;
``MILP.decide`` turns the answer into a Plan (``to_plan``) or falls back to another policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

from optim.base import Policy, build, register, registry
from optim.colocate import hosts
from optim.milp.formulation import build_model, snapshot_at_now
from optim.milp.model import Model
from optim.milp.reductions import reduce_snapshot
from optim.milp.solution import set_warm_start, to_plan
from optim.milp.solvers import SOLVERS, report_licence_once, solve
from optim.milp.split import GROUP_SHARE, group_size, solve_in_groups
from optim.milp.waiting import WAIT_ESTIMATES
from optim.spot.fleet import check_spot_rule, uniform_progress_snapshot
from sim.model import CapsimError, DecisionInfo, Plan, Snapshot
from sim.registry import did_you_mean
from sim.risk import expected_snapshot

__all__ = ["MILP", "NODE_LIMIT", "SPLIT_ABOVE"]

NODE_LIMIT = 500
"""Default branch-and-bound nodes per decision (docs/milp.md, "Limits and reproducibility", measures the choice)."""
SPLIT_ABOVE = 10_000
"""Default candidate placements above which a decision is solved in groups of waiting jobs (docs/milp.md, "Large
decisions"): above every decision of the shipped studies (the largest had 8,569 variables)."""


@register("milp")
class MILP(Policy):
    """Joint capacity planning and scheduling by one MILP per decision (docs/milp.md); falls back on failure.

    Options: ``solver`` (highs, cbc, gurobi), ``node_limit`` (branch-and-bound nodes per decision: a deterministic
    limit, so a run repeats exactly on any machine under any load), ``time_limit`` (wall-clock s per decision, off by
    default: where it stops a decision the run depends on the machine's load and its summary says
    ``deterministic`` 0), ``gap`` (relative), ``threads`` (a fixed count: results depend on it), ``warm_start``
    (from the fallback's plan), ``fallback`` (a policy name, default edf), ``preempt`` (running jobs may be moved,
    resized or sent back), ``urgency`` (the extra waiting charge factor of docs/reference.md §4, default 0),
    ``wait_estimate`` (Δ in the waiting penalty: ``mean`` or ``earliest`` running completion, see
    ``next_decision_delay``), ``dominance``
    (``safe``: exact reductions only; ``pareto``: also drop configs beaten across VM types, faster but a heuristic),
    ``solver_path`` (a CBC binary), ``solver_options`` (passed to the solver as they are), ``extra_constraints``
    (a callable adding constraints to the Model: research and tests only), ``msg`` (solver log on stdout),
    ``spot_rule`` (``uniform_progress``: each waiting job only on the market Uniform Progress allows it, see
    ``optim.spot.fleet``; spot at its expected runtime from the revocation rate either way), ``split_above``
    (candidate placements above which a decision's waiting jobs are solved in groups by deadline, each group's model
    about a quarter of that size, ``optim.milp.split``; null: never; not with ``preempt`` or co-location).
    ``fallback_policy`` is the fallback built from its name: derived, not a parameter. Where GPUs may be shared,
    pair variables let a waiting job join a running one (docs/milp.md, "Co-located pairs"; not with ``preempt``).
    """

    may_preempt: ClassVar[bool] = True
    """Moves, resizes and preemptions: only with ``preempt`` (without it running jobs stay where they are)."""
    may_share: ClassVar[bool] = True
    may_colocate: ClassVar[bool] = True

    def __init__(
        self,
        solver: str = "highs",
        node_limit: int | None = NODE_LIMIT,
        time_limit: float | None = None,
        gap: float | None = 0.01,
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
        spot_rule: str | None = None,
        split_above: int | None = SPLIT_ABOVE,
    ):
        if solver not in SOLVERS:
            raise CapsimError(f"milp policy: unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
        if fallback == "milp":
            raise CapsimError("milp policy: fallback must be another policy (e.g. edf), not milp itself")
        known = registry()
        if fallback not in known:
            raise CapsimError(f"milp policy: fallback {fallback!r} is not a policy{did_you_mean(fallback, known)} "
                              f"(the MILP hands a decision to its fallback when a solve fails, so that no job is "
                              f"lost: there is always one); expected one of {', '.join(sorted(known))}")
        self.solver = solver
        self.node_limit = node_limit
        self.time_limit = time_limit
        self.gap = gap
        self.threads = threads
        self.warm_start = warm_start
        self.fallback = fallback
        self.preempt = preempt
        self.urgency = urgency
        self.check_param("time_limit", float, above=0.0, optional=True)
        self.check_param("node_limit", int, low=1, optional=True)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise CapsimError(f"milp policy: threads must be a whole number ≥ 1, got {threads!r} (0, the solver's "
                              "automatic choice, depends on the machine's cores, and so would the results)")
        if gap is not None and (isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap < 1):
            raise CapsimError(f"milp policy: gap is a relative gap in [0, 1), got {gap!r}")
        self.check_param("warm_start", bool)
        self.check_param("preempt", bool)
        self.check_param("urgency", float, low=0.0)
        self.fallback_policy = build(fallback)
        if dominance not in ("pareto", "safe"):
            raise CapsimError(f"milp policy: dominance must be 'pareto' or 'safe', got {dominance!r}")
        self.dominance = dominance
        if wait_estimate not in WAIT_ESTIMATES:
            raise CapsimError(f"milp policy: wait_estimate must be one of {', '.join(WAIT_ESTIMATES)}, "
                              f"got {wait_estimate!r}")
        self.wait_estimate = wait_estimate
        self.solver_path = solver_path
        self.solver_options = solver_options
        self.extra_constraints = extra_constraints
        self.msg = msg
        self.check_param("msg", bool)
        if solver_options is not None and not isinstance(solver_options, Mapping):
            raise CapsimError(f"milp policy: solver_options must be a mapping of option → value (or null), got "
                              f"{solver_options!r}")
        self.spot_rule = spot_rule
        check_spot_rule("milp", spot_rule)
        self.split_above = split_above
        self.check_param("split_above", int, low=1, optional=True)

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
        return replace(plan, info=info)

    def decide(self, snapshot: Snapshot) -> Plan:
        if self.spot_rule is not None:
            snapshot = uniform_progress_snapshot(snapshot)
        snapshot = expected_snapshot(snapshot)  # spot at its expected runtime (the work revocations lose)
        limit = self.split_above
        full = None
        if (limit is not None and not self.preempt and snapshot.colocation is None and snapshot.mig is None
                and len(snapshot.waiting) > 1
                and len(snapshot.waiting) * len(snapshot.nodes) * len(snapshot.configs) > limit):
            try:
                full = reduce_snapshot(snapshot_at_now(snapshot), False, self.urgency, self.dominance,
                                       self.wait_estimate)
            except CapsimError:
                raise
            except Exception as e:  # noqa: BLE001  (a modelling failure must not lose jobs)
                return self._fall_back(snapshot, "error", f"reducing the model failed: {type(e).__name__}: {e}", None)
            if len(full.placements) > limit:
                size = group_size(full, limit / GROUP_SHARE)
                return solve_in_groups(snapshot, size, self._decide, len(full.placements), limit)
        return self._decide(snapshot, full)

    def _decide(self, snapshot: Snapshot, reduced: Model | None = None) -> Plan:
        """One MILP on ``snapshot`` (spot already at its expected runtime), or the fallback's plan; ``reduced`` is the
        snapshot's reduction when ``decide`` made it to count the placements (written as it is, not made again)."""
        if not snapshot.waiting and not (self.preempt and snapshot.running):
            return Plan(info=DecisionInfo(status="nothing_to_decide"))
        pairable = snapshot.colocation is not None and not self.preempt and bool(hosts(snapshot))
        if not self.preempt and not pairable and not any(nv.vm is None or nv.used_gpus < nv.vm.gpus
                                                         for nv in snapshot.nodes):
            # every slot runs jobs on all its GPUs: no placement exists, so skip writing the model
            return Plan(info=DecisionInfo(status="no_candidates", solver=self.solver, variables=0, constraints=0))
        try:
            model = build_model(snapshot, self.preempt, self.urgency, self.dominance, self.extra_constraints,
                                self.wait_estimate, reduced)
        except CapsimError:
            raise
        except Exception as e:  # noqa: BLE001  (a modelling failure must not lose jobs)
            return self._fall_back(snapshot, "error", f"building the model failed: {type(e).__name__}: {e}", None)
        size = model.size
        if not model.placements and not model.pairs:
            return Plan(info=DecisionInfo(status="no_candidates", solver=self.solver, variables=0, constraints=0))
        warm = False
        if self.warm_start:
            warm = set_warm_start(model, self.fallback_policy.decide(snapshot)) > 0 or self.preempt
        out = solve(
            model, self.solver, self.time_limit, self.gap, self.threads, warm, self.solver_path, self.msg,
            self.solver_options, self.node_limit,
        )
        if not out.usable:
            if out.status == "licence":
                report_licence_once(out.reason or "", self.fallback)
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
