"""MIG slices in the engine: a plan cuts an A100 into a layout (``Plan.layouts``), jobs run on its slices
(``Assignment.slice``) at the slice's measured speed from when the GPU is repartitioned, and the records say which
slice ran what; the plan rules refuse invalid layouts, busy GPUs, taken or missing slices; hand-computed cases.

Runtimes (whole GPU): A 100 s, B 50 s on ``a100`` (1 A100-40GB, $0.001/s). Neither is measured by MISO or MIGPerf
(``alexnet``), so they run at the per-profile medians: 3g 0.6568, 4g 0.7453, 1g 0.3219 of the whole GPU.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from predictors.interference.explicit import GivenPairs
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Plan, Slice, Snapshot, VMType
from sim.testing import World, check_run
from sim.vocabulary.mig import PROFILES, layout_problem, maximal_layouts, parse_layout, profile_for_share, slice_speeds
from tests.sim.helpers import A, B, Scripted, job

A100 = VMType("a100", gpu("A100-40GB"), 1, 3.6)
A100X2 = VMType("a100x2", gpu("A100-40GB"), 2, 7.2)
K80 = VMType("k80", gpu("K80"), 1, 3.6)
RUNTIMES = {f"{s}/{v}/{g}": t for v, gs in (("a100", (1,)), ("a100x2", (1, 2)), ("k80", (1,)))
            for g in gs for s, t in (("A", 100.0), ("B", 50.0))}
MED = slice_speeds().medians


def run(script, jobs, *, reconfigure=10.0, types=(A100, A100X2, K80), n=1, mig=True):
    policy = Scripted(script, share=True)
    cluster = Cluster(types, tuple(NodeSlot() for _ in range(n)),
                      rules=ClusterRules(mig=mig, mig_reconfigure_time=reconfigure))
    return Simulation(cluster, jobs, policy, TablePredictor(RUNTIMES)).run(), policy


def test_two_jobs_on_two_slices_of_one_a100():
    """At 0 the A100 is cut into 4g@0 + 3g@4 (ready at 10): A on the 4g ends at 10 + 100/0.7453, B on the 3g at
    10 + 50/0.6568. Each is credited its slice's compute share (4/7, 3/7) of the GPU-seconds."""
    cut = parse_layout("4g@0 3g@4")

    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100"}, layouts={(0, 0): cut},
                        start=(Assignment(0, 0, 1, slice=Slice(0, 0, "4g")),
                               Assignment(1, 0, 1, slice=Slice(0, 4, "3g"))))
        return Plan(keep_idle=frozenset({0}) if s.waiting else frozenset())

    r, policy = run(script, [job(0, A, 0.0), job(1, B, 0.0)])
    j = r.jobs.set_index("job_id")
    end_a, end_b = 10 + 100 / MED["4g"], 10 + 50 / MED["3g"]
    assert j.loc[0, "start_time"] == 10.0 and j.loc[0, "end_time"] == pytest.approx(end_a)
    assert j.loc[1, "end_time"] == pytest.approx(end_b)
    seg = r.segments.set_index("job_id")
    assert seg.loc[0, "slice"] == "0/4g.20gb@0" and seg.loc[1, "slice"] == "0/3g.20gb@4"
    busy = 4 / 7 * (end_a - 10) + 3 / 7 * (end_b - 10)
    assert r.nodes.busy_gpu_seconds.iloc[0] == pytest.approx(busy)
    assert r.summary["gpu_utilisation"] == pytest.approx(busy / end_a)  # the VM ran from 0 to A's end
    assert j.cost_share.sum() + r.summary["idle_cost"] == pytest.approx(r.summary["vm_cost"])
    shown = {jv.id: jv for jv in policy.seen[1].running}
    assert shown[0].slice == Slice(0, 0, "4g") and shown[0].pace == pytest.approx(1 / MED["4g"])
    assert policy.seen[0].nodes[0].layouts == ()  # before the plan: no VM
    assert policy.seen[1].nodes[0].layouts == (cut,) and policy.seen[1].nodes[0].used_gpus == 1


