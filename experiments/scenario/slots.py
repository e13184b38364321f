"""Rented node slots of a scenario: the VM types they may rent, what each slot group accepts, and the mistakes in
them.

A group's ``vm_types`` are written as the top level's are (catalogue names, inline types, cloud selections). With
``cluster.vm_types`` given, a group picks among those types; without it, when every group names its types, the
groups' types are the cluster's (else the paper's catalogue). With ``cluster.spot`` a group naming a type also takes
its spot variant (with ``only``: the variant alone); a group none of whose types has a spot price is an error, never a
silent on-demand-only market. Owned servers (``cluster.servers``) are never rented: no rented slot accepts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Protocol

from pydantic import Field, field_validator

from experiments.scenario.fields import PositiveInt, StrictModel
from experiments.scenario.vms import CloudSelection, VMEntry, listed_vm_types
from sim.model import CapsimError, VMType
from sim.registry import did_you_mean

__all__ = ["SlotGroup", "groups_name_the_types", "rentable_listed", "group_accepts", "entry_problems",
           "slot_problems", "free_rented_note"]

Problems = list[tuple[tuple, str]]


class SlotGroup(StrictModel):
    """``count`` rented node slots that may host only the VM types ``vm_types`` gives, written as the top level's
    (names, inline types, cloud selections; with ``cluster.spot``, their spot variants too), or any rentable type of
    the cluster if omitted."""

    count: PositiveInt = 1
    vm_types: Annotated[list[VMEntry], Field(min_length=1)] | None = None

    @field_validator("vm_types", mode="before")
    @classmethod
    def _one_selection(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v  # `vm_types: {provider: aws}` is a list of one selection


class ClusterView(Protocol):
    """What these checks read of ``experiments.scenario.cluster.ClusterSpec``."""

    vm_types: Any
    spot: Any

    @property
    def rented_nodes(self) -> int | list[SlotGroup] | None: ...


def groups_name_the_types(cluster: ClusterView) -> bool:
    """Whether the groups' types are the cluster's: no ``cluster.vm_types`` and every slot group names its own."""
    nodes = cluster.rented_nodes
    return cluster.vm_types is None and isinstance(nodes, list) and all(g.vm_types is not None for g in nodes)


def _entry_types(entry: Any) -> tuple[VMType, ...]:
    """The VM types one ``vm_types`` entry stands for, from the catalogues (``X-spot`` stands for ``X``)."""
    from sim import catalogue

    if isinstance(entry, str) and entry.endswith(catalogue.SPOT_SUFFIX) and entry not in catalogue.vm_types():
        entry = entry[: -len(catalogue.SPOT_SUFFIX)]
    return listed_vm_types([entry])


def rentable_listed(cluster: ClusterView) -> tuple[VMType, ...]:
    """The rentable VM types before spot variants: ``cluster.vm_types``, else the groups' types in the order they
    name them when every group names its own, else the paper's catalogue."""
    if not groups_name_the_types(cluster):
        return listed_vm_types(cluster.vm_types)
    out: dict[str, VMType] = {}
    nodes = cluster.rented_nodes
    assert isinstance(nodes, list)
    for g in nodes:
        for entry in g.vm_types or ():
            for v in _entry_types(entry):
                out.setdefault(v.name, v)
    return tuple(out.values())


def group_accepts(cluster: ClusterView, gi: int, rentable: Sequence[VMType], owned: Sequence[str] = ()
                  ) -> tuple[frozenset[str] | None, Problems]:
    """The names of the VM types slot group ``gi`` accepts among ``rentable`` (spot variants included), or None for
    any of them, and the problems of its ``vm_types`` (paths under ``cluster``)."""
    from sim import catalogue

    g = _group(cluster, gi)
    if g.vm_types is None:
        return (frozenset(v.name for v in rentable) if owned else None), []
    by_name = {v.name: v for v in rentable}
    suffix = catalogue.SPOT_SUFFIX
    problems: Problems = []
    named: list[str] = []
    for i, entry in enumerate(g.vm_types):
        at = ("nodes", gi, "vm_types", i)
        if isinstance(entry, str):
            names = [entry]
        elif isinstance(entry, CloudSelection):
            try:
                names = [v.name for v in _entry_types(entry)]
            except CapsimError as e:
                problems.append((at, str(e)))
                continue
        else:
            names = [entry.name]
        for name in names:
            if name in owned:
                problems.append((at, f"expected a rentable VM type, found {name!r}, an owned server type "
                                     f"(cluster.servers): owned servers are always there and never rented, so no "
                                     f"rented slot takes them"))
            elif name not in by_name and name + suffix not in by_name:
                where = ("cluster.vm_types" if cluster.vm_types is not None else
                         "the paper's catalogue (cluster.vm_types is not given and a slot group takes any type)")
                problems.append((at, f"expected one of the cluster's VM types, those of {where}, found {name!r}"
                                     f"{did_you_mean(name, by_name)}; list it under cluster.vm_types"))
            else:
                named.append(name)
    accepted = frozenset(n for name in named for n in (name, name + suffix) if n in by_name)
    if not problems and cluster.spot is not None and not any(by_name[n].spot for n in accepted):
        problems.append((("nodes", gi, "vm_types"), f"cluster.spot is set, but none of this group's VM types has a "
                         f"spot price ({', '.join(sorted(accepted))}): its {g.count} slot(s) would rent on demand "
                         f"only; name types with a spot price (spot_price_per_hour), or their -spot variants"))
    return accepted, problems


