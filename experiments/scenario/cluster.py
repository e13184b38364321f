"""The cluster of a scenario: owned servers (``servers``, always there) and rented node slots (``nodes``) with the VM
types they may rent (``vm_types``, ``spot``); billing, rescheduling, rounds and checkpoint options; and the
simulator's ``Cluster`` built from them."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, field_validator, model_serializer

from experiments.scenario.fields import NonNeg, PositiveFloat, PositiveInt, StrictModel
from experiments.scenario.slots import SlotGroup, group_accepts, rentable_listed
from experiments.scenario.vms import SpotSpec, VMEntry, resolved_vm
from sim.model import MAX_BILLING_QUANTUM, CapsimError, VMType

__all__ = ["ClusterSpec", "SlotGroup", "RoundsSpec"]


def _nodes_tag(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return "<count>"
    if isinstance(v, list):
        return "<groups>"
    return None


class RoundsSpec(StrictModel):
    """Round-based scheduling (``sim.timing.rounds``): decisions only at boundaries ``length`` s apart (Gavel: 360 s).
    ``effects: false`` keeps a decision every ``length`` s but drops the round effects (admission at boundaries, no
    backfilling, whole iterations): the event-driven, work-conserving variant."""

    length: PositiveFloat = 360.0
    effects: bool = True


_FIXED_CLUSTER = ("servers", "gpus_per_server", "server_price", "gang", "rounds", "spot", "checkpoint_interval",
                  "max_gang_gpus", "gpu", "mig", "mig_reconfigure_time")
"""ClusterSpec fields left out of the scenario's data when unset, so that scenarios without them keep their run ids."""


def _no_sexagesimal(v: Any, numbers: bool) -> Any:
    """Reject a number where YAML turned an unquoted ``4:4:4`` into one (base 60), or any number if not ``numbers``."""
    if isinstance(v, int) and not isinstance(v, bool) and (v >= 3600 or not numbers):
        hint = " (YAML reads an unquoted 4:4:4 as a base-60 number): write it in quotes" if v >= 3600 else ""
        raise ValueError(f"expected a quoted text like '4:4:4' or a mapping {{V100: 4, ...}}, found the number "
                         f"{v}{hint}")
    return v