def test_a_slice_freed_is_taken_again_without_reconfiguring():
    """B on 1g@0 from 10; at B's end A takes the same slice at once: the layout did not change."""
    cut = ((("1g", 0),))

    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100"}, layouts={(0, 0): cut}, start=(Assignment(1, 0, 1, slice=Slice(0, 0, "1g")),))
        if s.waiting and not s.running:
            return Plan(layouts={(0, 0): cut}, start=(Assignment(0, 0, 1, slice=Slice(0, 0, "1g")),))
        return Plan(keep_idle=frozenset({0}))

    r, _ = run(script, [job(1, B, 0.0), job(0, A, 1.0)])
    j = r.jobs.set_index("job_id")
    b_end = 10 + 50 / MED["1g"]
    assert j.loc[1, "end_time"] == pytest.approx(b_end)
    assert j.loc[0, "start_time"] == pytest.approx(b_end)
    assert j.loc[0, "end_time"] == pytest.approx(b_end + 100 / MED["1g"])


def test_repartitioning_an_idle_gpu_waits_the_reconfiguration_time_and_whole_jobs_avoid_cut_gpus():
    """On a 2-GPU VM, GPU 0 is cut (3g@0) for B, which starts once it is repartitioned (5 s); A, whole, takes GPU 1
    at once; the cut GPU counts as used."""
    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100x2"}, layouts={(0, 0): (("3g", 0),)},
                        start=(Assignment(1, 0, 1, slice=Slice(0, 0, "3g")), Assignment(0, 0, 1)))
        return Plan(keep_idle=frozenset({0}) if s.running else frozenset())

    r, policy = run(script, [job(0, A, 0.0), job(1, B, 0.0)], reconfigure=5.0)
    j = r.jobs.set_index("job_id")
    assert j.loc[0, "start_time"] == 0.0 and j.loc[0, "end_time"] == 100.0
    assert j.loc[1, "start_time"] == 5.0 and j.loc[1, "end_time"] == pytest.approx(5 + 50 / MED["3g"])
    seg = r.segments.set_index("job_id")
    assert seg.loc[0, "slice"] is None
    assert policy.seen[1].nodes[0].used_gpus == 2


@pytest.mark.parametrize("plan, rule", [
    (lambda: Plan(vms={0: "a100"}, layouts={(0, 0): (("3g", 2),)}), "invalid MIG layout"),
    (lambda: Plan(vms={0: "a100"}, layouts={(0, 0): (("4g", 0), ("3g", 0))}), "overlaps"),
    (lambda: Plan(vms={0: "k80"}, layouts={(0, 0): (("3g", 0),)}), "A100 and H100 only"),
    (lambda: Plan(vms={0: "a100"}, layouts={(0, 1): (("3g", 0),)}), "GPUs 0..0"),
    (lambda: Plan(vms={0: "a100"}, start=(Assignment(0, 0, 1, slice=Slice(0, 0, "3g")),)), "not in that GPU's layout"),
    (lambda: Plan(vms={0: "a100"}, layouts={(0, 0): (("3g", 0),)},
                  start=(Assignment(0, 0, 1, slice=Slice(0, 0, "3g")), Assignment(1, 0, 1, slice=Slice(0, 0, "3g")))),
     "another job holds"),
    (lambda: Plan(vms={0: "a100"}, layouts={(0, 0): (("3g", 0),)},
                  start=(Assignment(0, 0, 1, slice=Slice(0, 0, "3g")), Assignment(1, 0, 1))), "more than its"),
])
def test_the_plan_rules_refuse_bad_layouts_and_slices(plan, rule):
    with pytest.raises(CapsimError, match=rule):
        run(lambda s: plan() if s.time == 0 else Plan(), [job(0, A, 0.0), job(1, B, 0.0)])


