"""The cluster a simulation runs on: node slots, the VM types they may host, billing and decision cadence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from sim.catalogue import configurations
from sim.model import Billing, CapsimError, Config, VMType

__all__ = ["NodeSlot", "Cluster", "MAX_BILLING_QUANTUM"]

MAX_BILLING_QUANTUM = 86_400.0
"""The longest billing quantum (s): one day. Clouds bill per second, minute or hour; with a quantum longer than a run
every VM costs one quantum whatever it does, so VM cost no longer tells policies apart, and ``billed_seconds``
rounds ``on / q`` with a tolerance of 1e-9, so a quantum above 1e9 times a VM's time on bills it nothing at all."""

_EXACT = Billing()


@dataclass(frozen=True)
class NodeSlot:
    """One node slot hosting at most one VM at a time.

    ``allowed=None`` takes any VM type of the cluster (a cloud quota slot); an in-house server is a slot limited to
    its own type, e.g. ``frozenset({"inhouse2"})``. A ``fixed`` slot is a server that is always present (as in Gavel's
    clusters): it allows exactly one VM type, which runs from the start of the run to its end, is never stopped when
    idle and cannot be stopped or changed by a plan; it bills like any VM (its price may be 0).
    """

    allowed: frozenset[str] | None = None
    fixed: bool = False

    def accepts(self, vm_name: str) -> bool:
        return self.allowed is None or vm_name in self.allowed


@dataclass(frozen=True)
class Cluster:
    """Node slots, the VM types they can host, and the rules of money and time.

    ``billing_quantum`` 0 bills each VM interval by its VM type's own rule (``VMType.billing``; the paper's catalogue
    bills exactly per second); q > 0 overrides every rule and bills ``ceil(on / q) * q`` seconds.
    ``restart_overhead`` seconds are added to a preempted or moved job when it restarts. ``decision_interval`` H
    adds a periodic decision every H seconds (inf: decide only on arrivals and completions).

    ``gang`` lets a job run on several nodes of one VM type at once (for policies with ``may_gang``): the
    configurations of a VM type then go up to all the GPUs of the slots that accept it, or to ``max_gang_gpus`` if
    that is smaller (a job of 64 GPUs on a cluster of 100 8-GPU nodes need not make 800 configurations per VM type).
    ``unplaceable_gangs`` (with ``gang``) gives every VM type configurations up to the largest count any VM type
    reaches, beyond what its own slots hold: those cannot be placed, and the engine shows their estimates only to
    policies that price them (``prices_unplaceable``), as Gavel's LPs price a gang on a type too small for it.
    ``checkpoint_interval`` C: a running job writes a checkpoint after every C seconds of work of its run (inf:
    never); when its spot VM (``VMType.spot``) is revoked it keeps the work up to its last checkpoint and returns to
    the queue. A job preempted or moved by a plan keeps all its work, as before. ``round_length`` R (finite)
    runs the round-based mode of ``sim.rounds``: decisions only at round boundaries, arrivals admitted at the first
    boundary at or after them, no backfilling inside a round (it excludes ``decision_interval``).
    """

    vm_types: tuple[VMType, ...]
    slots: tuple[NodeSlot, ...]
    billing_quantum: float = 0.0
    restart_overhead: float = 0.0
    decision_interval: float = math.inf
    gang: bool = False
    round_length: float = math.inf
    checkpoint_interval: float = math.inf
    max_gang_gpus: int | None = None
    unplaceable_gangs: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "vm_types", tuple(self.vm_types))
        object.__setattr__(self, "slots", tuple(self.slots))
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
        if not (0 <= self.billing_quantum <= MAX_BILLING_QUANTUM):
            raise CapsimError(f"cluster: billing_quantum must be a number of seconds in [0, {MAX_BILLING_QUANTUM:g}] "
                              f"(at most a day), got {self.billing_quantum}")
        if not (self.restart_overhead >= 0 and math.isfinite(self.restart_overhead)):
            raise CapsimError(f"cluster: restart_overhead must be a finite number >= 0, got {self.restart_overhead}")
        if not self.decision_interval > 0:
            raise CapsimError(f"cluster: decision_interval must be > 0 (inf for none), got {self.decision_interval}")
        if not self.round_length > 0:
            raise CapsimError(f"cluster: round_length must be > 0 (inf for no rounds), got {self.round_length}")
        if math.isfinite(self.round_length) and math.isfinite(self.decision_interval):
            raise CapsimError("cluster: round_length and decision_interval exclude each other: in round mode the "
                              "decisions are the round boundaries; give one of them")
        if not self.checkpoint_interval > 0:
            raise CapsimError(f"cluster: checkpoint_interval must be a number of seconds > 0 (inf for no "
                              f"checkpoints), got {self.checkpoint_interval}")
        if self.max_gang_gpus is not None and not (isinstance(self.max_gang_gpus, int) and self.max_gang_gpus >= 1):
            raise CapsimError(f"cluster: max_gang_gpus must be a whole number >= 1 (or None), got "
                              f"{self.max_gang_gpus!r}")
        self._check_spot()

    def _check_spot(self) -> None:
        spot = [v for v in self.vm_types if v.spot]
        for v in spot:
            if not (math.isfinite(v.revocation_rate) and v.revocation_rate >= 0):
                raise CapsimError(f"cluster: spot VM type {v.name!r} needs a revocation_rate >= 0 per hour, got "
                                  f"{v.revocation_rate!r}")
        if spot and self.rounds:
            raise CapsimError("cluster: spot VM types are not modelled in round mode; drop rounds or spot")
        fixed = sorted({n for s in self.slots if s.fixed for n in s.allowed or ()} & {v.name for v in spot})
        if fixed:
            raise CapsimError(f"cluster: fixed servers cannot be spot VMs ({fixed}); a fixed server is never revoked")

    @cached_property
    def configs(self) -> tuple[Config, ...]:
        """Every (VM type, GPU count) of the cluster, in the order ``Snapshot.configs`` and estimates use; with
        ``gang``, a VM type's counts go up to the GPUs of all the slots that accept it."""
        if not self.gang:
            return configurations(self.vm_types)
        caps = self.placeable_gpus
        if self.unplaceable_gangs and caps:
            top = max(caps.values())
            caps = {k: top for k in caps}
        return configurations(self.vm_types, caps)

    @cached_property
    def placeable_gpus(self) -> dict[str, int]:
        """With ``gang``, the largest GPU count a job can be placed on, per VM type (its slots' GPUs, at most
        ``max_gang_gpus``)."""
        caps = {v.name: v.gpus * sum(1 for s in self.slots if s.accepts(v.name)) for v in self.vm_types}
        if self.max_gang_gpus is not None:
            caps = {k: min(c, self.max_gang_gpus) for k, c in caps.items()}
        return caps

    @property
    def rounds(self) -> bool:
        """Whether the cluster runs in round mode (``round_length`` finite)."""
        return math.isfinite(self.round_length)

    @property
    def n_nodes(self) -> int:
        return len(self.slots)

    def billed_seconds(self, on: float, vm: VMType | None = None) -> float:
        """Seconds billed for a VM of type ``vm`` that was on for ``on`` seconds: by the cluster's quantum if one is
        set, else by the VM type's own rule (exactly, when no type is given)."""
        if self.billing_quantum > 0:
            return self._quantum.billed_seconds(on)
        return (vm.billing if vm is not None else _EXACT).billed_seconds(on)

    @cached_property
    def _quantum(self) -> Billing:
        return Billing(increment=self.billing_quantum)
