"""Large MILP decisions solved in groups (optim/milp/split.py): the shape a recorded spot market produces when a
zone's end revokes every VM at once while arrivals wait, and the hand-checked ways groups see each other."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import optim.milp.formulation as milp_formulation
import optim.milp.policy as milp_policy
from optim.milp.formulation import build_model, write_problem
from optim.milp.model import Model
from optim.milp.policy import MILP
from optim.milp.reductions import reduce_snapshot
from optim.milp.split import solve_in_groups, started
from sim.availability import AvailabilitySeries
from sim.catalogue import configurations, spot_variant, vm_types
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Config, NodeView, Plan, Snapshot
from sim.spot_market import RecordedMarkets
from tests.instances import instance, revoked, runtime_table
from tests.optim.helpers import BIG, SMALL, job, snapshot
from tests.sim.helpers import SMALL as ON_DEMAND
from tests.sim.helpers import A, table
from tests.sim.helpers import job as sim_job

INF = float("inf")


def _configs() -> tuple[Config, ...]:
    return configurations(tuple(vm_types().values()))


def _check_plan(snap: Snapshot, plan: Plan) -> None:
    """Every job starts at most once, on a VM the plan leaves there, within that VM's GPUs."""
    ids = [a.job_id for a in plan.start]
    assert len(ids) == len(set(ids))
    assert set(ids) <= {jv.id for jv in snap.waiting}
    used: Counter[int] = Counter()
    for a in plan.start:
        used[a.node] += a.gpus
    for n, gpus in used.items():
        host = snap.nodes[n].vm
        name = plan.vms.get(n) or (host.name if host is not None else None)
        assert name is not None
        assert any(c.vm.name == name and c.gpus == a.gpus for c in snap.configs for a in plan.start if a.node == n)
        assert gpus <= snap.vm_type(name).gpus


def test_mass_revocation_is_solved_in_groups_and_places_everyone_validly():
    snap = revoked(16, 24, 0, runtime_table(_configs())[0])
    full = reduce_snapshot(snap, False, 0.0, "safe")
    assert len(full.placements) > 2000
    policy = MILP(split_above=2000)
    plan = policy.decide(snap)
    assert (plan.info.reason or "").startswith(f"split: {len(full.placements)} placements > split_above 2000")
    assert plan.info.status in ("optimal", "work_limit")
    assert (plan.info.variables or 0) < len(full.placements)
    _check_plan(snap, plan)
    assert len(plan.start) == len(snap.waiting)  # 16 empty slots of up to 4-8 GPUs hold 24 one-GPU-or-more jobs
    again = MILP(split_above=2000).decide(snap)
    assert again == plan  # deterministic


def test_groups_go_by_deadline_and_each_sees_only_its_jobs():
    jobs = [job(j, [100.0, 100.0, 60.0], deadline=float(d)) for j, d in enumerate([500, 100, 300, 200, 400])]
    snap = snapshot(jobs, nodes=5)
    seen: list[list[int]] = []

    def decide(s: Snapshot) -> Plan:
        seen.append([jv.id for jv in s.waiting])
        return Plan()

    plan = solve_in_groups(snap, 2, decide, 99, 10)
    assert seen == [[1, 3], [2, 4], [0]]
    assert plan.start == () and "3 groups of ≤ 2" in (plan.info.reason or "")


def test_a_later_group_joins_the_vm_an_earlier_group_opened():
    # one slot; both jobs run only on the big VM's one-GPU configuration: the second group must share that VM
    a, b = job(0, [INF, 100.0, INF], deadline=50.0), job(1, [INF, 100.0, INF], deadline=60.0)
    snap = snapshot([a, b], nodes=1)
    plan = MILP(split_above=1).decide(snap)
    assert "2 groups of ≤ 1" in (plan.info.reason or "")
    assert dict(plan.vms) == {0: "big"}
    assert sorted((s.job_id, s.node, s.gpus) for s in plan.start) == [(0, 0, 1), (1, 0, 1)]


def test_started_pins_the_new_vm_with_its_job_from_when_it_is_ready():
    small = replace(SMALL, boot_time=30.0)
    big = replace(BIG, boot_time=60.0)
    a, b = job(0, [50.0, 40.0, 25.0]), job(1, [50.0, 40.0, 25.0])
    snap = snapshot([a, b], nodes=[NodeView(0), NodeView(1, vm=small, ready_at=0.0)], time=100.0,
                    vm_types=(small, big))
    plan = Plan(vms={0: "big"}, start=(Assignment(0, 0, 1),))
    after = started(snap, plan)
    assert after.nodes[0].vm == big and after.nodes[0].ready_at == 160.0 and after.nodes[0].used_gpus == 1
    assert after.nodes[1] == snap.nodes[1]
    assert [jv.id for jv in after.waiting] == [1]
    (r,) = after.running
    assert (r.id, r.node, r.config, r.since) == (0, 0, 1, 160.0)
    assert r.remaining_at(100.0) == 40.0  # not begun: its whole estimate is left
    assert after.empty_nodes == ()


