"""ElasticFlow's simulator replayed: each policy against the simulator's own runs (per-job verdicts and completion
times, ``experiments/elasticflow/reference``), the time model's rules on hand-computed cases, and the invariants of
every replay (no GPU over-subscribed, every job done or rejected exactly once)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

import optim
from optim.elasticflow.chronus import pack
from optim.elasticflow.plan import plan
from optim.elasticflow.themis import fair_shares
from optim.elasticflow.timeline import PlanJob, elasticflow_cap, table_cap
from sim.elasticflow.events import Events
from sim.elasticflow.placement import Placement
from sim.elasticflow.replay import replay
from sim.elasticflow.state import Run, overhead
from sim.elasticflow.vocabulary import (
    LEVELS,
    ElasticView,
    JobStatus,
    ReplayCluster,
    ReplayJob,
    align,
)
from sim.model import CapsimError
from sim.testing.replay import replay_world, run_replay_world

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "experiments" / "elasticflow" / "reference"
DATA = ROOT / "sim" / "data" / "elasticflow"
TABLES = ROOT / "predictors" / "data" / "elasticflow"


def _tables(gpu: str) -> dict[tuple[str, int], tuple[float, ...]]:
    out = {}
    for f in TABLES.glob(f"{gpu}_*.csv"):
        model = f.stem[len(gpu) + 1:]
        for r in csv.DictReader(f.open()):
            out[(model, int(r["global_batch_size"]))] = tuple(
                float(r[str(g)]) if r.get(str(g)) not in (None, "", "nan") else 0.0 for g in LEVELS)
    return out


def trace_jobs(name: str, gpu: str) -> list[ReplayJob]:
    """The trace's jobs in ElasticFlow's order (submission time, then row), with the table's throughputs."""
    tables = _tables(gpu)
    rows = list(csv.DictReader((DATA / f"{name}.csv").open()))
    keyed = sorted(enumerate(rows), key=lambda ir: int(ir[1].get("submission_time") or ir[1]["submit_time"]))
    out = []
    for k, (_, r) in enumerate(keyed):
        sub = float(r.get("submission_time") or r["submit_time"])
        out.append(ReplayJob(k, r["job_id"], r["model_name"], int(r["batch_size"]), sub,
                             float(r.get("deadline") or r["ddl"]), int(r["num_gpu"]), float(r["duration"]),
                             float(r.get("num_iteration") or r["iteration"]),
                             tables[(r["model_name"], int(r["batch_size"]))]))
    return out


def reference(run: str) -> dict[str, dict[str, str]]:
    return {r["job_id"]: r for r in csv.DictReader((REF / f"{run}.csv").open())}


REPLAY_KINDS = sorted(k for k, c in optim.registry(aliases=False).items() if c.time_model == "elasticflow")
SETTINGS = {"cluster10": (ReplayCluster(32, 8, "A100-40GB"), "A100", "n32g8"),
            "elasticVpollux_e": (ReplayCluster(16, 4, "T4"), "T4", "n16g4")}
REF_NAMES = {"elasticflow_edf": "edf", "tiresias": "dlas-gpu", "elasticflow_gandiva": "gandiva", "themis": "themis",
             "elasticflow": "ef-accessctrl"}


def compare(trace: str, kind: str) -> tuple[float, float, float, int]:
    """(our ratio, reference ratio, share of jobs with the same verdict, jobs whose completion differs)."""
    cluster, gpu, shape = SETTINGS[trace]
    runs, _ = replay(trace_jobs(trace, gpu), cluster, optim.build(kind))
    ref = reference(f"{trace}__{shape}__{REF_NAMES[kind]}")
    agree = differ = 0
    for r in runs:
        mine = "rejected" if r.status == "rejected" else "on_time" if r.on_time else "late"
        theirs = ref[r.job.name]
        agree += mine == theirs["status"]
        if r.status == "done" and theirs["end_time"]:
            differ += abs(r.finish - float(theirs["end_time"])) > 1e-6
    ours = sum(r.status == "done" and r.on_time for r in runs) / len(runs)
    theirs_ratio = sum(v["status"] == "on_time" for v in ref.values()) / len(ref)
    return ours, theirs_ratio, agree / len(runs), differ


