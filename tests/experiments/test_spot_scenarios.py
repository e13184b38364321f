"""Spot VMs in scenario files: spot variants of the selected types, their rates, checkpoints, mistakes named, older
run ids kept, and a run that records revocations."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cli import main
from experiments.results.reading import read_results
from experiments.scenario import PolicySpec, load_scenario
from sim.model import CapsimError

from .conftest import small_scenario, write_yaml

FIFO = PolicySpec(kind="fifo")
L4 = {"provider": "gcp", "gpu": "L4"}
NAMES = ["g2-standard-4", "g2-standard-48", "g2-standard-4-spot", "g2-standard-48-spot", "NC6"]
ANYWHERE = {"kind": "table", "table": {f"{j}/{v}/1": 600.0 for j in ("J1", "J4") for v in NAMES}}


def _load(tmp_path: Path, **cluster):
    data = small_scenario(cluster={"nodes": 2, "vm_types": L4, **cluster}, predictor=ANYWHERE)
    return load_scenario(write_yaml(tmp_path / "s.yaml", data))


def test_spot_adds_a_variant_after_each_type_with_a_spot_price(tmp_path: Path) -> None:
    sc = _load(tmp_path, spot={"revocation_rate": {"g2-standard-48": 0.5, "L4": 0.2}}, checkpoint_interval=900)
    vms = sc.vm_types()
    assert [v.name for v in vms] == ["g2-standard-4", "g2-standard-4-spot", "g2-standard-48", "g2-standard-48-spot"]
    assert [(v.spot, v.revocation_rate) for v in vms] == [(False, 0.0), (True, 0.2), (False, 0.0), (True, 0.5)]
    assert vms[1].price_per_hour == vms[0].spot_price_per_hour
    cluster = sc.build_cluster()
    assert cluster.rules.checkpoint_interval == 900.0 and cluster.vm_types == vms
    resolved = {v["name"]: v for v in sc.resolved(FIFO, 0)["cluster"]["vm_types"]}
    assert resolved["g2-standard-48-spot"]["spot"] is True and resolved["g2-standard-48-spot"]["revocation_rate"] == 0.5
    assert "spot" not in resolved["g2-standard-48"]
    only = _load(tmp_path, spot={"revocation_rate": 0.1, "only": True}).vm_types()
    assert [v.name for v in only] == ["g2-standard-4-spot", "g2-standard-48-spot"]


def test_scenarios_without_spot_keep_their_run_ids(tmp_path: Path) -> None:
    plain = _load(tmp_path)
    assert not {"spot", "checkpoint_interval", "max_gang_gpus"} & set(plain.resolved()["cluster"])
    assert plain.build_cluster().rules.checkpoint_interval == float("inf")
    assert _load(tmp_path, checkpoint_interval=600).run_id(FIFO, 0) != plain.run_id(FIFO, 0)
    assert _load(tmp_path, spot={"revocation_rate": 0.1}).run_id(FIFO, 0) != plain.run_id(FIFO, 0)


@pytest.mark.parametrize("cluster, where, message", [
    (dict(spot={"revocation_rate": {"H100": 0.1}}), "cluster.spot.revocation_rate.H100",
     "expected a VM type or GPU model of the cluster, or 'default', found 'H100'"),
    (dict(spot={"revocation_rate": {"g2-standard-4": 0.1}}), "cluster.spot.revocation_rate",
     "no revocation rate for VM type 'g2-standard-48' (L4)"),
    (dict(vm_types=["NC6"], spot={"revocation_rate": 0.1}), "cluster.spot", "expected some VM type with a spot price"),
    (dict(spot={"revocation_rate": -1}), "cluster.spot.revocation_rate", "expected a number ≥ 0.0, found -1"),
    (dict(spot={"revocation_rate": "often"}), "cluster.spot.revocation_rate", "expected a rate per hour or a mapping"),
    (dict(checkpoint_interval=0), "cluster.checkpoint_interval", "expected a number > 0.0, found 0"),
])
def test_spot_mistakes_are_named(tmp_path: Path, cluster, where: str, message: str) -> None:
    with pytest.raises(CapsimError) as e:
        _load(tmp_path, **cluster)
    assert f"{where}: " in str(e.value) and message in str(e.value), str(e.value)


def test_spot_is_refused_on_owned_servers_alone(tmp_path: Path) -> None:
    data = small_scenario(cluster={"servers": {"V100": 2}, "spot": {"revocation_rate": 0.1}},
                          predictor={"kind": "table", "table": {"J1/v100/1": 60.0, "J4/v100/1": 60.0}})
    with pytest.raises(CapsimError, match=r"cluster.spot: expected rented node slots \(cluster.nodes\) for spot"):
        load_scenario(write_yaml(tmp_path / "s.yaml", data))


def test_slot_groups_may_name_spot_variants(tmp_path: Path) -> None:
    sc = _load(tmp_path, nodes=[{"count": 1, "vm_types": ["g2-standard-4-spot"]}, {"count": 1}],
               spot={"revocation_rate": 0.1})
    assert [s.allowed for s in sc.build_cluster().slots] == [frozenset({"g2-standard-4-spot"}), None]


def test_a_spot_run_records_revocations_and_the_spot_share(tmp_path: Path) -> None:
    table = {"J1/g4dn.xlarge-spot/1": 20_000.0, "J1/g4dn.xlarge/1": 20_000.0}
    d = small_scenario(cluster={"nodes": 1, "vm_types": {"provider": "aws", "gpu": "T4", "gpus": 1},
                                "spot": {"revocation_rate": 2.0}, "checkpoint_interval": 600},
                       workload={"jobs": 1, "mix": {"J1": 1}}, predictor={"kind": "table", "table": table},
                       policies=[{"kind": "fifo", "spot": True}], seeds=[0, 1])
    out = tmp_path / "out"
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", d)), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    t = read_results(out).tables
    s = t["summary"]
    assert (s["revocations"] > 0).all() and (s["spot_cost_share"] > 0.9).all() and (s["lost_gpu_hours"] > 0).all()
    nodes = t["nodes"]
    assert (nodes.groupby("seed")["revoked"].sum() == s.set_index("seed")["revocations"]).all()
    # each revocation loses less than one checkpoint interval of the one GPU's work
    assert (s["lost_gpu_hours"] * 3600 < s["revocations"] * 600).all()
    assert s.set_index("seed")["revocations"].nunique() == 2, "two seeds, two markets"


def test_a_sweep_over_spot_reports_and_plots_the_on_demand_point_too(tmp_path: Path, capsys) -> None:
    """A grid value left empty (YAML null: no spot VMs) is a grid point like the others: its own report row named
    'none' and its own, non-empty panel in every faceted figure (NaN never equals NaN, so a plain == lost it)."""
    from experiments.plots import PlotData, render, specs
    from experiments.results.reading import read_results

    base = small_scenario(cluster={"nodes": 2, "vm_types": L4, "checkpoint_interval": 600}, predictor=ANYWHERE)
    sweep = {"scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds")},
             "policies": [{"kind": "fifo"}, {"kind": "edf", "spot": True}], "seeds": [0, 1],
             "grid": {"cluster.spot": [None, {"revocation_rate": 2.0}]}}
    out = tmp_path / "out"
    assert main(["sweep", str(write_yaml(tmp_path / "s.yaml", sweep)), "--out", str(out), "--workers", "1",
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--format", "markdown", "--metrics", "total_cost"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| ") and "policy" not in r]
    assert sorted(r.split(" | ")[0] for r in rows) == ["| none"] * 2 + ["| revocation rate 2 per hour"] * 2
    res = read_results(out)
    data = PlotData(res.tables, res.fields, res.policies)
    assert [sorted(data.select(data.summary, pt)["policy"]) for pt in data.points()] == [["edf"] * 2 + ["fifo"] * 2] * 2
    from tests.experiments.test_plots import check_printable

    for name in ("cost_deadlines", "pareto"):
        for width in ("column", "page"):
            for spec in specs(name, data, width):
                titles = [p.title for p in spec.panels]
                assert sorted(titles) == ["spot VMs = none", "spot VMs = revocation rate 2 per hour"]
                check_printable(render(spec, width), width)  # no empty panel, every title inside the figure
