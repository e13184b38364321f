"""A brute-force reference for the MILP's cost model, written from the snapshot without the model's reductions."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np

from optim.milp import next_decision_delay, waiting_penalty
from sim.model import Snapshot


def best_by_enumeration(
    snapshot: Snapshot, preempt: bool = False, urgency: float = 0.0, wait_estimate: str = "mean"
) -> float:
    """The least cost over every assignment of each deciding job to (node, config) or to waiting.

    Running jobs count the time already run: their remaining work is taken as of the decision time.
    """
    now = snapshot.time
    snapshot = replace(snapshot, running=tuple(r.at(now) for r in snapshot.running))
    configs = snapshot.configs
    nodes = snapshot.nodes
    accepted = np.array([any(n.accepts(c.vm.name) for n in nodes) for c in configs])
    delta = next_decision_delay(snapshot, wait_estimate)
    deciding = list(snapshot.waiting) + (list(snapshot.running) if preempt else [])
    pinned = [] if preempt else list(snapshot.running)

    def wait(n: int, vm: str) -> float:
        nv = nodes[n]
        if nv.vm is not None and nv.vm.name == vm:
            return max(0.0, nv.ready_at - now)
        return snapshot.vm_type(vm).boot_time

    options = []
    for jv in deciding:
        opts = [None]
        for nv in nodes:
            for k, c in enumerate(configs):
                if math.isfinite(jv.estimates[k]) and nv.accepts(c.vm.name):
                    opts.append((nv.index, k))
        options.append(opts)

    best = math.inf
    for combo in itertools.product(*options):
        vm_on: dict[int, str] = {}
        gpus_on: dict[int, int] = {}
        end_on: dict[int, float] = {}
        cost = 0.0
        for r in pinned:
            vm_on[r.node] = nodes[r.node].vm.name
            gpus_on[r.node] = gpus_on.get(r.node, 0) + configs[r.config].gpus
            span = max(0.0, nodes[r.node].ready_at - now) + r.remaining(r.config)
            end_on[r.node] = max(end_on.get(r.node, 0.0), span)
            cost += r.job.weight * max(0.0, now + span - r.job.deadline)
        ok = True
        for jv, choice in zip(deciding, combo):
            overhead = snapshot.rules.restart_overhead if jv.running else 0.0
            if choice is None:
                cost += waiting_penalty(jv, snapshot, delta, accepted, overhead, urgency)
                continue
            n, k = choice
            vm = configs[k].vm.name
            if vm_on.setdefault(n, vm) != vm:
                ok = False
                break
            gpus_on[n] = gpus_on.get(n, 0) + configs[k].gpus
            t = jv.remaining(k) + (0.0 if (jv.node, jv.config) == (n, k) else overhead)
            span = wait(n, vm) + t
            end_on[n] = max(end_on.get(n, 0.0), span)
            cost += jv.job.weight * max(0.0, now + span - jv.job.deadline)
        if not ok or any(gpus_on[n] > snapshot.vm_type(vm).gpus for n, vm in vm_on.items()):
            continue
        cost += sum(snapshot.vm_type(vm).price_per_second * end_on[n] for n, vm in vm_on.items())
        best = min(best, cost)
    return best
