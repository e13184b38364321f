"""The deciders: policies that turn a Snapshot into a Plan. Importing this package registers the built-in policies.

``optim.base`` holds the contract and the registry, ``optim.common`` the helpers every policy shares (configuration
arrays and index, D*, a job's standalone cost). Each policy is one module (or a package, like ``optim.milp``) that
registers itself with ``@register(name)``; a new one is that module plus its name in the import line below, and the
conformance suite (``tests/optim/test_conformance.py``) then checks it.
"""

from optim import (  # noqa: F401  (fifo, edf, priority, ps, greedy, milp, the heuristics, spot strategies)
    baselines,
    elasticflow,  # noqa: F401  (ElasticFlow's simulator's six deadline policies, on its time model)
    gavel,  # noqa: F401  (registers fifo_perf, max_min_fairness_perf, gavel_fifo)
    gpu_assignment,  # even, gpu_priority
    greedy,
    heuristics,
    mig,  # MIG slices before a base policy
    milp,
    spot,
)
from optim.base import Policy, build, register, registry

__all__ = ["Policy", "build", "register", "registry"]
