"""The random streams of a run: one generator per random concern, all from the run's seed.

Every random concern draws from its own stream of one seed, so the same seed gives the same jobs to every policy and
changing one concern (say the mix) leaves the others (arrival times) untouched. The workload draws arrivals, mix,
deadlines, weights and noise (``sim.workload``); the engine draws spot VMs' lifetimes (``spot_streams``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["STREAMS", "streams", "spot_streams"]

STREAMS = ("arrivals", "mix", "deadlines", "weights", "noise", "spot")
"""The random concerns, each child ``i`` of ``SeedSequence(seed).spawn`` in this order. A child depends only on its
index (``spawn_key=(i,)``), never on how many are spawned, so a new concern is appended and the draws of the others
stay as they were; never insert one."""


def streams(seed: int) -> dict[str, np.random.Generator]:
    """Independent generators for each random concern, spawned from ``SeedSequence(seed)`` in a fixed order."""
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return {name: np.random.default_rng(child) for name, child in zip(STREAMS, children)}


def spot_streams(seed: int, nodes: int) -> list[np.random.Generator]:
    """One generator per node slot for the revocations of its spot VMs, spawned from the run's ``spot`` stream: a
    node's draws do not depend on what other nodes rent, so policies that rent the same VMs on a node meet the same
    revocations there."""
    child = np.random.SeedSequence(seed).spawn(len(STREAMS))[STREAMS.index("spot")]
    return [np.random.default_rng(c) for c in child.spawn(nodes)]
