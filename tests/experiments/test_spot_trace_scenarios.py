"""Spot markets replayed from availability traces in scenario files: what policies are told, mistakes named, run
ids that follow the trace's content."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from experiments.scenario import PolicySpec, load_scenario
from sim.availability import read_availability
from sim.model import CapsimError

from .conftest import small_scenario, write_yaml

ZONES = Path(__file__).resolve().parents[2] / "experiments" / "spot" / "traces" / "aws-02-15-2023"
V100 = {"provider": "aws", "gpu": "V100"}
FIFO = PolicySpec(kind="fifo")
ANYWHERE = {"kind": "table", "table": {"J1/p3.2xlarge/1": 600.0, "J4/p3.2xlarge/1": 600.0}}


def _load(tmp_path: Path, **spot):
    data = small_scenario(cluster={"nodes": 2, "vm_types": V100, "spot": spot}, predictor=ANYWHERE)
    return load_scenario(write_yaml(tmp_path / "s.yaml", data))


def test_a_trace_of_zones_governs_every_spot_type_and_policies_are_told_its_observed_rate(tmp_path):
    sc = _load(tmp_path, trace={"path": str(ZONES)})
    spot = [v for v in sc.vm_types() if v.spot]
    assert {v.name for v in spot} == {"p3.2xlarge-spot", "p3.8xlarge-spot", "p3.16xlarge-spot"}
    series = read_availability(ZONES)
    revocations = sum(s.stats().revocations for s in series.values())
    up_hours = sum(s.stats().available_share * s.end for s in series.values()) / 3600
    assert all(v.revocation_rate == pytest.approx(revocations / up_hours) for v in spot)
    markets = sc.cluster.spot_markets(sc.base_dir)
    assert [s.name for s in markets.zones["p3.2xlarge-spot"]] == sorted(series)
    told = _load(tmp_path, trace=str(ZONES), revocation_rate=0.3)
    assert {v.revocation_rate for v in told.vm_types() if v.spot} == {0.3}


def test_the_run_id_follows_the_trace_content_and_offset(tmp_path):
    copy = tmp_path / "zones"
    shutil.copytree(ZONES, copy)
    a = _load(tmp_path, trace=str(copy)).run_id(FIFO, 0)
    assert _load(tmp_path, trace=str(copy), offset_hours=24).run_id(FIFO, 0) != a
    f = copy / "us-east-1a_v100_1.json"
    doc = json.loads(f.read_text())
    doc["data"][0] = 1 - doc["data"][0]
    f.write_text(json.dumps(doc))
    assert _load(tmp_path, trace=str(copy)).run_id(FIFO, 0) != a
    assert "path" not in _load(tmp_path, trace=str(copy)).resolved()["cluster"]["spot"]["trace"]


@pytest.mark.parametrize("spot, where, message", [
    ({}, "cluster.spot", "expected revocation_rate (a Poisson market) or trace"),
    ({"trace": "nowhere"}, "cluster.spot.trace", "no such availability trace"),
    ({"trace": {"path": str(ZONES), "market": "us-east-1z_v100_1"}}, "cluster.spot.trace",
     "no market 'us-east-1z_v100_1'; did you mean"),
    ({"trace": str(ZONES), "offset_hours": 2000}, "cluster.spot.trace", "past the end of series"),
    ({"trace": {"path": str(ZONES), "format": "json"}}, "cluster.spot.trace.format", "json"),
])
def test_mistakes_are_named_with_the_field(tmp_path, spot, where, message):
    with pytest.raises(CapsimError) as e:
        _load(tmp_path, **spot)
    assert where in str(e.value) and message in str(e.value)


def test_the_shipped_market_sweeps_plan_the_documented_runs_with_distinct_ids():
    from experiments.runs import plan
    from experiments.scenario.sweep import load_sweep

    root = Path(__file__).resolve().parents[2] / "experiments"
    lists = plan(load_sweep(root / "cloud_spot_markets.yaml")).tasks
    milp = plan(load_sweep(root / "cloud_spot_markets_milp.yaml")).tasks
    assert len(lists) == 2 * 3 * 6 and len(milp) == 2 * 3 * 2
    ids = [t.run_id for t in lists + milp]
    assert len(set(ids)) == len(ids)
    sweep = load_sweep(root / "cloud_spot_markets_milp.yaml")
    traced = [p for p in sweep.points if p.scenario.cluster.spot and "trace" in json.dumps(dict(p.values))]
    assert len(traced) == 2