def test_small_decisions_are_not_split():
    table, _ = runtime_table(_configs())
    snap = instance(5, 15, 1, table)
    assert len(reduce_snapshot(snap, False, 0.0, "safe").placements) < 10_000
    default, never = MILP().decide(snap), MILP(split_above=None).decide(snap)
    assert default == never and "split" not in (default.info.reason or "")


def test_a_decision_counted_against_split_above_is_reduced_once_and_writes_the_model_a_fresh_build_writes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # more waiting jobs × slots × configurations than split_above but no more placements: decide reduces the snapshot
    # to count them, and the model it then solves must be that reduction written, the same LP file as a fresh build
    table, _ = runtime_table(_configs())
    snap = instance(6, 16, 0, table)
    fresh = build_model(snap)
    limit = len(fresh.placements)
    assert len(snap.waiting) * len(snap.nodes) * len(snap.configs) > limit
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Model:
        calls.append(1)
        return reduce_snapshot(*args, **kwargs)

    monkeypatch.setattr(milp_policy, "reduce_snapshot", counted)
    monkeypatch.setattr(milp_formulation, "reduce_snapshot", counted)
    written: list[Model] = []
    plan = MILP(split_above=limit, extra_constraints=written.append).decide(snap)
    assert len(calls) == 1 and len(written) == 1
    assert plan.info.status == "optimal" and "split" not in (plan.info.reason or "")
    assert (plan.info.variables, plan.info.constraints) == fresh.size
    assert written[0].problem is not None
    write_problem(fresh).writeLP(str(tmp_path / "fresh.lp"))
    written[0].problem.writeLP(str(tmp_path / "decided.lp"))
    assert (tmp_path / "decided.lp").read_text() == (tmp_path / "fresh.lp").read_text()


def test_a_reduction_that_fails_while_counting_placements_falls_back_and_loses_no_job(
        monkeypatch: pytest.MonkeyPatch) -> None:
    table, _ = runtime_table(_configs())
    snap = instance(6, 16, 0, table)

    def broken(*args: Any, **kwargs: Any) -> Model:
        raise ValueError("no reduction today")

    monkeypatch.setattr(milp_policy, "reduce_snapshot", broken)
    plan = MILP(split_above=10).decide(snap)
    assert plan.info.status == "error" and plan.info.fallback == "edf"
    assert "reducing the model failed: ValueError: no reduction today" in (plan.info.reason or "")
    assert plan.start  # the fallback's plan: EDF starts jobs on the free slots


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_split_above_must_be_a_positive_whole_number(value):
    with pytest.raises(CapsimError, match="split_above"):
        MILP(split_above=value)


def test_a_run_on_a_recorded_market_splits_the_decision_after_a_zone_ends_and_finishes_every_job():
    # 6 slots on spot in one zone that ends at 1,000 s: all 6 VMs are revoked at once and 8 jobs wait again
    spot = spot_variant(replace(ON_DEMAND, spot_price_per_hour=1.2), 0.5)
    zone = AvailabilitySeries.ticks("a", [True] * 10 + [False] + [True] * 89, 100.0)
    c = Cluster((ON_DEMAND, spot), tuple(NodeSlot() for _ in range(6)),
                rules=ClusterRules(checkpoint_interval=300.0), markets=RecordedMarkets.build([spot], {"a": zone}))
    jobs = [sim_job(i, A, 10.0 * i, deadline=20_000.0) for i in range(8)]
    truth = table(A_small_1=1500.0, **{"A_small-spot_1": 1500.0})
    r = Simulation(c, jobs, MILP(split_above=20), truth, seed=0).run()
    assert sorted(r.jobs["job_id"]) == list(range(8)) and r.jobs["end_time"].notna().all()
    assert r.nodes["revoked"].sum() == 6
    split = r.decisions[r.decisions["reason"].fillna("").str.startswith("split")]
    assert list(split["time"]) == [1000.0] and list(split["trigger"]) == ["revocation"]
    assert list(split["waiting"]) == [8] and list(split["started"]) == [6]  # every slot again, on demand
    assert r.decisions["fallback"].isna().all()
