"""Production traces in scenarios: the shipped traces replay end to end from their example scenarios (sampled here;
whole in the slow test and ``benchmarks/traces.py``), a fixed cluster of the trace's own hardware, fractional
requests rounded up and said so, jobs larger than the cluster reported and left out, and the mistakes of
``servers: trace`` named."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from experiments import api
from experiments.cli import main
from experiments.scenario import load_scenario
from sim.model import CapsimError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "experiments" / "traces"
DATA = ROOT / "sim" / "data" / "traces"


def _scenario(tmp_path: Path, **parts: object) -> Path:
    data = {"name": "t", "predictor": {"kind": "trace"}, "policies": [{"kind": "fifo", "pack": True}], "seeds": [0]}
    data.update(parts)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def _error(path: Path) -> str:
    with pytest.raises(CapsimError) as e:
        load_scenario(path)
    return str(e.value)


@pytest.mark.parametrize("name, sample", [("philly", 400), ("alibaba_pai_2023", 400), ("acme_kalos", None)])
def test_each_shipped_trace_replays_from_its_example(name: str, sample: int | None, tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8"))
    trace = data["workload"]["trace"]
    trace["path"] = str((EXAMPLES / trace["path"]).resolve())
    if sample:
        trace.update(sample=sample, seed=3)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    runs = api.run(tmp_path / "s.yaml", out=tmp_path / name, workers=1)
    jobs, summary = runs.jobs, runs.summary
    assert set(summary["policy"]) == {"fifo", "edf", "greedy"} and (summary["jobs"] == summary["jobs"].iloc[0]).all()
    for _, run in jobs.groupby("run_id"):
        assert run["job_id"].is_unique and (run["end_time"] > run["start_time"]).all()
        assert (run["start_time"] >= run["submit_time"]).all()
        ran = run["end_time"] - run["start_time"]
        np.testing.assert_allclose(ran, run["true_runtime"], rtol=1e-9)  # the measured run, on the trace's hardware
    if sample:
        assert summary["jobs"].iloc[0] == sample


def test_the_trace_hardware_is_the_cluster(tmp_path: Path) -> None:
    trace = {"path": str(DATA / "alibaba_pai_2023" / "openb_pod_list_default.csv.gz"), "format": "alibaba_pai_2023"}
    sc = load_scenario(_scenario(tmp_path, cluster={"servers": "trace", "server_price": {"G2": 8.0}},
                                 workload={"trace": trace}))
    cluster = sc.build_cluster()
    assert len(cluster.slots) == 1_213 == sc.node_count and all(s.fixed for s in cluster.slots)
    types = {v.name: v for v in cluster.vm_types}
    assert sum(v.gpus * sum(1 for s in cluster.slots if v.name in (s.allowed or ())) for v in types.values()) == 6_212
    g2 = types["g2-8gpu"]
    assert g2.gpus == 8 and g2.price_per_hour == 0.0, "an owned server is free to use: its rate is billed by the rules"
    assert cluster.rules.owned_price_per_hour["g2-8gpu"] == 8.0 and cluster.rules.owned_price_per_hour["t4-2gpu"] == 0.0
    assert math.isnan(g2.gpu.fp32_tflops), "G2's specifications were never published"
    assert types["v100m32-8gpu"].gpu.memory_gb == 32.0 and max(c.gpus for c in cluster.configs) == 8


def test_fractional_requests_run_on_whole_gpus_and_are_counted(tmp_path: Path) -> None:
    trace = {"path": str(DATA / "alibaba_pai_2023" / "openb_pod_list_default.csv.gz"), "format": "alibaba_pai_2023",
             "sample": 300, "seed": 1}
    runs = api.run(_scenario(tmp_path, cluster={"servers": "trace"}, workload={"trace": trace}), workers=1)
    jobs = runs.jobs
    fractional = jobs["gpu_request"] < 1
    assert fractional.any() and (jobs.loc[fractional, "gpus"] == 1).all()
    assert (jobs.loc[~fractional, "gpu_request"] == jobs.loc[~fractional, "gpus"]).all()
    assert runs.summary["rounded_up_jobs"].iloc[0] == fractional.sum()


def test_jobs_larger_than_the_cluster_are_reported_and_left_out(tmp_path: Path, capsys) -> None:
    trace = {"path": str(DATA / "acme" / "converted_kalos_trace.csv.gz"), "format": "acme"}
    path = _scenario(tmp_path, cluster={"servers": {"A100-80GB": 32}, "gpus_per_server": 8},
                     workload={"trace": trace})
    sc = load_scenario(path)
    report = sc.trace_report()
    over = report.steps[-1]
    assert over.action == "dropped" and "no configuration of the cluster has" in over.rule
    _, truth = sc.predictors()
    jobs = sc.build_jobs(0, truth, sc.build_cluster().configs)
    assert len(jobs) == report.kept == 319 - over.rows and max(j.spec.gpus for j in jobs) <= 256
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--workers", "1"]) == 0
    err = capsys.readouterr().err  # notes go to stderr, even with --quiet
    assert err.count("no configuration of the cluster has") == 1 and "319 rows read" in err


def test_mistakes_with_the_trace_hardware(tmp_path: Path) -> None:
    msg = _error(_scenario(tmp_path, cluster={"servers": "trace"}, workload={"jobs": 5}))
    assert "cluster.servers" in msg and "expected a workload trace with servers: trace" in msg
    (tmp_path / "jobs.csv").write_text("submit_time,application,framework,iterations,batch_size\n"
                                       "0,alexnet,pytorch,10,32\n")
    msg = _error(_scenario(tmp_path, cluster={"servers": "trace"}, workload={"trace": "jobs.csv"}))
    assert "cluster.servers" in msg and "trace format 'csv' does not describe the hardware" in msg
    trace = {"path": str(DATA / "alibaba_pai_2023" / "openb_pod_list_default.csv.gz"), "format": "alibaba_pai_2023"}
    msg = _error(_scenario(tmp_path, cluster={"servers": "trace", "server_price": {"G22": 1.0}},
                           workload={"trace": trace}))
    assert "cluster.server_price.G22" in msg and "did you mean 'G2'" in msg
    msg = _error(_scenario(tmp_path, cluster={"servers": "trace", "gpus_per_server": 8}, workload={"trace": trace}))
    assert "cluster.gpus_per_server" in msg and "the trace's hardware says" in msg
    msg = _error(_scenario(tmp_path, cluster={"servers": "4:4"}, workload={"trace": trace}))
    assert "'trace'" in msg


@pytest.mark.slow
@pytest.mark.parametrize("name", ["philly", "alibaba_pai_2023"])
def test_whole_traces_replay(name: str, tmp_path: Path) -> None:
    runs = api.run(EXAMPLES / f"{name}.yaml", out=tmp_path / name, workers=1)
    kept = load_scenario(EXAMPLES / f"{name}.yaml").trace_report().kept
    assert (runs.summary["jobs"] == kept).all()
