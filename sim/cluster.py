"""The cluster a simulation runs on: node slots, the VM types they may host, and the rules of money and time."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from sim.catalogue import configurations
from sim.model import CapsimError, ClusterRules, Config, VMType
from sim.spot_market import RecordedMarkets

__all__ = ["NodeSlot", "Cluster"]


@dataclass(frozen=True)
class NodeSlot:
    """One node slot hosting at most one VM at a time.

    ``allowed=None`` takes any VM type of the cluster (a cloud quota slot); ``allowed`` limits a slot to some types.
    A ``fixed`` slot is a server that is always present (as in Gavel's clusters): it allows exactly one VM type, which
    runs from the first arrival to the last job's end, is never stopped when idle and cannot be stopped or changed by
    a plan. An owned (in-house) server is a fixed slot of a type listed in ``ClusterRules.owned_price_per_hour``,
    billed at that amortised rate; a fixed slot of another type bills like any VM (its price may be 0).
    """

    allowed: frozenset[str] | None = None
    fixed: bool = False

    def accepts(self, vm_name: str) -> bool:
        return self.allowed is None or vm_name in self.allowed


@dataclass(frozen=True)
class Cluster:
    """Node slots, the VM types they can host, and the cluster's ``rules`` of money and time (``ClusterRules``:
    billing quantum, restart overhead, checkpoints, decision cadence or rounds, gangs), which every policy sees as
    ``Snapshot.rules``. With ``rules.gang`` the configurations of a VM type go up to all the GPUs of the slots that
    accept it, or to ``rules.max_gang_gpus`` if that is smaller (a job of 64 GPUs on a cluster of 100 8-GPU nodes
    need not make 800 configurations per VM type).
    """

    vm_types: tuple[VMType, ...]
    slots: tuple[NodeSlot, ...]
    rules: ClusterRules = field(default_factory=ClusterRules, kw_only=True)
    markets: RecordedMarkets | None = field(default=None, kw_only=True)
    """Recorded spot markets (``sim.spot_market``): the spot types they name follow their availability series
    instead of Poisson revocations; others keep their ``revocation_rate``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "vm_types", tuple(self.vm_types))
        object.__setattr__(self, "slots", tuple(self.slots))
        if not isinstance(self.rules, ClusterRules):
            raise CapsimError(f"cluster: rules must be a sim.model.ClusterRules, got {type(self.rules).__name__}")
        names = [v.name for v in self.vm_types]
        if not names:
            raise CapsimError("cluster: vm_types is empty; give at least one VM type")
        if len(set(names)) != len(names):
            raise CapsimError(f"cluster: vm_types lists a VM type twice ({names}); list each once")
        if not self.slots:
            raise CapsimError("cluster: slots is empty; give at least one node slot")
        known = set(names)
        for i, s in enumerate(self.slots):
            if s.fixed and (s.allowed is None or len(s.allowed) != 1):
                raise CapsimError(f"cluster: slot {i} is a fixed server but allows {sorted(s.allowed or names)}; a "
                                  f"fixed server allows exactly one VM type")
            if s.allowed is not None:
                bad = sorted(set(s.allowed) - known)
                if bad or not s.allowed:
                    raise CapsimError(
                        f"cluster: slot {i} allows {sorted(s.allowed)}, but {bad or 'nothing'} is not among the "
                        f"cluster's VM types {names}; restrict slots to listed VM types"
                    )
        self._check_spot()
        self._check_owned()

    def _check_spot(self) -> None:
        spot = [v for v in self.vm_types if v.spot]
        for v in spot:
            if not (math.isfinite(v.revocation_rate) and v.revocation_rate >= 0):
                raise CapsimError(f"cluster: spot VM type {v.name!r} needs a revocation_rate >= 0 per hour, got "
                                  f"{v.revocation_rate!r}")
        if spot and self.rules.rounds:
            raise CapsimError("cluster: spot VM types are not modelled in round mode; drop rounds or spot")
        if self.markets is not None:
            unknown = sorted(set(self.markets.names()) - {v.name for v in spot})
            if unknown:
                raise CapsimError(f"cluster: spot markets name {unknown}, which are not spot VM types of the cluster")
        fixed = sorted({n for s in self.slots if s.fixed for n in s.allowed or ()} & {v.name for v in spot})
        if fixed:
            raise CapsimError(f"cluster: fixed servers cannot be spot VMs ({fixed}); a fixed server is never revoked")

    def _check_owned(self) -> None:
        """An owned server's type is hosted by fixed slots only (rented slots take only rentable types) and is priced
        0: its amortised cost is billed by the rules, and using it costs nothing more."""
        by_name = {v.name: v for v in self.vm_types}
        for name in self.rules.owned_price_per_hour:
            vm = by_name.get(name)
            if vm is None:
                raise CapsimError(f"cluster: owned_price_per_hour names {name!r}, which is not among the cluster's VM "
                                  f"types {list(by_name)}")
            if vm.price_per_hour != 0 or vm.spot:
                raise CapsimError(f"cluster: owned server type {name!r} must be an on-demand type priced 0 (using an "
                                  f"owned server costs nothing more; its amortised cost is owned_price_per_hour), got "
                                  f"price_per_hour {vm.price_per_hour}{' and spot' if vm.spot else ''}")
            rented = [i for i, s in enumerate(self.slots) if not s.fixed and s.accepts(name)]
            if rented:
                raise CapsimError(f"cluster: slots {rented} are rented slots that accept the owned server type "
                                  f"{name!r}; an owned server is a fixed slot, and rented slots take only rentable "
                                  f"types (give them an allowed set without it)")
            if not any(s.fixed and s.accepts(name) for s in self.slots):
                raise CapsimError(f"cluster: owned server type {name!r} has no fixed slot; give each owned server a "
                                  f"fixed slot of its type")

    @cached_property
    def configs(self) -> tuple[Config, ...]:
        """Every (VM type, GPU count) of the cluster, in the order ``Snapshot.configs`` and estimates use; with
        ``gang``, a VM type's counts go up to the GPUs of all the slots that accept it."""
        if not self.rules.gang:
            return configurations(self.vm_types)
        caps = self.placeable_gpus
        if self.rules.unplaceable_gangs and caps:
            top = max(caps.values())
            caps = {k: top for k in caps}
        return configurations(self.vm_types, caps)

    @cached_property
    def placeable_gpus(self) -> dict[str, int]:
        """With ``rules.gang``, the largest GPU count a job can be placed on, per VM type (its slots' GPUs, at most
        ``rules.max_gang_gpus``)."""
        caps = {v.name: v.gpus * sum(1 for s in self.slots if s.accepts(v.name)) for v in self.vm_types}
        cap = self.rules.max_gang_gpus
        if cap is not None:
            caps = {k: min(c, cap) for k, c in caps.items()}
        return caps

    @property
    def n_nodes(self) -> int:
        return len(self.slots)
