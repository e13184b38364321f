"""Spot risk in one place: every registered capacity-planning policy prices a spot VM at its expected cost under
revocations (``sim.testing.check_spot_pricing``), not at its list price as if it were never revoked; the list
schedulers with their ``spot`` option too."""

from __future__ import annotations

import pytest

import optim
from optim.base import Policy
from sim.model import Assignment, Plan, Snapshot
from sim.testing import SPOT_CASES, check_spot_pricing, spot_case
from tests.optim.test_conformance import KINDS, make

PLANNERS = tuple(k for k in KINDS if optim.registry()[k].plans_capacity)


@pytest.mark.parametrize("kind", PLANNERS)
def test_every_capacity_planning_policy_prices_spot_at_its_expected_cost(kind):
    check_spot_pricing(make(kind))


@pytest.mark.parametrize("kind", ["fifo", "edf", "priority"])
def test_the_list_schedulers_weigh_spot_when_asked(kind):
    check_spot_pricing(make(kind, spot=True))
    assert make(kind, spot=True).decide(spot_case(SPOT_CASES[0])).vms[0].endswith("-spot")


def test_the_check_catches_a_policy_that_reads_the_raw_estimates():
    """A policy choosing the cheapest configuration by list price × raw estimate rents spot on the often-revoked
    market, where its expected cost is $5.75 against $3.60: the check names the case."""

    class ListPrice(Policy):
        name = "list_price"

        def decide(self, s: Snapshot) -> Plan:
            jv = s.waiting[0]
            k = min(range(len(s.configs)), key=lambda i: s.configs[i].vm.price_per_hour * jv.estimates[i])
            return Plan(vms={0: s.configs[k].vm.name}, start=(Assignment(jv.id, 0, 1),))

    with pytest.raises(AssertionError, match="often revoked .* above the on-demand"):
        check_spot_pricing(ListPrice())


def test_plans_drawn_among_every_setup_are_ranked_at_their_expected_cost():
    """With ``alpha=1`` random_greedy draws each job's setup among its whole D* ranking, so its pool holds spot plans
    too; it keeps the one of least expected cost (its default ``alpha`` draws only the head for two setups)."""
    check_spot_pricing(make("random_greedy", alpha=1.0, iterations=20))
