"""Spot strategies for one job with a deadline (the single-job spot mode of ``sim.spot_ticks``).

Importing this package registers them in ``sim.spotjob.SPOT_STRATEGIES``: ``on_demand``, ``only_spot``,
``spot_greedy`` (the paper's greedy; ``variant: strawman`` is Can't Be Late's simulator's), ``uniform_progress``,
``time_sliced`` (the simulator's ``pair_amortize``) and ``omniscient`` (the optimum in hindsight: a reference that
sees the future, not a policy).
"""

from optim.spot import basic, omniscient, slack, time_sliced  # noqa: F401  (registers the strategies)
from optim.spot.base import build, register, registry

__all__ = ["build", "register", "registry"]
