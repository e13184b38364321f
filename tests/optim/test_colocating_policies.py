"""Co-location in capacity planning (``optim.colocate``): greedy and insertion put a job on a running job's GPUs when
the pair's cost is below the job's cost alone, and not otherwise; hand-computed cases.

One slot, VM ``small`` (1 K80, $0.001/s). A (100 s alone) starts at 0; B (100 s alone) arrives at 10, when A has
R = 90 s left and the slot is full, so B alone would start when A ends, at 100, and cost $0.1 (no tardiness).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, note, settings

from optim import colocate
from optim.colocate import Host, HostIndex, hosts, pair_cost, pair_times, queue_behind
from optim.greedy import Greedy
from optim.heuristics.insertion import Insertion
from optim.milp import MILP
from predictors.interference.explicit import GivenPairs
from sim.engine import Simulation
from tests.optim.worlds import recorded_run, worlds
from tests.sim.helpers import SMALL, A, cluster, job, table

POLICIES = [Greedy, Insertion, MILP]


def _run(policy, slowdown: float, deadline: float = 1e9, runtime: float = 100.0):
    b = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="B")
    pairs = GivenPairs({"A+B": [slowdown, slowdown]})
    jobs = [job(0, A, 0.0), job(1, b, 10.0, deadline=deadline)]
    sim = Simulation(cluster(1, (SMALL,), jobs_per_gpu=2), jobs, policy(), table(B_small_1=runtime), interference=pairs)
    return sim.run().jobs.set_index("job_id")


def test_pair_times_by_hand() -> None:
    """s_a T = 120 > s_h R = 108: the host ends first, at 108, having left the new job 100 - 108/1.2 = 10 s."""
    assert pair_times(100.0, 90.0, 1.2, 1.2) == pytest.approx((118.0, 108.0))
    assert pair_times(50.0, 90.0, 1.2, 1.5) == pytest.approx((60.0, 60.0 + 90.0 - 60.0 / 1.5))


@pytest.mark.parametrize("policy", POLICIES)
def test_greedy_pairs_when_sharing_costs_less_than_waiting(policy) -> None:
    """Slowdowns 1.2: A ends at 10 + 108 = 118, B at 10 + 118 = 128; the VM is held 28 s longer than A alone needs
    ($0.028), below B's $0.1 alone."""
    j = _run(policy, 1.2)
    assert j.loc[1, "start_time"] == 10.0
    assert j.loc[0, "end_time"] == pytest.approx(118.0) and j.loc[1, "end_time"] == pytest.approx(128.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_greedy_does_not_pair_when_interference_costs_more(policy) -> None:
    """Slowdowns 2.5: A would end 225 s after 10, B 10 s later; the VM held 145 s longer ($0.145) is above $0.1, so B
    waits for A (ending at 100) and runs alone to 200."""
    j = _run(policy, 2.5)
    assert j.loc[0, "end_time"] == pytest.approx(100.0)
    assert j.loc[1, "start_time"] == pytest.approx(100.0) and j.loc[1, "end_time"] == pytest.approx(200.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_greedy_pairs_for_a_deadline_what_it_would_not_pair_for_money(policy) -> None:
    """B needs 20 s alone, slowdowns 2.2: shared, B ends 44 s after 10 and A 44 + 90 - 20 = 114 s after 10, the VM
    held 24 s longer ($0.024) against B's $0.02 alone: B waits (100 to 120). Due at 60 (weight $0.01/s), B alone is
    60 s late ($0.6 more) while shared it ends at 54, on time: it pairs, and A ends at 124."""
    j = _run(policy, 2.2, runtime=20.0)
    assert (j.loc[1, "start_time"], j.loc[1, "end_time"]) == pytest.approx((100.0, 120.0))
    j = _run(policy, 2.2, deadline=60.0, runtime=20.0)
    assert (j.loc[1, "start_time"], j.loc[1, "end_time"]) == pytest.approx((10.0, 54.0))
    assert j.loc[0, "end_time"] == pytest.approx(124.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_no_pair_when_the_slowed_host_makes_the_job_queued_behind_it_late(policy) -> None:
    """As in the first case (slowdowns 1.2: the pair holds the GPU 28 s longer, $0.028 against B's $0.1 alone), but
    C (50 s, shares with no one) also waits, due at 160 at $0.01/s: by deadline C is next on A's GPU, 100 to 150, on
    time. Paired, A's GPU frees at 128 and C ends at 178, 18 s late ($0.18): the pair costs $0.208 > $0.1, so B waits
    (which of B and C then runs first is each policy's own choice). With C's deadline far away the pair is as cheap as
    before and B joins A at 10."""
    b = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="B")
    c = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="C")
    pairs = GivenPairs({"A+B": [1.2, 1.2]})
    for c_due, pairs_b in ((160.0, False), (1e9, True)):
        jobs = [job(0, A, 0.0), job(1, b, 10.0), job(2, c, 10.0, deadline=c_due)]
        sim = Simulation(cluster(1, (SMALL,), jobs_per_gpu=2), jobs, policy(),
                         table(B_small_1=100.0, C_small_1=50.0), interference=pairs)
        j = sim.run().jobs.set_index("job_id")
        assert (j.loc[1, "start_time"] == 10.0) == pairs_b, f"C due at {c_due}"
        assert j.loc[0, "end_time"] == pytest.approx(118.0 if pairs_b else 100.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_no_pair_that_holds_the_gpu_longer_than_waiting_for_it(policy) -> None:
    """Two slots: A (100 s) and L (1000 s, shares with no one) run from 0; B (100 s, due 300) arrives at 10. At
    slowdowns 2.2 the pair does less than one GPU's work: A ends at 10 + 2.2 * 90 = 208, B 10 s after, the VM held
    118 s past A's end ($0.118), B on time. B waiting for A's GPU runs 100 to 200: $0.1, on time, so B must wait.
    The MILP's waiting penalty prices waiting from the mean running end, (90 + 990) / 2 = 540 s on: B would end at
    650, 350 s late ($3.6), which the pair beat; the pair now also has to beat running next on A's GPUs. At
    slowdowns 1.2 (A ends at 118, B at 128: $0.028) B still joins A at 10."""
    b = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="B")
    long = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="L")
    for slowdown, pairs_b in ((2.2, False), (1.2, True)):
        jobs = [job(0, A, 0.0), job(2, long, 0.0), job(1, b, 10.0, deadline=300.0)]
        sim = Simulation(cluster(2, (SMALL,), jobs_per_gpu=2), jobs, policy(),
                         table(B_small_1=100.0, L_small_1=1000.0), interference=GivenPairs({"A+B": [slowdown] * 2}))
        j = sim.run().jobs.set_index("job_id")
        assert j.loc[1, "start_time"] == (10.0 if pairs_b else 100.0), f"slowdown {slowdown}"
        assert j.loc[1, "end_time"] == pytest.approx(128.0 if pairs_b else 200.0)
        assert j.loc[0, "end_time"] == pytest.approx(118.0 if pairs_b else 100.0)


