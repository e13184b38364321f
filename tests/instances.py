"""Synthetic decision snapshots in the published setting, for the MILP benchmark and stress tests (not the library).

An instance has S node slots (unrestricted, as in the default scenario) and J jobs in the system from the J1–J6 mix:
about 40% already run (pinned) on up to half of the slots, the rest wait. Runtimes come from the measured predictor
on the shipped runs; there is no stand-in table.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

import predictors
from sim.catalogue import configurations, job_types, vm_types
from sim.model import Config, Job, JobView, NodeView, Snapshot

__all__ = ["runtime_table", "instance", "revoked"]


def runtime_table(configs: tuple[Config, ...]) -> tuple[dict[str, np.ndarray], str]:
    """Estimated runtimes of J1–J6 on every config from the measured predictor, and where they come from."""
    specs = list(job_types().values())
    table = np.asarray(predictors.build("measured").runtimes(specs, configs), dtype=float)
    return {s.name: row for s, row in zip(specs, table)}, "measured predictor (shipped Politecnico di Milano runs)"


def instance(slots: int, jobs: int, seed: int, table: dict[str, np.ndarray]) -> Snapshot:
    """One decision snapshot: half of the slots busy with pinned running jobs, the remaining jobs waiting."""
    rng = np.random.default_rng(seed)
    vms = tuple(vm_types().values())
    configs = configurations(vms)
    names = sorted(table)
    now = 10_000.0
    nodes: list[NodeView] = []
    running: list[JobView] = []
    want_running = int(round(0.4 * jobs))
    jid = 0
    for n in range(slots):
        if n >= slots // 2 or len(running) >= want_running:
            nodes.append(NodeView(n))
            continue
        vm = vms[int(rng.integers(len(vms)))]
        used = 0
        while used < vm.gpus and len(running) < want_running:
            name = names[int(rng.integers(len(names)))]
            est = table[name]
            ok = [k for k, c in enumerate(configs) if c.vm.name == vm.name and c.gpus <= vm.gpus - used
                  and math.isfinite(est[k])]
            if not ok:
                break
            k = ok[int(rng.integers(len(ok)))]
            submit = now - float(rng.uniform(0, 3000))
            job = Job(jid, job_types()[name], submit, submit + float(rng.uniform(1, 3)) * float(np.min(est)),
                      float(rng.uniform(0.003, 0.015)))
            running.append(JobView(job, est, done=float(rng.uniform(0, 0.8)), node=n, config=k, since=submit))
            used += configs[k].gpus
            jid += 1
        nodes.append(NodeView(n, vm=vm, ready_at=0.0, used_gpus=used))
    waiting = []
    while len(running) + len(waiting) < jobs:
        name = names[int(rng.integers(len(names)))]
        est = table[name]
        submit = now - float(rng.uniform(0, 600))
        job = Job(jid, job_types()[name], submit, submit + float(rng.uniform(1, 3)) * float(np.min(est)),
                  float(rng.uniform(0.003, 0.015)))
        waiting.append(JobView(job, est))
        jid += 1
    return Snapshot(
        time=now, trigger="arrival", configs=configs, vm_types=vms, nodes=tuple(nodes), waiting=tuple(waiting),
        running=tuple(running), empty_nodes=tuple(nv.index for nv in nodes if nv.vm is None),
    )



def revoked(slots: int, jobs: int, seed: int, table: dict[str, np.ndarray]) -> Snapshot:
    """The decision after a recorded spot zone's end revoked every VM at once: ``instance``'s jobs all waiting again
    (the running ones with the work they had done), every slot empty."""
    snap = instance(slots, jobs, seed, table)
    waiting = tuple(replace(jv, node=None, config=None, since=None) for jv in snap.running + snap.waiting)
    return replace(snap, nodes=tuple(NodeView(n) for n in range(slots)), waiting=waiting, running=(),
                   empty_nodes=tuple(range(slots)))
