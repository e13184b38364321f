"""Owned servers next to rented VMs (issue 20): "2 owned A100 servers + up to 6 rented AWS VMs, spot allowed" gives
exactly 2 owned servers and rented VMs only of AWS (spot included) under every capacity-planning policy, written with
a cloud selection, with the 13 types named, or with a slot group's selection; a slot group naming types also takes
their spot variants; old spellings that meant something else are refused with what to write instead."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from experiments import api
from experiments.scenario import load_scenario, registered_policies
from sim.catalogue import SPOT_SUFFIX, select_vm_types
from sim.model import CapsimError

from .conftest import write_yaml

AWS = [v.name for v in select_vm_types("aws")]
AWS_SPOT = [v.name + SPOT_SUFFIX for v in select_vm_types("aws") if v.spot_price_per_hour is not None]
RATE = 3.2
"""The owned servers' amortised $ per server-hour."""


def owned_plus_aws(rented: dict[str, Any], jobs: int = 16) -> dict[str, Any]:
    """The README's scenario: 2 owned servers of 4 A100s and rented AWS VMs, spot allowed, 6 rented slots."""
    return {"name": "owned-plus-aws",
            "cluster": {"servers": {"A100": 2}, "gpus_per_server": 4, "server_price": RATE, **rented,
                        "spot": {"revocation_rate": 0.1}},
            "workload": {"jobs": jobs, "mean_interarrival": 30}, "seeds": [0]}


SPELLINGS = {
    "selected": {"nodes": 6, "vm_types": {"provider": "aws"}},
    "named": {"nodes": 6, "vm_types": AWS},
    "group-selects": {"nodes": [{"count": 6, "vm_types": {"provider": "aws"}}]},
    "group-names": {"nodes": [{"count": 6, "vm_types": AWS}]},
}


def test_readme_spells_the_scenario_as_tested() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "servers: {A100: 2}" in b)
    assert yaml.safe_load(block)["cluster"] == owned_plus_aws(SPELLINGS["selected"])["cluster"]


@pytest.mark.parametrize("spelling", ["selected", "named", "group-selects", "group-names"])
def test_every_spelling_gives_two_owned_servers_and_six_aws_slots(tmp_path: Path, spelling: str) -> None:
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", owned_plus_aws(SPELLINGS[spelling])))
    c = sc.build_cluster()
    fixed = [s for s in c.slots if s.fixed]
    assert [s.allowed for s in fixed] == [frozenset({"a100"})] * 2 and sc.cluster.node_count == 8
    assert [s.allowed for s in c.slots if not s.fixed] == [frozenset(AWS + AWS_SPOT)] * 6
    assert len(AWS_SPOT) == 13, "every AWS type has a spot price: all 13 spot markets are open"
    assert c.rules.owned_price_per_hour == {"a100": RATE} and c.vm_types[0].name == "a100"
    assert c.vm_types[0].price_per_hour == 0.0, "a policy sees an owned server as free to use"
    assert not c.rules.gang, "gangs stay off unless asked for, as on any rented cluster"
    assert [p.kind for p in sc.policy_specs()] == registered_policies(fixed=False), "the capacity planners run"


@pytest.mark.parametrize("spelling", ["selected", "named"])
def test_the_nodes_table_has_two_owned_servers_and_only_aws_rentals(tmp_path: Path, spelling: str) -> None:
    runs = api.run(write_yaml(tmp_path / "s.yaml", owned_plus_aws(SPELLINGS[spelling])), workers=2)
    nodes, summary = runs.nodes, runs.summary
    assert sorted(summary["policy"]) == sorted(registered_policies(fixed=False)) and runs.failures.empty
    for policy, n in nodes.groupby("policy"):
        own = n[n["vm_type"] == "a100"]
        assert sorted(own["node"]) == [0, 1], f"{policy}: exactly 2 owned servers, one interval each"
        jobs = runs.jobs[runs.jobs["policy"] == policy]
        assert (own["start_time"] == jobs["submit_time"].min()).all(), "on from the first arrival"
        assert (own["stop_time"] == jobs["end_time"].max()).all(), "to the last job's end"
        assert (own["billed_seconds"] == own["stop_time"] - own["start_time"]).all(), "billed its time on exactly"
        assert (own["price_per_hour"] == RATE).all(), "at its amortised rate"
        rented = n[n["vm_type"] != "a100"]
        assert set(rented["vm_type"]) <= set(AWS + AWS_SPOT), f"{policy}: only AWS VMs are rented"
        assert set(rented["node"]) <= set(range(2, 8)) and not (rented["spot"] & rented["vm_type"].isin(AWS)).any()
        total = float(n["cost"].sum())
        assert math.isclose(total, float(summary.loc[summary["policy"] == policy, "vm_cost"].iloc[0]), rel_tol=1e-9)
    assert nodes["spot"].any(), "some policy rents spot VMs: the spot market is open"


