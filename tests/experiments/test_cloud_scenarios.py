"""Cloud VM types in scenario files: selections by provider, region, GPU and count, mixed with catalogue names and
inline types; clear messages for each mistake; run ids of older scenarios kept; a run billed by the provider's rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cli import main
from experiments.results.reading import read_results
from experiments.scenario import PolicySpec, load_scenario
from sim import catalogue
from sim.model import Billing, CapsimError

from .conftest import small_scenario, write_yaml

FIFO = PolicySpec(kind="fifo")
# one runtime per job of the tiny mix on one GPU of every VM type either catalogue has, or an inline one of the tests
# ("mine", "x"), so that loading (which checks every job can run) is about the VM types alone
_NAMES = [*catalogue.vm_types(), *catalogue.cloud_vm_types(), "mine", "x"]
EVERYWHERE = {"kind": "table", "table": {f"{j}/{v}/1": 600.0 for j in ("J1", "J4") for v in _NAMES}}


def _load(tmp_path: Path, vm_types, **cluster):
    data = small_scenario(cluster={"nodes": 2, "vm_types": vm_types, **cluster}, predictor=EVERYWHERE)
    return load_scenario(write_yaml(tmp_path / "s.yaml", data))


def _error(tmp_path: Path, vm_types) -> str:
    with pytest.raises(CapsimError) as e:
        _load(tmp_path, vm_types)
    return str(e.value)


def test_one_selection_takes_a_provider_and_region(tmp_path: Path) -> None:
    sc = _load(tmp_path, {"provider": "aws", "region": "us-east-1"})
    vms = sc.vm_types()
    assert len(vms) == 13 and {(v.provider, v.region) for v in vms} == {("aws", "us-east-1")}
    assert all(v.billing == Billing(1.0, 60.0) and v.boot_time == 120.0 for v in vms)
    assert sc.build_cluster().vm_types == vms


def test_a_list_mixes_selections_names_and_inline_types(tmp_path: Path) -> None:
    inline = {"name": "mine", "gpu": "H100", "gpus": 8, "price_per_hour": 40.0, "spot_price_per_hour": 12.0,
              "billing": {"increment": 3600, "minimum": 3600}, "region": "onprem"}
    sc = _load(tmp_path, [{"provider": "gcp", "gpu": "L4", "boot_time": 30}, "NC6", "p5.48xlarge", inline])
    vms = sc.vm_types()
    assert [v.name for v in vms] == ["g2-standard-4", "g2-standard-48", "NC6", "p5.48xlarge", "mine"]
    assert [v.boot_time for v in vms] == [30.0, 30.0, 0.0, 120.0, 0.0]
    mine = vms[-1]
    assert (mine.billing, mine.spot_price_per_hour, mine.region, mine.provider) == \
        (Billing(3600.0, 3600.0), 12.0, "onprem", "custom")
    resolved = {v["name"]: v for v in sc.resolved(FIFO, 0)["cluster"]["vm_types"]}
    assert resolved["NC6"].keys() == {"name", "gpu", "gpus", "price_per_hour", "boot_time", "provider"}
    assert resolved["g2-standard-4"]["billing"] == {"increment": 1.0, "minimum": 60.0}
    assert resolved["g2-standard-4"]["spot_price_per_hour"] == 0.28184
    assert resolved["mine"]["region"] == "onprem"


def test_the_paper_catalogue_resolves_as_before(tmp_path: Path) -> None:
    """VM fields at their defaults stay out of the resolved configuration, so older run ids are unchanged."""
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", small_scenario(cluster={"nodes": 2})))
    for v in sc.resolved(FIFO, 0)["cluster"]["vm_types"]:
        assert v.keys() == {"name", "gpu", "gpus", "price_per_hour", "boot_time", "provider"}
    inline = {"name": "x", "gpu": "K80", "gpus": 1, "price_per_hour": 1.0}
    (v,) = _load(tmp_path, [inline]).resolved(FIFO, 0)["cluster"]["vm_types"]
    assert v == {**inline, "boot_time": 0.0, "provider": "custom"}


def test_a_price_change_is_a_different_run(tmp_path: Path) -> None:
    a = _load(tmp_path, ["g4dn.xlarge"]).run_id(FIFO, 0)
    inline = {"name": "g4dn.xlarge", "gpu": "T4", "gpus": 1, "price_per_hour": 0.526, "boot_time": 120,
              "provider": "aws", "region": "us-east-1", "spot_price_per_hour": 0.2069,
              "billing": {"increment": 1, "minimum": 60}}
    assert _load(tmp_path, [inline]).run_id(FIFO, 0) == a, "the same VM type, named or inline: the same run"
    assert _load(tmp_path, [{**inline, "price_per_hour": 0.6}]).run_id(FIFO, 0) != a


@pytest.mark.parametrize("vm_types, where, message", [
    ([{"provider": "ibm"}], "cluster.vm_types[0]", "unknown cloud provider 'ibm': the cloud catalogue has aws"),
    ({"provider": "aws", "region": "eastus"}, "cluster.vm_types[0]", "no VM type of aws is in region 'eastus'"),
    ([{"provider": "gcp", "gpus": 3}], "cluster.vm_types[0]", "no VM type of gcp has 3 GPUs"),
    ([{}], "cluster.vm_types[0]", "expected at least one of provider, region, gpu, gpus"),
    (["p5.48xlarge", {"gpu": "H100"}], "cluster.vm_types[1]", "VM type 'p5.48xlarge' is listed twice"),
    (["p5.48xlarg"], "cluster.vm_types[0]", "did you mean 'p5.48xlarge'?"),
    ([{"provider": "aws", "regoin": "x"}], "cluster.vm_types[0].regoin",
     "did you mean 'region'? (known keys: boot_time, gpu, gpus, provider, region)"),
    ([{"name": "x", "gpu": "H100", "gpus": 1, "price_per_hour": 1, "billing": {"increment": -1}}],
     "cluster.vm_types[0].billing.increment", "expected a number ≥ 0"),
    ([5], "cluster.vm_types[0]", "or a cloud selection {provider, region, gpu, gpus}, found 5"),
])
def test_mistakes_name_the_entry_and_what_there_is(tmp_path: Path, vm_types, where: str, message: str) -> None:
    msg = _error(tmp_path, vm_types)
    assert f"{where}: " in msg and message in msg, msg


def test_a_run_on_a_cloud_vm_bills_by_its_providers_rule(tmp_path: Path) -> None:
    d = small_scenario(cluster={"nodes": 1, "vm_types": {"provider": "aws", "gpu": "T4", "boot_time": 0}},
                       workload={"jobs": 1, "mix": {"J1": 1}}, predictor={"kind": "table",
                                                                          "table": {"J1/g4dn.xlarge/1": 30.0}},
                       policies=[{"kind": "fifo"}], seeds=[0])
    out = tmp_path / "out"
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", d)), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    t = read_results(out).tables
    (node,) = t["nodes"].itertuples()
    assert (node.vm_type, node.billed_seconds) == ("g4dn.xlarge", 60.0)
    assert node.stop_time - node.start_time == pytest.approx(30.0), "on for 30 s, billed the 60 s minimum"
    assert t["summary"]["vm_cost"].iloc[0] == pytest.approx(60.0 * 0.526 / 3600.0)
    # the job starts on arrival (no boot) and runs its fastest 30 s: by its deadline, submit + U(1, 3) x 30 s
    assert (t["summary"]["deadline_met"].iloc[0], t["summary"]["mean_lateness"].iloc[0]) == (1.0, 0.0)


def test_the_docs_examples_load(tmp_path: Path) -> None:
    import re

    import yaml

    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "clouds.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    cluster_block, workload_block = blocks[0], next(b for b in blocks if b.startswith("workload:"))
    cluster = yaml.safe_load(cluster_block)["cluster"]
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", small_scenario(cluster=cluster, predictor=EVERYWHERE)))
    names = [v.name for v in sc.vm_types()]
    assert len(names) == 13 + 3 + 2 + 1 + 1 + 1 and len(set(names)) == len(names)
    workload = yaml.safe_load(workload_block)["workload"]
    trace = root / "experiments" / workload["trace"]["path"]  # the path is relative to a scenario in experiments/
    assert trace.is_file()
    workload["trace"]["path"] = str(trace)
    from experiments.scenario import validate_scenario

    # no shipped predictor knows ElasticFlow's models yet, so the trace is checked but not whether its jobs can run
    ef, problems = validate_scenario(small_scenario(workload=workload), "ef.yaml", tmp_path, runnable=False)
    assert not problems and ef is not None and ef.trace_spec().format == "elasticflow"
