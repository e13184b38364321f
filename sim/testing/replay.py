"""What any run of a policy on ElasticFlow's time model must satisfy (``check_replay``), and small worlds for it
(``replay_world``): homogeneous clusters of fixed servers of one VM type, jobs that ask for a power-of-two GPU count
and record how long they ran in their trace, with runtimes on every level of ``sim.elasticflow.vocabulary.LEVELS``."""

from __future__ import annotations

import dataclasses

import numpy as np

from sim.catalogue import job_types, vm_types
from sim.cluster import Cluster, NodeSlot
from sim.contracts import Policy
from sim.elasticflow.vocabulary import LEVELS
from sim.engine import RunResult, Simulation
from sim.model import Job
from sim.testing.runs import RuntimeTable, World

__all__ = ["replay_world", "replay_worlds", "check_replay", "check_replay_policy"]

STATUSES = ("on_time", "late", "rejected")


def replay_world(k: int, servers: int = 4, vm: str = "NC24", n_jobs: int = 12, noisy_truth: bool = False) -> World:
    """World ``k`` drawn from its own generator: ``servers`` fixed servers of ``vm``; jobs over 3,000 s asking for 1
    to the servers' GPUs (powers of two), runtimes of 200–2,000 s on one GPU that scale sub-linearly with the level,
    trace durations 0.5–1.5 times the runtime on the GPUs asked for, deadlines 1–3 times it after submission;
    ``noisy_truth``: the jobs run 0.8–1.3 times as long as the policy is told."""
    rng = np.random.default_rng(k)
    server = vm_types()[vm]
    cluster = Cluster((server,), tuple(NodeSlot(frozenset({server.name}), fixed=True) for _ in range(servers)))
    specs = tuple(job_types().values())
    asks = [g for g in LEVELS if g <= server.gpus * servers]
    table, truth = {}, {}
    for s in specs:
        one = float(rng.integers(200, 2001))
        for g in LEVELS:
            table[f"{s.name}/{server.name}/{g}"] = one / g ** float(rng.uniform(0.6, 0.95))
            truth[f"{s.name}/{server.name}/{g}"] = table[f"{s.name}/{server.name}/{g}"] * float(rng.uniform(0.8, 1.3))
    jobs = []
    for i, t in enumerate(sorted(rng.integers(0, 3001, size=n_jobs))):
        g = int(asks[int(rng.integers(len(asks)))])
        spec = dataclasses.replace(specs[int(rng.integers(len(specs)))], gpus=g)
        runtime = table[f"{spec.name}/{server.name}/{g}"]
        jobs.append(Job(i, spec, float(t), float(t + runtime * rng.uniform(1.0, 3.0)), 0.0,
                        duration=float(round(runtime * rng.uniform(0.5, 1.5)))))
    return World(cluster, jobs, RuntimeTable(table), RuntimeTable(truth) if noisy_truth else None, seed=k)


def replay_worlds() -> list[World]:
    """Three small worlds every replay policy must run correctly: 4 servers of 4 GPUs; 2 of 4 with a truth unlike
    the estimate; 4 of 2 GPUs, crowded (ElasticFlow's policies assume a power-of-two GPU total, as its clusters
    have)."""
    return [replay_world(1), replay_world(2, servers=2, noisy_truth=True),
            replay_world(3, servers=4, vm="NC12", n_jobs=16)]


def run_replay_world(world: World, policy: Policy) -> RunResult:
    """``policy`` run through the engine (which puts it on ElasticFlow's time model) on ``world``."""
    return Simulation(world.cluster, world.jobs, policy, world.estimator, world.truth, seed=world.seed).run()


def check_replay(world: World, r: RunResult) -> None:
    """A replay's invariants: every job recorded exactly once with a status; a rejected one never ran, a finished one
    started and ended after it arrived; no GPU of the cluster over-subscribed at any instant."""
    jobs, seg = r.jobs, r.segments
    assert sorted(jobs["job_id"]) == [j.id for j in world.jobs], "every job recorded exactly once"
    assert set(jobs["status"]) <= set(STATUSES), f"statuses {sorted(set(jobs['status']))}"
    rejected = set(jobs.loc[jobs["status"] == "rejected", "job_id"])
    assert not rejected & set(seg["job_id"]), "a rejected job ran"
    done = jobs[jobs["status"] != "rejected"]
    assert (done["start_time"] >= done["submit_time"]).all() and (done["end_time"] >= done["start_time"]).all(), \
        "a job started before it arrived or ended before it started"
    assert (seg["end_time"] >= seg["start_time"]).all() and (seg["gpus"] >= 1).all(), "an empty or backward segment"
    gpus = len(world.cluster.slots) * world.cluster.vm_types[0].gpus
    edges = sorted(set(seg["start_time"]) | set(seg["end_time"]))
    starts, ends, used = seg["start_time"].to_numpy(), seg["end_time"].to_numpy(), seg["gpus"].to_numpy()
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        busy = int(used[(starts <= mid) & (mid < ends)].sum())
        assert busy <= gpus, f"{busy} GPUs in use at {mid:g} s on a cluster of {gpus}"


def check_replay_policy(policy: Policy) -> None:
    """On each of ``replay_worlds()``: a run through the engine that keeps a replay's invariants (``check_replay``)
    and asks the policy at least once, and a clone that gives the same records (decision wall times aside)."""
    label = policy.describe()
    for i, world in enumerate(replay_worlds()):
        result = run_replay_world(world, policy.clone())
        check_replay(world, result)
        assert len(result.decisions), f"{label}: the policy was never asked (world {i})"
        again = run_replay_world(world, policy.clone())
        assert result.jobs.equals(again.jobs) and result.segments.equals(again.segments), \
            f"{label}: a clone's run differs (world {i})"
        cols = [c for c in result.decisions.columns if "wall" not in c]
        assert result.decisions[cols].equals(again.decisions[cols]), f"{label}: a clone decides otherwise (world {i})"