def test_a_slot_group_naming_types_takes_their_spot_variants(tmp_path: Path) -> None:
    data = {"name": "g", "cluster": {"nodes": [{"count": 6, "vm_types": AWS}], "spot": {"revocation_rate": 0.1}},
            "workload": {"jobs": 16, "mean_interarrival": 30}, "policies": [{"kind": "greedy"}], "seeds": [0]}
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", data))
    assert [v.name for v in sc.vm_types()] == [n for v in AWS for n in (v, v + SPOT_SUFFIX)]
    assert {s.allowed for s in sc.build_cluster().slots} == {frozenset(AWS + AWS_SPOT)}
    runs = api.run(sc, workers=1)
    assert runs.nodes["spot"].sum() > 0, "the group rents spot VMs"
    data["cluster"]["spot"]["only"] = True
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", data))
    assert {s.allowed for s in sc.build_cluster().slots} == {frozenset(AWS_SPOT)}


def _refused(tmp_path: Path, cluster: dict[str, Any]) -> str:
    data = {"name": "x", "cluster": cluster, "workload": {"jobs": 4}}
    with pytest.raises(CapsimError) as e:
        load_scenario(write_yaml(tmp_path / "s.yaml", data))
    return str(e.value)


MINE = {"name": "my-a100x4", "gpu": "A100", "gpus": 4, "price_per_hour": 0}


@pytest.mark.parametrize("cluster, where, words", [
    # the file: an in-house type on 2 slots next to a group taking every type (8 of them, not 2)
    ({"nodes": [{"count": 2, "vm_types": ["my-a100x4"]}, {"count": 6}], "vm_types": [MINE, {"provider": "aws"}],
      "spot": {"revocation_rate": 0.1}},
     "cluster.nodes[0].vm_types", ["up to 8 'my-a100x4' VMs", "servers: {A100: 2} with gpus_per_server: 4"]),
    # README's old example: an in-house server of the paper's catalogue on one slot, four slots of any type
    ({"nodes": [{"count": 1, "vm_types": ["inhouse2"]}, {"count": 4}], "vm_types": ["NC6", "NV12", "inhouse2"]},
     "cluster.nodes[0].vm_types", ["up to 5 'inhouse2' VMs", "servers: {GTX1080Ti: 1} with gpus_per_server: 8"]),
    ({"servers": {"A100": 2}, "nodes": [{"count": 2, "vm_types": ["a100"]}], "vm_types": ["NC6"]},
     "cluster.nodes[0].vm_types[0]", ["'a100', an owned server type", "never rented"]),
    ({"servers": {"A100": 2}, "vm_types": {"provider": "aws"}},
     "cluster.vm_types", ["expected rented node slots (cluster.nodes) for vm_types", "give nodes: N"]),
    ({"servers": {"A100": 2}, "nodes": 2, "vm_types": [{**MINE, "name": "a100"}]},
     "cluster.vm_types", ["rentable type 'a100'", "rename it"]),
    ({"nodes": [{"count": 2, "vm_types": ["NC6"]}], "vm_types": ["NC6", "g5.xlarge"], "spot": {"revocation_rate": 0.1}},
     "cluster.nodes[0].vm_types", ["none of this group's VM types has a spot price (NC6)", "on demand only"]),
    ({"nodes": [{"count": 2, "vm_types": {"provider": "gcp"}}], "vm_types": ["g5.xlarge"]},
     "cluster.nodes[0].vm_types[0]", ["expected one of the cluster's VM types", "list it under cluster.vm_types"]),
    ({"nodes": [{"count": 2, "vm_types": ["g5.xlarg"]}]},
     "cluster.nodes[0].vm_types[0]", ["unknown VM type 'g5.xlarg'"]),
])
def test_spellings_that_meant_something_else_are_refused(tmp_path: Path, cluster, where: str, words) -> None:
    msg = _refused(tmp_path, cluster)
    assert f"{where}: " in msg, msg
    for w in words:
        assert w in msg, msg


