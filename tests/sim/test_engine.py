"""Hand-computed runs of the engine: times, money, boots, preemption, folding, periodic decisions, stalls."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pandas as pd
import pytest

from sim.engine import Simulation
from sim.model import Assignment, CapsimError, Plan
from tests.sim.helpers import BIG, SLOW, SMALL, A, B, FirstFit, Scripted, cluster, job, preempt_job0_at_10, table


def run(jobs, policy=None, n=1, types=(SMALL, BIG), pred=None, **kw):
    return Simulation(cluster(n, types, **kw), jobs, policy or FirstFit(), pred or table()).run()


def row(df: pd.DataFrame, job_id: int) -> pd.Series:
    return df.set_index("job_id").loc[job_id]


def test_two_jobs_one_node_exact_times_cost_and_tardiness():
    r = run([job(0, A, 0.0, deadline=150.0, weight=0.01), job(1, B, 10.0, deadline=120.0, weight=0.02)])
    a, b = row(r.jobs, 0), row(r.jobs, 1)
    assert (a.start_time, a.end_time, a.lateness) == (0.0, 100.0, 0.0)
    assert (b.start_time, b.end_time, b.wait_time, b.jct) == (100.0, 150.0, 90.0, 140.0)
    assert b.lateness == 30.0 and b.tardiness_cost == pytest.approx(0.6)
    assert len(r.nodes) == 1 and r.nodes.stop_time[0] == 150.0
    assert r.summary["vm_cost"] == pytest.approx(0.15)
    assert (a.cost_share, b.cost_share) == (pytest.approx(0.1), pytest.approx(0.05))
    assert r.summary["total_cost"] == pytest.approx(0.75)
    assert r.summary["late_jobs"] == 1 and r.summary["makespan"] == 150.0
    assert r.summary["gpu_utilisation"] == pytest.approx(1.0)
    assert list(r.decisions.trigger) == ["arrival", "arrival", "completion", "completion"]


def test_billing_quantum_rounds_each_interval_up():
    r = run([job(0, A, 0.0)], billing_quantum=60.0)
    assert r.nodes.billed_seconds[0] == 120.0
    assert r.summary["vm_cost"] == pytest.approx(0.12)
    assert r.jobs.cost_share[0] == pytest.approx(0.12)
    assert r.summary["gpu_utilisation"] == pytest.approx(100 / 120)


def test_boot_time_delays_start_and_is_billed():
    r = run([job(0, A, 0.0), job(1, B, 5.0)], FirstFit("slow"), n=2, types=(SMALL, SLOW))
    a, b = row(r.jobs, 0), row(r.jobs, 1)
    assert (a.start_time, a.end_time) == (20.0, 120.0)
    assert (b.start_time, b.end_time) == (25.0, 75.0)
    nodes = r.nodes.sort_values("node")
    assert list(nodes.ready_time) == [20.0, 25.0]
    assert r.summary["vm_cost"] == pytest.approx(0.001 * (120 + 70))


def test_ready_trigger_when_jobs_wait():
    def script(s):
        if s.trigger == "arrival" and s.time == 0:
            return Plan(vms={0: "slow"}, start=(Assignment(0, 0, 1),))
        if s.trigger == "arrival":
            return Plan()
        free = [n.index for n in s.nodes if n.vm is None]
        return Plan(vms={free[0]: "small"}, start=(Assignment(s.waiting[0].id, free[0], 1),)) if s.waiting else Plan()
    pol = Scripted(script)
    r = run([job(0, A, 0.0), job(1, B, 5.0)], pol, n=2, types=(SMALL, SLOW))
    assert [(s.time, s.trigger) for s in pol.seen][:3] == [(0.0, "arrival"), (5.0, "arrival"), (20.0, "ready")]
    assert row(r.jobs, 1).start_time == 20.0


def test_preempt_keeps_work_done_and_adds_restart_overhead():
    pol = Scripted(preempt_job0_at_10, preempt=True)
    r = run([job(0, A, 0.0), job(1, B, 10.0)], pol, restart_overhead=5.0)
    a, b = row(r.jobs, 0), row(r.jobs, 1)
    assert (b.start_time, b.end_time) == (10.0, 60.0)
    assert (a.start_time, a.end_time, a.runs) == (0.0, 60.0 + 0.9 * 100 + 5.0, 2)
    back = [s for s in pol.seen if s.time == 60.0][0]
    assert back.waiting[0].done == pytest.approx(0.1)


def test_move_to_bigger_vm_rescales_remaining_work():
    def script(s):
        if s.time == 0.0:
            return Plan(vms={0: "small"}, start=(Assignment(0, 0, 1),))
        if s.time == 10.0:
            return Plan(vms={1: "big"}, move=(Assignment(0, 1, 2),))
        return Plan()
    pol = Scripted(script, preempt=True)
    r = Simulation(cluster(2, restart_overhead=5.0, decision_interval=10.0), [job(0, A, 0.0)], pol, table()).run()
    a = row(r.jobs, 0)
    assert (a.end_time, a.vm_type, a.gpus, a.node, a.runs) == (10.0 + 0.9 * 50 + 5.0, "big", 2, 1, 2)
    nodes = r.nodes.sort_values("node").reset_index(drop=True)
    assert list(nodes.stop_time) == [10.0, 60.0]
    assert a.cost_share == pytest.approx(0.001 * 10 + 0.002 * 50)


def test_preempt_during_restart_overhead_makes_no_progress():
    def script(s):
        if s.time in (0.0, 20.0, 40.0):
            return Plan(vms={0: "small"}, start=(Assignment(0, 0, 1),))
        if s.time in (10.0, 30.0):
            return Plan(preempt=(0,), keep_idle=frozenset({0}))
        return Plan()
    pol = Scripted(script, preempt=True)
    r = Simulation(cluster(1, restart_overhead=15.0, decision_interval=10.0), [job(0, A, 0.0)], pol, table()).run()
    done = {s.time: s.waiting[0].done for s in pol.seen if s.waiting}
    assert done[20.0] == pytest.approx(0.1) and done[40.0] == pytest.approx(0.1)
    a = row(r.jobs, 0)
    assert (a.start_time, a.end_time, a.runs) == (0.0, 40.0 + 0.9 * 100 + 15.0, 3)
    assert r.summary["vm_cost"] == pytest.approx(0.001 * a.end_time)


def test_simultaneous_triggers_fold_into_one_decision():
    pol = Scripted(lambda s: FirstFit().decide(s))
    run([job(0, B, 0.0), job(1, A, 50.0), job(2, A, 50.0)], pol, n=3)
    assert [(s.time, s.trigger) for s in pol.seen][:2] == [(0.0, "arrival"), (50.0, "arrival+completion")]
    assert len(pol.seen[1].waiting) == 2


def test_periodic_decisions_every_h_until_all_done():
    pol = Scripted(lambda s: FirstFit().decide(s))
    run([job(0, A, 0.0)], pol, decision_interval=25.0)
    assert [(s.time, s.trigger) for s in pol.seen] == [
        (0.0, "arrival"), (25.0, "periodic"), (50.0, "periodic"), (75.0, "periodic"), (100.0, "completion+periodic")
    ]


def test_stall_guard_names_the_policy():
    pol = Scripted(lambda s: Plan())
    with pytest.raises(CapsimError, match=r"'scripted[^']*' left 1 jobs waiting forever"):
        run([job(0, A, 0.0)], pol)
    assert [s.trigger for s in pol.seen] == ["arrival", "stall"]


def test_stall_decision_lets_a_policy_recover():
    pol = Scripted(lambda s: FirstFit().decide(s) if s.trigger == "stall" else Plan())
    r = run([job(0, A, 0.0)], pol)
    assert row(r.jobs, 0).start_time == 0.0
    assert list(r.decisions.trigger) == ["arrival", "stall", "completion"]


def test_keep_idle_vm_costs_idle_and_adds_up():
    def script(s):
        if s.waiting and s.nodes[0].used_gpus == 0:
            return Plan(vms={0: "small"}, start=(Assignment(s.waiting[0].id, 0, 1),), keep_idle=frozenset({0}))
        return Plan(keep_idle=frozenset({0}))
    r = run([job(0, B, 0.0), job(1, B, 80.0)], Scripted(script))
    assert len(r.nodes) == 1 and r.nodes.stop_time[0] == 130.0
    assert r.summary["vm_cost"] == pytest.approx(0.13)
    assert r.jobs.cost_share.sum() == pytest.approx(0.13)


def test_idle_interval_without_jobs_goes_to_idle_cost():
    def script(s):
        if s.time == 0.0:
            return Plan(vms={0: "small", 1: "big"}, start=(Assignment(0, 0, 1),), keep_idle=frozenset({1}))
        return Plan()
    r = run([job(0, A, 0.0)], Scripted(script), n=2)
    assert r.summary["idle_cost"] == pytest.approx(0.2)
    assert r.summary["vm_cost"] == pytest.approx(0.3)
    assert r.jobs.cost_share.sum() + r.summary["idle_cost"] == pytest.approx(r.summary["vm_cost"])


def test_determinism_two_runs_equal_frames():
    from predictors.table import TablePredictor
    from sim.catalogue import vm_types
    from sim.cluster import Cluster, NodeSlot
    from sim.workload import WorkloadSpec, poisson_jobs

    vts = tuple(vm_types().values())
    pred = TablePredictor({f"J{i}/{v.name}/{g}": 300.0 * i / g for i in range(1, 7) for v in vts
                           for g in range(1, v.gpus + 1)})
    cl = Cluster(vts, (NodeSlot(),) * 3 + (NodeSlot(frozenset({"inhouse2"})),))
    out = []
    for _ in range(2):
        jobs = poisson_jobs(WorkloadSpec(30, 60.0), pred, cl.configs, seed=7)
        out.append(Simulation(cl, jobs, FirstFit("NC6"), pred).run())
    pd.testing.assert_frame_equal(out[0].jobs, out[1].jobs)
    pd.testing.assert_frame_equal(out[0].nodes, out[1].nodes)
    pd.testing.assert_frame_equal(out[0].decisions.drop(columns="wall_time"),
                                  out[1].decisions.drop(columns="wall_time"))
    assert {k: v for k, v in out[0].summary.items() if "wall" not in k} == \
        {k: v for k, v in out[1].summary.items() if "wall" not in k}


def test_infeasible_spec_for_estimator_is_rejected_up_front():
    with pytest.raises(CapsimError, match="job spec 'A'.*no feasible configuration"):
        Simulation(cluster(1), [job(0, A, 0.0)], FirstFit(), table(A_small_1=math.inf, A_big_1=math.inf,
                                                                      A_big_2=math.inf))


def test_stall_guard_with_periodic_ticks_allows_one_idle_tick():
    pol = Scripted(lambda s: Plan())
    with pytest.raises(CapsimError, match="waiting forever"):
        run([job(0, A, 0.0)], pol, decision_interval=10.0)
    assert [(s.time, s.trigger) for s in pol.seen] == [(0.0, "arrival"), (10.0, "periodic"), (20.0, "periodic"),
                                                       (20.0, "stall")]


def test_ready_decision_when_jobs_were_assigned_to_the_booting_vm():
    pol = Scripted(lambda s: FirstFit("slow").decide(s))
    run([job(0, A, 0.0)], pol, types=(SMALL, SLOW))
    assert [(s.time, s.trigger) for s in pol.seen] == [(0.0, "arrival"), (20.0, "ready"), (120.0, "completion")]
    assert pol.seen[1].running[0].since == 20.0 and pol.seen[1].nodes[0].ready_at == 20.0


def test_running_view_keeps_done_at_run_start_and_remaining_at_counts_time_run():
    pol = Scripted(lambda s: FirstFit().decide(s))
    run([job(0, A, 0.0), job(1, B, 30.0)], pol, n=2)
    at30 = pol.seen[1]
    view = at30.running[0]
    assert (view.done, view.since, view.remaining(view.config)) == (0.0, 0.0, 100.0)
    assert view.remaining_at(at30.time) == 70.0 and at30.waiting[0].remaining_at(30.0) == math.inf


def test_snapshot_lists_idle_nodes_freed_by_a_completion():
    pol = Scripted(lambda s: FirstFit().decide(s))
    run([job(0, B, 0.0), job(1, A, 0.0), job(2, A, 60.0)], pol, n=3)
    at50 = [s for s in pol.seen if s.time == 50.0][0]
    assert at50.trigger == "completion" and at50.idle_nodes == (0,) and at50.empty_nodes == (2,)
    at60 = [s for s in pol.seen if s.time == 60.0][0]
    assert at60.idle_nodes == () and at60.empty_nodes == (0, 2)


def test_events_count_every_simpy_event_including_a_cancelled_completion():
    sim = Simulation(cluster(1), [job(0, A, 0.0), job(1, B, 10.0)], Scripted(preempt_job0_at_10, preempt=True),
                     table())
    assert sim.events == 0
    sim.run()
    arrivals, decisions, completions = 2, 4, 3  # decisions at t = 0, 10, 60, 150; job 0's first completion cancelled
    assert sim.events == arrivals + decisions + completions


def test_node_changes_name_exactly_the_views_the_engine_made_anew():
    seen = []
    pol = Scripted(lambda s: (seen.append(s), FirstFit().decide(s))[1])
    jobs = [job(i, A if i % 2 else B, 7.0 * i) for i in range(12)]
    run(jobs, pol, n=3, types=(SMALL, SLOW))
    assert len(seen) > 10
    for before, after in zip(seen, seen[1:]):
        changes = after.node_changes
        assert changes is not None and changes.after is after.nodes
        named = changes.since(before.nodes)
        assert named is not None
        assert {i for i, (a, b) in enumerate(zip(before.nodes, after.nodes)) if a is not b} <= named
        # a node without a VM shows its one view of that state again: the same object means the same state
        assert all(nv is seen[0].nodes[i] for i, nv in enumerate(after.nodes) if nv.vm is None)
        assert all(before.nodes[i] is not after.nodes[i] or after.nodes[i].vm is None for i in named)
    assert any(changes.since(s.nodes) for s in seen[:-1])


def test_positional_views_are_the_keyword_ones():
    from sim.model import JobView, NodeView, positional
    spec = job(3, A, 1.0)
    est = table().runtimes([A], cluster(1).configs)[0]
    assert positional(JobView)(spec, est, 0.5, 2, 1, 4.0, ((2, 1),), 7, 1.5, None) == JobView(
        spec, est, done=0.5, node=2, config=1, since=4.0, parts=((2, 1),), partner=7, pace=1.5)
    assert positional(NodeView)(4, frozenset({"small"}), SMALL, 3.0, 1, True, None) == NodeView(
        4, allowed=frozenset({"small"}), vm=SMALL, ready_at=3.0, used_gpus=1, fixed=True)
    assert positional(NodeView)(4) == NodeView(4)  # fields with defaults may be left out (a field added later)
    made = positional(JobView)(spec, est)
    assert type(made) is JobView and made == JobView(spec, est)
    with pytest.raises(dataclasses.FrozenInstanceError):  # made through a mutable twin, then frozen as any view
        made.done = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del made.done  # type: ignore[misc]
    # a subclass adding slots but no fields (the engine's snapshot): its own slots from keyword arguments, else None
    from sim.model import Snapshot
    from sim.state import EngineSnapshot
    args = (1.0, "arrival", (), (), (), (), ())
    snap = positional(Snapshot, EngineSnapshot)(*args, _world="w")
    keyword = Snapshot(time=1.0, trigger="arrival", configs=(), vm_types=(), nodes=(), waiting=(), running=())
    assert type(snap) is EngineSnapshot and snap._world == "w"
    assert [getattr(snap, f.name) for f in dataclasses.fields(Snapshot)] == [
        getattr(keyword, f.name) for f in dataclasses.fields(Snapshot)]
    assert positional(Snapshot, EngineSnapshot)(*args)._world is None
    # a class whose layout no twin can share (a weak reference slot on object) is built slot by slot, the same
    weak = positional(_Weak)(1, "x")
    assert type(weak) is _Weak and weak == _Weak(1, "x") and pickle.loads(pickle.dumps(weak)) == weak
    with pytest.raises(TypeError, match="__post_init__"):
        positional(_Checked)
    with pytest.raises(TypeError, match="not a slot"):
        positional(_Loose)
    with pytest.raises(TypeError, match="not a slot"):
        positional(Plan)


@dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)
class _Weak:
    x: int
    y: str


@dataclasses.dataclass(frozen=True)
class _Loose:
    x: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    x: int

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x < 0")


def _running_ids(s) -> tuple[int, ...]:
    return tuple(j.id for j in s.running)


def _state(s) -> tuple:
    """What a snapshot shows of the cluster: running jobs, empty and idle nodes, each node's VM and used GPUs."""
    return (_running_ids(s), s.empty_nodes, s.idle_nodes,
            tuple((n.vm.name if n.vm else None, n.used_gpus) for n in s.nodes))


