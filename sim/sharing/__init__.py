"""GPU sharing: two jobs co-located on the same GPUs (``ClusterRules.jobs_per_gpu``), each at its co-located speed.

``PairView`` is what a policy may know (the estimator's interference model, ``Snapshot.colocation``); ``TruePairs``
is what the engine runs jobs by (the truth's); ``SharedGPUs`` keeps which jobs hold which GPUs and who shares with
whom (``docs/sharing.md``).
"""

from sim.sharing.gpus import SharedGPUs
from sim.sharing.view import PairView, TruePairs

__all__ = ["PairView", "TruePairs", "SharedGPUs"]
