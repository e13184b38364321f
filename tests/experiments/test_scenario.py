"""Scenario files: valid ones load with their defaults; every kind of mistake gets one clear message."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from experiments.scenario import Scenario, load_scenario, parse_seeds
from sim.model import CapsimError

from .conftest import small_scenario, write_yaml


def error_of(path: Path) -> str:
    with pytest.raises(CapsimError) as e:
        load_scenario(path)
    return str(e.value)


def bad(tmp_path: Path, **over) -> str:
    return error_of(write_yaml(tmp_path / "bad.yaml", small_scenario(**over)))


def test_small_scenario_loads_with_defaults(tiny: Path) -> None:
    sc = load_scenario(tiny)
    assert sc.n_jobs == 6 and sc.cluster.node_count == 2
    assert [p.label for p in sc.policy_specs()] == ["fifo", "edf"]
    assert [v.name for v in sc.vm_types()] == ["NC6", "NC12"]
    assert sc.cluster.decision_interval is None


def test_jobs_default_to_ten_per_node(tmp_path: Path) -> None:
    d = small_scenario()
    del d["workload"]["jobs"]
    d["cluster"]["nodes"] = [{"count": 2, "vm_types": ["NC6"]}, {"count": 1, "vm_types": ["NC6", "NC12"]}]
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", d))
    assert sc.n_jobs == 30
    assert [s.allowed for s in sc.slots()] == [frozenset({"NC6"})] * 2 + [frozenset({"NC6", "NC12"})]


def test_run_ids_are_stable_and_distinct(tiny: Path) -> None:
    a, b = load_scenario(tiny), load_scenario(tiny)
    fifo, edf = a.policy_specs()
    assert a.run_id(fifo, 0) == b.run_id(fifo, 0)
    assert len({a.run_id(fifo, 0), a.run_id(fifo, 1), a.run_id(edf, 0)}) == 3


def test_default_scenario_is_the_paper_setting() -> None:
    pytest.importorskip("predictors.measured", reason="the measured predictor is not there yet")
    sc = load_scenario()
    assert (sc.cluster.node_count, sc.n_jobs, sc.workload.mean_interarrival) == (5, 50, 30.0)
    assert sc.seeds == [0, 1, 2, 3, 4] and sc.predictor.kind == "measured"
    import optim

    kinds = {p.kind for p in sc.policy_specs()}
    assert kinds and kinds <= set(optim.registry())


def test_a_scenario_without_a_predictor_gets_hybrid_and_the_shipped_ones_pin_measured(tmp_path: Path) -> None:
    d = small_scenario()
    del d["predictor"]
    sc = load_scenario(write_yaml(tmp_path / "s.yaml", d))
    assert sc.predictor.kind == "hybrid" and sc.estimator is None and sc.truth is None
    estimator, truth = sc.predictors()
    assert estimator is truth and estimator.name == "hybrid"
    from experiments.scenario.sweep import load_sweep

    root = Path(__file__).parents[2] / "experiments"
    assert load_scenario(root / "scenario" / "default.yaml").predictor.kind == "measured"
    for name in ("paper.yaml", "quickstart.yaml"):  # the published setting: their results must not change
        assert {pt.scenario.predictor.kind for pt in load_sweep(root / name).points} == {"measured"}


@pytest.mark.parametrize(
    "text, expected",
    [("0-4", [0, 1, 2, 3, 4]), ("2..3", [2, 3]), ("1,5", [1, 5]), (7, [7]), ([3, 1], [3, 1])],
)
def test_seed_forms(text, expected) -> None:
    assert parse_seeds(text) == expected


def test_missing_file(tmp_path: Path) -> None:
    msg = error_of(tmp_path / "nope.yaml")
    assert "nope.yaml" in msg and "not found" in msg


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\ncluster:\n  nodes: [1, 2\nworkload: {}\n")
    msg = error_of(p)
    assert "broken.yaml:" in msg and "not valid YAML" in msg
    assert any(f"broken.yaml:{n}:" in msg for n in (3, 4, 5))


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    d = small_scenario()
    d["workload"]["mean_interarival"] = 30
    msg = error_of(write_yaml(tmp_path / "typo.yaml", d))
    assert "typo.yaml:" in msg and "workload.mean_interarival" in msg
    assert "unknown key" in msg and "did you mean 'mean_interarrival'" in msg


def test_wrong_type_says_expected_and_found(tmp_path: Path) -> None:
    msg = bad(tmp_path, workload={"mean_interarrival": "fast"})
    assert "workload.mean_interarrival" in msg and "expected a number" in msg and "'fast'" in msg


def test_out_of_range_value(tmp_path: Path) -> None:
    msg = bad(tmp_path, cluster={"nodes": 0})
    assert "cluster.nodes" in msg and "> 0" in msg and "found 0" in msg


def test_line_number_points_at_the_field(tmp_path: Path) -> None:
    p = tmp_path / "lines.yaml"
    p.write_text("name: x\nworkload:\n  jobs: 5\n  mean_interarrival: -1\n")
    assert "lines.yaml:4: workload.mean_interarrival: expected a number > 0" in error_of(p)


def test_unknown_policy_lists_known_ones(tmp_path: Path) -> None:
    msg = bad(tmp_path, policies=[{"kind": "fifo"}, {"kind": "fifoo"}])
    assert "policies[1].kind" in msg and "unknown policy 'fifoo'" in msg
    assert "did you mean 'fifo'" in msg and "edf" in msg


def test_bad_policy_parameter(tmp_path: Path) -> None:
    msg = bad(tmp_path, policies=[{"kind": "fifo", "speed": 3}])
    assert "policies[0].speed" in msg and "unknown parameter 'speed' for policy 'fifo'" in msg


def test_misspelt_predictor_parameter(tmp_path: Path) -> None:
    msg = bad(tmp_path, predictor={"kind": "table", "tabel": {}})
    assert "predictor.tabel" in msg and "did you mean 'table'" in msg


def test_problems_are_listed_in_file_order(tmp_path: Path) -> None:
    p = tmp_path / "order.yaml"
    p.write_text("policies: [{kind: fifoo}]\nworkload:\n  mean_interarrival: -1\n")
    lines = error_of(p).splitlines()[1:]
    assert "order.yaml:1:" in lines[0] and "order.yaml:3:" in lines[1]


def test_duplicate_policy_names(tmp_path: Path) -> None:
    msg = bad(tmp_path, policies=[{"kind": "fifo"}, {"kind": "fifo"}])
    assert "policies[1].name" in msg and "used twice" in msg


def test_unknown_predictor_lists_known_ones(tmp_path: Path) -> None:
    msg = bad(tmp_path, truth={"kind": "tabel"})
    assert "truth.kind" in msg and "unknown predictor 'tabel'" in msg and "table" in msg


def test_unknown_vm_type_lists_catalogue(tmp_path: Path) -> None:
    msg = bad(tmp_path, cluster={"nodes": 2, "vm_types": ["NC6", "NC7"]})
    assert "cluster.vm_types[1]" in msg and "'NC7'" in msg and "NV24" in msg


def test_custom_vm_with_unknown_gpu(tmp_path: Path) -> None:
    vm = {"name": "big", "gpu": "V101", "gpus": 4, "price_per_hour": 3.0}
    msg = bad(tmp_path, cluster={"nodes": 2, "vm_types": ["NC6", vm]})
    assert "cluster.vm_types[1].gpu" in msg and "'V101'" in msg and "did you mean 'V100'" in msg


def test_slot_group_with_foreign_vm_type(tmp_path: Path) -> None:
    msg = bad(tmp_path, cluster={"nodes": [{"count": 1, "vm_types": ["NV6"]}], "vm_types": ["NC6"]})
    assert "cluster.nodes[0].vm_types[0]" in msg and "'NV6'" in msg


def test_unknown_job_type_in_mix(tmp_path: Path) -> None:
    msg = bad(tmp_path, workload={"mix": {"J1": 1, "J9": 1}})
    assert "workload.mix.J9" in msg and "unknown job type 'J9'" in msg


def test_missing_trace_file(tmp_path: Path) -> None:
    msg = bad(tmp_path, workload={"trace": "jobs.csv"})
    assert "workload.trace" in msg and "jobs.csv" in msg


def test_trace_with_poisson_settings(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text("submit_time,application,framework,iterations,batch_size\n")
    msg = bad(tmp_path, workload={"trace": "jobs.csv", "mean_interarrival": 30, "deadline_factor": [1, 2]})
    assert "workload.mean_interarrival" in msg and "with a trace" in msg
    assert "workload.deadline_factor" not in msg


def test_trace_replayed_relative_to_the_scenario_file(tmp_path: Path) -> None:
    from experiments.cli import main

    sub = tmp_path / "sc"
    sub.mkdir()
    (sub / "jobs.csv").write_text("submit_time,application,framework,iterations,batch_size,name,deadline,weight\n"
                                  "0,deepspeech,tensorflow,2528,4,J1,1000,0.01\n"
                                  "10,alexnet,pytorch,6094,256,J4,500,0.01\n")
    table = {"J1/NC6/1": 400.0, "J4/NC6/1": 900.0}
    p = write_yaml(sub / "s.yaml", small_scenario(workload={"trace": "jobs.csv"}, cluster={"nodes": 1,
                   "vm_types": ["NC6"]}, predictor={"kind": "table", "table": table}, seeds=[0]))
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    import pandas as pd

    jobs = pd.read_parquet(out / "jobs")
    fifo = jobs[jobs.policy == "fifo"].sort_values("job_id")
    assert list(fifo.start_time) == [0.0, 400.0] and list(fifo.end_time) == [400.0, 1300.0]
    assert list(fifo.lateness) == [0.0, 800.0]


def test_bad_seeds(tmp_path: Path) -> None:
    msg = bad(tmp_path, seeds="4-2")
    assert "seeds" in msg and "'4-2'" in msg


def test_wrong_shape_of_union_field(tmp_path: Path) -> None:
    msg = bad(tmp_path, cluster={"nodes": "many"})
    assert "cluster.nodes" in msg and "expected a number of nodes or a list of slot groups" in msg


def test_every_problem_reported_at_once(tmp_path: Path) -> None:
    d = small_scenario()
    d["workload"]["mean_interarrival"] = 0
    d["cluster"]["billing"] = 60
    d["seeds"] = []
    msg = error_of(write_yaml(tmp_path / "many.yaml", d))
    assert msg.startswith("3 problems in")
    for field in ("workload.mean_interarrival", "cluster.billing", "seeds"):
        assert field in msg


def test_scenario_must_be_a_mapping(tmp_path: Path) -> None:
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    assert "expected a mapping" in error_of(p)


def test_model_forbids_unknown_top_level_keys() -> None:
    with pytest.raises(pydantic.ValidationError, match="nmae"):
        Scenario.model_validate({"nmae": "x"})