def test_groups_that_name_their_types_are_the_clusters_types(tmp_path: Path) -> None:
    data = {"name": "g", "workload": {"jobs": 4},
            "cluster": {"nodes": [{"count": 1, "vm_types": ["NC6"]}, {"count": 2, "vm_types": {"provider": "gcp",
                                                                                               "gpu": "L4"}}]}}
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", data))
    l4 = [v.name for v in select_vm_types("gcp", gpu="L4")]
    assert [v.name for v in sc.vm_types()] == ["NC6", *l4]
    assert [s.allowed for s in sc.build_cluster().slots] == [frozenset({"NC6"})] + [frozenset(l4)] * 2


def test_a_cluster_of_servers_keeps_its_run_ids_and_gangs(tmp_path: Path) -> None:
    """Servers alone: the nodes field left out still resolves as 5 (run ids of Gavel's and ElasticFlow's clusters
    are unchanged) and an override of another field keeps them servers alone."""
    data = {"name": "s", "cluster": {"servers": {"V100": 2}, "server_price": 1.5},
            "workload": {"jobs": 4, "mix": {"J1": 1, "J4": 1}},
            "predictor": {"kind": "table", "table": {"J1/v100/1": 60.0, "J4/v100/1": 60.0}},
            "policies": [{"kind": "fifo"}]}
    path = write_yaml(tmp_path / "s.yaml", data)
    sc = load_scenario(path)
    resolved = sc.resolved()
    assert resolved["cluster"]["nodes"] == 5 and resolved["cluster"]["vm_types"][0]["price_per_hour"] == 1.5
    assert sc.build_cluster().rules.gang and sc.cluster.servers_only
    again = api.load(path, {"workload.jobs": 6})
    assert isinstance(again, type(sc)) and again.cluster.servers_only and again.cluster.node_count == 2


def test_insertion_starts_jobs_on_free_owned_servers(tmp_path: Path) -> None:
    """On servers priced 0, waiting costs a job nothing more than starting: insertion stalled there with jobs left
    waiting ('left 2 jobs waiting forever'); it must start them."""
    data = {"name": "own", "cluster": {"servers": {"A100": 2}, "gpus_per_server": 4},
            "workload": {"jobs": 20, "mean_interarrival": 30}, "policies": [{"kind": "insertion"}], "seeds": [0, 2]}
    runs = api.run(write_yaml(tmp_path / "s.yaml", data), workers=1)
    assert runs.failures.empty and len(runs.summary) == 2 and (runs.jobs["end_time"].notna()).all()


def test_an_elasticflow_replay_bills_its_owned_servers_their_rate(tmp_path: Path) -> None:
    """ElasticFlow's replay keeps its own node records: its servers bill server_price for their time on, not the 0
    their VM type shows the policies."""
    rows = (Path(__file__).resolve().parents[2] / "sim" / "data" / "elasticflow" / "elasticVpollux_e.csv"
            ).read_text(encoding="utf-8").splitlines()[:21]
    trace = tmp_path / "t.csv"
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = {"name": "ef", "cluster": {"servers": "4x4", "gpu": "T4", "server_price": 1.5},
            "workload": {"trace": {"path": str(trace), "format": "elasticflow"}, "weight_range": [0.0, 0.0]},
            "predictor": {"kind": "throughput", "table": "elasticflow"}, "policies": [{"kind": "elasticflow_edf"}],
            "seeds": [0]}
    runs = api.run(write_yaml(tmp_path / "s.yaml", data), workers=1)
    nodes = runs.nodes
    on = nodes["stop_time"] - nodes["start_time"]
    assert runs.failures.empty and len(nodes) == 4 and (on > 0).all() and (nodes["price_per_hour"] == 1.5).all()
    assert ((nodes["cost"] - on * 1.5 / 3600.0).abs() < 1e-9).all()
    assert math.isclose(float(nodes["cost"].sum()), float(runs.summary["vm_cost"].iloc[0]), rel_tol=1e-12)


def test_a_free_rented_type_gets_a_note_on_stderr(tmp_path: Path, capsys) -> None:
    """A rentable type priced 0 is valid (the run goes on) but is how in-house servers were once written: rented
    slots may take as many as they have. The run says so on stderr, names the types and how to write owned servers."""
    from experiments.cli import main

    data = {"name": "free", "cluster": {"nodes": 3, "vm_types": [MINE, "NC6"]}, "workload": {"jobs": 6},
            "policies": [{"kind": "fifo"}], "seeds": [0]}
    path = write_yaml(tmp_path / "s.yaml", data)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "cluster.vm_types: 'my-a100x4' priced 0: up to 3 such VMs" in err and "servers: {<GPU model>" in err
    data["cluster"]["vm_types"] = ["NC6", "NC12"]
    assert load_scenario(write_yaml(tmp_path / "t.yaml", data)).notes() == [], "priced types get no note"
