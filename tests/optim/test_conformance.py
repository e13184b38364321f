"""One conformance suite run over every registered policy, the way scikit-learn's ``parametrize_with_checks`` runs
over every estimator.

The kinds come from ``optim.registry(aliases=False)``, never a hand list: a policy is covered the moment it
registers. One that cannot be built with its defaults here (a solver this machine lacks, a required argument)
declares ``test_params``; it is never skipped. Checked: the parameter contract (stored under their own names,
``get_params()`` rebuilds an equal policy, the label names what differs from the defaults); and, on random small
worlds run through the real engine, the engine's invariants (``tests/optim/worlds.py``), plans that name only known
jobs, nodes and VM types, and deterministic decisions (a policy rebuilt from ``get_params()`` and fed the same
snapshots answers the same plans). The default suite draws a few worlds per policy; ``-m slow`` draws many.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import optim
from optim.base import Policy
from tests.optim.worlds import World, at_scale, check, check_plan_names, recorded_run, worlds

KINDS = tuple(optim.registry(aliases=False))
EMPTY = inspect.Parameter.empty
FEW = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make(kind: str, **params: Any) -> Policy:
    """The policy ``kind`` built with its declared ``test_params`` (if any) and ``params`` on top."""
    cls = optim.registry()[kind]
    return optim.build(kind, **{**dict(getattr(cls, "test_params", {})), **params})


def same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b) or (isinstance(a, float) and isinstance(b, int) and a == b)


def test_the_registry_lists_every_policy_once():
    kinds = optim.registry(aliases=False)
    assert len(set(kinds.values())) == len(kinds)
    assert set(optim.registry().values()) == set(kinds.values())  # every alias points to a listed policy


@pytest.mark.parametrize("kind", KINDS)
def test_builds_with_its_defaults_or_declared_test_params(kind):
    cls = optim.registry()[kind]
    unknown = set(cls.test_params) - set(cls.param_names())
    assert not unknown, f"{kind}: test_params names {sorted(unknown)}, which are not constructor parameters"
    required = {n for n, d in cls.param_defaults().items() if d is EMPTY}
    assert required <= set(cls.test_params), f"{kind}: required parameters {sorted(required)} need test_params"
    p = make(kind)
    assert isinstance(p, Policy) and p.name == kind
    assert isinstance(p.may_share, bool) and isinstance(p.may_preempt, bool)


@pytest.mark.parametrize("kind", KINDS)
def test_parameters_are_stored_under_their_own_names(kind):
    cls = optim.registry()[kind]
    p = make(kind)
    params = p.get_params()
    assert tuple(params) == cls.param_names()
    for name, default in cls.param_defaults().items():
        built_with = cls.test_params.get(name, default)
        if built_with is not EMPTY:
            assert same(params[name], built_with), f"{kind}.{name}: built with {built_with!r}, stores {params[name]!r}"
    if not cls.test_params:
        assert p.describe() == kind, "a policy built with its defaults is labelled by its name alone"


@pytest.mark.parametrize("kind", KINDS)
def test_get_params_rebuilds_an_equal_policy(kind):
    cls = optim.registry()[kind]
    flipped = {n: not d for n, d in cls.param_defaults().items() if isinstance(d, bool) and n not in cls.test_params}
    for extra in ({}, flipped):
        p = make(kind, **extra)
        assert all(p.get_params()[n] == v for n, v in extra.items())
        q = optim.build(kind, **p.get_params())
        assert type(q) is type(p) and q.get_params() == p.get_params()
        assert q.describe() == p.describe() and (q.may_share, q.may_preempt) == (p.may_share, p.may_preempt)
        assert all(n in p.describe() for n in extra), "the label names every parameter that differs from its default"


def engine_run_keeps_the_invariants(kind: str, world: World) -> None:
    result, seen = recorded_run(world, make(kind))
    check(world, result)
    assert seen, "the engine asked the policy at least once"
    for snapshot, plan in seen:
        check_plan_names(snapshot, plan)


def decisions_are_deterministic(kind: str, world: World) -> None:
    _, seen = recorded_run(world, make(kind))
    again = optim.build(kind, **make(kind).get_params())
    for i, (snapshot, plan) in enumerate(seen):
        assert again.decide(snapshot) == plan, f"{kind}: decision {i} differs when replayed"


PROPERTIES = {"engine_invariants": engine_run_keeps_the_invariants, "deterministic": decisions_are_deterministic}


@pytest.mark.parametrize("depth", [pytest.param(FEW, id="few"), pytest.param(MANY, id="many", marks=pytest.mark.slow)])
@pytest.mark.parametrize("prop", PROPERTIES)
@pytest.mark.parametrize("kind", KINDS)
def test_on_random_worlds(kind, prop, depth):
    @depth
    @given(world=worlds(single_gpu=getattr(optim.registry()[kind], "single_gpu_only", False),
                        spot=optim.registry()[kind].plans_capacity))
    def holds(world: World) -> None:
        PROPERTIES[prop](kind, world)

    holds()


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_engine_invariants_at_scale(kind):
    """The slow profile: the engine's invariants on ``AT_SCALE`` (1,000) random worlds per policy."""
    at_scale(lambda world: engine_run_keeps_the_invariants(kind, world), f"policy {kind}",
             single_gpu=getattr(optim.registry()[kind], "single_gpu_only", False),
             spot=optim.registry()[kind].plans_capacity)
