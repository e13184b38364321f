"""One conformance suite run over every registered policy, the way scikit-learn's ``parametrize_with_checks`` runs
over every estimator, built on ``sim.testing.check_policy`` (the checks an outside author runs on their own policy).

The kinds come from ``optim.registry(aliases=False)``, never a hand list: a policy is covered the moment it
registers (ElasticFlow's policies, on their own time model, on worlds of that model: ``sim.testing.replay``). One
that cannot be built with its defaults here (a solver this machine lacks, a required argument) declares
``test_params``; it is never skipped. ``check_policy`` checks the parameter contract (stored as given under
their own names, ``clone``/``set_params``/``get_params`` round trips, the label), capability flags on the class, runs
on small worlds through the real engine keeping its invariants, deterministic replays, and spot priced at its
expected cost. On top, random worlds (``tests/optim/worlds.py``, hypothesis) check the invariants and determinism
on many more cases: a few per policy by default, many with ``-m slow``.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optim
from optim.base import Policy
from optim.gavel.packed_policies import _PackedLP
from sim.model import CapsimError
from sim.testing import check_policy, check_replay, replay_world
from sim.testing.replay import run_replay_world
from tests.optim.worlds import AT_SCALE, World, at_scale, check, check_plan_names, recorded_run, worlds

KINDS = tuple(optim.registry(aliases=False))
ENGINE = tuple(k for k in KINDS if optim.registry()[k].time_model == "engine")
REPLAY = tuple(k for k in KINDS if optim.registry()[k].time_model == "elasticflow")
# Gavel's LP packing policies solve an LP over every (job or pair, GPU type) per recompute, minutes per random world
# here: their random-world properties run with -m slow (their replays against Gavel stay in the default suite).
PAIR_LPS = frozenset(k for k in ENGINE if issubclass(optim.registry()[k], _PackedLP))
ENGINE_CASES = [pytest.param(k, marks=pytest.mark.slow) if k in PAIR_LPS else k for k in ENGINE]
EMPTY = inspect.Parameter.empty
FEW = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make(kind: str, **params: Any) -> Policy:
    """The policy ``kind`` built with its declared ``test_params`` (if any) and ``params`` on top."""
    cls = optim.registry()[kind]
    return optim.build(kind, **{**dict(getattr(cls, "test_params", {})), **params})


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
    if not cls.test_params:
        assert p.describe() == kind, "a policy built with its defaults is labelled by its name alone"


@pytest.mark.parametrize("kind", KINDS)
def test_check_policy(kind):
    check_policy(make(kind))


def test_the_checks_catch_a_policy_outside_the_contract():
    """A policy that converts a parameter, or sets a capability on its instance, fails ``check_policy`` by name."""

    class Converts(Policy):
        name = "converts"

        def __init__(self, rounds: int = 3):
            self.rounds = float(rounds)

    class Flags(Policy):
        name = "flags"

        def __init__(self, share: bool = False):
            self.share = share
            self.may_share = share  # type: ignore[misc]

    with pytest.raises(AssertionError, match="built with rounds=3, it stores 3.0"):
        check_policy(Converts())
    with pytest.raises(AssertionError, match="may_share is set on the instance"):
        check_policy(Flags())
    with pytest.raises(CapsimError, match="unknown parameter 'round'.*did you mean 'rounds'"):
        Converts().set_params(round=2)


def engine_run_keeps_the_invariants(kind: str, world: World) -> None:
    result, seen = recorded_run(world, make(kind))
    check(world, result)
    assert seen, "the engine asked the policy at least once"
    for snapshot, plan in seen:
        check_plan_names(snapshot, plan)


def decisions_are_deterministic(kind: str, world: World) -> None:
    _, seen = recorded_run(world, make(kind))
    again = make(kind).clone()
    for i, (snapshot, plan) in enumerate(seen):
        assert again.decide(snapshot) == plan, f"{kind}: decision {i} differs when replayed"


PROPERTIES = {"engine_invariants": engine_run_keeps_the_invariants, "deterministic": decisions_are_deterministic}


@pytest.mark.parametrize("depth", [pytest.param(FEW, id="few"), pytest.param(MANY, id="many", marks=pytest.mark.slow)])
@pytest.mark.parametrize("prop", PROPERTIES)
@pytest.mark.parametrize("kind", ENGINE_CASES)
def test_on_random_worlds(kind, prop, depth):
    @depth
    @given(world=worlds(single_gpu=getattr(optim.registry()[kind], "single_gpu_only", False),
                        spot=optim.registry()[kind].plans_capacity))
    def holds(world: World) -> None:
        PROPERTIES[prop](kind, world)

    holds()


@pytest.mark.parametrize("depth", [pytest.param(FEW, id="few"), pytest.param(MANY, id="many", marks=pytest.mark.slow)])
@pytest.mark.parametrize("kind", REPLAY)
def test_replays_on_random_worlds(kind, depth):
    """A policy on ElasticFlow's time model keeps a replay's invariants, and decides the same again, on random
    homogeneous clusters (2–8 servers of 2 or 4 GPUs) and workloads, with and without a truth unlike the estimate."""

    @depth
    @given(seed=st.integers(0, 2**31), servers=st.sampled_from([2, 4, 8]), vm=st.sampled_from(["NC12", "NC24"]),
           n_jobs=st.integers(1, 20), noisy=st.booleans())
    def holds(seed: int, servers: int, vm: str, n_jobs: int, noisy: bool) -> None:
        world = replay_world(seed, servers, vm, n_jobs, noisy)
        result = run_replay_world(world, make(kind))
        check_replay(world, result)
        assert result.jobs.equals(run_replay_world(world, make(kind)).jobs), f"{kind}: a second run differs"

    holds()


def test_the_replay_checks_catch_a_broken_run():
    """``check_replay`` fails a replay whose records lose a job, run a rejected one or use more GPUs than there are;
    and ElasticFlow's time model itself stops a policy that runs more jobs than fit."""
    import dataclasses

    from sim.elasticflow.vocabulary import LasView, ReplayPolicy, RigidPlan

    world = replay_world(5, servers=2, n_jobs=12)
    good = run_replay_world(world, make("tiresias"))
    check_replay(world, good)
    seg = good.segments
    crowded = seg.assign(start_time=seg["start_time"].min(), end_time=seg["end_time"].max())
    rejected = good.jobs.assign(status=["rejected"] + list(good.jobs["status"][1:]))
    for broken, why in ((dataclasses.replace(good, jobs=good.jobs.iloc[1:]), "exactly once"),
                        (dataclasses.replace(good, jobs=rejected), "rejected job ran"),
                        (dataclasses.replace(good, segments=crowded), "GPUs in use")):
        with pytest.raises(AssertionError, match=why):
            check_replay(world, broken)

    class Everyone(ReplayPolicy):
        name = "everyone"
        clock = "las"

        def decide(self, view: LasView) -> RigidPlan:  # type: ignore[override]
            return RigidPlan(tuple(s.id for s in view.runnable))

    with pytest.raises(CapsimError, match="runs more than"):
        check_policy(Everyone())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ENGINE)
def test_engine_invariants_at_scale(kind):
    """The slow profile: the engine's invariants on ``AT_SCALE`` (1,000) random worlds per policy; a tenth of that
    for Gavel's LP packing policies (seconds per world: 1,000 would take hours each)."""
    at_scale(lambda world: engine_run_keeps_the_invariants(kind, world), f"policy {kind}",
             examples=AT_SCALE // 10 if kind in PAIR_LPS else AT_SCALE,
             single_gpu=getattr(optim.registry()[kind], "single_gpu_only", False),
             spot=optim.registry()[kind].plans_capacity)