FAST = [("cluster10", "elasticflow_edf"), ("cluster10", "tiresias"), ("cluster10", "elasticflow_gandiva"),
        ("cluster10", "elasticflow"), ("elasticVpollux_e", "elasticflow_edf"), ("elasticVpollux_e", "tiresias"),
        ("elasticVpollux_e", "elasticflow")]
SLOW = [("cluster10", "themis"), ("elasticVpollux_e", "elasticflow_gandiva")]


@pytest.mark.parametrize("trace,kind", FAST)
def test_replay_agrees_with_elasticflows_own_run(trace, kind):
    ours, theirs, agree, _ = compare(trace, kind)
    assert abs(ours - theirs) <= 0.02 and agree >= 0.98, (ours, theirs, agree)


@pytest.mark.slow
@pytest.mark.parametrize("trace,kind", SLOW)
def test_replay_agrees_with_elasticflows_own_run_slow(trace, kind):
    ours, theirs, agree, _ = compare(trace, kind)
    assert abs(ours - theirs) <= 0.02 and agree >= 0.98, (ours, theirs, agree)


@pytest.mark.parametrize("kind", ["elasticflow_edf", "tiresias", "elasticflow_gandiva", "elasticflow"])
def test_every_completion_matches_to_the_second_on_cluster10(kind):
    assert compare("cluster10", kind)[3] == 0


def test_elasticflow_matches_every_completion_on_the_t4_testbed():
    assert compare("elasticVpollux_e", "elasticflow")[3] == 0


def test_a_job_grown_by_the_hand_out_takes_the_grown_plans_exact_end():
    # alone on 32 x 8 GPUs: its minimum satisfactory share is 2 GPUs, the spare ones take it to its cap of 64; its
    # exact end (the cap on its progress and its verdict) is the 64-GPU plan's, not the 2-GPU one's
    j = _job()
    ef = optim.build("elasticflow")
    ef.reset(ReplayCluster(32, 8, "A100-40GB"))
    status = JobStatus(j, j.iterations, 0.0, 0, False)
    answer = ef.decide(ElasticView(0.0, (status,), (), ReplayCluster(32, 8, "A100-40GB"), 0))
    assert answer.gpus == ((0, 64),)
    assert answer.real_ends[0] == math.ceil(j.iterations / j.rate(64)) < math.ceil(j.iterations / j.rate(2))
    assert answer.ends[0] == align(0.0, answer.real_ends[0])


def _small() -> list[ReplayJob]:
    return trace_jobs("elasticVpollux_e", "T4")[:20]


@pytest.mark.parametrize("kind", REPLAY_KINDS)
def test_invariants_every_job_once_and_no_gpu_oversubscribed(kind):
    cluster = ReplayCluster(4, 4, "T4")
    jobs = _small()
    runs, log = replay(jobs, cluster, optim.build(kind))
    assert len(runs) == len(jobs) and all(r.status in ("done", "rejected") for r in runs)
    assert kind == "elasticflow" or all(r.status == "done" for r in runs)
    edges = sorted({t for r in runs for _, _, a, b in r.segments for t in (a, b)})
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        used = sum(g for r in runs for _, g, s, e in r.segments if s <= mid < e)
        assert used <= cluster.gpus, (kind, mid, used)
    for r in runs:
        if r.status == "done":
            assert r.finish >= r.job.submit and r.start >= r.job.submit
    assert log.rows, "the policy was asked at least once"


@pytest.mark.parametrize("kind", REPLAY_KINDS)
def test_replays_are_deterministic_and_parameters_round_trip(kind):
    p = optim.build(kind)
    q = optim.build(kind, **p.get_params())
    assert type(q) is type(p) and q.get_params() == p.get_params() and q.describe() == p.describe()
    first, _ = replay(_small(), ReplayCluster(4, 4, "T4"), p)
    again, _ = replay(_small(), ReplayCluster(4, 4, "T4"), q)
    assert [(r.status, r.finish, r.on_time) for r in first] == [(r.status, r.finish, r.on_time) for r in again]


