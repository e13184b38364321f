"""The deciders: policies that turn a Snapshot into a Plan. Importing this package registers the built-in policies."""

from optim.base import Policy, build, register, registry
from optim import baselines, greedy, milp  # noqa: F401  (registers fifo, edf, priority, ps, greedy, milp)

__all__ = ["Policy", "build", "register", "registry"]
