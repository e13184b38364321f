"""The kind registries behind YAML names: aliases, clear errors for unknown kinds and bad parameters."""

from __future__ import annotations

import pytest

import optim
import predictors
from sim.model import CapsimError


def test_alias_builds_the_same_policy_and_is_listed_once_without_aliases():
    assert type(optim.build("ps")) is type(optim.build("priority"))
    assert "ps" in optim.registry() and "ps" not in optim.registry(aliases=False)
    assert list(optim.registry(aliases=False))[:3] == ["fifo", "edf", "priority"]


@pytest.mark.parametrize("build, what", [(optim.build, "policy"), (predictors.build, "predictor")])
def test_unknown_kind_lists_the_known_ones(build, what):
    with pytest.raises(CapsimError, match=f"unknown {what} 'nope' \\(known {what} kinds: .*\\)"):
        build("nope")


def test_bad_parameters_name_the_kind_and_the_parameters():
    with pytest.raises(CapsimError, match=r"policy 'fifo': bad parameters \['speed'\]"):
        optim.build("fifo", speed=3)
    with pytest.raises(CapsimError, match=r"predictor 'table': bad parameters \[\]"):
        predictors.build("table")


def test_one_face_for_every_kind_of_component():
    """Policies, predictors, trace formats and spot strategies: each room's register/alias/registry/build are the
    methods of its one Registry, which imports nothing (the floor never reaches up into a room)."""
    import ast
    from pathlib import Path

    import optim.base
    import optim.spot.base
    import predictors.base
    import sim.registry
    import sim.traces
    from sim.contracts import POLICIES, PREDICTORS
    from sim.spotjob import SPOT_STRATEGIES
    from sim.traces import TRACE_FORMATS

    for room, reg in ((optim.base, POLICIES), (predictors.base, PREDICTORS), (sim.traces, TRACE_FORMATS),
                      (optim.spot.base, SPOT_STRATEGIES)):
        assert (room.register, room.alias, room.registry, room.build) == (reg.register, reg.alias, reg.kinds,
                                                                          reg.build), room.__name__
    tree = ast.parse(Path(sim.registry.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "difflib", "collections.abc", "typing", "sim.model"}, imported


def test_a_parameter_given_as_a_kind_mapping_is_built_by_the_same_registry():
    p = predictors.build("noisy", base={"kind": "noisy", "base": {"kind": "measured"}, "mape": 0.1}, mape=0.2)
    assert p.base.name == "noisy" and p.base.base.name == "measured" and p.base.mape == 0.1
