"""The scenario's ``colocation`` option: off by default (run ids unchanged), on it gives the cluster two jobs per GPU
and the simulation its interference models; mistakes in it get one clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import api
from experiments.scenario import load_scenario
from sim.model import CapsimError

from .conftest import small_scenario, write_yaml

PAIRS = {"kind": "pairs", "pairs": {"J1+J4": [1.5, 1.2], "J1+J1": [1.8, 1.8]}}


def test_without_colocation_nothing_changes(tmp_path: Path) -> None:
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", small_scenario()))
    assert "colocation" not in sc.resolved() and sc.build_cluster().rules.jobs_per_gpu == 1
    assert sc.interference() == (None, None)
    on = load_scenario(write_yaml(tmp_path / "c.yaml", small_scenario(colocation={"interference": PAIRS})))
    assert on.run_id(on.policy_specs()[0], 0) != sc.run_id(sc.policy_specs()[0], 0)


def test_colocation_gives_the_cluster_two_jobs_per_gpu_and_the_models(tmp_path: Path) -> None:
    d = small_scenario(colocation={"interference": PAIRS, "estimator": {"kind": "pairs", "pairs": {"J1+J4": [1, 1]}}})
    sc = load_scenario(write_yaml(tmp_path / "c.yaml", d))
    told, truth = sc.interference()
    assert sc.build_cluster().rules.jobs_per_gpu == 2
    assert truth.pairs == PAIRS["pairs"] and told.pairs == {"J1+J4": [1, 1]}
    runs = api.run(sc, policies="fifo", seeds=[0])
    assert len(runs.jobs) == 6 and "partner" in runs.segments.columns and runs.segments.partner.isna().all()
    assert (runs.summary.colocated_share == 0).all()


def test_the_default_interference_model_is_gavels_table(tmp_path: Path) -> None:
    sc = load_scenario(write_yaml(tmp_path / "c.yaml", small_scenario(colocation={})))
    told, truth = sc.interference()
    assert told is truth and truth.name == "table"


@pytest.mark.parametrize(("colocation", "message"), [
    ({"interference": "tabel"}, "did you mean 'table'"),
    ({"interference": {"kind": "pairs", "pairz": {}}}, "unknown parameter 'pairz'"),
    ({"interference": {"kind": "pairs", "pairs": {"J1": [1, 1]}}}, "expected a key 'A\\+B'"),
    ({"interferance": "table"}, "interferance"),
])
def test_mistakes_in_colocation_are_named(tmp_path: Path, colocation, message) -> None:
    with pytest.raises(CapsimError, match=message):
        load_scenario(write_yaml(tmp_path / "bad.yaml", small_scenario(colocation=colocation)))
