"""Property: whatever layouts and jobs a policy chooses, the MIG slices that run at any instant on one GPU form one of
NVIDIA's valid layouts (part of a shipped maximal layout), no slice holds two jobs, and every engine invariant holds
(``sim.testing.check_run``); and the plan rules accept a layout exactly when it is part of a shipped maximal one."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optim.base import Policy
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import Assignment, CapsimError, ClusterRules, Job, JobSpec, Plan, Slice, Snapshot, VMType
from sim.testing import RuntimeTable, World, check_run
from sim.vocabulary.mig import PROFILES, maximal_layouts
from tests.sim.helpers import Scripted

TYPES = (VMType("a1", gpu("A100-40GB"), 1, 3.7), VMType("a2", gpu("A100-80GB"), 2, 7.0),
         VMType("h1", gpu("H100"), 1, 6.9), VMType("k1", gpu("K80"), 1, 0.9))
SPECS = tuple(JobSpec(app, "pytorch", 100, batch, name=f"{app}{batch}")
              for app, batch in (("alexnet", 64), ("resnet50", 64), ("resnet50", 256), ("bert", 8),
                                 ("deepspeech", 16)))


class RandomSlicer(Policy):
    """Cuts idle GPUs into random valid layouts (parts of random maximal ones, or whole again) and puts waiting jobs
    on random free slices or whole GPUs; starts VMs of random types. With nothing running, it makes an idle GPU whole
    for a waiting job, so every job runs."""

    name = "random_slicer"
    may_share: ClassVar[bool] = True

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._calls = 0

    def decide(self, s: Snapshot) -> Plan:
        self._calls += 1
        rng = np.random.default_rng([self.seed, self._calls])
        maximal = maximal_layouts()
        vms: dict[int, str] = {}
        layouts: dict[tuple[int, int], tuple] = {}
        start: list[Assignment] = []
        held = {(jv.node, jv.slice) for jv in s.running if jv.slice is not None}
        waiting = list(s.waiting)
        rng.shuffle(waiting)  # type: ignore[arg-type]
        for n in s.empty_nodes:
            if waiting and rng.random() < 0.7:
                vms[n] = TYPES[int(rng.integers(len(TYPES)))].name
        after: dict[int, list] = {}
        free_whole: dict[int, list[int]] = {}
        for node in s.nodes:
            name = vms.get(node.index) or (node.vm.name if node.vm is not None else None)
            if name is None:
                continue
            vm = s.vm_type(name)
            cuts = list(node.layouts) if node.vm is not None else [()] * vm.gpus
            idle = list(node.idle_gpus) if node.vm is not None else list(range(vm.gpus))
            if vm.gpu.name.startswith(("A100", "H100")):
                for d in idle:
                    if rng.random() < 0.5:
                        full = maximal[int(rng.integers(len(maximal)))]
                        keep = tuple(x for x in full if rng.random() < 0.6)
                        layouts[(node.index, d)] = cuts[d] = keep
            after[node.index] = cuts
            free_whole[node.index] = [d for d in idle if not cuts[d]]
        for jv in waiting:
            options: list[Assignment] = []
            for n, cuts in after.items():
                vm = s.vm_type(vms.get(n) or s.nodes[n].vm.name)  # type: ignore[union-attr]
                k = s.configs.index(next(c for c in s.configs if c.vm.name == vm.name and c.gpus == 1))
                if not np.isfinite(jv.estimates[k]):
                    continue
                if free_whole[n]:
                    options.append(Assignment(jv.id, n, 1))
                for d, lay in enumerate(cuts):
                    for profile, begin in lay:
                        cut = Slice(d, begin, profile)
                        speed = s.mig.speed(jv.job.spec, vm.gpu, profile)
                        if (n, cut) not in held and speed > 0:
                            options.append(Assignment(jv.id, n, 1, slice=cut))
            if options and rng.random() < 0.8:
                a = options[int(rng.integers(len(options)))]
                if a.slice is None:
                    free_whole[a.node].pop(0)
                else:
                    held.add((a.node, a.slice))
                start.append(a)
        if not start and not s.running and s.waiting and after:  # liveness: a whole idle GPU for the first job
            n = min(after)
            d = (s.nodes[n].idle_gpus or (0,))[0] if s.nodes[n].vm is not None else 0
            if (n, d) in layouts or any(lay for lay in after[n]):
                layouts[(n, d)] = ()
            start = [Assignment(s.waiting[0].id, n, 1)]
        keep = frozenset(after) if s.waiting else frozenset()
        return Plan(vms=vms, layouts=layouts, start=tuple(start), keep_idle=keep)


def _world(seed: int, reconfigure: float) -> World:
    rng = np.random.default_rng(seed)
    cluster = Cluster(TYPES, tuple(NodeSlot() for _ in range(2)),
                      rules=ClusterRules(mig=True, mig_reconfigure_time=reconfigure))
    table = {f"{s.name}/{c.vm.name}/{c.gpus}": float(rng.integers(20, 300)) for s in SPECS for c in cluster.configs}
    jobs = []
    for i, t in enumerate(sorted(rng.integers(0, 300, size=12))):
        spec = SPECS[int(rng.integers(len(SPECS)))]
        jobs.append(Job(i, spec, float(t), float(t + 400), 0.01))
    return World(cluster, jobs, RuntimeTable(table), seed=seed)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), reconfigure=st.sampled_from([0.0, 7.5]))
def test_every_layout_that_runs_is_valid(seed: int, reconfigure: float) -> None:
    world = _world(seed, reconfigure)
    r = Simulation(world.cluster, world.jobs, RandomSlicer(seed), world.estimator, seed=seed).run()
    check_run(world, r)
    assert "slice" in r.segments.columns


def test_the_random_policy_does_run_jobs_on_slices():
    """The property above is not vacuous: over a few seeds, jobs do run on slices of several profiles."""
    cuts = set()
    for seed in range(4):
        world = _world(seed, 7.5)
        r = Simulation(world.cluster, world.jobs, RandomSlicer(seed), world.estimator, seed=seed).run()
        cuts |= {x.split("/")[1].split(".")[0] for x in r.segments.slice.dropna()}
    assert len(cuts) >= 3, cuts


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(PROFILES)), st.integers(0, 7)), max_size=5))
def test_the_rules_accept_a_layout_exactly_when_it_is_part_of_a_maximal_one(pairs) -> None:
    """A job that fits every slice (alexnet: the medians) is put on the first slice of a random layout: the run
    completes when the layout is part of a shipped maximal one, and is refused naming the layout otherwise."""
    layout = tuple(sorted(set(pairs), key=lambda x: x[1]))
    shipped = any(set(layout) <= set(m) for m in maximal_layouts())
    world = _world(1, 0.0)
    jobs = [Job(0, SPECS[0], 0.0, 1e9, 0.01)]
    first = Slice(0, layout[0][1], layout[0][0]) if layout else None
    policy = Scripted(lambda s: Plan(vms={0: "a1"}, layouts={(0, 0): layout},
                                     start=(Assignment(0, 0, 1, slice=first),)) if s.time == 0 else Plan(), share=True)
    if shipped:
        r = Simulation(world.cluster, jobs, policy, world.estimator).run()
        check_run(dataclasses.replace(world, jobs=jobs), r)
    else:
        with pytest.raises(CapsimError, match="invalid MIG layout"):
            Simulation(world.cluster, jobs, policy, world.estimator).run()
