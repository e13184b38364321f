"""The node index the list schedulers and greedy keep across decisions: after any sequence of snapshots it holds what
a from-scratch reading of the last one gives (free nodes per slot class, idle VMs per type, free GPUs of busy VMs),
and a decision's room hands out nodes and GPUs as a direct reading of the snapshot would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from optim.common import config_table
from optim.room import NodeIndex, Room
from sim.catalogue import configurations, gpu
from sim.model import NodeChanges, NodeView, VMType

TYPES = (VMType("a2", gpu("V100"), 2, 1.0), VMType("a8", gpu("V100"), 8, 3.0), VMType("b4", gpu("T4"), 4, 1.0))
CLASSES = (None, frozenset({"a2"}), frozenset({"a8"}), frozenset({"a2", "b4"}))
TABLE = config_table(configurations(TYPES, {"a8": 16}))


@st.composite
def cluster_history(draw):
    """Slot classes of a small cluster and a few successive states of its nodes: (VM type or None, GPUs in use)."""
    n = draw(st.integers(1, 12))
    classes = [draw(st.sampled_from(CLASSES)) for _ in range(n)]
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        state = []
        for cls in classes:
            allowed = [v for v in TYPES if cls is None or v.name in cls]
            vm = draw(st.one_of(st.none(), st.sampled_from(allowed)))
            state.append((vm, 0 if vm is None else draw(st.integers(0, vm.gpus))))
        steps.append(state)
    return classes, steps


def views(classes, state, old: tuple[NodeView, ...] = ()) -> tuple[NodeView, ...]:
    """Node views of ``state``, reusing an old view object where its node did not change (as the engine does)."""
    out = []
    for i, (cls, (vm, used)) in enumerate(zip(classes, state)):
        nv = NodeView(i, allowed=cls, vm=vm, used_gpus=used)
        out.append(old[i] if i < len(old) and old[i] == nv else nv)
    return tuple(out)


def scratch(nodes: tuple[NodeView, ...]) -> NodeIndex:
    index = NodeIndex(TABLE)
    index.follow(nodes)
    return index


def same(a: NodeIndex, b: NodeIndex) -> None:
    assert {k: v for k, v in a.free.items() if v} == {k: v for k, v in b.free.items() if v}
    assert {k: v for k, v in a.hosting.items() if v} == {k: v for k, v in b.hosting.items() if v}
    assert {k: v for k, v in a.spare.items() if v} == {k: v for k, v in b.spare.items() if v}
    for vm, nodes in b.spare.items():
        assert a.spare_total.get(vm, 0) == sum(nodes.values())
        assert sorted(n for bucket in a.buckets.get(vm, []) for n in bucket) == sorted(nodes)


@settings(max_examples=150, deadline=None)
@given(cluster_history())
def test_the_index_follows_any_sequence_of_snapshots(history) -> None:
    classes, steps = history
    index = NodeIndex(TABLE)
    lean = NodeIndex(TABLE, spare=False)  # a list scheduler that does not pack keeps no spare GPUs
    nodes: tuple[NodeView, ...] = ()
    for state in steps:
        nodes = views(classes, state, nodes)
        index.follow(nodes)
        lean.follow(nodes)
        same(index, scratch(nodes))
        assert lean.free == index.free and lean.hosting == index.hosting and not lean.spare and not lean.spare_total
        direct_free = [nv.index for nv in nodes if nv.vm is None or nv.used_gpus == 0]
        assert sorted(n for v in index.free.values() for n in v) == direct_free


@settings(max_examples=150, deadline=None)
@given(cluster_history(), st.lists(st.booleans(), min_size=6, max_size=6))
def test_the_index_follows_the_node_changes_it_is_told_even_when_it_skips_snapshots(history, skips) -> None:
    classes, steps = history
    index = NodeIndex(TABLE)
    nodes = views(classes, steps[0])
    changes = NodeChanges((), nodes, ())
    index.follow(nodes, changes)
    for state, skip in zip(steps[1:], skips):
        new = views(classes, state, nodes)
        changes = changes.then(new, tuple(i for i, (a, b) in enumerate(zip(nodes, new)) if a is not b))
        nodes = new
        if not skip:  # a policy that returns early follows no snapshot
            index.follow(nodes, changes)
            same(index, scratch(nodes))
    index.follow(nodes, changes)
    same(index, scratch(nodes))


def test_node_changes_name_the_views_that_are_new_since_a_tuple_they_know() -> None:
    a = tuple(NodeView(i) for i in range(4))
    b = (a[0], NodeView(1, used_gpus=1), a[2], a[3])
    c = (b[0], b[1], b[2], NodeView(3, used_gpus=2))
    changes = NodeChanges((), a, ()).then(b, (1,)).then(c, (3,))
    assert changes.since(c) == set() and changes.since(b) == {3} and changes.since(a) == {1, 3}
    assert changes.since(tuple(a)) is not None  # the same tuple object (tuple() of a tuple is that tuple)
    assert changes.since(tuple(list(a))) is None  # an equal tuple it never issued: unknown
    far = changes
    for _ in range(NodeChanges.KEEP):
        far = far.then(c, ())
    assert far.since(a) is None and far.since(c) == set()


@settings(max_examples=150, deadline=None)
@given(cluster_history(), st.sampled_from([v.name for v in TYPES]), st.integers(1, 8))
def test_a_room_hands_out_nodes_and_gpus_as_the_snapshot_reads(history, vm, g) -> None:
    classes, steps = history
    nodes = views(classes, steps[-1])
    room = Room(scratch(nodes), pack=True)
    accepts = [nv for nv in nodes if nv.allowed is None or vm in nv.allowed]
    free = [nv.index for nv in accepts if nv.vm is None or nv.used_gpus == 0]
    idle = [n for n in free if nodes[n].vm is not None and nodes[n].vm.name == vm]
    assert room.free_count(vm) == len(free) and list(room.free_in_order(vm)) == free
    assert room._free_nodes(vm, len(free)) == idle + [n for n in free if n not in idle]
    busy = sorted((nv.free_gpus, nv.index) for nv in nodes
                  if nv.vm is not None and nv.vm.name == vm and nv.used_gpus and nv.free_gpus >= g)
    per = next(v.gpus for v in TYPES if v.name == vm)
    assert room.spare_nodes(vm, g) == busy
    assert room.best_fit(vm, g, per) == (busy[0][1] if busy else None)
    if busy:  # a decision's own placements count, the index stays as it was
        f, n = busy[0]
        room.set_spare(vm, n, f - g, per)
        assert room.spare_of(vm, n) == f - g and room.index.spare[vm][n] == f
        assert room.spare_total(vm) == sum(x for x, _ in busy) - g + sum(
            nv.free_gpus for nv in nodes if nv.vm is not None and nv.vm.name == vm and nv.used_gpus
            and 0 < nv.free_gpus < g)
    if free:
        room.take(free[0])
        assert room.free_count(vm) == len(free) - 1 and free[0] not in list(room.free_in_order(vm))
