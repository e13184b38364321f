"""The cluster's vocabulary: GPU models, VM types, how providers bill, and the rules of money and time a cluster plays
by; and ``CapsimError``. Part of the floor: it imports nothing of the project. ``sim.model`` re-exports every name, so
the rooms import them from there with the rest of the vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from functools import lru_cache
from numbers import Real

__all__ = ["CapsimError", "GPUModel", "Billing", "VMType", "ClusterRules", "MAX_BILLING_QUANTUM"]

class CapsimError(Exception):
    """An error the user can cause and fix: the message names the file or object, the field and the fix."""


@dataclass(frozen=True, slots=True)
class GPUModel:
    """One GPU model with its dense per-board specifications (docs/reference.md §6).

    ``measured_gflops`` is the ``GFlops(7)`` value that identifies this GPU in the shipped measurements, if any.
    """

    name: str
    _: KW_ONLY
    sms: int
    boost_mhz: float
    fp32_tflops: float
    memory_gb: float
    bandwidth_gbs: float
    fp16_tensor_tflops: float | None = None
    dies_per_board: int = 1
    measured_gflops: float | None = None

    def __hash__(self) -> int:
        return hash(self.name)


@dataclass(frozen=True, slots=True)
class Billing:
    """How a provider turns the seconds a VM was on into billed seconds: rounded up to whole ``increment`` seconds
    (0: billed exactly), and at least ``minimum`` seconds for every VM started. The default bills exactly."""

    increment: float = 0.0
    minimum: float = 0.0

    def __post_init__(self) -> None:
        for field_name in ("increment", "minimum"):
            v = getattr(self, field_name)
            if not (isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) and float(v) >= 0):
                raise CapsimError(f"billing: {field_name} must be a finite number of seconds >= 0, got {v!r}")
            object.__setattr__(self, field_name, float(v))

    def billed_seconds(self, on: float) -> float:
        """Seconds billed for a VM that was on for ``on`` seconds."""
        if on < 0:
            return 0.0
        q = self.increment
        billed = math.ceil(on / q - 1e-9) * q if q > 0 else on
        return max(billed, self.minimum)


_EXACT = Billing()


@dataclass(frozen=True, slots=True)
class VMType:
    """A rentable VM: ``gpus`` GPUs of one model for ``price_per_hour`` dollars, ready ``boot_time`` s after start.

    ``billing`` is its provider's rule (exact per-second by default); ``spot_price_per_hour`` the provider's spot
    list price, if it has one; ``region`` where the prices hold (empty for the paper's catalogue).

    ``spot`` marks a VM rented on the spot market (``sim.catalogue.spot_variant``: its ``price_per_hour`` is then the
    spot price): the provider revokes it at random, ``revocation_rate`` times per hour on average (a Poisson process
    from its start), and the jobs on it lose the work since their last checkpoint
    (``ClusterRules.checkpoint_interval``).
    """

    name: str
    gpu: GPUModel
    gpus: int
    price_per_hour: float
    _: KW_ONLY
    boot_time: float = 0.0
    provider: str = "cloud"
    billing: Billing = Billing()
    spot_price_per_hour: float | None = None
    region: str = ""
    spot: bool = False
    revocation_rate: float = 0.0

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def price_per_second(self) -> float:
        return self.price_per_hour / 3600.0


MAX_BILLING_QUANTUM = 86_400.0
"""The longest billing quantum (s): one day. Clouds bill per second, minute or hour; with a quantum longer than a run
every VM costs one quantum whatever it does, so VM cost no longer tells policies apart, and ``billed_seconds``
rounds ``on / q`` with a tolerance of 1e-9, so a quantum above 1e9 times a VM's time on bills it nothing at all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterRules:
    """The rules of money and time a cluster plays by, built once from the scenario and shown to every policy as
    ``Snapshot.rules``. A new cluster-wide knob is a field here, read by the engine and the policies that need it.

    - ``billing_quantum`` q: 0 bills each VM interval by its VM type's own rule (``VMType.billing``; the paper's
      catalogue bills exactly per second); q > 0 overrides every rule and bills ``ceil(on / q) * q`` seconds.
    - ``restart_overhead``: seconds a preempted, moved or revoked job pays when it runs again.
    - ``checkpoint_interval`` C: a running job writes a checkpoint after every C seconds of work of its run (inf:
      never); when its spot VM is revoked it keeps the work up to its last checkpoint. A spot market itself is a
      property of its VM type (``VMType.spot``, ``VMType.revocation_rate``).
    - ``decision_interval`` H: a periodic decision every H seconds (inf: only on arrivals, completions, boots).
    - ``round_length`` R (finite): round mode (``sim.timing.rounds``): decisions only at round boundaries, arrivals
      admitted at the first boundary at or after them, no backfilling inside a round; it excludes
      ``decision_interval``.
    - ``gang``: a job may run on several nodes of one VM type at once (for policies with ``may_gang``);
      ``max_gang_gpus`` caps the GPUs of a gang configuration (None: all the GPUs of the slots that accept its type).
      ``unplaceable_gangs`` also gives every VM type the gang configurations up to the largest any VM type can hold:
      they cannot be placed, and the engine shows their estimates only to policies that price them
      (those declaring ``prices_unplaceable = True``, as Gavel's mechanism does: its LPs price a gang on a type too
      small for it).
    - ``jobs_per_gpu``: how many jobs may share one GPU at once: 1 (the default: a GPU runs one job), or 2, co-location
      (``docs/sharing.md``): a policy with ``may_colocate`` may start a job on the GPUs of another
      (``Assignment.partner``); each then runs at its co-located speed (``Snapshot.colocation``).
    - ``mig``: the A100 and H100 GPUs may be cut into MIG slices (``docs/sharing.md``, "MIG slices"): a plan sets a
      GPU's layout (``Plan.layouts``) and starts a job on a slice (``Assignment.slice``), where it runs at the slice's
      measured speed (``Snapshot.mig``). ``mig_reconfigure_time``: seconds a repartitioned GPU is unavailable before
      its slices can run (an assumption: NVIDIA publishes no figure; the GPU's slices must be idle to repartition).
      With ``jobs_per_gpu`` 2 as well, two jobs may share a whole GPU, never a slice.
    - ``owned_price_per_hour``: owned servers' VM types with their amortised $/server-hour. Each is a fixed slot whose
      type is priced 0 for the policies (using it costs nothing more); ``bill`` bills its whole time on at this rate.
    """

    billing_quantum: float = 0.0
    restart_overhead: float = 0.0
    checkpoint_interval: float = math.inf
    decision_interval: float = math.inf
    round_length: float = math.inf
    gang: bool = False
    max_gang_gpus: int | None = None
    unplaceable_gangs: bool = False
    jobs_per_gpu: int = 1
    mig: bool = False
    mig_reconfigure_time: float = 10.0
    owned_price_per_hour: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for name, rate in self.owned_price_per_hour.items():
            if not (isinstance(rate, Real) and not isinstance(rate, bool) and math.isfinite(rate) and rate >= 0):
                raise CapsimError(f"cluster: owned_price_per_hour[{name!r}] must be finite $/h >= 0, got {rate!r}")
        object.__setattr__(self, "owned_price_per_hour", {k: float(v) for k, v in self.owned_price_per_hour.items()})
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
        if self.jobs_per_gpu not in (1, 2) or isinstance(self.jobs_per_gpu, bool):
            raise CapsimError(f"cluster: jobs_per_gpu must be 1 (no sharing) or 2 (co-location: the interference "
                              f"models describe pairs), got {self.jobs_per_gpu!r}")
        if not (self.mig_reconfigure_time >= 0 and math.isfinite(self.mig_reconfigure_time)):
            raise CapsimError(f"cluster: mig_reconfigure_time must be a finite number of seconds >= 0, got "
                              f"{self.mig_reconfigure_time!r}")
        if self.mig and self.rounds:
            raise CapsimError("cluster: MIG slices (mig) exclude round mode (round_length): give one of them")
        if self.max_gang_gpus is not None and not (isinstance(self.max_gang_gpus, int) and self.max_gang_gpus >= 1):
            raise CapsimError(f"cluster: max_gang_gpus must be a whole number >= 1 (or None), got "
                              f"{self.max_gang_gpus!r}")

    @property
    def rounds(self) -> bool:
        """Whether decisions happen in rounds (``round_length`` finite)."""
        return math.isfinite(self.round_length)

    @property
    def colocation(self) -> bool:
        """Whether two jobs may share a GPU (``jobs_per_gpu`` 2)."""
        return self.jobs_per_gpu > 1

    def billed_seconds(self, on: float, vm: VMType | None = None) -> float:
        """Seconds billed for a VM of type ``vm`` that was on for ``on`` seconds: by the quantum if one is set, else
        by the VM type's own rule (exactly, when no type is given)."""
        if self.billing_quantum > 0:
            return _quantum(self.billing_quantum).billed_seconds(on)
        return (vm.billing if vm is not None else _EXACT).billed_seconds(on)

    def bill(self, on: float, vm: VMType) -> tuple[float, float, float]:
        """(seconds billed, $/h, cost) of ``vm`` on ``on`` s: an owned server's time on at its rate, else as rented."""
        rate = self.owned_price_per_hour.get(vm.name)
        billed, rate = (on, rate) if rate is not None else (self.billed_seconds(on, vm), vm.price_per_hour)
        return billed, rate, billed * rate / 3600.0


@lru_cache(maxsize=8)
def _quantum(q: float) -> Billing:
    return Billing(increment=q)
