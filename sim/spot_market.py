"""Spot markets replayed from recorded availability series, for the cluster engine.

Each spot VM type is rented in one or more *zones*, each with its own availability series (``sim.availability``). A
spot VM can be started only while one of its zones is available; it goes to the first available zone in the order
the zones are listed (a launcher failing over from zone to zone) and is revoked when that zone's series turns
unavailable. Its type is available again as soon as any of its zones is.

Which series govern which type: a series named after a spot VM type (its own name or its on-demand name) or after
its GPU model governs that type alone (the type's name wins over the GPU's); every other series is a zone shared by
every spot type no series is named after (so a series named after a type or GPU the cluster does not rent spot is a
zone too). The series start with the run (its first arrival), ``offset`` seconds into them; times here are from the
run's start.

Engine side: only the engine reads the series (they are the future); a policy sees which spot types can be started
now and their revocation rates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sim.availability import AvailabilitySeries
from sim.catalogue import SPOT_SUFFIX
from sim.model import CapsimError, VMType

__all__ = ["RecordedMarkets"]


@dataclass(frozen=True, eq=False)
class RecordedMarkets:
    """The zones (availability series, in failover order) of each spot VM type, by type name."""

    zones: Mapping[str, tuple[AvailabilitySeries, ...]]
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.offset) and self.offset >= 0):
            raise CapsimError(f"spot markets: offset must be a time >= 0 s into the series, got {self.offset!r}")
        for name, zs in self.zones.items():
            if not zs:
                raise CapsimError(f"spot markets: VM type {name!r} has no zone")
            short = min(zs, key=lambda s: s.end)
            if self.offset >= short.end:
                raise CapsimError(f"spot markets: offset {self.offset / 86400:g} days is past the end of series "
                                  f"{short.name!r} ({short.end / 86400:g} days)")

    @classmethod
    def build(cls, vm_types: Iterable[VMType], series: Mapping[str, AvailabilitySeries],
              offset: float = 0.0) -> RecordedMarkets:
        """Assign ``series`` to the spot types among ``vm_types`` by name (see the module docstring); an error names a
        spot type left without a series, or series that govern nothing."""
        spot = [v for v in vm_types if v.spot]
        if not series:
            raise CapsimError("spot markets: no availability series given")
        own: dict[str, list[AvailabilitySeries]] = {}
        for v in spot:
            names = (v.name, v.name.removesuffix(SPOT_SUFFIX))
            by_type = [s for n, s in series.items() if n in names]
            by_gpu = [s for n, s in series.items() if n == v.gpu.name]
            if by_type or by_gpu:
                own[v.name] = by_type or by_gpu
        named = {n for v in spot for n in (v.name, v.name.removesuffix(SPOT_SUFFIX), v.gpu.name)}
        shared = tuple(s for n, s in series.items() if n not in named)
        zones: dict[str, tuple[AvailabilitySeries, ...]] = {}
        for v in spot:
            zs = tuple(own.get(v.name, ())) or shared
            if not zs:
                raise CapsimError(f"spot markets: spot VM type {v.name!r} has no availability series: name one after "
                                  f"it or its GPU ({v.gpu.name}), or give zone series (named after no type or GPU); "
                                  f"series given: {', '.join(series)}")
            zones[v.name] = zs
        return cls(zones, offset)

    def _zones(self, vm: str) -> tuple[AvailabilitySeries, ...]:
        try:
            return self.zones[vm]
        except KeyError:
            raise CapsimError(f"spot markets: VM type {vm!r} has no recorded market") from None

    def _at(self, s: AvailabilitySeries, t: float) -> bool:
        q = t + self.offset
        if q >= s.end:
            raise CapsimError(f"spot market series {s.name!r} ({s.source or 'no file'}) covers "
                              f"{(s.end - self.offset) / 86400:.4g} days from the run's start; the run reached day "
                              f"{t / 86400:.4g}: replay a longer series, start earlier in it (offset) or run less")
        return bool(s.available_at(q)[0])

    def zone_at(self, vm: str, t: float) -> int | None:
        """The zone a spot VM of type ``vm`` started at ``t`` goes to (the first available), or None if none is."""
        for i, s in enumerate(self._zones(vm)):
            if self._at(s, t):
                return i
        return None

    def available(self, vm: str, t: float) -> bool:
        """Whether a spot VM of type ``vm`` can be started at ``t``."""
        return self.zone_at(vm, t) is not None

    def revoked_at(self, vm: str, zone: int, t: float) -> float:
        """When a spot VM of type ``vm`` running in ``zone`` since ``t`` (available then) is revoked: the end of the
        zone's available run (``inf`` if it lasts to the series' end)."""
        s = self._zones(vm)[zone]
        return s.next_change(t + self.offset) - self.offset

    def next_available(self, vm: str, t: float) -> float:
        """The first time at or after ``t`` at which a spot VM of type ``vm`` can be started (``inf``: never within
        the series)."""
        best = math.inf
        for s in self._zones(vm):
            best = min(best, t if self._at(s, t) else s.next_change(t + self.offset) - self.offset)
        return best

    def revocation_rate(self, vm: str) -> float:
        """Revocations per hour of availability over the type's zones' whole series: what a policy is told of the
        market's risk (like a provider's published interruption frequency)."""
        stats = [s.stats() for s in self._zones(vm)]
        up = sum(st.available_share * s.end for st, s in zip(stats, self._zones(vm)))
        return sum(st.revocations for st in stats) / (up / 3600) if up > 0 else math.inf

    def names(self) -> Sequence[str]:
        """The spot VM types with a recorded market."""
        return tuple(self.zones)