class ClusterSpec(StrictModel):
    """Owned servers (``servers``, see ``experiments.scenario.servers``: always there, never rented, billed at their
    amortised ``server_price``) and rented node slots (``nodes``: a number or slot groups; default 5 without servers,
    none with them) with the VM types they may rent (``vm_types``), billing and rescheduling options, optionally
    rounds. ``spot`` adds spot variants of the rented types (``SpotSpec``); ``checkpoint_interval`` (s of work; none:
    no checkpoints) bounds what a revoked job loses; ``max_gang_gpus`` caps the GPU count of a gang's configurations
    (``sim.cluster.Cluster``)."""

    nodes: Annotated[
        Annotated[PositiveInt, Tag("<count>")] | Annotated[list[SlotGroup], Field(min_length=1), Tag("<groups>")],
        Discriminator(
            _nodes_tag,
            custom_error_type="capsim_choice",
            custom_error_message="expected a number of nodes or a list of slot groups {count, vm_types}",
        ),
    ] | None = None
    vm_types: Annotated[list[VMEntry], Field(min_length=1)] | None = None
    billing_quantum: NonNeg = 0.0
    restart_overhead: NonNeg = 0.0
    decision_interval: PositiveFloat | None = None
    servers: str | dict[str, Annotated[int, Field(ge=0)]] | None = None
    gpus_per_server: PositiveInt | str | dict[str, PositiveInt] | None = None
    server_price: NonNeg | dict[str, NonNeg] | None = None
    gang: bool | None = None
    rounds: PositiveFloat | RoundsSpec | None = None
    spot: SpotSpec | None = None
    checkpoint_interval: PositiveFloat | None = None
    max_gang_gpus: PositiveInt | None = None
    gpu: str | None = None
    """The GPU model of a ``servers: "NxG"`` cluster (N servers of G GPUs of one model)."""
    mig: bool | None = None
    """A100 and H100 GPUs may be cut into MIG slices (``ClusterRules.mig``, docs/sharing.md)."""
    mig_reconfigure_time: NonNeg | None = None
    """Seconds a repartitioned GPU is unavailable (``ClusterRules.mig_reconfigure_time``; default 10)."""

    @field_validator("servers", mode="before")
    @classmethod
    def _quoted_servers(cls, v: Any) -> Any:
        return _no_sexagesimal(v, numbers=False)

    @field_validator("gpus_per_server", mode="before")
    @classmethod
    def _quoted_gpus(cls, v: Any) -> Any:
        return _no_sexagesimal(v, numbers=True)

    @field_validator("servers", "gpus_per_server")
    @classmethod
    def _colons(cls, v: Any, info: Any) -> Any:
        from experiments.scenario.servers import TRACE, parse_colons, parse_shape

        if isinstance(v, str) and not (info.field_name == "servers" and v == TRACE) and parse_shape(v) is None:
            parse_colons(v)
        return v

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: Any) -> Any:
        d = handler(self)
        if isinstance(d, dict):
            for k in _FIXED_CLUSTER:
                if d.get(k) is None:
                    d.pop(k, None)
            if d.get("nodes") is None and self.servers is None:
                d["nodes"] = self.rented_nodes  # the default written out, as it always was (it reads back the same)
        return d

    @property
    def round_spec(self) -> RoundsSpec | None:
        return RoundsSpec(length=self.rounds) if isinstance(self.rounds, (int, float)) else self.rounds

    @field_validator("vm_types", mode="before")
    @classmethod
    def _one_selection(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v  # `vm_types: {provider: aws}` is a list of one selection

    @field_validator("billing_quantum")
    @classmethod
    def _quantum(cls, v: float) -> float:
        if v > MAX_BILLING_QUANTUM:
            raise ValueError(f"expected a billing quantum of at most {MAX_BILLING_QUANTUM:g} s (a day: longer ones "
                             f"make every VM cost one quantum whatever it does, and huge ones bill nothing), found "
                             f"{v:g}")
        return v

    @property
    def rented_nodes(self) -> int | list[SlotGroup] | None:
        """The rented node slots: ``nodes``, else 5 on a cluster without owned servers (none with them)."""
        return self.nodes if self.nodes is not None else (5 if self.servers is None else None)

    @property
    def servers_only(self) -> bool:
        """A fixed cluster: owned servers and no rented slot (Gavel's clusters)."""
        return self.servers is not None and self.rented_nodes is None

    @property
    def node_count(self) -> int:
        """The node slots: owned servers, then rented slots (a trace's own hardware counts through ``Scenario``)."""
        owned = sum(n for _, n, _ in self.server_types(())) if self.servers is not None else 0
        nodes = self.rented_nodes
        return owned + (0 if nodes is None else nodes if isinstance(nodes, int) else sum(g.count for g in nodes))

    # ----- the simulator's objects --------------------------------------------------------------------------------
    # ``hardware`` is the trace's own servers (``sim.traces.Servers``), for ``servers: trace``.
    def listed_vm_types(self) -> tuple[VMType, ...]:
        """The rentable VM types before spot variants: those ``vm_types`` lists, else the slot groups' own when each
        names them, else the paper's catalogue (``experiments.scenario.slots``)."""
        return rentable_listed(self)

    def server_types(self, hardware: Any = None) -> list[tuple[VMType, int, float]]:
        """The owned servers' types (priced 0), each with its count and amortised $ per server-hour
        (``experiments.scenario.servers``)."""
        from experiments.scenario.servers import TRACE, server_types, trace_server_types

        if self.servers == TRACE:
            if hardware is None:
                raise CapsimError("cluster.servers: trace needs a workload trace whose format describes the hardware "
                                  "its jobs ran on")
            return trace_server_types(hardware, self.server_price)
        return server_types(self.servers, self.gpus_per_server, self.server_price, self.gpu)

    def owned_names(self, hardware: Any = None) -> list[str]:
        """The owned servers' VM type names (none without ``servers``)."""
        return [v.name for v, _, _ in self.server_types(hardware)] if self.servers is not None else []

    def rentable_vm_types(self, base_dir: Path | None = None) -> tuple[VMType, ...]:
        """The VM types rented slots may take: those listed plus their spot variants (with a replayed trace, at the
        revocation rate policies are told: given, or observed in the series); none without rented slots."""
        from sim import catalogue

        if self.rented_nodes is None:
            return ()
        types = self.listed_vm_types()
        if self.spot is None:
            return types
        rates = self.spot.revocation_rate
        if rates is None:
            markets = self.spot_markets(base_dir)
            assert markets is not None
            rates = {name.removesuffix(catalogue.SPOT_SUFFIX): markets.revocation_rate(name)
                     for name in markets.names()}
        return catalogue.with_spot(types, rates, self.spot.only)

    def all_vm_types(self, base_dir: Path | None = None, hardware: Any = None) -> tuple[VMType, ...]:
        """Every VM type of the cluster: the owned servers' types (``hardware``: the trace's own servers, for
        ``servers: trace``), then the rentable ones."""
        owned = tuple(v for v, _, _ in self.server_types(hardware)) if self.servers is not None else ()
        return owned + self.rentable_vm_types(base_dir)

    def resolved_vm_types(self, base_dir: Path | None = None, hardware: Any = None) -> list[dict[str, Any]]:
        """Every VM type as plain data behind run ids: an owned server's type priced at its amortised rate (the form
        fixed servers always had), the rentable ones as they are."""
        from dataclasses import replace

        owned = ([resolved_vm(replace(v, price_per_hour=rate)) for v, _, rate in self.server_types(hardware)]
                 if self.servers is not None else [])
        return owned + [resolved_vm(v) for v in self.rentable_vm_types(base_dir)]

    def spot_markets(self, base_dir: Path | None = None) -> Any:
        """The replayed spot markets (``sim.spot_market.RecordedMarkets``) of ``spot.trace`` (relative paths from
        ``base_dir``), or None for a Poisson market or no spot."""
        from experiments.scenario.files import availability
        from sim import catalogue
        from sim.spot_market import RecordedMarkets

        t = None if self.spot is None else self.spot.trace_spec()
        if self.spot is None or t is None:
            return None
        path = Path(t.path) if Path(t.path).is_absolute() or base_dir is None else base_dir / t.path
        series = availability(path, t.format, t.encoding, t.min_count)
        if t.market is not None:
            if t.market not in series:
                from experiments.scenario.loading import did_you_mean

                raise CapsimError(f"{path}: no market {t.market!r}{did_you_mean(t.market, series)} (markets: "
                                  f"{', '.join(series)})")
            series = {t.market: series[t.market]}
        spot = [v for v in catalogue.with_spot(self.listed_vm_types(), 0.0, self.spot.only) if v.spot]
        return RecordedMarkets.build(spot, series, self.spot.offset_hours * 3600)

    def slots(self, hardware: Any = None, base_dir: Path | None = None) -> list[Any]:
        """The node slots (``sim.engine.NodeSlot``): one fixed slot per owned server, then the rented ones as
        ``nodes`` says (on a cluster with owned servers, limited to the rentable types)."""
        from sim.engine import NodeSlot

        out: list[Any] = []
        owned: list[str] = []
        if self.servers is not None:
            for v, n, _ in self.server_types(hardware):
                owned.append(v.name)
                out.extend(NodeSlot(frozenset({v.name}), fixed=True) for _ in range(n))
        nodes = self.rented_nodes
        if nodes is None:
            return out
        rentable = self.rentable_vm_types(base_dir)
        if isinstance(nodes, int):
            allowed = frozenset(v.name for v in rentable) if owned else None
            return out + [NodeSlot(allowed) for _ in range(nodes)]
        for gi, g in enumerate(nodes):
            accepted, problems = group_accepts(self, gi, rentable, owned)
            if problems:
                raise CapsimError(f"cluster.nodes[{gi}]: {problems[0][1]}")
            out.extend(NodeSlot(accepted) for _ in range(g.count))
        return out

    def build(self, base_dir: Path | None = None, hardware: Any = None, largest_job: int | None = None) -> Any:
        """The simulator's ``sim.engine.Cluster``: its VM types, its slots and its rules. Every ``ClusterRules`` field
        this spec has under the same name passes as it is (None: the rule's default); rounds, gangs and the owned
        servers' rates are derived. On a trace's own ``hardware``, gangs reach ``largest_job`` GPUs (the trace's
        largest request) unless ``max_gang_gpus`` says otherwise."""
        from sim.engine import Cluster
        from sim.model import ClusterRules

        given = {f.name: getattr(self, f.name) for f in fields(ClusterRules) if getattr(self, f.name, None) is not None}
        rounds = self.round_spec
        if rounds is not None and not rounds.effects:
            given["decision_interval"] = rounds.length  # the event-driven variant: a decision every round length
        elif rounds is not None:
            given["round_length"] = rounds.length
        given["gang"] = self.gang if self.gang is not None else self.servers_only
        given["unplaceable_gangs"] = self.servers_only and rounds is not None  # Gavel's LPs price them
        if self.servers is not None:
            given["owned_price_per_hour"] = {v.name: rate for v, _, rate in self.server_types(hardware)}
        if self.max_gang_gpus is None and hardware is not None and largest_job is not None:
            given["max_gang_gpus"] = max(largest_job, max(h.gpus for h in hardware))
        return Cluster(self.all_vm_types(base_dir, hardware), tuple(self.slots(hardware, base_dir)),
                       rules=ClusterRules(**given), markets=self.spot_markets(base_dir))