def test_events_within_a_slot_merge_into_one_at_plus_60_but_the_last_is_not_moved():
    ev = Events()
    for t in (110.0, 130.0, 300.0):
        ev.get(t).starts.append(t)
    assert ev.merge(100.0, 60) == 160.0
    assert ev.first().starts == [110.0, 130.0]
    one = Events()
    one.get(110.0).starts.append(1)
    assert one.merge(100.0, 60) == 110.0
    gap = Events()
    gap.get(160.5).starts.append(1)
    gap.get(400.0).starts.append(2)
    assert gap.merge(100.0, 60) == 160.0  # int(60.5) <= 60, as ElasticFlow compares


def test_overheads_and_the_slot_grid():
    assert overhead(8, 64) == 2 + 2 * (3 + 1)
    assert overhead(8, 64, cached=True) == 2
    assert overhead(64, 256, restart=True) == 7 + 47 + 14
    assert overhead(64, 256, restart=True, cached=True) == 7
    assert align(100.0, 161.0) == 220.0 and align(100.0, 160.0) == 160.0 and align(100.0, 70.0) == 100.0


def _job(model="resnet50", batch=128, iterations=2218.0, submit=0.0, deadline=377.0, gpus=1) -> ReplayJob:
    return ReplayJob(0, "j", model, batch, submit, deadline, gpus, 100.0, iterations, _tables("A100")[(model, batch)])


def test_minimum_satisfactory_share_on_an_empty_cluster():
    j = _job()  # 2,218 iterations of resnet50 at batch 128, 377 s to its deadline
    pj = PlanJob(JobStatus(j, j.iterations, 0.0, 0, False), elasticflow_cap(j, "A100-40GB"))
    met, timeline = plan(pj, 0.0, {0.0: 256}, 256)
    rate2 = j.rate(2)  # one GPU needs 607 s, two need 336 s: two is the fewest that meet the deadline
    assert met and pj.allocations == {0.0: 2}
    assert pj.real_end == math.ceil(j.iterations / rate2) and pj.end == align(0.0, pj.real_end)
    assert timeline == {0.0: 254, pj.end: 256}


def test_gpu_caps_follow_the_policy_and_the_gpu():
    assert elasticflow_cap(_job("bert", 64), "A100-40GB") == 8 and elasticflow_cap(_job("bert", 128), "A100") == 16
    assert elasticflow_cap(_job("deepspeech2", 32), "A100-40GB") == 32
    assert table_cap(_job("deepspeech2", 32)) == 32 and table_cap(_job("resnet50", 128)) == 64


def test_placement_remembers_gpu_sets_until_reset():
    place = Placement(4, 8)
    a = Run(_job(gpus=16))
    a.gpus = 16
    place.place(a)
    place.mark_cached()
    assert a.cached is False and place.first_node(a) == 0
    place.mark_cached()
    assert a.cached is True
    place.release(a)
    place.reset_cache()
    place.place(a)
    place.mark_cached()
    assert a.cached is False and place.free_nodes == [2, 3]


def test_themis_shares_bind_the_cluster_when_it_is_contended():
    # two jobs of 4 GPUs on 4 GPUs, equal in every way: half each, and the GPU constraint holds with equality
    x = fair_shares([0.0, 0.0], [100.0, 100.0], [50.0, 50.0], [4, 4], 4)
    assert x[0] == pytest.approx(0.5, rel=1e-6) and x[1] == pytest.approx(0.5, rel=1e-6)
    assert fair_shares([0.0], [10.0], [5.0], [2], 8) == [1.0]


def test_chronus_packs_before_deadlines_or_refuses():
    j = _job(gpus=4)
    ok = pack([JobStatus(j, 0.0, 0.0, 0, False)], 0.0, 240.0, 4)  # 100 s of service, 1 lease before 377 s
    assert ok == {0: [0]}
    late = ReplayJob(1, "k", "resnet50", 128, 0.0, 200.0, 4, 100.0, 10.0, j.rates)  # no whole lease before it
    assert pack([JobStatus(late, 0.0, 0.0, 0, False)], 0.0, 240.0, 4) is None


@pytest.mark.parametrize("allocations,end", [({0.0: 2, 120.0: 4, 300.0: 0}, 300.0), ({0.0: 8}, 240.0),
                                             ({0.0: 0, 60.0: 16}, 900.0), ({0.0: 4, 180.0: 2}, 200.0)])