def _group(cluster: ClusterView, gi: int) -> SlotGroup:
    nodes = cluster.rented_nodes
    assert isinstance(nodes, list)
    return nodes[gi]


def entry_problems(cluster: ClusterView) -> Problems:
    """When the groups' types are the cluster's (``groups_name_the_types``), an entry that stands for no VM type."""
    nodes = cluster.rented_nodes
    if not groups_name_the_types(cluster) or not isinstance(nodes, list):
        return []
    problems: Problems = []
    for gi, g in enumerate(nodes):
        for i, entry in enumerate(g.vm_types or ()):
            try:
                _entry_types(entry)
            except CapsimError as e:
                problems.append((("nodes", gi, "vm_types", i), str(e)))
    return problems


def slot_problems(cluster: ClusterView, owned: Sequence[str], rentable: Sequence[VMType]) -> Problems:
    """Every problem of the rented slot groups: a group of one type that another group (taking any type) also takes
    (the old way of writing in-house servers, which gave as many of them as there were slots), what each group
    names, and a group left on demand only under ``spot``. ``owned``: the owned servers' type names; ``rentable``:
    the cluster's rentable types, spot variants included (``ClusterSpec.rentable_vm_types``)."""
    nodes = cluster.rented_nodes
    if not isinstance(nodes, list):
        return []
    problems = _server_spellings(nodes, rentable)
    shown = {p[0][1] for p in problems}
    for gi in range(len(nodes)):
        if gi not in shown:
            problems += group_accepts(cluster, gi, rentable, owned)[1]
    return problems


def _server_spellings(nodes: list[SlotGroup], rentable: Sequence[VMType]) -> Problems:
    """A group naming one on-demand type that a group without ``vm_types`` also takes: a problem saying what it
    means (that type on every such slot) and how to write owned servers, or a rented type on a few slots."""
    free = [gi for gi, g in enumerate(nodes) if g.vm_types is None]
    by_name = {v.name: v for v in rentable}
    problems: Problems = []
    for gi, g in enumerate(nodes):
        if g.vm_types is None or len(g.vm_types) != 1 or isinstance(g.vm_types[0], CloudSelection) or not free:
            continue
        entry = g.vm_types[0]
        name = entry if isinstance(entry, str) else entry.name
        vm = by_name.get(name)
        if vm is None or vm.spot:  # unknown: named by group_accepts; a spot-only group is a market, never a server
            continue
        other, n = free[0], g.count
        total = n + sum(nodes[k].count for k in free)
        plural = "s" if n != 1 else ""
        problems.append((("nodes", gi, "vm_types"),
                         f"expected the VM types this group's {n} slot{plural} rent, found only {name!r}, which "
                         f"cluster.nodes[{other}] (taking every VM type) also takes: that means up to {total} "
                         f"{name!r} VMs, rented and stopped like any VM, not {n} server{plural} of your own. For "
                         f"owned servers, always on and never rented, write servers: {{{vm.gpu.name}: {n}}} with "
                         f"gpus_per_server: {vm.gpus} (and server_price: the amortised $ per server-hour, default 0) "
                         f"next to the rented nodes; for a rented type on at most {n} slot{plural}, give "
                         f"cluster.nodes[{other}] VM types of its own (e.g. a selection {{provider: aws}})"))
    return problems


def free_rented_note(cluster: ClusterView, rentable: Sequence[VMType], file: str) -> str | None:
    """A warning for rentable VM types priced 0, valid but rarely meant: rented slots may take as many of them as they
    have, started and stopped like any VM, which is how in-house servers were once written (and multiplied)."""
    free = [v.name for v in rentable if v.price_per_hour == 0 and not v.spot]
    nodes = cluster.rented_nodes
    if not free or nodes is None:
        return None
    n = nodes if isinstance(nodes, int) else sum(g.count for g in nodes)
    names = ", ".join(repr(name) for name in free)
    return (f"capsim: note: {file}: cluster.vm_types: {names} priced 0: up to {n} such VMs may be rented at a "
            f"time, free, and started and stopped like any rented VM. For servers of your own (always there, billed "
            f"an amortised $ per server-hour), write servers: {{<GPU model>: <count>}} with gpus_per_server and "
            f"server_price (docs/clouds.md, 'Owned servers and rented VMs')")