def test_a_busy_gpu_is_not_repartitioned_and_mig_needs_the_cluster_rule():
    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100"}, layouts={(0, 0): (("3g", 0),)},
                        start=(Assignment(0, 0, 1, slice=Slice(0, 0, "3g")),))
        return Plan(layouts={(0, 0): (("4g", 0),)}, start=(Assignment(1, 0, 1, slice=Slice(0, 0, "4g")),))

    with pytest.raises(CapsimError, match="where a job still runs"):
        run(script, [job(0, A, 0.0), job(1, B, 1.0)])
    with pytest.raises(CapsimError, match="has no MIG"):
        run(lambda s: Plan(vms={0: "a100"}, layouts={(0, 0): (("3g", 0),)}), [job(0, A, 0.0)], mig=False)


def _shared(script, jobs):
    """A run on one a100x2 where GPUs may be cut into slices and two jobs may share a whole GPU (A+B slow down 2x and
    1.5x), its invariants checked."""
    class Pairing(Scripted):
        may_colocate: ClassVar[bool] = True

    pairs = GivenPairs({"A+B": [2.0, 1.5]})
    cluster = Cluster((A100X2,), (NodeSlot(),), rules=ClusterRules(mig=True, jobs_per_gpu=2))
    r = Simulation(cluster, jobs, Pairing(script, share=True), TablePredictor(RUNTIMES), interference=pairs).run()
    check_run(World(cluster, jobs, TablePredictor(RUNTIMES), interference=pairs), r)
    return r


def test_with_co_location_a_whole_gpu_may_hold_two_jobs_a_slice_one():
    """At 0 job 0 (A) takes GPU 0 whole and job 2 (A) the 4g slice of GPU 1 (cut, ready at 10); B arrives at 10 and
    joins job 0 on GPU 0: B needs 50 x 1.5 = 75 s (ends at 85) while A does 75/200 = 0.375 of its work, then 52.5 s
    alone (ends at 137.5). The slice job runs at the 4g median throughout. A partner on a slice is refused, running
    or placed in the same plan."""
    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100x2"}, layouts={(0, 1): (("4g", 0), ("3g", 4))},
                        start=(Assignment(0, 0, 1), Assignment(2, 0, 1, slice=Slice(1, 0, "4g"))))
        return Plan(start=(Assignment(1, 0, 1, partner=0),)) if s.waiting else Plan()

    r = _shared(script, [job(0, A, 0.0), job(1, B, 10.0), job(2, A, 0.0)])
    j = r.jobs.set_index("job_id")
    assert (j.loc[1, "start_time"], j.loc[1, "end_time"]) == (10.0, 85.0)
    assert j.loc[0, "end_time"] == pytest.approx(137.5)
    assert j.loc[2, "end_time"] == pytest.approx(10 + 100 / MED["4g"])
    seg = r.segments
    assert set(seg[seg.partner.notna()].job_id) == {0, 1} and seg[seg.partner.notna()].slice.isna().all()
    assert list(seg[seg.slice.notna()].job_id) == [2] and seg[seg.job_id == 2].partner.isna().all()

    def on_a_running_slice(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100x2"}, layouts={(0, 1): (("4g", 0),)},
                        start=(Assignment(2, 0, 1, slice=Slice(1, 0, "4g")),))
        return Plan(start=(Assignment(1, 0, 1, partner=2),)) if s.waiting else Plan()

    with pytest.raises(CapsimError, match="runs on a MIG slice"):
        _shared(on_a_running_slice, [job(1, B, 10.0), job(2, A, 0.0)])
    with pytest.raises(CapsimError, match="is put on a MIG slice"):
        _shared(lambda s: Plan(vms={0: "a100x2"}, layouts={(0, 1): (("4g", 0),)},
                               start=(Assignment(2, 0, 1, slice=Slice(1, 0, "4g")), Assignment(1, 0, 1, partner=2)))
                if s.time == 0 else Plan(), [job(1, B, 0.0), job(2, A, 0.0)])
    with pytest.raises(CapsimError, match="exclude round mode"):
        ClusterRules(mig=True, round_length=360.0)


