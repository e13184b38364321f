"""The deciders: policies that turn a Snapshot into a Plan. Importing this package registers the built-in policies.

``optim.base`` holds the contract and the registry, ``optim.common`` the helpers every policy shares (configuration
arrays and index, D*, a job's standalone cost); each policy is one module (or package, like ``optim.milp``) that
registers itself.
"""

from optim import baselines, greedy, milp  # noqa: F401  (registers fifo, edf, priority, ps, greedy, milp)
from optim.base import Policy, build, register, registry

__all__ = ["Policy", "build", "register", "registry"]
