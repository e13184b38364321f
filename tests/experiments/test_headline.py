"""Metrics that do not apply are not shown (issue 20): a run whose jobs have no deadline from their workload reports
no deadline metric, and each command leads with its setting's own headline (Gavel's metrics for a Gavel replay,
ElasticFlow's for its replay, the costs for capacity planning)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from experiments.cli import main
from experiments.results.headline import headline
from experiments.results.reading import read_results
from sim.metrics import HEADLINE, HEADLINES, NO_DEADLINE

from .conftest import small_scenario, write_yaml

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_METRICS = ("tardiness_cost", "late_jobs", "deadline_met", "mean_lateness", "p95_lateness")


def _summary(kind: str, cluster: dict, **values: float) -> pd.DataFrame:
    config = json.dumps({"scenario": {"cluster": cluster}, "policy": {"kind": kind}, "seed": 0})
    row = {m: 1.0 for names in HEADLINES.values() for m in names}
    return pd.DataFrame([{**row, **values, "policy": kind, "config": config}])


def test_the_setting_chooses_the_headline() -> None:
    assert headline(_summary("edf", {"nodes": 3})) == list(HEADLINE)
    assert headline(_summary("fifo_perf", {"servers": "4:4:4", "rounds": 360})) == list(HEADLINES["gavel"])
    assert headline(_summary("elasticflow", {"servers": "32x8"})) == list(HEADLINES["elasticflow"])
    mixed = pd.concat([_summary("edf", {"nodes": 3}), _summary("elasticflow", {"servers": "32x8"})])
    assert headline(mixed) == list(HEADLINE)


def test_a_metric_empty_for_every_run_leaves_the_headline() -> None:
    s = _summary("edf", {"nodes": 3}, tardiness_cost=math.nan, late_jobs=math.nan)
    assert headline(s) == ["total_cost", "vm_cost", "mean_jct"]
    two = pd.concat([s, _summary("edf", {"nodes": 3})])  # one run has them: they stay
    assert headline(two) == list(HEADLINE)


@pytest.fixture(scope="module")
def gavel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = yaml.safe_load((ROOT / "experiments" / "gavel" / "replay.yaml").read_text(encoding="utf-8"))
    data["workload"]["trace"]["path"] = str(ROOT / "experiments" / "gavel" / "d.trace")
    data["policies"] = [{"kind": "fifo_perf"}, {"kind": "edf"}]  # edf steers by the placeholder deadlines
    tmp = tmp_path_factory.mktemp("gavel")
    return write_yaml(tmp / "gavel.yaml", data)


def test_a_gavel_replay_reports_gavels_metrics_and_no_deadline_ones(gavel: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r"
    assert main(["run", str(gavel), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "Gavel's average JCT" in header and "Gavel's utilisation" in header
    assert "tardiness" not in header and "late" not in header and "total cost" not in header
    summary = read_results(out).summary
    assert len(summary) == 2 and all(summary[m].isna().all() for m in DEADLINE_METRICS)
    assert (summary["total_cost"] == summary["vm_cost"]).all() and summary["gavel_mean_jct"].gt(0).all()
    jobs = read_results(out).jobs
    assert jobs["deadline"].isna().all() and (jobs["status"] == "no_deadline").all()

    assert main(["report", str(out)]) == 0
    assert "Gavel's total duration" in capsys.readouterr().out
    assert main(["report", str(out), "--metrics", "tardiness_cost,gavel_makespan"]) == 0
    text = capsys.readouterr().out
    assert "empty (-): tardiness_cost" in text and "gavel_makespan" not in text.split("empty (-)")[1]

    assert main(["plot", str(out), "--only", "cost_breakdown,tardiness_late,pareto,cdf"]) == 0
    err = capsys.readouterr().err
    assert "tardiness_late: not drawn" in err and "pareto: not drawn" in err and "cdf: drawn without lateness" in err
    drawn = {p.stem for p in (out / "figures").glob("*.png")}
    assert drawn == {"cost_breakdown", "cdf"}


def test_report_metrics_list_says_when_a_deadline_metric_is_empty(capsys) -> None:
    assert main(["report", "unused", "--metrics", "list"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.split(" ")[0] in DEADLINE_METRICS]
    assert len(rows) == len(DEADLINE_METRICS) and all("empty (NaN) when no job" in r for r in rows)
    assert "no job of the run has a deadline" in NO_DEADLINE


def test_a_trace_with_some_deadlines_keeps_the_cost_headline_over_those_jobs(tmp_path: Path, capsys) -> None:
    rows = pd.DataFrame({"submit_time": [0.0, 30.0, 60.0, 90.0], "application": "resnet50", "framework": "pytorch",
                         "iterations": 2000, "batch_size": 64, "deadline": [400.0, None, 300.0, None]})
    rows.to_csv(tmp_path / "t.csv", index=False)
    sc = small_scenario(workload={"trace": "t.csv"}, predictor={"kind": "measured"}, policies=[{"kind": "edf"}],
                        seeds=[0])
    out = tmp_path / "r"
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "--out", str(out), "--quiet", "--workers", "1"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "total cost" in header and "tardiness cost" in header and "late jobs" in header
    jobs = read_results(out).jobs.sort_values("submit_time")
    assert list(jobs["deadline"].notna()) == [True, False, True, False]
    summary = read_results(out).summary
    given = jobs[jobs["deadline"].notna()]
    assert summary["tardiness_cost"].iloc[0] == pytest.approx(given["tardiness_cost"].sum())
    assert summary["deadline_met"].iloc[0] == pytest.approx((given["status"] == "on_time").mean())
    assert summary["total_cost"].iloc[0] == pytest.approx(summary["vm_cost"].iloc[0] + given["tardiness_cost"].sum())


def test_an_elasticflow_replay_reports_its_own_metrics(tmp_path: Path, capsys) -> None:
    scenario = ROOT / "experiments" / "elasticflow" / "replay.yaml"
    out = tmp_path / "r"
    assert main(["run", str(scenario), "--policies", "elasticflow_edf", "--out", str(out), "--workers", "1",
                 "--quiet"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.split()[2:] == ["deadlines", "met", "rejected", "jobs", "mean", "JCT", "(s)", "makespan", "(s)"]
    jobs = read_results(out).jobs
    assert jobs["deadline"].notna().all() and set(jobs["status"]) <= {"on_time", "late", "rejected"}
