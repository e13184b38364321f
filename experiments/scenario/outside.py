"""Components from outside capsim: a scenario may name a policy ``kind: package.module:Class``, a ``Policy``
subclass in a module of the user's (installed, or its directory on ``PYTHONPATH``); README, "Extending capsim". The
module is imported by the name the scenario gives, the one import here by a computed name."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["policy_class"]


def policy_class(kind: str) -> Any:
    """The policy class ``kind`` names: a registered kind (None if there is none), or ``package.module:Class``, a
    ``sim.contracts.Policy`` subclass in an importable module (installed, or on ``PYTHONPATH``); a CapsimError says
    what is wrong with such a name."""
    import optim
    from experiments.scenario.loading import did_you_mean
    from sim.contracts import Policy
    from sim.model import CapsimError

    if ":" not in kind:
        return optim.registry().get(kind)
    module, _, name = kind.partition(":")
    try:
        found = importlib.import_module(module)
    except ImportError as e:
        raise CapsimError(f"policy {kind!r}: cannot import the module {module!r} ({e}); install it or put its "
                          f"directory on PYTHONPATH") from None
    cls = getattr(found, name, None)
    if cls is None:
        names = [n for n, v in vars(found).items() if isinstance(v, type) and issubclass(v, Policy)]
        raise CapsimError(f"policy {kind!r}: the module {module!r} has no {name!r}{did_you_mean(name, names)}")
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise CapsimError(f"policy {kind!r}: {name!r} is not a policy class (a subclass of sim.contracts.Policy, "
                          f"re-exported as optim.base.Policy)")
    return cls