def test_the_queue_behind_a_host_is_a_list_schedule_by_deadline() -> None:
    """Two 1-GPU hosts ending at 30 and 50; waiting jobs due at 100, 200, 300 (40 s, 10 s, 20 s): the first takes the
    GPU freed at 30 (ends 70), the second the one freed at 50 (ends 60), the third the first to free again (at 60,
    ends 80)."""
    from tests.optim import helpers as h

    small = [c.vm.name for c in h.CONFIGS].index("small")

    def only_small(t: float) -> list[float]:
        return [t if k == small else math.inf for k in range(len(h.CONFIGS))]

    running = [h.job(i, only_small(t), node=i, config=small, since=0.0) for i, t in enumerate((30.0, 50.0))]
    waiting = [h.job(10 + i, only_small(t), deadline=d) for i, (d, t) in enumerate(((300.0, 20.0), (100.0, 40.0),
                                                                                      (200.0, 10.0)))]
    behind = queue_behind(h.snapshot(waiting, running), waiting)
    assert [(j, end) for j, _, _, end in behind[0]] == [(11, 70.0)]
    assert [(j, end) for j, _, _, end in behind[1]] == [(12, 60.0), (10, 80.0)]


def _every_host(snapshot) -> list[Host]:
    """Every running job alone on one node's GPUs, unfiltered: what the index must not lose a partner of."""
    out = []
    for jv in snapshot.running:
        if jv.partner is None and not jv.parts and jv.config is not None and jv.node is not None:
            c = snapshot.configs[jv.config]
            out.append(Host(jv, jv.node, jv.config, c.gpus, jv.remaining_at(snapshot.time), c.vm.price_per_second))
    return out


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(world=worlds(colocation=True))
def test_the_host_index_keeps_every_partner_a_pair_could_be_priced_with(world) -> None:
    """At every decision of random co-locating worlds, the hosts ``HostIndex`` offers a waiting job contain, in the
    order given, every host whose pair with it is priced finite; so best_host decides as it would over all of them."""
    _, seen = recorded_run(world, Greedy())
    offered = ruled_out = 0
    for snapshot, _ in seen:
        everyone = _every_host(snapshot)
        index = HostIndex(snapshot, hosts(snapshot))
        for jv in snapshot.waiting:
            got = [h.view.id for h in index.for_job(jv)]
            asked = jv.job.spec.gpus
            priced = [h.view.id for h in everyone
                      if (asked is None or h.gpus == asked) and math.isfinite(pair_cost(snapshot, jv, h))]
            assert [i for i in got if i in priced] == priced, f"job {jv.id} at {snapshot.time}: {got} lost {priced}"
            offered += len(got)
            ruled_out += len(everyone) - len(got)
    note(f"offered {offered}, ruled out {ruled_out}")