class _Keeper(FirstFit):
    """FirstFit that keeps every other snapshot unread, reads every fourth at once, and every third follows the nodes
    by ``node_changes`` (checking them against an identity comparison with the nodes it followed last)."""

    def __init__(self):
        super().__init__()
        self.kept, self.count, self.followed, self.checked = [], 0, None, 0

    def decide(self, s):
        self.count += 1
        if self.count % 2:
            self.kept.append(s)
            return super().decide(s) if self.count % 3 == 0 else self._without_nodes(s)
        if self.count % 4 == 0:
            _state(s)  # read at once: made from the state as it is then
        if self.count % 3 == 0:
            nodes, before = s.nodes, self.followed
            if before is not None and s.node_changes.since(before) is not None:
                assert s.node_changes.since(before) == {i for i, (a, b) in enumerate(zip(before, nodes)) if a is not b}
                self.checked += 1
            self.followed = nodes
        return self._without_nodes(s)

    def _without_nodes(self, s):
        """FirstFit's plan without reading ``nodes`` (a free node is one no job is running on or started on)."""
        taken = {j.node for j in s.running}
        free = [n for n in range(len(self.slots)) if n not in taken]
        vms, start = {}, []
        for jv, n in zip(s.waiting, free):
            vms[n] = self.vm
            start.append(Assignment(jv.id, n, self.gpus))
        return Plan(vms=vms, start=tuple(start))