def test_the_timeline_without_a_jobs_own_gpus_is_built_as_coded(allocations, end):
    # the one-pass timeline the hand-out plans a trial on equals the step-by-step one ElasticFlow's code builds
    from optim.elasticflow.elasticflow import _lay_literal, _own_free

    j = _job()
    pj = PlanJob(JobStatus(j, j.iterations, 0.0, 0, False), 64)
    pj.allocations, pj.end = dict(allocations), end
    for timeline in ({0.0: 10, 60.0: 30, 240.0: 56, 600.0: 64}, {0.0: 0, 300.0: 64}, {0.0: 48}):
        assert _own_free(pj, timeline) == _lay_literal(pj, timeline, 64)
        assert list(_own_free(pj, timeline)) == sorted(_own_free(pj, timeline))


@pytest.mark.parametrize("trace,gpu,servers,gpus", [("cluster10", "A100", 32, 8), ("elasticVpollux_e", "T4", 16, 4)])
def test_every_hand_out_trial_costs_what_plan_lays(monkeypatch, trace, gpu, servers, gpus):
    # the hand-out works a trial's marginal out on lists (optim.elasticflow.trial); at every trial of two whole runs
    # the literal plan on the same timeline gives the same value, to the last bit
    import optim.elasticflow.elasticflow as ef

    fast, laid = ef.marginal, []

    def checked(job, now, times, free, n, q, gs_now):
        value = fast(job, now, times, free, n, q, gs_now)
        plan(job, now, dict(zip(times, free)), n, assign=q, trial=True)
        laid.append(value is not None)
        assert value is None or value == job.marginal, (job.id, now, value, job.marginal)
        return value

    monkeypatch.setattr(ef, "marginal", checked)
    records, _ = replay(trace_jobs(trace, gpu), ReplayCluster(servers, gpus, "A100-40GB" if gpu == "A100" else "T4"),
                        optim.build("elasticflow"))
    assert len(laid) > 1000 and sum(laid) > 0.8 * len(laid)  # the lists' path is the usual one
    assert sum(r.status == "done" for r in records) > 0


def test_a_run_with_every_trial_laid_by_plan_decides_the_same(monkeypatch):
    # the whole run, not only each value: with every trial laid by plan on the whole own timeline (no lists, no
    # reuse of a trial that read the same), every job's GPUs, completion and verdict are the same
    import optim.elasticflow.elasticflow as ef

    jobs, cluster = trace_jobs("cluster10", "A100"), ReplayCluster(32, 8, "A100-40GB")
    fast, _ = replay(jobs, cluster, optim.build("elasticflow"))
    monkeypatch.setattr(ef, "marginal", lambda *a: None)
    laid, _ = replay(jobs, cluster, optim.build("elasticflow"))
    assert [(r.status, r.finish, r.on_time, r.segments) for r in fast] == \
        [(r.status, r.finish, r.on_time, r.segments) for r in laid]


@pytest.mark.parametrize("trace,gpu,servers,gpus", [("cluster10", "A100", 32, 8), ("elasticVpollux_e", "T4", 16, 4)])
def test_a_trial_that_reads_the_same_region_keeps_its_value(monkeypatch, trace, gpu, servers, gpus):
    # a trial whose own timeline up to its deadline is made of the same keys and values as its last one is not worked
    # out again; without that reuse (every region new) every trial's value and the whole run are the same
    import optim.elasticflow.elasticflow as ef

    jobs, cluster = trace_jobs(trace, gpu), ReplayCluster(servers, gpus, "A100-40GB" if gpu == "A100" else "T4")
    region, reused, values = ef._region, [], {}

    def counted(*a):
        out = region(*a)
        reused.append(out)
        return out

    fast_marginal = ef._marginal

    def kept(job, *a):
        fast_marginal(job, *a)
        values.setdefault("fast", []).append(job.marginal)

    monkeypatch.setattr(ef, "_region", counted)
    monkeypatch.setattr(ef, "_marginal", kept)
    fast, _ = replay(jobs, cluster, optim.build("elasticflow"))
    monkeypatch.setattr(ef, "_region", lambda *a: (object(),))

    def fresh(job, *a):
        fast_marginal(job, *a)
        values.setdefault("fresh", []).append(job.marginal)

    monkeypatch.setattr(ef, "_marginal", fresh)
    laid, _ = replay(jobs, cluster, optim.build("elasticflow"))
    assert values["fast"] == values["fresh"] and len(values["fast"]) > 1000
    assert [(r.status, r.finish, r.on_time, r.segments) for r in fast] == \
        [(r.status, r.finish, r.on_time, r.segments) for r in laid]