def test_a_job_no_one_can_share_with_is_not_priced(monkeypatch) -> None:
    """B has no pair in the model (``shares`` False): the index offers it no host and pair_cost is never asked."""
    b = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="B")
    asked: list[int] = []
    real = colocate.pair_cost

    def counting(snapshot, jv, host, behind=None):
        asked.append(jv.id)
        return real(snapshot, jv, host, behind)

    monkeypatch.setattr(colocate, "pair_cost", counting)
    jobs = [job(0, A, 0.0), job(1, b, 10.0)]
    pairs = GivenPairs({"A+C": [1.1, 1.1]})
    sim = Simulation(cluster(1, (SMALL,), jobs_per_gpu=2), jobs, Greedy(), table(B_small_1=100.0), interference=pairs)
    j = sim.run().jobs.set_index("job_id")
    assert j.loc[1, "start_time"] == pytest.approx(100.0)
    assert asked == []
    pairs = GivenPairs({"A+B": [2.5, 2.5]})
    Simulation(cluster(1, (SMALL,), jobs_per_gpu=2), jobs, Greedy(), table(B_small_1=100.0), interference=pairs).run()
    assert 1 in asked, "a job that may share is priced"


@pytest.mark.parametrize("kind", ["random_greedy", "local_search", "path_relinking"])
def test_heuristics_that_do_not_colocate_start_from_greedy_plans_without_pairs(kind) -> None:
    """Two slots; at t = 10 B and a second A arrive while A runs. The greedy pairs B with A (slowdowns 1.2) and opens
    the other slot for the second A. The search heuristics do not declare ``may_colocate``: their greedy starts have
    no pair, so one of the two waits for A's GPU (their runs once failed on the greedy's pair)."""
    import optim

    b = A.__class__(A.application, A.framework, A.iterations, A.batch_size, name="B")
    pairs = GivenPairs({"A+B": [1.2, 1.2]})
    jobs = [job(0, A, 0.0), job(1, b, 10.0), job(2, A, 10.0)]
    policy = optim.build(kind, seed=0)
    assert not policy.may_colocate
    sim = Simulation(cluster(2, (SMALL,), jobs_per_gpu=2), jobs, policy, table(B_small_1=100.0), interference=pairs)
    r = sim.run()
    j = r.jobs.set_index("job_id")
    assert j.loc[0, "end_time"] == pytest.approx(100.0)  # never slowed by a partner
    assert sorted(j.loc[[1, 2], "start_time"]) == pytest.approx([10.0, 100.0])
