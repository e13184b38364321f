"""The MIG layer (``optim.mig``): MISO's layout choice by hand, slices taken only where they cost less than whole
GPUs, fractional requests on the smallest slice that fits, and the layer on random MIG clusters keeping every engine
invariant (``sim.testing.check_run``, which checks the slices against NVIDIA's layouts)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optim import build
from optim.mig import choose_layout
from predictors.interference.explicit import GivenPairs
from sim.catalogue import gpu
from sim.cluster import Cluster, NodeSlot
from sim.engine import Simulation
from sim.model import CapsimError, ClusterRules, Job, JobSpec, VMType
from sim.testing import RuntimeTable, World, check_run
from sim.vocabulary.mig import PROFILES, slice_speeds

MED = slice_speeds().medians
A100 = VMType("a100", gpu("A100-40GB"), 1, 3.6)  # $0.001/s
A100X4 = VMType("a100x4", gpu("A100-40GB"), 4, 14.4)
SPEC = JobSpec("alexnet", "pytorch", 100, 64, name="A")  # unmeasured: the per-profile medians


def test_miso_layout_choice_by_hand():
    """Summed median speeds (the 7g layout, a whole GPU, is left to the base policy): one job takes a 4g; two take
    4g + 3g (0.7453 + 0.6568, more than 3g + 3g or 4g + 2g); seven take seven 1-compute slices (7 x 0.3219 = 2.25,
    more than 3 x 2g + 1g = 1.74); four that fit no 1g slice take 2g + 2g + 3g (1.6, more than 3 x 2g = 1.5 or
    4g + 3g = 1.3)."""
    med = {p: MED[p] for p in PROFILES}
    assert [p for _, (p, _) in choose_layout([med])[1]] == ["4g"]
    two, matches = choose_layout([med, med])
    assert sorted(p for p, _ in two) == ["3g", "4g"] and sorted(p for _, (p, _) in matches) == ["3g", "4g"]
    seven, matches = choose_layout([med] * 7)
    assert [PROFILES[p].compute for p, _ in seven] == [1] * 7 and len(matches) == 7
    no_1g = {"1g": 0.0, "1g2m": 0.0, "2g": 0.5, "3g": 0.6, "4g": 0.7, "7g": 1.0}  # 2g + 2g + 3g = 1.6 is best
    _, matches = choose_layout([no_1g] * 4)
    assert sorted(p for _, (p, _) in matches) == ["2g", "2g", "3g"]


def _run(jobs, policy="mig", slots=1, **params):
    cluster = Cluster((A100, A100X4), tuple(NodeSlot() for _ in range(slots)),
                      rules=ClusterRules(mig=True, mig_reconfigure_time=10.0))
    table = {f"A/{v.name}/{g}": 1000.0 for v in (A100, A100X4) for g in range(1, v.gpus + 1)}
    r = Simulation(cluster, jobs, build(policy, **params), RuntimeTable(table)).run()
    check_run(World(cluster, jobs, RuntimeTable(table)), r)
    return r


def test_loose_deadlines_share_one_gpu_in_slices_tight_ones_take_whole_gpus():
    """Seven 1000-s jobs at 0. With a day's slack each, the layer rents one A100 ($0.001/s) and cuts it into seven
    1-compute slices: each runs 10 + 1000/0.3219 s, all seven for about 3,117 s of one VM, against greedy's seven
    GPU-runs of 1000 s. With deadlines at 1,100 s and $1/s late, a 1g slice (late by ~2,000 s) loses to a whole GPU:
    nothing is cut."""
    loose = [Job(i, SPEC, 0.0, 86_400.0, 0.001) for i in range(7)]
    r = _run(loose)
    assert r.segments.slice.notna().all() and r.segments.slice.str.contains("/1g.").all()
    assert r.jobs.end_time.max() == pytest.approx(10 + 1000 / MED["1g"])
    assert r.summary["vm_cost"] == pytest.approx(0.001 * (10 + 1000 / MED["1g"]), rel=1e-6)
    whole = _run(loose, "greedy")
    assert whole.summary["vm_cost"] > 2 * r.summary["vm_cost"]
    tight = [Job(i, SPEC, 0.0, 1100.0, 1.0) for i in range(7)]
    assert _run(tight).segments.slice.isna().all()


def test_fractional_requests_take_the_smallest_slice_that_fits():
    """Three jobs asking 0.25 of a GPU run at their own pace on a 2g slice (2/7 >= 0.25), not on a 1g."""
    share = dataclasses.replace(SPEC, gpu_share=0.25)
    assert slice_speeds().speed(share, A100.gpu, "2g") == 1.0 and slice_speeds().speed(share, A100.gpu, "1g") == 0.0
    r = _run([Job(i, share, 0.0, 86_400.0, 0.001) for i in range(3)])
    assert r.segments.slice.str.contains("2g.10gb").all()
    assert r.jobs.end_time.max() == pytest.approx(1010.0)


def test_without_mig_the_layer_is_its_base_policy_and_a_preempting_base_is_refused():
    cluster = Cluster((A100,), (NodeSlot(), NodeSlot()))
    jobs = [Job(i, SPEC, 10.0 * i, 5000.0, 0.01) for i in range(4)]
    table = RuntimeTable({"A/a100/1": 300.0})
    a = Simulation(cluster, jobs, build("mig", base="insertion"), table).run()
    b = Simulation(cluster, jobs, build("insertion"), table).run()
    assert a.jobs.drop(columns=[c for c in a.jobs.columns if "wall" in c]).equals(
        b.jobs.drop(columns=[c for c in b.jobs.columns if "wall" in c]))
    with pytest.raises(CapsimError, match="preempts"):
        build("mig", base="edf_preemptive") if "edf_preemptive" in __import__("optim").registry() else \
            build("mig", base=next(k for k, c in __import__("optim").registry().items() if c.may_preempt))


def test_the_milp_without_preemption_plans_whole_gpus_around_the_layers_slices():
    """Seven loose jobs and two with deadlines at 1,100 s and $1/s late, on three slots: the layer cuts slices for the
    loose ones only (a tight job is late on any slice); the MILP then puts the two tight jobs on whole GPUs, where
    they finish by 1,000 s plus the VM's boot. A MILP that may preempt is refused."""
    loose = [Job(i, SPEC, 0.0, 86_400.0, 0.001) for i in range(7)]
    tight = [Job(7 + i, SPEC, 0.0, 1100.0, 1.0) for i in range(2)]
    r = _run(loose + tight, slots=3, base="milp")
    on_slice = r.segments[r.segments.slice.notna()]
    assert sorted(on_slice.job_id) == list(range(7))
    whole = r.jobs[r.jobs.job_id >= 7]
    assert r.segments[r.segments.job_id >= 7].slice.isna().all()
    assert (whole.end_time <= 1100.0).all()
    with pytest.raises(CapsimError, match="preempts"):
        build("mig", base="milp", params={"preempt": True})