def test_the_own_timeline_up_to_a_time_is_the_whole_ones_beginning():
    # a trial reads its own free-GPU timeline up to its aligned deadline only: that part equals the whole timeline's
    from optim.elasticflow.trial import own_free

    rng = np.random.default_rng(0)
    for _ in range(2000):
        tk = sorted(float(t) for t in rng.choice(np.arange(0, 2000, 60), rng.integers(1, 12), replace=False))
        tv = [int(v) for v in rng.integers(-2, 17, len(tk))]
        at = sorted(float(t) for t in rng.choice(np.arange(0, 2000, 30), rng.integers(0, 5), replace=False))
        allocs = [(t, int(g)) for t, g in zip(at, rng.integers(0, 9, len(at)))]
        end, upto = float(rng.choice(np.arange(0, 2100, 30))), float(rng.choice(np.arange(0, 2100, 30)))
        times, free = own_free(allocs, end, tk, tv)
        part = own_free(allocs, end, tk, tv, upto)
        k = sum(t <= upto for t in times)
        assert part == (times[:k], free[:k]), (allocs, end, upto, tk, tv)


@pytest.mark.parametrize("kind", ["elasticflow_edf", "elasticflow"])
def test_an_elastic_planner_on_a_cluster_that_is_no_table_level_is_a_clear_refusal(kind: str) -> None:
    """3 servers of 4 GPUs: ElasticFlow's planners would start a job on min(cap, 12) = 12 GPUs, a count its tables
    do not have (its simulator fails with a KeyError): capsim says so, naming the policy, the job and the counts."""
    world = replay_world(5, servers=3)
    refusal = rf"{kind}: job \d+ may use up to \d+ GPUs and the cluster has 12.*power-of-two"
    with pytest.raises(CapsimError, match=refusal):
        run_replay_world(world, optim.build(kind))
    run_replay_world(replay_world(5, servers=4), optim.build(kind))  # 16 GPUs: a level, runs


def _rigid(k: int, submit: float, duration: float) -> ReplayJob:
    rates = _tables("A100")[("resnet50", 128)]
    return ReplayJob(k, f"j{k}", "resnet50", 128, submit, submit + 10 * duration, 1, duration, duration * rates[0],
                     rates)


@pytest.mark.parametrize("slot", [60, 240])
def test_the_slot_spaces_decisions_sets_themis_rounds_and_the_plan_grid(slot):
    # Tiresias: an arrival 100 s after a decision waits for it only when the slot is longer than 100 s
    jobs = [_rigid(0, 0.0, 500.0), _rigid(1, 100.0, 50.0), _rigid(2, 5000.0, 50.0)]
    runs, _ = replay(jobs, ReplayCluster(1, 8, "A100-40GB"), optim.build("tiresias", slot=slot))
    assert [r.start for r in runs] == [0.0, 100.0 if slot == 60 else 240.0, 5000.0]
    # Themis: a lone job of 100 s of work completes at the end of the round in which its iterations run out
    runs, _ = replay([_rigid(0, 0.0, 100.0)], ReplayCluster(1, 8, "A100-40GB"), optim.build("themis", slot=slot))
    assert runs[0].finish == (120.0 if slot == 60 else 240.0)
    # ElasticFlow's plan: its planned end on the slot's grid, the exact end unchanged
    j = _job()
    pj = PlanJob(JobStatus(j, j.iterations, 0.0, 0, False), elasticflow_cap(j, "A100-40GB"), slot)
    plan(pj, 0.0, {0.0: 256}, 256)
    assert pj.real_end == math.ceil(j.iterations / j.rate(2)) == 336
    assert pj.end == (360.0 if slot == 60 else 480.0)


@pytest.mark.parametrize("slot", [0, -60, 60.0, "60", True])
def test_a_slot_that_is_no_positive_whole_number_is_refused(slot):
    with pytest.raises(CapsimError, match="slot must be a whole number >= 1"):
        optim.build("elasticflow_edf", slot=slot)
