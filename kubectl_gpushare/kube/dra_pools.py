"""kube-scheduler's pool rule for ResourceSlices (``GatherPools``): the one implementation. Pure.

The structured allocator (`kube.dra_allocation`, which the sandbox's scheduler, ``explain`` and
``fit`` run) and the views (`kube.stacks.dra`: inspect, doctor, top) both gather pools here, so a
node sees a pool the same way everywhere. The rule, as k8s.io/dynamic-resource-allocation
``structured/internal/incubating/pools_incubating.go`` (``GatherPools``, ``addSlice``,
``checkSlicesInPool``, ``buildPool``, ``validateDeviceNames``) has it, per node:

- the slices a node sees (``NodeMatches``): its own (``nodeName``), then those on no one node in
  their order: ``allNodes`` ones and those whose ``nodeSelector`` matches its labels and name;
  a slice with ``perDeviceNodeSelection`` (partitionable devices, not allocated here) or none of
  these is skipped, but still counts as one of its pool's slices;
- per (driver, pool), only the highest generation among them counts; the first of them (in that
  order) gives the ``resourceSliceCount``;
- they are the pool when there are exactly that many of them, whatever other nodes see; else the
  whole pool is read (`dra_objects.PoolGenerations.judge`): a newer generation anywhere makes the
  node's obsolete (the pool is ignored on the node), and the pool is incomplete unless that
  generation has exactly ``resourceSliceCount`` slices;
- a pool that is not incomplete is invalid when the slices the node sees name a device twice.
  An incomplete pool is not also invalid (upstream builds, and so validates, only complete ones).

`gather` judges every node of a pool in one pass, each distinct set of shared slices once, so
the views stay linear in the nodes at 5,000 of them; the allocator asks it for one node at a time.
Where this differs: a node selector that does not parse matches no node (upstream fails the
node's allocation; the callers warn once).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.node_affinity import NodeSelector

_T = TypeVar("_T")
_K = TypeVar("_K")
_S_co = TypeVar("_S_co", covariant=True)


@dataclass(frozen=True)
class SliceReading(Generic[_T]):
    """How `gather` reads the pool facts of one kind of slice (checked ones, or NVIDIA's unchecked)."""

    pool: Callable[[_T], tuple[str, str]]
    """(driver, pool name)."""
    node: Callable[[_T], str]
    """``nodeName`` ("" for a slice on no one node)."""
    generation: Callable[[_T], int]
    count: Callable[[_T], int]
    """``resourceSliceCount``."""
    names: Callable[[_T], Iterable[str]]
    """Its device names."""
    repeated: Callable[[list[_T]], str | None]
    """The first device name some slices (of one generation) repeat."""
    sees: Callable[[_T, str], bool]
    """Whether a node sees a slice on no one node (``NodeMatches``); of "": whether it is for all nodes."""
    reached: Callable[[_T], frozenset[str] | None]
    """The only node names a slice on no one node can reach (`NodeSelector.names_reached`; None: any)."""


class NodeView(NamedTuple, Generic[_S_co]):
    """What one node sees of one pool."""

    node: str
    """The node; "": every node read that is not named in the pool's views (it sees only its allNodes slices)."""
    view: dra.PoolView
    expected: int
    """The ``resourceSliceCount`` of the first slice the node sees of the generation."""
    repeated: str | None
    """The first device name they repeat when the pool is complete (invalid); None: none, or incomplete."""
    slices: tuple[_S_co, ...]
    """The slices of the generation the node sees, in the order it sees them (none when obsolete)."""

    @property
    def unusable(self) -> bool:
        """Whether kube-scheduler allocates no new claim from the pool on this node."""
        return self.view is dra.PoolView.INCOMPLETE or self.repeated is not None


def gather(
    slices: list[_T], generations: dra.PoolGenerations, reading: SliceReading[_T], nodes: Iterable[str],
) -> tuple[list[_T], dict[tuple[str, str], list[NodeView[_T]]]]:
    """The slices some node uses, in their order, and what each node that sees a pool makes of it.

    ``generations``: every slice of the cluster counted (the pools' newest generations, not only
    those of ``slices``). ``nodes``: the nodes read, in order, which selectors are matched against.
    The nodes judged per pool: those with slices of it, those of ``nodes`` a selector of it
    matches, and, when the pool has allNodes slices, "" for every other node (they see only
    those). A node whose view is obsolete uses none of the pool's slices.
    """
    used: set[int] = set()
    views: dict[tuple[str, str], list[NodeView[_T]]] = {}
    known = {node: position for position, node in enumerate(nodes)}  # the nodes read, in their order
    node_of, generation_of, count_of = reading.node, reading.generation, reading.count
    for key, members in _grouped((reading.pool(s), s) for s in slices).items():
        only = members[0]
        if len(members) == 1 and (node_of(only) or reading.sees(only, "")):  # the common pool: one slice
            expected = count_of(only)
            view = generations.judge(*key, generation_of(only), 1, expected)
            if view is dra.PoolView.OBSOLETE:
                views[key] = [NodeView(node_of(only), view, expected, None, ())]
                continue
            used.add(id(only))
            repeated = reading.repeated(members) if view is dra.PoolView.USED else None
            views[key] = [NodeView(node_of(only), view, expected, repeated, (only,))]
            continue
        views[key] = list(_judged(key, members, generations, reading, known, used))
    return [s for s in slices if id(s) in used], views


def _judged(
    key: tuple[str, str], members: list[_T], generations: dra.PoolGenerations, reading: SliceReading[_T],
    known: Mapping[str, int], used: set[int],
) -> Iterator[NodeView[_T]]:
    """Each node's view of one pool of several slices (or one on no one node); marks the slices used."""
    node_of, generation_of = reading.node, reading.generation
    shared = [s for s in members if not node_of(s)]  # on no one node, in their order
    everywhere = {id(s) for s in shared if reading.sees(s, "")}
    selecting = [s for s in shared if id(s) not in everywhere]
    own: dict[str, list[_T]] = _grouped((node, s) for s in members if (node := node_of(s)))
    # per distinct set of shared slices a node sees: their newest generation, those slices, the name they repeat
    by_seen: dict[tuple[int, ...], tuple[int | None, list[_T], str | None]] = {}
    names_by_seen: dict[tuple[int, ...], set[str]] = {}
    for node, visible in _visible(own, _asked(known, selecting, reading.reached), shared, everywhere, selecting,
                                  reading.sees, known):
        seen_key = tuple(id(s) for s in visible)
        if seen_key not in by_seen:
            top_shared = max((generation_of(s) for s in visible), default=None)
            newest = [s for s in visible if generation_of(s) == top_shared]
            by_seen[seen_key] = (top_shared, newest, reading.repeated(newest) if len(newest) > 0 else None)
        top_shared, newest_shared, shared_repeated = by_seen[seen_key]
        mine = own.get(node, [])
        top = max((generation_of(s) for s in mine), default=top_shared)
        if top is None:
            continue  # sees nothing of the pool
        if top_shared is not None and top_shared > top:
            top = top_shared
        mine = [s for s in mine if generation_of(s) == top]
        seeing = newest_shared if top == top_shared else []
        if not mine and not seeing:
            continue
        first = (mine or seeing)[0]  # GatherPools' slicesForPool[0]: own slices come first
        expected = reading.count(first)
        view = generations.judge(*key, top, len(mine) + len(seeing), expected)
        if view is dra.PoolView.OBSOLETE:
            yield NodeView(node, view, expected, None, ())
            continue
        used.update(id(s) for s in mine)
        used.update(id(s) for s in seeing)
        repeated: str | None = None
        if view is dra.PoolView.USED:  # buildPool validates complete pools only
            repeated = (shared_repeated if seeing else None) or (reading.repeated(mine) if mine else None)
            if repeated is None and seeing and mine:
                names = names_by_seen.get(seen_key)
                if names is None:
                    names = names_by_seen[seen_key] = {name for s in seeing for name in reading.names(s)}
                repeated = next((name for s in mine for name in reading.names(s) if name in names), None)
        yield NodeView(node, view, expected, repeated, (*mine, *seeing))


def _asked(
    known: Mapping[str, int], selecting: list[_T], reached: Callable[[_T], frozenset[str] | None]
) -> Iterable[str]:
    """The nodes read that a slice of ``selecting`` may reach, in ``known``'s order.

    All of them unless every selector names its nodes; then only those, so pools of one node each,
    each selecting its node by ``metadata.name``, cost time linear in the nodes, not quadratic.
    """
    if not selecting:
        return ()
    names: set[str] = set()
    for s in selecting:
        found = reached(s)
        if found is None:
            return known
        names.update(found)
    return sorted((name for name in names if name in known), key=known.__getitem__)


def _visible(
    own: Mapping[str, list[_T]], asked: Iterable[str], shared: list[_T], everywhere: set[int],
    selecting: list[_T], sees: Callable[[_T, str], bool], known: Mapping[str, int],
) -> Iterator[tuple[str, list[_T]]]:
    """Each node judged, with the slices on no one node it sees, in their order; each node asks each selector once.

    The nodes with slices of the pool, then those ``asked`` a selector matches, then "" (every other
    node: it sees the allNodes slices) when there are allNodes slices and a node read is not judged,
    or no node is.
    """
    alike = [s for s in shared if id(s) in everywhere]
    judged = 0
    for node in own:
        judged += node in known
        yield node, [s for s in shared if id(s) in everywhere or sees(s, node)] if selecting else alike
    for node in asked:
        if node not in own:
            visible = [s for s in shared if id(s) in everywhere or sees(s, node)]
            if len(visible) > len(alike):  # a selector matches it
                judged += 1
                yield node, visible
    if alike and (judged < len(known) or not (own or judged)):
        yield "", alike


def _grouped(keyed: Iterable[tuple[_K, _T]]) -> dict[_K, list[_T]]:
    """Items by key, in their order."""
    found: defaultdict[_K, list[_T]] = defaultdict(list)
    for key, item in keyed:
        found[key].append(item)
    return found


def names_reached(selector: NodeSelector | None, all_nodes: bool) -> frozenset[str] | None:
    """The only nodes a slice on no one node can reach: by its selector's names, none without one (None: any)."""
    if selector is not None:
        return selector.names_reached
    return None if all_nodes else frozenset()


def checked_reading(labels: Mapping[str, Mapping[str, str]]) -> SliceReading[dra.ResourceSlice]:
    """How checked slices (`dra_objects.read_slice`) are read, ``labels`` being the nodes read's labels."""
    return SliceReading(
        pool=lambda s: (s.driver, s.pool), node=lambda s: s.node_name, generation=lambda s: s.generation,
        count=lambda s: s.slice_count, names=lambda s: (d.name for d in s.devices), repeated=dra.repeated_device,
        sees=lambda s, node: dra.shared_slice_reaches(s.node_selector, s.all_nodes, node, labels.get(node)),
        reached=lambda s: names_reached(s.node_selector, s.all_nodes))


__all__ = ["NodeView", "SliceReading", "checked_reading", "gather", "names_reached"]
