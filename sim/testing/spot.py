"""The spot check of ``sim.testing.check_policy``: a capacity-planning policy prices a spot VM at its expected cost
under revocations (``sim.risk``), on a lone job whose right answer is known in each of four rates."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.catalogue import configurations, gpu, spot_variant
from sim.contracts import Policy
from sim.model import Assignment, ClusterRules, Job, JobSpec, JobView, NodeView, Plan, Snapshot, VMType
from sim.risk import expected_runtime, spot_rates

__all__ = ["SpotCase", "SPOT_CASES", "spot_case", "check_spot_pricing"]

_ON_DEMAND = VMType("od", gpu("K80"), 1, 3.6, spot_price_per_hour=1.8)
_SPEC = JobSpec("resnet50", "pytorch", 1000, 64, name="lone")


@dataclass(frozen=True)
class SpotCase:
    """A lone one-hour job with a loose deadline on an empty cluster of one slot that may host a $3.60/h VM or its
    spot variant at $1.80/h, revoked ``rate`` times per hour, under ``rules``. ``spot_wins``: whether the spot
    variant's expected cost (its price x the expected runtime, ``sim.risk``) is below the on-demand cost."""

    name: str
    rate: float
    rules: ClusterRules
    spot_wins: bool


SPOT_CASES = (
    SpotCase("never revoked", 0.0, ClusterRules(), True),
    SpotCase("rarely revoked (0.01/h: E[T] 3,618 s, $1.81)", 0.01, ClusterRules(), True),
    SpotCase("often revoked (2/h, no checkpoints: E[T] 11,501 s, $5.75)", 2.0, ClusterRules(), False),
    SpotCase("often revoked, checkpoints every 600 s and a 60-s restart (E[T] 4,415 s, $2.21)", 2.0,
             ClusterRules(checkpoint_interval=600.0, restart_overhead=60.0), True),
)
"""The rates ``check_spot_pricing`` tries, the first telling whether the policy rents spot at all."""


def spot_case(case: SpotCase) -> Snapshot:
    """The snapshot of ``case``: job 0 waiting (3,600 s on either configuration, due in a year), node 0 empty."""
    types = (_ON_DEMAND, spot_variant(_ON_DEMAND, case.rate))
    est = np.full(2, 3600.0)
    est.setflags(write=False)
    job = Job(0, _SPEC, 0.0, 3.2e7, 0.01)
    return Snapshot(time=0.0, trigger="arrival", configs=configurations(types), vm_types=types,
                    nodes=(NodeView(0),), waiting=(JobView(job, est),), running=(), empty_nodes=(0,),
                    rules=case.rules)


def _expected_costs(snap: Snapshot) -> np.ndarray:
    """Each configuration's expected cost for the case's job: price x expected runtime."""
    rates = spot_rates(snap.configs)
    t = expected_runtime(snap.waiting[0].estimates, rates, snap.rules)
    return np.array([c.vm.price_per_second for c in snap.configs]) * t


def _rented(policy: Policy, snap: Snapshot, case: SpotCase) -> bool:
    """Whether ``policy`` starts the case's job on the spot VM (an AssertionError if it does not start it)."""
    plan = policy.decide(snap)
    label = policy.describe()
    assert isinstance(plan, Plan), f"{label}: decide() returned {type(plan).__name__} on the spot case {case.name!r}"
    starts: tuple[Assignment, ...] = tuple(a for a in plan.start if a.job_id == 0)
    assert len(starts) == 1 and starts[0].node == 0, (
        f"{label}: on the spot case {case.name!r} a lone job with a loose deadline on an empty cluster is started on "
        f"node 0; the plan starts {plan.start}")
    vm = plan.vms.get(0)
    assert vm in {v.name for v in snap.vm_types}, f"{label}: the plan rents {vm!r} on node 0 for the lone job"
    return snap.vm_type(vm).spot


def check_spot_pricing(policy: Policy) -> None:
    """A capacity-planning policy prices a spot VM at its expected cost under revocations (``sim.risk``).

    On each of ``SPOT_CASES``: the policy starts the lone job; it never rents spot where spot's expected cost is above
    on demand's (a policy reading the raw estimates would, pricing a spot VM as if it were never revoked); and if it
    rents spot at all (on a market that never revokes), it rents spot wherever spot's expected cost is below on
    demand's, restarts and checkpoints counted. A policy that never rents spot (a baseline by default) passes.
    """
    label = policy.describe()
    weighs_spot = None
    for case in SPOT_CASES:
        snap = spot_case(case)
        cost = _expected_costs(snap)
        assert (cost[1] < cost[0]) == case.spot_wins and math.isfinite(cost[1]), (case.name, cost)
        spot = _rented(policy, snap, case)
        if weighs_spot is None:
            weighs_spot = spot
        if spot:
            assert case.spot_wins, (
                f"{label}: rents the spot VM on the case {case.name!r}, where its expected cost ${cost[1]:.2f} is "
                f"above the on-demand ${cost[0]:.2f}: it prices spot without the work revocations lose (decide on "
                f"sim.risk.expected_snapshot(snapshot))")
        elif weighs_spot:
            assert not case.spot_wins, (
                f"{label}: rents spot on a market that never revokes but not on the case {case.name!r}, where spot's "
                f"expected cost ${cost[1]:.2f} is below the on-demand ${cost[0]:.2f}")
