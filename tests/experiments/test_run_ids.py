"""A run id covers the configuration as built (issue 18): the policy's and predictors' every parameter with its
default, so runs made under another default are not taken for finished ones; and every run records the versions of
the packages it ran with, in its summary's config and in the folder's manifest."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.results.reading import read_results
from experiments.scenario import PolicySpec, PredictorSpec, components, load_scenario
from optim.baselines import ListScheduler

from .conftest import small_scenario, write_yaml


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "tiny.yaml", small_scenario(policies=[{"kind": "fifo"}], seeds=[0]))


def test_a_default_written_out_is_the_same_run(tiny: Path) -> None:
    sc = load_scenario(tiny)
    bare, spelt = PolicySpec(kind="fifo"), PolicySpec(kind="fifo", pack=False, spot=False)
    assert sc.run_id(bare, 0) == sc.run_id(spelt, 0) != sc.run_id(PolicySpec(kind="fifo", pack=True), 0)
    assert sc.run_id(bare, 0) != sc.run_id(PolicySpec(kind="fifo", name="other"), 0)  # a label is another run
    assert components.resolved_policy(bare) == {"kind": "fifo", "name": None, "pack": False, "spot": False,
                                                "spot_rule": None}


def test_a_predictor_is_resolved_with_its_defaults() -> None:
    built = components.resolved_predictor(PredictorSpec(kind="trace", base={"kind": "measured"}))
    assert built["kind"] == "trace" and built["base"]["kind"] == "measured"
    assert set(built["base"]) > {"kind"}  # the nested predictor's defaults too
    json.dumps(built)  # plain data


def test_runs_made_under_another_default_run_again(tiny: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "r"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    old = set(read_results(out, all_runs=True).summary["run_id"])
    # a later capsim changes fifo's default: pack=True; the folder's run was made with pack=False
    monkeypatch.setattr(ListScheduler.__init__, "__defaults__", (True, False, None))
    monkeypatch.setattr(components, "_RESOLVED", {})
    capsys.readouterr()
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1"]) == 0
    assert "0 already done, 1 to run" in capsys.readouterr().err
    summary = read_results(out, all_runs=True).summary
    new = summary[~summary["run_id"].isin(old)]
    assert len(new) == 1 and len(summary) == 2
    config = json.loads(new["config"].iloc[0])
    assert config["policy"] == {"kind": "fifo", "name": None} and config["policy_resolved"]["pack"] is True


def test_versions_are_recorded_with_every_run_and_command(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert main(["run", str(tiny), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    summary = read_results(out).summary
    for versions in [manifest["versions"], *(json.loads(c)["versions"] for c in summary["config"])]:
        assert {k: versions[k] for k in ("highspy", "numpy", "pandas", "pulp", "simpy")} == {
            k: version(k) for k in ("highspy", "numpy", "pandas", "pulp", "simpy")}


def test_run_ids_of_many_seeds_are_the_run_ids_of_each() -> None:
    """``Scenario.run_ids`` (the configuration resolved once for a policy, the seed set per run: what a plan of
    many seeds uses) gives every run the id ``run_id`` gives it alone, on the shipped scenarios and sweeps (grid
    points, traces, spot, co-location, servers)."""
    from experiments.scenario.sweep import load_sweep
    from sim.model import CapsimError

    root = Path(__file__).resolve().parents[2] / "experiments"
    checked = 0
    for f in sorted(root.rglob("*.yaml")):
        try:
            sweep = load_sweep(f)
        except CapsimError:
            continue  # not a scenario or sweep file (trace definitions)
        for pt in sweep.points[:2]:
            for pol in sweep.policies:
                ids = pt.scenario.run_ids(pol)
                for seed in [*sweep.seeds[:2], 12345]:
                    assert ids(seed) == pt.scenario.run_id(pol, seed), (f, pol, seed)
                    checked += 1
    assert checked > 100
