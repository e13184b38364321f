"""The policy contract (``sim.contracts.Policy``, re-exported here for policy authors) and the policy registry, with
the face every registry has (``sim.registry``). One registry holds every policy: those the engine's time models ask
and ElasticFlow's simulator's (``time_model = "elasticflow"``, ``optim.elasticflow``)."""

from __future__ import annotations

from sim.contracts import POLICIES, Policy

__all__ = ["Policy", "register", "alias", "registry", "build"]

register = POLICIES.register
"""Class decorator adding a policy to the registry under ``name`` (the YAML ``policies[].kind``)."""
alias = POLICIES.alias
"""``alias(name, target)``: another YAML name for a registered policy (e.g. ``ps`` for ``priority``)."""
registry = POLICIES.kinds
"""Every registered policy kind in registration order; ``aliases=False`` lists each policy once."""
build = POLICIES.build
"""Build the registered policy ``kind`` with ``params``; a clear error names the known kinds otherwise."""
