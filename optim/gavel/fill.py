"""The greedy fill of a round in Gavel's mechanism, shared by the jobs-alone (``mechanism.TimeSliced._map``) and the
packing (``packed.Packed._map``) mappings: each server type in turn takes its ranked offers while GPUs are free."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

__all__ = ["fill"]

Offer = tuple[int, Sequence[int], int]
"""An offer to a type: (key, the job ids it runs, the GPUs it takes there)."""


def fill(order: Sequence[int], left: np.ndarray, offers: Callable[[int], Iterable[Offer]],
         placed: set[int]) -> list[tuple[int, int]]:
    """``(key, type)`` of the offers taken, types visited in ``order``: a type with free GPUs (``left``) takes each of
    its offers in turn whose GPUs fit in what it has left and none of whose jobs is ``placed`` yet, until it is full.
    ``left`` and ``placed`` are updated; ``offers`` is asked only for types with free GPUs and read only while the
    type has room."""
    taken: list[tuple[int, int]] = []
    for w in order:
        if left[w] <= 0:
            continue
        room = int(left[w])
        for key, members, need in offers(w):
            if need > room or not placed.isdisjoint(members):
                continue
            room -= need
            placed.update(members)
            taken.append((key, w))
            if room <= 0:
                break
        left[w] = room
    return taken