def test_the_placement_rule_gives_exactly_the_shipped_maximal_layouts():
    """Every layout the rule allows, by brute force over placements: the maximal ones are the 78 NVIDIA-derived ones
    shipped in ``sim/data/mig``."""
    slots = [(p, s) for p in PROFILES for s in PROFILES[p].starts]
    valid: list[tuple] = [()]
    frontier: list[tuple] = [()]
    while frontier:
        nxt = []
        for lay in frontier:
            for sl in slots:
                if not lay or sl > lay[-1]:
                    cand = (*lay, sl)
                    if layout_problem(cand) is None:
                        nxt.append(cand)
        valid += nxt
        frontier = nxt
    maximal = {tuple(sorted(lay, key=lambda s: s[1])) for lay in valid
               if lay and not any(layout_problem((*lay, sl)) is None for sl in slots)}
    assert len(valid) - 1 == 722
    assert maximal == set(maximal_layouts()) and len(maximal) == 78


def test_fractional_requests_map_to_the_smallest_slice_that_fits():
    assert [profile_for_share(x) for x in (0.1, 1 / 7, 0.2, 0.25, 0.5, 0.6, 0.9, 1.0)] == \
        ["1g", "1g", "2g", "2g", "4g", "7g", "7g", None]


def test_an_owned_a100_server_is_cut_like_a_rented_one():
    """A fixed A100 server (always on) is cut at 0 into 3g@0 + 3g@4: A and B run side by side from 10."""
    server = VMType("srv", gpu("A100-80GB"), 1, 0.0)
    table = TablePredictor({"A/srv/1": 100.0, "B/srv/1": 50.0})

    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(layouts={(0, 0): (("3g", 0), ("3g", 4))},
                        start=(Assignment(0, 0, 1, slice=Slice(0, 0, "3g")),
                               Assignment(1, 0, 1, slice=Slice(0, 4, "3g"))))
        return Plan()

    cluster = Cluster((server,), (NodeSlot(frozenset({"srv"}), fixed=True),),
                      rules=ClusterRules(mig=True, owned_price_per_hour={"srv": 3.6}))
    r = Simulation(cluster, [job(0, A, 0.0), job(1, B, 0.0)], Scripted(script, share=True), table).run()
    j = r.jobs.set_index("job_id")
    assert j.loc[0, "end_time"] == pytest.approx(10 + 100 / MED["3g"]) and j.loc[1, "start_time"] == 10.0
    assert set(r.segments.slice) == {"0/3g.40gb@0", "0/3g.40gb@4"}


def test_an_observed_slice_job_keeps_its_slice_and_is_seen_at_its_pace_alone():
    """The online estimator watches A on a 3g slice: it is shown A's seconds at the whole GPU's pace (the slice's
    slowdown divided out, as for a co-located job), and A's renewed view keeps its slice and pace."""
    from predictors.uncertainty.online import OnlinePredictor

    seen = []

    class Watching(OnlinePredictor):
        def refine(self, job, estimates, progress):
            seen.append(progress)
            return super().refine(job, estimates, progress)

    def script(s: Snapshot) -> Plan:
        if s.time == 0:
            return Plan(vms={0: "a100"}, layouts={(0, 0): (("3g", 0),)},
                        start=(Assignment(0, 0, 1, slice=Slice(0, 0, "3g")),))
        return Plan(keep_idle=frozenset({0}))

    policy = Scripted(script, share=True)
    cluster = Cluster((A100, K80), (NodeSlot(),), rules=ClusterRules(mig=True, mig_reconfigure_time=0.0,
                                                                       decision_interval=50.0))
    Simulation(cluster, [job(0, A, 0.0)], policy,
               Watching(TablePredictor(RUNTIMES), drift=0.0, iteration_cv=0.0), TablePredictor(RUNTIMES)).run()
    at50 = next(s for s in policy.seen if s.time == 50.0)
    (a,) = at50.running
    assert a.slice == Slice(0, 0, "3g") and a.pace == pytest.approx(1 / MED["3g"])
    p = seen[0]
    assert p.run_seconds == pytest.approx(p.run_iterations * 1.0)  # an iteration of A: 1 s on the whole GPU
