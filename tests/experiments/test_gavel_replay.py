"""Replaying Gavel's traces: capsim agrees with Gavel's own results, and fixed clusters of servers in scenario files
load, build and fail with clear messages."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.scenario import load_scenario, registered_policies
from sim.model import CapsimError
from studies.gavel_replay import CASES, PACKED, REPLAY, agreement, reference, replay

from .conftest import small_scenario, write_yaml


@pytest.mark.parametrize("trace, policy", CASES)
def test_capsim_agrees_with_gavel_on_its_traces(trace, policy):
    """Within 2 % of Gavel's average JCT and makespan, median per-job relative JCT error at most 2 %, and the jobs
    Gavel drops (its failed-micro-task quirk) are the ones capsim reports it would drop. ``gandiva`` and the
    ``*_packed`` policies co-locate pairs of jobs on a GPU (Gavel's packing, switched on by the policy's name)."""
    a = agreement(trace, policy)
    assert abs(a["avg_jct"] / a["gavel_avg_jct"] - 1) <= 0.02
    assert abs(a["makespan"] / a["gavel_makespan"] - 1) <= 0.02
    assert a["median_error"] <= 0.02
    assert a["dropped"] == a["gavel_dropped"]
    assert abs(a["utilisation"] - a["gavel_utilisation"]) <= 0.03


@pytest.mark.parametrize("policy", PACKED[1:])
def test_gavels_lp_packing_policies_refuse_e_trace_where_gavel_crashes(policy):
    """Gavel's LP packing policies crash on e.trace at t = 2,519.8 s, when 7 one-GPU jobs and one 4-GPU job are
    active; capsim stops there with one clear error naming the corrected model, which runs the trace."""
    with pytest.raises(CapsimError, match=f"7 of 1 GPU, 1 of 4 GPUs.*'{policy}_mixed'"):
        replay("e.trace", policy)


def test_a_packed_lp_without_an_answer_falls_back_to_jobs_alone_and_says_so(monkeypatch):
    from optim.gavel.packed_lp import LPFailed
    from optim.gavel.packed_policies import MaxMinFairnessPacked

    def fail(*args):
        raise LPFailed("no answer (test)")

    monkeypatch.setattr(MaxMinFairnessPacked, "solve", fail)
    r = replay("d.trace", "max_min_fairness_packed")
    assert r.jobs.end_time.notna().all() and len(r.jobs) == 40
    fell = r.decisions[r.decisions.fallback.notna()]
    assert len(fell) > 0 and (fell.fallback == "isolated").all() and fell.reason.str.contains("no answer").all()
    assert r.summary["colocated_share"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("policy", PACKED[1:])
def test_the_corrected_lp_packing_policies_run_a_mix_of_gpu_counts(policy):
    r = replay("e.trace", f"{policy}_mixed")
    assert len(r.jobs) == 80 and r.jobs.end_time.notna().all()
    assert r.summary["colocated_share"] > 0


def test_without_round_effects_decisions_are_event_driven():
    r = replay("d.trace", "max_min_fairness_perf", rounds={"length": 360, "effects": False})
    assert "round" not in set(r.decisions.trigger) and "periodic" in set(r.decisions.trigger)
    assert r.jobs.final_round_iterations.isna().all() and r.summary["gavel_dropped"] == 0
    first = r.decisions.groupby("time").size().index.min()
    assert first == 0.0 and r.jobs.start_time.min() == 0.0


def fixed(tmp_path: Path, **cluster) -> Path:
    d = small_scenario()
    d["cluster"] = cluster
    d["predictor"] = {"kind": "throughput"}
    d["workload"] = {"trace": {"path": str(REPLAY.parent / "e.trace"), "format": "gavel"}}
    return write_yaml(tmp_path / "s.yaml", d)


def test_a_fixed_cluster_from_the_brief_form_and_from_mappings(tmp_path):
    sc = load_scenario(fixed(tmp_path, servers="4:4:4", rounds=360))
    c = sc.build_cluster()
    assert [v.name for v in c.vm_types] == ["v100", "p100", "k80"] and len(c.slots) == 12
    assert all(s.fixed for s in c.slots) and c.rules.gang and c.rules.round_length == 360.0
    assert max(cfg.gpus for cfg in c.configs if cfg.vm.name == "v100") == 4, "gangs up to every V100"
    sc = load_scenario(fixed(tmp_path, servers={"V100": 2, "K80": 1}, gpus_per_server="4:1:2",
                             server_price={"V100": 12.24}, gang=False, rounds={"length": 60, "effects": False}))
    c = sc.build_cluster()
    assert [(v.name, v.gpus, v.price_per_hour) for v in c.vm_types] == [("v100", 4, 0.0), ("k80", 2, 0.0)]
    assert c.rules.owned_price_per_hour == {"v100": 12.24, "k80": 0.0}, "owned servers bill their rate by the rules"
    assert not c.rules.gang and c.rules.round_length == float("inf") and c.rules.decision_interval == 60.0
    assert sc.cluster.node_count == 3 and sc.n_jobs == 80


def test_fixed_cluster_mistakes_are_named(tmp_path):
    p = fixed(tmp_path, servers="1:1:1")
    p.write_text(p.read_text().replace("'1:1:1'", "4:4:4"))  # unquoted, as a user would write it
    with pytest.raises(CapsimError, match="found the number 14644 .*write it in quotes"):
        load_scenario(p)
    with pytest.raises(CapsimError, match="expected three whole numbers V100:P100:K80"):
        load_scenario(fixed(tmp_path, servers="4:4"))
    with pytest.raises(CapsimError, match="cluster.servers: expected a quoted text like '4:4:4' or a mapping .*the "
                                          "number 12$"):
        load_scenario(fixed(tmp_path, servers=12))
    with pytest.raises(CapsimError) as e:
        load_scenario(fixed(tmp_path, servers={"V100": 1, "X9": 2}, vm_types=["NC6"], gpus_per_server={"P100": 2},
                            rounds=360, decision_interval=30))
    for words in ("cluster.servers.X9: unknown GPU model 'X9'",
                  "cluster.vm_types: expected rented node slots (cluster.nodes)",
                  "cluster.gpus_per_server.P100: expected a GPU model of servers",
                  "cluster.rounds: expected rounds or decision_interval, not both"):
        assert words in str(e.value)
    with pytest.raises(CapsimError, match="cluster.server_price: expected no server_price without servers"):
        load_scenario(write_yaml(tmp_path / "t.yaml", small_scenario(cluster={"nodes": 2, "server_price": 1})))


def test_scenarios_without_the_new_fields_keep_their_data_and_run_ids(tiny):
    sc = load_scenario(tiny)
    dumped = sc.model_dump(mode="json")["cluster"]
    assert not {"servers", "gpus_per_server", "server_price", "gang", "rounds"} & set(dumped)
    assert "fifo_perf" not in [p.kind for p in load_scenario(Path(__file__).parents[2] / "experiments" / "scenario"
                                                               / "default.yaml").policy_specs()]
    assert {"fifo_perf", "max_min_fairness_perf", "gavel_fifo"} <= set(registered_policies(fixed=True))
    assert not {"fifo_perf", "max_min_fairness_perf", "gavel_fifo"} & set(registered_policies(fixed=False))


def test_the_replay_scenario_runs_through_the_command_line(tmp_path):
    from experiments.cli import main

    main(["run", str(REPLAY), "--out", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert list(summary.policy) == ["fifo_perf", "max_min_fairness_perf", "gavel_fifo"]
    gavel = reference("d.trace", "fifo_perf")[0]
    assert summary.set_index("policy").gavel_mean_jct["fifo_perf"] == pytest.approx(gavel.avg_jct_s, rel=0.03)


def test_a_replay_without_deadlines_passes_the_money_check_and_a_charged_one_fails(tmp_path):
    """A Gavel trace gives no deadlines: its jobs carry none (NaN lateness and tardiness), the run's tardiness cost is
    NaN and its total cost is the VM cost; the engine checks accept that, and reject a job without a deadline that is
    charged tardiness."""
    import dataclasses

    from sim.engine import Simulation
    from studies.gavel_replay import build, write_trace
    from tests.optim.worlds import World, check

    path = write_trace(tmp_path / "small.trace", 8, 300.0, 3, multi_gpu=True)
    c, jobs, pol, est, truth, _, _ = build(path, "fifo_perf", rounds=360)
    world = World(c, jobs, est, None if truth is est else truth, 3)
    r = Simulation(c, jobs, pol, est, truth).run()
    assert r.jobs.deadline.isna().all() and r.jobs.tardiness_cost.isna().all()
    check(world, r)
    charged = r.jobs.assign(tardiness_cost=[1.0] + [float("nan")] * (len(r.jobs) - 1))
    with pytest.raises(AssertionError, match="without a deadline was charged"):
        check(world, dataclasses.replace(r, jobs=charged))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [21, 22, 23])
def test_held_out_traces_replay_within_the_engine_invariants(seed, tmp_path):
    """Traces made by Gavel's generator (not the two shipped ones), multi-GPU, replayed with each Gavel policy in
    round mode and without the round effects: every run keeps the engine's invariants."""
    from sim.engine import Simulation
    from studies.gavel_replay import build, write_trace
    from tests.optim.worlds import World, check

    path = write_trace(tmp_path / "held_out.trace", 60, 300.0, seed, multi_gpu=True)
    for policy in ("fifo_perf", "max_min_fairness_perf", "gavel_fifo"):
        for rounds in (360, {"length": 360, "effects": False}):
            c, jobs, pol, est, truth, _, _ = build(path, policy, rounds=rounds)
            r = Simulation(c, jobs, pol, est, truth).run()
            check(World(c, jobs, est, None if truth is est else truth, seed), r)
