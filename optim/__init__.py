"""The deciders: policies that turn a Snapshot into a Plan. Importing this package registers the built-in policies."""

from optim.base import Policy, build, register, registry

__all__ = ["Policy", "build", "register", "registry"]
