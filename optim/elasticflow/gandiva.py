"""Gandiva (Xiao et al., OSDI'18) as ElasticFlow's simulator runs it (``gandiva``): rigid jobs packed into node sets
per job size, time-sliced when a size outgrows its servers, decisions at arrivals only.

Gandiva's scheduling is its packing and time slicing: both are part of how the cluster executes jobs, so they live
in the ``slices`` clock (``sim.elasticflow.slices``, which documents them); this policy selects that clock.
"""

from __future__ import annotations

from typing import ClassVar

from optim.base import register
from sim.elasticflow.vocabulary import ReplayPolicy

__all__ = ["ElasticGandiva"]


@register("elasticflow_gandiva")
class ElasticGandiva(ReplayPolicy):
    """Gandiva's node sets and time slicing (see the module docstring)."""

    clock: ClassVar[str] = "slices"
