"""The greedy fill of a round in Gavel's mechanism, shared by the jobs-alone (``mechanism.TimeSliced._map``) and the
packing (``packed.Packed._map``) mappings: each server type in turn takes its ranked offers while GPUs are free."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

__all__ = ["fill"]

Offer = tuple[int, int, int, int]
"""An offer to a type: (key, job a, job b, the GPUs it takes there); a job alone is offered with b = a, a pair with
its two members."""


def fill(order: Sequence[int], left: np.ndarray, offers: Callable[[int], Iterable[Offer]],
         placed: set[int]) -> list[tuple[int, int]]:
    """``(key, type)`` of the offers taken, types visited in ``order``: a type with free GPUs (``left``) takes each of
    its offers in turn whose GPUs fit in what it has left and none of whose jobs is ``placed`` yet, until it is full.
    ``left`` and ``placed`` are updated; ``offers`` is asked only for types with free GPUs and read only while the
    type has room."""
    taken: list[tuple[int, int]] = []
    add, keep = placed.add, taken.append  # the hot loop's calls, looked up once
    for w in order:
        if left[w] <= 0:
            continue
        room = int(left[w])
        for key, a, b, need in offers(w):
            if need > room or a in placed or b in placed:
                continue
            room -= need
            add(a)
            add(b)
            keep((key, w))
            if room <= 0:
                break
        left[w] = room
    return taken
