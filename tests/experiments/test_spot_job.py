"""The single-job spot mode end to end: agreement with Can't Be Late's recorded runs, the command, scenario errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from experiments.cli import main
from experiments.results.spot import agreement, agreement_summary, read_reference
from experiments.running.spot import run_scenario
from experiments.scenario.spot import load_spot_scenario
from sim.model import CapsimError

SPOT = Path(__file__).resolve().parents[2] / "experiments" / "spot"
TRACE = str(SPOT / "traces" / "aws-10-26-2022" / "us-west-2a_v100_1.json")


@pytest.fixture(scope="module")
def agree() -> pd.DataFrame:
    sc = load_spot_scenario(SPOT / "agreement.yaml")
    assert sc.reference is not None
    return agreement(run_scenario(sc), read_reference(sc.reference))


def test_every_development_case_agrees_with_the_reference_simulator(agree):
    s = agreement_summary(agree)
    assert set(s["reference_strategy"]) == {"on_demand", "only_spot", "greedy_2d_local", "strawman",
                                            "uniform_progress_local", "pair_amortize", "omniscient_dp",
                                            "ideal_ilp_overhead"}
    # 2 traces x 2 deadlines x 2 overheads x 12 starts per strategy; CBC's ILP where it was run
    assert (s.loc[s["reference_strategy"] != "ideal_ilp_overhead", "cases"] == 96).all()
    # the issue asks for 1 %; the reference prints costs to 6 decimals, so agreement is to rounding
    assert agree["cost_error"].max() < 1e-6
    assert agree["verdict_same"].all()
    policies = agree[~agree["reference_strategy"].isin(["omniscient_dp", "ideal_ilp_overhead"])]
    assert policies["finish_error_hours"].max() < 1e-5


def test_spot_greedy_misses_where_the_simulator_s_strawman_does(agree):
    straw = agree[agree["reference_strategy"] == "strawman"]
    missed = ~straw["reference_deadline_met"].astype(bool)
    assert missed.any() and (straw["deadline_met"] == ~missed).all()
    paper = agree[agree["reference_strategy"] == "greedy_2d_local"]
    assert paper["deadline_met"].all()


def write(tmp_path: Path, **fields) -> Path:
    d = {"name": "t", "trace": TRACE, "task_hours": 48, "deadline_hours": 52, "restart_overhead_hours": 0.2,
         "strategies": ["on_demand", "spot_greedy", "omniscient"], **fields}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return p


def test_the_command_writes_runs_and_agreement_and_may_write_into_its_own_folder_again(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["spot", str(SPOT / "cantbelate.yaml"), "--out", str(out), "--figure", str(tmp_path / "f" / "slack.png")]
    assert main(args) == 0
    runs = pd.read_csv(out / "spot_runs.csv")
    assert len(runs) == 7 and set(runs["strategy"]) >= {"on_demand", "omniscient", "time_sliced"}
    od = runs.set_index("strategy")["cost"]["on_demand"]
    assert od == pytest.approx(290 * 3.06 / 6)  # 48.2 h in 600-s ticks: 290 ticks
    assert len(pd.read_csv(out / "agreement.csv")) == 8
    assert (tmp_path / "f" / "slack.png").exists() and (tmp_path / "f" / "slack.pdf").exists()
    assert main(args) == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert main(["spot", str(SPOT / "cantbelate.yaml"), "--out", str(tmp_path / "other")]) == 2
    assert "not a spot result folder" in capsys.readouterr().err


def test_per_second_billing_charges_the_last_tick_only_up_to_the_finish(tmp_path):
    tick = run_scenario(load_spot_scenario(write(tmp_path, strategies=["on_demand"])))
    second = run_scenario(load_spot_scenario(write(tmp_path, strategies=["on_demand"], billing="second")))
    assert tick["cost"].iloc[0] == pytest.approx(290 * 0.51)
    assert second["cost"].iloc[0] == pytest.approx(48.2 * 3.06)


def test_a_grid_varies_the_documented_fields(tmp_path):
    sc = load_spot_scenario(write(tmp_path, grid={"start_hours": [0, 1], "deadline_hours": [52, 60]}))
    assert len(sc.cases) == 4
    assert {c.start for c in sc.cases} == {0, 3600} and {c.job.deadline for c in sc.cases} == {52 * 3600, 60 * 3600}


@pytest.mark.parametrize("fields, match", [
    ({"task_hour": 3}, "unknown key 'task_hour'; did you mean 'task_hours'"),
    ({"strategies": ["spot_gredy"]}, "unknown spot strategy 'spot_gredy'; did you mean 'spot_greedy'"),
    ({"strategies": [{"kind": "time_sliced", "slices": 3}]}, "unknown parameter 'slices'"),
    ({"strategies": [{"kind": "spot_greedy", "variant": "x"}]}, "variant must be one of"),
    ({"strategies": ["on_demand", "on_demand"]}, "listed twice"),
    ({"grid": {"deadline": [1]}}, "cannot vary 'deadline'"),
    ({"grid": {"deadline_hours": [52, -1]}}, "deadline_hours"),
    ({"start_hours": 10000}, "past the end"),
    ({"trace": "nowhere.json"}, "no such availability trace"),
    ({"trace": {"path": str(SPOT / "traces" / "aws-02-15-2023")}}, "holds 9 markets"),
    ({"trace": {"path": str(SPOT / "traces" / "aws-02-15-2023"), "market": "us-east-1x_v100_1"}},
     "no market 'us-east-1x_v100_1'; did you mean"),
    ({"deadline_hours": "52"}, "deadline_hours"),
    ({"name": "../x"}, "name"),
])
def test_scenario_mistakes_are_named_with_the_field(tmp_path, fields, match):
    with pytest.raises(CapsimError, match=match) as e:
        load_spot_scenario(write(tmp_path, **fields))
    assert "s.yaml" in str(e.value)


def test_a_market_of_a_directory_is_picked_by_name(tmp_path):
    sc = load_spot_scenario(write(tmp_path, trace={"path": str(SPOT / "traces" / "aws-02-15-2023"),
                                                   "market": "us-east-2a_v100_1"}))
    assert sc.cases[0].series.name == "us-east-2a_v100_1" and sc.cases[0].market.gap == 195


def test_a_reference_run_past_the_trace_end_agrees_with_a_run_that_stopped_there(tmp_path):
    import json

    (tmp_path / "short.json").write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": [1, 1, 0, 0, 0, 0]}))
    cols = "trace,start_h,deadline_h,overhead_h,task_h,strategy,status,cost,finish_h,deadline_met\n"
    rows = ("short,0.0,1.0,0.0,0.5,only_spot,error:Timestamp out of range,,,\n"
            "short,0.0,1.0,0.0,0.5,on_demand,ok,1.53,0.5,True\n")
    (tmp_path / "ref.csv").write_text(cols + rows)
    p = write(tmp_path, trace=str(tmp_path / "short.json"), task_hours=0.5, deadline_hours=1.0,
              restart_overhead_hours=0, strategies=["on_demand", "only_spot"])
    sc = load_spot_scenario(p)
    runs = run_scenario(sc)
    a = agreement(runs, read_reference(tmp_path / "ref.csv")).set_index("strategy")
    assert runs.set_index("strategy")["status"]["only_spot"] == "trace_ended"  # 1200 s of spot, then none
    assert a["verdict_same"].all() and a["cost_error"]["on_demand"] == pytest.approx(0.0)