seen: set[str] = set()
"""What the random runs did (``test_the_random_mig_clusters_cut_gpus_and_pair_jobs``)."""


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_the_layer_keeps_every_invariant_on_random_mig_clusters(seed):
    rng = np.random.default_rng(seed)
    types = (A100, A100X4, VMType("h100", gpu("H100"), 1, 7.0), VMType("k80", gpu("K80"), 1, 0.9))
    specs = [JobSpec(a, "pytorch", 100, b, name=f"{a}{b}", gpus=g, gpu_share=sh)
             for a, b, g, sh in (("alexnet", 64, None, None), ("resnet50", 256, None, None), ("bert", 8, 1, None),
                                 ("vgg19", 32, 2, None), ("resnet50", 64, 1, 0.4))]
    table = {f"{s.name}/{v.name}/{g}": float(rng.integers(100, 2000)) / g ** 0.7 for s in specs for v in types
             for g in range(1, v.gpus + 1)}
    jobs = [Job(i, specs[int(rng.integers(len(specs)))], float(t), float(t + rng.integers(500, 20_000)),
                float(rng.choice([0.0001, 0.001, 0.01]))) for i, t in enumerate(sorted(rng.integers(0, 3000, 15)))]
    shared = bool(rng.integers(2))  # and two jobs may share a whole GPU, at random slowdowns of 1.05-2
    pairs = GivenPairs({f"{a.name}+{b.name}": [float(x) for x in rng.uniform(1.05, 2.0, 2)]
                        for i, a in enumerate(specs) for b in specs[i:]}) if shared else None
    cluster = Cluster(types, tuple(NodeSlot() for _ in range(3)),
                      rules=ClusterRules(mig=True, mig_reconfigure_time=float(rng.choice([0.0, 30.0])),
                                         jobs_per_gpu=2 if shared else 1))
    for base in ("greedy", "insertion"):
        r = Simulation(cluster, jobs, build("mig", base=base), RuntimeTable(table), interference=pairs).run()
        check_run(World(cluster, jobs, RuntimeTable(table), interference=pairs), r)
        seen.update({"slices"} if r.segments.slice.notna().any() else set())
        seen.update({"pairs"} if r.segments.partner.notna().any() else set())


def test_the_random_mig_clusters_cut_gpus_and_pair_jobs():
    """Not vacuous: over the property test's examples (seeds 0-9 here), the layer cuts slices and, with co-location,
    its base pairs jobs on whole GPUs."""
    seen.clear()
    for seed in range(10):
        test_the_layer_keeps_every_invariant_on_random_mig_clusters.hypothesis.inner_test(seed=seed)
    assert seen == {"slices", "pairs"}
