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