def test_a_kept_snapshot_shows_the_state_of_its_own_decision():
    # The engine makes a snapshot's tuples when first read. Run 1 reads them at each decision; run 2 keeps every
    # other snapshot unread (the others die at once, or are read at once, or follow the nodes) and reads them all at
    # the end, after the engine has started and ended jobs and VMs many times: each must show the state of its own
    # decision (two nodes, so some decisions follow one another with nothing changed).
    jobs = [job(i, A if i % 3 else B, 9.0 * i) for i in range(16)]
    eager: list[tuple] = []
    keeper = _Keeper()
    keeper.slots = range(2)
    run(jobs, Scripted(lambda s: (eager.append(_state(s)), keeper._without_nodes(s))[1]), n=2)
    policy = _Keeper()
    policy.slots = range(2)
    r = run(jobs, policy, n=2)
    assert len(eager) == len(r.decisions) > 20 and any(e[0] for e in eager) and any(not e[0] for e in eager)
    assert [_state(s) for s in policy.kept] == eager[::2]
    assert r.decisions.running.tolist() == [len(e[0]) for e in eager]
    assert policy.checked > 3


def test_an_engine_snapshot_is_replaced_and_compared_as_any_snapshot():
    seen = []
    run([job(0, A, 0.0), job(1, B, 1.0), job(2, B, 2.0)], Scripted(lambda s: (seen.append(s), FirstFit().decide(s))[1]),
        n=2)
    s = seen[2]
    assert _running_ids(s) == (0, 1)
    other = dataclasses.replace(s, trigger="elsewhere")
    assert other.trigger == "elsewhere" and other.running == s.running and other.nodes is s.nodes
    assert dataclasses.replace(s) == s and other != s
    back = pickle.loads(pickle.dumps(s))  # (its views' estimates arrays come back as copies)
    assert type(back) is type(s) and type(s).__name__ == "EngineSnapshot" and back.nodes == s.nodes
    assert _running_ids(back) == (0, 1) and back.time == s.time
    with pytest.raises(dataclasses.FrozenInstanceError):  # (made through a mutable twin: ``positional``)
        s.trigger = "changed"  # type: ignore[misc]


def test_a_snapshot_with_no_running_job_reads_an_empty_tuple():
    seen = []
    run([job(0, A, 0.0)], Scripted(lambda s: (seen.append(s), FirstFit().decide(s))[1]))
    assert seen[0].running == () and dataclasses.replace(seen[0], trigger="x").running == ()
