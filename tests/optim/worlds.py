"""Random small worlds for property tests, on top of ``sim.testing`` (its ``World``, ``recorded_run`` and the
engine's invariants ``check_run``, re-exported here as ``check``).

``worlds()`` draws a cluster, either rented (2–4 catalogue VM types, 1–4 slots, some restricted to one type,
optional boot time, billing quantum, restart overhead and periodic decisions; outside round mode sometimes spot
variants of its types, revoked at random or by a recorded market of two zones, with or without checkpoints;
sometimes 1–2 owned servers next to them) or fixed servers (1–3 VM types with 1–3 always-present servers each,
sometimes owned, gangs across servers allowed or not), each sometimes in round mode; 3–15 jobs of the
J1–J6 mix with tight or loose deadlines, on fixed servers some asking for a GPU count; an estimator table and,
sometimes, a truth that differs from it; sometimes GPUs that two jobs may share (co-location), with random pair
slowdowns and memory.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

from predictors.interference.explicit import GivenPairs
from predictors.table import TablePredictor
from sim.availability import AvailabilitySeries
from sim.catalogue import job_types, vm_types, with_spot
from sim.cluster import Cluster, NodeSlot
from sim.model import ClusterRules, Job
from sim.spot_market import RecordedMarkets
from sim.testing import World, check_plan_names, recorded_run, run
from sim.testing import check_run as check

__all__ = ["World", "worlds", "run", "recorded_run", "check", "check_plan_names", "AT_SCALE", "at_scale",
           "features"]

CATALOGUE = tuple(vm_types().values())
SPECS = tuple(job_types().values())


@st.composite
def worlds(draw, single_gpu: bool = False, spot: bool = True, colocation: bool | None = None) -> World:
    """A random small world; ``single_gpu``: every job that fixes its GPU count asks for one (for policies that
    schedule single-GPU jobs only, ``single_gpu_only``); ``spot``: rented clusters may rent spot VMs (not for
    policies that schedule the servers they are given, ``plans_capacity`` false); ``colocation``: GPUs two jobs may
    share always (True), never (False) or in a quarter of the worlds (None)."""
    fixed = draw(st.integers(0, 3)) == 0
    rounds = draw(st.sampled_from([math.inf, math.inf, 60.0]))
    owned: dict[str, float] = {}
    if fixed:
        k = draw(st.integers(1, 3))
        types = tuple(draw(st.lists(st.sampled_from(CATALOGUE), min_size=k, max_size=k, unique_by=lambda v: v.name)))
        if draw(st.booleans()):  # owned servers: priced 0 for the policy, billed their rate by the rules
            owned = {v.name: v.price_per_hour for v in types}
            types = tuple(dataclasses.replace(v, price_per_hour=0.0) for v in types)
        slots = tuple(NodeSlot(frozenset({v.name}), fixed=True) for v in types for _ in range(draw(st.integers(1, 3))))
        gang = draw(st.booleans())
    else:
        k = draw(st.integers(2, 4))
        picks = draw(st.lists(st.sampled_from(CATALOGUE), min_size=k, max_size=k, unique_by=lambda v: v.name))
        boot = draw(st.sampled_from([0.0, 0.0, 7.0]))
        types = tuple(dataclasses.replace(v, boot_time=boot) for v in picks)
        slots = tuple(
            NodeSlot(frozenset({draw(st.sampled_from(types)).name}) if draw(st.booleans()) else None)
            for _ in range(draw(st.integers(1, 4)))
        )
        gang = False
    market = "" if fixed or math.isfinite(rounds) or not spot else draw(st.sampled_from(["", "poisson", "replayed"]))
    markets = None
    if market:
        priced = tuple(dataclasses.replace(v, spot_price_per_hour=0.4 * v.price_per_hour) for v in types)
        types = with_spot(priced, 20.0)  # a mean life of 3 min, as long as these jobs
        if market == "replayed":
            markets = RecordedMarkets.build(types, {z: _zone(z, draw(st.integers(0, 2**31))) for z in ("a", "b")})
    if not fixed and draw(st.integers(0, 3)) == 0:  # owned servers next to rented slots, which take only rented types
        base = draw(st.sampled_from(CATALOGUE))
        server = dataclasses.replace(base, name="own-" + base.name, price_per_hour=0.0, boot_time=0.0)
        owned = {server.name: draw(st.sampled_from([0.0, base.price_per_hour]))}
        rented = frozenset(v.name for v in types)
        slots = (tuple(NodeSlot(frozenset({server.name}), fixed=True) for _ in range(draw(st.integers(1, 2))))
                 + tuple(NodeSlot(s.allowed or rented) for s in slots))
        types = (server,) + types
    cluster = Cluster(types, slots, rules=ClusterRules(billing_quantum=draw(st.sampled_from([0.0, 60.0])),
                      restart_overhead=draw(st.sampled_from([0.0, 5.0])),
                      decision_interval=math.inf if math.isfinite(rounds) else
                      draw(st.sampled_from([math.inf, math.inf, 45.0])),
                      checkpoint_interval=draw(st.sampled_from([math.inf, 30.0])) if market else math.inf,
                      gang=gang, round_length=rounds, owned_price_per_hour=owned,
                      jobs_per_gpu=2 if (draw(st.integers(0, 3)) == 0 if colocation is None else colocation) else 1),
                      markets=markets)
    table = {}
    for spec in SPECS:
        for c in cluster.configs:
            if c.gpus == 1 or draw(st.integers(0, 5)) > 0:
                table[f"{spec.name}/{c.vm.name}/{c.gpus}"] = float(draw(st.integers(5, 300)))
    n = draw(st.integers(3, 15))
    submit = sorted(draw(st.lists(st.integers(0, 400), min_size=n, max_size=n)))
    jobs = []
    for i, t in enumerate(submit):
        spec = draw(st.sampled_from(SPECS))
        # a GPU count some one-VM configuration of the cluster runs (so that every policy can place the job)
        counts = sorted({c.gpus for c in cluster.configs if c.gpus <= c.vm.gpus
                         and any(s.accepts(c.vm.name) for s in slots)
                         and f"{spec.name}/{c.vm.name}/{c.gpus}" in table})
        if fixed and draw(st.integers(0, 3)) == 0:  # rented clusters leave the count to the policy, as before
            spec = dataclasses.replace(spec, gpus=1 if single_gpu else draw(st.sampled_from(counts)))
        jobs.append(Job(i, spec, float(t), float(t + draw(st.integers(10, 600))),
                        draw(st.sampled_from([0.003, 0.01, 0.015]))))
    truth = None
    if draw(st.booleans()):
        truth = TablePredictor({k: v * draw(st.sampled_from([0.5, 0.9, 1.3, 2.0])) for k, v in table.items()})
    pairs = None
    if cluster.rules.colocation:
        names = [spec.name for spec in SPECS]
        pairs = GivenPairs({f"{a}+{b}": [draw(st.sampled_from([1.0, 1.3, 1.7, 2.5])) for _ in range(2)]
                            for i, a in enumerate(names) for b in names[i:] if draw(st.integers(0, 4)) > 0},
                           memory={n: float(draw(st.integers(1, 9))) for n in names})
    return World(cluster, jobs, TablePredictor(table), truth, draw(st.integers(0, 1000)), pairs)


def _zone(name: str, seed: int) -> AvailabilitySeries:
    """A recorded market for a random world: available runs of 5 min and outages of 1.5 min on average, in 10-s
    ticks, long enough for any run of these worlds."""
    rng = np.random.default_rng(seed)
    bits: list[bool] = []
    up = bool(rng.integers(2))
    while len(bits) < 40_000:
        bits.extend([up] * (1 + int(rng.exponential(30.0 if up else 9.0))))
        up = not up
    return AvailabilitySeries.ticks(name, bits, 10.0)


AT_SCALE = 1_000
"""Random worlds per policy in the slow profile (``pytest -m slow``; ``-rP`` shows the printed counts)."""


def features(world: World) -> set[str]:
    """What makes a world hard, for the coverage count of the slow profile."""
    c = world.cluster
    found = set()
    if any(v.boot_time > 0 for v in c.vm_types):
        found.add("boot time")
    if c.rules.billing_quantum > 0:
        found.add("billing quantum")
    if c.rules.restart_overhead > 0:
        found.add("restart overhead")
    if world.truth is not None:
        found.add("estimator != truth")
    if any(s.allowed is not None for s in c.slots):
        found.add("slot groups")
    if math.isfinite(c.rules.decision_interval):
        found.add("periodic decisions")
    if c.rules.owned_price_per_hour:
        found.add("owned servers")
    if any(v.spot for v in c.vm_types):
        found.add("spot, replayed market" if c.markets is not None else "spot, Poisson")
    if c.rules.colocation:
        found.add("co-location")
    return found


def at_scale(prop: Callable[[World], None], label: str, examples: int = AT_SCALE, single_gpu: bool = False,
             spot: bool = True) -> int:
    """Check ``prop`` on ``examples`` fresh random worlds (no example database, no replay); print and return how
    many ran and how often each feature of ``features`` appeared, and fail if one appeared in under 10 %."""
    from collections import Counter

    from hypothesis import HealthCheck, Phase, given, settings

    seen: Counter[str] = Counter()
    count = [0]

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(world=worlds(single_gpu=single_gpu, spot=spot))
    def check_one(world: World) -> None:
        count[0] += 1
        seen.update(features(world))
        prop(world)

    check_one()
    shares = ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
    print(f"{label}: {count[0]} random worlds checked ({shares})")
    assert count[0] >= examples, f"only {count[0]} worlds were drawn"
    wanted = ("boot time", "billing quantum", "restart overhead", "estimator != truth", "slot groups")
    rare = [k for k in wanted + (("spot, Poisson", "spot, replayed market") if spot else ())
            if seen[k] < examples // 10]
    assert not rare, f"too few worlds with {rare}: {dict(seen)}"
    return count[0]
