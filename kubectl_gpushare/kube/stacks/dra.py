"""Dynamic Resource Allocation as the views read it: our driver's GPUs as gpushare records, NVIDIA's as a stack.

ResourceSlices and ResourceClaims (``resource.k8s.io/v1``) come in as `dra_objects` decodes them
and leave as the records inspect already shows, so every view counts DRA by the rules it counts
the device plugin's pods with.

Our driver (`protocol.DRA_DRIVER`): a node's slice lists ``gpu-<index>`` devices with a ``memory``
capacity. The node becomes a ledger `NodeRecord` as if the device plugin advertised those GPUs
(per-GPU totals in the node's unit), and the claims allocated on them `PodRecord` s holding their
``consumedCapacity.memory`` on their GPU:

- unit: GiB when every GPU's memory and every amount of its request policy are whole GiB (the
  driver's default ``--memory-unit``), else MiB. Totals round down and consumption rounds up, so
  nothing a slice does not publish is ever credited as free;
- a result without ``consumedCapacity`` (an exclusive allocation), or with one that cannot be read,
  holds the whole device; an admin-access result holds nothing (the allocator's
  ``allocatedstate.go`` counts them so);
- a claim reserved for one pod (``status.reservedFor``) is shown as that pod, its claims summed; a
  claim reserved for several pods, or for none yet, is shown under its own name, so memory is
  counted once however many pods share it;
- a pool is read per node as kube-scheduler gathers it (`dra_pools.gather`, `pool_states`): a node sees its
  own slices, those for all nodes and those whose node selector matches its labels (of the nodes
  read; `node_affinity`, the allocator's rule); only the newest generation of the slices it sees
  counts (`dra_objects.PoolGenerations.judge`), each device name once; on a node where the pool's
  generation has more or fewer slices than its ``resourceSliceCount`` (incomplete), or, complete,
  lists a device name twice (invalid), its GPUs keep their memory (claims allocated there still hold it) but
  are unhealthy: the allocator allocates no new claim from such a pool there. A device that is not
  ``gpu-<index>`` or has no readable memory is left out with a warning, an invalid one (marked by
  `dra_objects`) is kept with no memory;
- a slice on no one node (allNodes, a node selector) is one warning and its devices are not shown
  (memory every node it reaches shares is no one node's); a claim's result on one is counted on
  no node (`shared_pools`).

NVIDIA's driver (`protocol.NVIDIA_DRA_DRIVER`, read-only like the other stacks): one stack GPU per
device, named as the slice names it (``gpu-0``, MIG devices ``gpu-0-mig-...``). Its devices are
allocated whole (unit ``GPUs``, one per claim), unless a device allows multiple allocations: then
its ``memory`` in MiB, by ``consumedCapacity`` as above. Its pools follow the same rules.

Pure: decoded objects in, records out; warnings through the caller's `Warnings`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Final, NamedTuple

import msgspec

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare import protocol
from kubectl_gpushare.kube import dra_pools
from kubectl_gpushare.kube.go_format import go_quote
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.types import Pod, PodResourceClaim
from kubectl_gpushare.ledger import PENDING, NodeRecord, PodRecord, StackClaim, StackGPU, StackNode
from kubectl_gpushare.node_affinity import NodeSelector
from kubectl_gpushare.protocol import shown_value

GIB: Final = protocol.UNIT_BYTES[protocol.UNIT_GIB]
MIB: Final = protocol.UNIT_BYTES[protocol.UNIT_MIB]
BLOCKING_TAINTS: Final = (dra.EFFECT_NO_SCHEDULE, dra.EFFECT_NO_EXECUTE)
"""Device taint effects that keep new claims off a device (the allocator's ``taintPreventsAllocation``)."""
DRIVERS: Final = (protocol.DRA_DRIVER, protocol.NVIDIA_DRA_DRIVER)
"""The drivers the views read."""
MAX_TEXT: Final = 128
"""Longest attribute text (UUID, product name) kept for display."""


@dataclass
class DraObjects:
    """The DRA objects of a cluster that the views read, each decoded and checked once.

    Attributes:
        slices: our driver's slices some node uses (`dra_pools.gather`), checked by `dra_objects.read_slice`.
        nvidia: NVIDIA's driver's slices some node uses, read here as a stack.
        claims: the claims that matter here, checked by `dra_objects.read_claim` (see `read`).
        others: the allocated claims of drivers not read here, kept (`read` ``resolve``) only so that a
            pod's claims resolve as kube-scheduler resolves them, over every driver's (`claim_index`);
            nothing counts them.
        classes: DeviceClasses by name, where a question read them (explain, doctor); None: not read.
        served: whether the API serves ``resource.k8s.io/v1`` (False: no DRA, nothing else to read).
        unusable: (driver, pool) -> why kube-scheduler allocates no new claim from the pool (`pool_states`).
        unusable_on: (driver, pool) -> the nodes where it does not (sorted; "": every node not named in
            `named_in`, which sees only the pool's allNodes slices).
    """

    slices: list[dra.ResourceSlice] = field(default_factory=list)
    nvidia: list[dra.WireResourceSlice] = field(default_factory=list)
    claims: list[dra.ResourceClaim] = field(default_factory=list)
    others: list[dra.ResourceClaim] = field(default_factory=list)
    classes: dict[str, dra.DeviceClass] | None = None
    served: bool = True
    unusable: dict[tuple[str, str], str] = field(default_factory=dict)
    unusable_on: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    published: list[dra.ResourceSlice] = field(default_factory=list)
    """Every slice of our driver that reads (`slices` and those no node uses): what the allocator gathers
    pools from (`dra_pools`: a slice no node uses still counts toward its pool), for explain."""
    named_in: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    """(driver, pool) -> the nodes with a view of their own, for a pool that "" (every other node) cannot use."""
    _unusable_sets: dict[tuple[str, str], frozenset[str]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    """`unusable_on` as sets, made on first ask: a pool over 40,000 nodes is asked once per slice."""

    def __bool__(self) -> bool:
        """Whether there is anything of the drivers the views read."""
        return bool(self.slices or self.nvidia or self.claims)

    def unusable_at(self, driver: str, pool: str, node: str) -> bool:
        """Whether kube-scheduler allocates no new claim from the pool on ``node`` (`pool_states`)."""
        if not self.unusable:
            return False
        key = (driver, pool)
        nodes = self._unusable_sets.get(key)
        if nodes is None:
            nodes = self._unusable_sets[key] = frozenset(self.unusable_on.get(key, ()))
        return node in nodes or ("" in nodes and node not in self.named_in.get(key, ()))


_NO_SPEC: Final = dra.WireClaimSpec()


def read(
    slices: Iterable[dra.WireResourceSlice], claims: Iterable[dra.WireResourceClaim | dra.ResourceClaim],
    warnings: Warnings | None, *, pending: bool = True, labels: Mapping[str, Mapping[str, str]] | None = None,
    resolve: bool = False,
) -> DraObjects:
    """Check the slices of the drivers read here and the claims; each unreadable object is one warning.

    Slices of other drivers are skipped undecoded; of each pool only the slices a node uses are kept
    (`dra_pools.gather`: older generations are being replaced by their driver), and a pool kube-scheduler
    allocates nothing from is one warning naming the nodes where (`pool_states`). An allocated
    claim is read without its requests (what it holds is its allocation; 100,000 claims cost a
    third less so); unallocated claims are kept with ``pending`` (explain and doctor ask why they
    wait), else left out (the tables show what is allocated). A claim allocated on no driver read
    here is kept in ``others`` with ``resolve`` (explain and doctor: a pod's claims resolve over
    every driver's), else not read; nothing is said of it either way.
    A claim passed already read (`dra.tally_claim`, for counting) is kept as a wire one is. ``labels``:
    node name -> labels of the nodes read, which slices' node selectors are matched against
    (`dra_pools.gather`); a selector matches no node not in it by its labels.
    """
    labels = labels or {}
    ours: list[dra.ResourceSlice] = []
    nvidia: list[dra.WireResourceSlice] = []
    for wire in slices:
        if wire.spec.driver == protocol.NVIDIA_DRA_DRIVER:
            nvidia.append(wire)
        elif wire.spec.driver == protocol.DRA_DRIVER:
            try:
                checked = dra.read_slice(wire)
            except dra.InvalidObjectError as exc:
                _warn(warnings, f"{exc}; not shown")
                continue
            for problem in checked.problems:
                _warn(warnings, problem)
            ours.append(checked)
    read_claims: list[dra.ResourceClaim] = []
    others: list[dra.ResourceClaim] = []
    for wire_claim in claims:
        if isinstance(wire_claim, dra.ResourceClaim):  # already read, for counting (`dra.tally_claim`)
            if _ours_or_nvidia(wire_claim):
                read_claims.append(wire_claim)
            elif resolve:
                others.append(wire_claim)
            continue
        allocation = wire_claim.status.allocation
        if allocation is None and not pending:
            continue
        into = read_claims
        if allocation is not None:
            for result in allocation.devices.results:
                if result.driver in DRIVERS:
                    break
            else:
                if not resolve:
                    continue
                into = others
            if wire_claim.spec.devices.requests or wire_claim.spec.devices.constraints:
                wire_claim = msgspec.structs.replace(wire_claim, spec=_NO_SPEC)  # (a file's are decoded without)
        try:
            claim = dra.read_claim(wire_claim)
        except dra.InvalidObjectError as exc:
            if into is read_claims:  # another driver's: not ours to warn about
                _warn(warnings, f"{exc}; not counted")
            continue
        if claim.problems and _ours_or_nvidia(claim):
            for problem in claim.problems:
                _warn(warnings, problem)
        into.append(claim)
    published, generations = ours, dra.PoolGenerations.of(ours)
    ours, views = dra_pools.gather(ours, generations, dra_pools.checked_reading(labels), labels)
    unusable = pool_states(generations, views)
    generations = dra.PoolGenerations((s.spec.driver, s.spec.pool.name, s.spec.pool.generation) for s in nvidia)
    selectors: dict[int, NodeSelector] = {}
    for wire in nvidia:  # NVIDIA's slices are read unchecked, but a refused selector is warned about as ours is
        problems: list[str] = []
        selector = dra.read_slice_selector(wire.spec.node_selector, f"ResourceSlice {wire.metadata.name[:253]}",
                                           problems)
        if selector is not None:
            selectors[id(wire)] = selector
        for problem in problems:
            _warn(warnings, problem)
    nvidia, nvidia_views = dra_pools.gather(nvidia, generations, _wire_reading(selectors, labels), labels)
    unusable.update(pool_states(generations, nvidia_views))
    named_in = {**_named_in(views), **_named_in(nvidia_views)}
    objects = DraObjects(ours, nvidia, read_claims, others=others,
                         unusable={key: why for key, (why, _) in unusable.items()},
                         unusable_on={key: nodes for key, (_, nodes) in unusable.items()}, named_in=named_in,
                         published=published)
    if warnings is not None:
        for message in pool_warnings(objects):
            warnings.add(message)
    return objects


def _wire_reading(
    selectors: Mapping[int, NodeSelector], labels: Mapping[str, Mapping[str, str]],
) -> dra_pools.SliceReading[dra.WireResourceSlice]:
    """How NVIDIA's unchecked slices are read for the pool rule; ``selectors``: their compiled ones, by id."""
    def sees(slice_: dra.WireResourceSlice, node: str) -> bool:
        return dra.shared_slice_reaches(selectors.get(id(slice_)), bool(slice_.spec.all_nodes), node, labels.get(node))

    return dra_pools.SliceReading(
        pool=lambda s: (s.spec.driver, s.spec.pool.name), node=lambda s: s.spec.node_name or "",
        generation=lambda s: s.spec.pool.generation, count=lambda s: s.spec.pool.resource_slice_count,
        names=_wire_names, repeated=lambda seen: dra.repeated_name(n for s in seen for n in _wire_names(s)),
        sees=sees, reached=lambda s: dra_pools.names_reached(selectors.get(id(s)), bool(s.spec.all_nodes)))


def _wire_names(slice_: dra.WireResourceSlice) -> Iterator[str]:
    """The device names of an unchecked slice, as many as a slice may hold."""
    return (device.name for device in slice_.spec.devices[: dra.MAX_DEVICES_PER_SLICE])


UNUSABLE_EFFECT: Final = ("kube-scheduler allocates no new claim from it (its GPUs are shown unhealthy; claims "
                          "allocated there keep their memory)")
"""What an unusable pool means (`pool_states`), after its reason."""


MAX_NAMED_NODES: Final = 3
"""Nodes a pool warning names before "and N more"."""


def _named_in(
    views: Mapping[tuple[str, str], Sequence[dra_pools.NodeView[object]]],
) -> dict[tuple[str, str], frozenset[str]]:
    """`DraObjects.named_in`: the nodes named in the views of each pool that "" (every other node) cannot use."""
    return {key: frozenset(v.node for v in seen if v.node) for key, seen in views.items()
            if any(not v.node and v.unusable for v in seen)}


def pool_name(driver: str, pool: str, nodes: Sequence[str]) -> str:
    """``pool NAME of DRIVER`` and the nodes it is said of (a node-local pool's own node is not repeated)."""
    names = [node for node in nodes if node]  # "": every other node (`DraObjects.named_in`)
    named = [shown_value(node) for node in names[:MAX_NAMED_NODES]]
    if not named or (len(nodes) == 1 and nodes[0] == pool):
        return f"pool {shown_value(pool)} of {driver}"
    more = f" and {len(names) - len(named)} more" if len(names) > len(named) else ""
    more += " and every other node" if len(names) < len(nodes) else ""
    return f"pool {shown_value(pool)} of {driver} ({'node' if len(nodes) == 1 else 'nodes'} {', '.join(named)}{more})"


def pool_warning(objects: DraObjects, driver: str, pool: str) -> str:
    """What the views say of an unusable pool (`DraObjects.unusable`): its name, the nodes, why, and the effect."""
    nodes = objects.unusable_on.get((driver, pool), ())
    return f"{pool_name(driver, pool, nodes)} {objects.unusable[driver, pool]}; {UNUSABLE_EFFECT}"


def pool_warnings(objects: DraObjects) -> Iterator[str]:
    """`pool_warning` for each unusable pool, in order of driver and pool."""
    return (pool_warning(objects, driver, pool) for driver, pool in sorted(objects.unusable))


def pool_states(
    generations: dra.PoolGenerations, pools: Mapping[tuple[str, str], Sequence[dra_pools.NodeView[object]]],
) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
    """(driver, pool) -> why kube-scheduler allocates nothing new from the pool, and the nodes where.

    ``pools``: what each node that sees a pool makes of it (`dra_pools.gather`). The rules and words of
    k8s.io/dynamic-resource-allocation structured ``GatherPools``, per node (the allocator skips
    such pools for new claims; an ``All`` request fails on them): ``IsIncomplete`` when the
    generation does not have exactly ``resourceSliceCount`` slices ("currently being updated"),
    ``IsInvalid`` when a node's slices name a device twice ("duplicate device name"). Pools
    usable on every node are left out.
    """
    unusable: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
    for key, views in pools.items():
        failing = [v for v in views if v.unusable]
        if not failing:
            continue
        reasons: list[str] = []
        expected = next((v.expected for v in failing if v.view is dra.PoolView.INCOMPLETE), None)
        repeated = next((v.repeated for v in failing if v.repeated is not None), None)
        if expected is not None:  # an incomplete node's generation is the pool's newest (else it is obsolete)
            reasons.append(f"is incomplete (currently being updated): {generations.published[key]} ResourceSlice(s) "
                           f"of generation {generations.newest[key]}, resourceSliceCount {expected}")
        if repeated is not None:
            reasons.append(f"is invalid: duplicate device name {shown_value(repeated)}")
        unusable[key] = (" and ".join(reasons), tuple(sorted(v.node for v in failing)))
    return unusable


def read_classes(classes: Iterable[dra.WireDeviceClass], warnings: Warnings | None) -> dict[str, dra.DeviceClass]:
    """DeviceClasses by name; one that cannot be read is one warning (a class with bad selectors is kept, invalid)."""
    found: dict[str, dra.DeviceClass] = {}
    for wire in classes:
        try:
            klass = dra.read_class(wire)
        except dra.InvalidObjectError as exc:
            _warn(warnings, f"{exc}; skipped")
            continue
        found[klass.name] = klass
    return found


def _warn(warnings: Warnings | None, message: str) -> None:
    if warnings is not None:
        warnings.add(message)


def _ours_or_nvidia(claim: dra.ResourceClaim) -> bool:
    allocation = claim.allocation
    if allocation is not None:
        for result in allocation.results:  # a loop, not any() over a generator: called for every claim
            if result.driver in DRIVERS:
                return True
    return False


# --- Our driver's GPUs --------------------------------------------------------------------------------
class DraGpu(msgspec.Struct, frozen=True, gc=False):
    """One GPU our driver publishes: device ``gpu-<index>`` of a node's pool, its memory in bytes."""

    index: int
    pool: str
    memory: int
    """The ``memory`` capacity in bytes; 0 when the device is invalid (nothing credited)."""
    device: dra.Device
    uuid: str = ""
    model: str = ""
    healthy: bool = True
    """False when kube-scheduler allocates no new claim on it: a NoSchedule or NoExecute taint
    (``--unhealthy taint``), or its pool is incomplete or invalid (`pool_states`)."""


class DraNode(msgspec.Struct, frozen=True, gc=False):
    """A node's GPUs of our driver, by index, and the unit its views count them in."""

    name: str
    unit: str
    gpus: tuple[DraGpu, ...]

    @property
    def unit_bytes(self) -> int:
        """Bytes per unit."""
        return protocol.UNIT_BYTES[self.unit]

    def totals(self) -> dict[int, int]:
        """GPU index -> whole units of memory (rounded down)."""
        unit_bytes = self.unit_bytes  # once, not per GPU
        return {gpu.index: gpu.memory // unit_bytes for gpu in self.gpus}


class _DeviceIndices(dict[str, "int | None"]):
    """Device name -> GPU index (`protocol.parse_dra_device_name`), each name parsed once.

    Every node has gpu-0 ...: one read of 100,000 claims or 40,000 devices parses a few names.
    """

    def __missing__(self, name: str) -> int | None:
        index = self[name] = protocol.parse_dra_device_name(name)
        return index


def _text(value: dra.AttributeValue | None) -> str:
    if not isinstance(value, str):
        return ""
    return protocol.printable(value, MAX_TEXT)


def _memory(device: dra.Device, driver: str) -> dra.DeviceCapacity | None:
    return dra.lookup_capacity(device, protocol.DRA_CAPACITY_MEMORY, driver)


def _amounts(capacity: dra.DeviceCapacity) -> Iterator[dra.Quantity]:
    yield capacity.value
    policy = capacity.request_policy
    if policy is None:
        return
    yield from (q for q in (policy.default, *policy.valid_values) if q is not None)
    if policy.valid_range is not None:
        found = (policy.valid_range.min, policy.valid_range.max, policy.valid_range.step)
        yield from (q for q in found if q is not None)


def node_unit(capacities: Iterable[dra.DeviceCapacity]) -> str:
    """GiB when every capacity and policy amount is a whole number of GiB (the driver's default), else MiB."""
    distinct = {id(capacity): capacity for capacity in capacities}.values()  # a node's GPUs share one or two
    whole = all(q.millis % (GIB * 1000) == 0 for capacity in distinct for q in _amounts(capacity))
    return protocol.UNIT_GIB if whole else protocol.UNIT_MIB


def our_nodes(objects: DraObjects, warnings: Warnings | None) -> dict[str, DraNode]:
    """Node -> its GPUs of our driver, from every node-local slice (GPUs by index, each once: the first counts).

    A GPU of a pool kube-scheduler allocates nothing from on its node (`DraObjects.unusable_at`, warned
    once by `read`) keeps its memory and is unhealthy; a device name such a pool repeats is not warned again.
    """
    found: dict[str, dict[int, DraGpu]] = {}
    capacities: dict[str, list[dra.DeviceCapacity]] = {}
    indices = _DeviceIndices()
    for slice_ in objects.slices:
        what = f"ResourceSlice {slice_.name}"
        pool_unusable = objects.unusable_at(slice_.driver, slice_.pool, slice_.node_name)
        if not slice_.node_name:
            _warn(warnings, f"{what}: not local to one node (allNodes or a node selector); its devices are not shown")
            continue
        gpus = found.setdefault(slice_.node_name, {})
        for device in slice_.devices:
            index = indices[device.name]
            if index is None:
                _warn(warnings, f"{what}: device {shown_value(device.name)} is not gpu-<index>; not counted")
                continue
            if index in gpus:
                first = gpus[index]
                if not (pool_unusable and first.pool == slice_.pool and first.device.name == device.name):
                    _warn(warnings, f"{what}: GPU {index} of node {slice_.node_name} is published twice; the first "
                                    "counts")
                continue
            capacity = _memory(device, slice_.driver)
            if capacity is None and not device.invalid:
                _warn(warnings, f"{what}: device {device.name} has no {protocol.DRA_CAPACITY_MEMORY} capacity; "
                                "counted as 0")
            memory = 0 if capacity is None or device.invalid else capacity.value.value
            if memory and capacity is not None:
                capacities.setdefault(slice_.node_name, []).append(capacity)
            healthy = not pool_unusable and (
                not device.taints or not any(taint.effect in BLOCKING_TAINTS for taint in device.taints))
            uuid = _text(dra.lookup_attribute(device, protocol.DRA_ATTR_UUID, slice_.driver))
            model = _text(dra.lookup_attribute(device, protocol.DRA_ATTR_MODEL, slice_.driver))
            gpus[index] = DraGpu(index, slice_.pool, memory, device, uuid, model, healthy)
    nodes: dict[str, DraNode] = {}
    unit_of: dict[tuple[int, ...], str] = {}  # distinct capacities -> unit: a fleet's nodes share a few
    for name, gpus in found.items():
        distinct = {id(capacity): capacity for capacity in capacities.get(name, ())}  # alive: held in `capacities`
        key = tuple(distinct)
        unit = unit_of.get(key)
        if unit is None:
            unit = unit_of[key] = node_unit(distinct.values())
        nodes[name] = DraNode(name, unit, tuple([gpus[i] for i in sorted(gpus)]))
    return nodes


def node_record(base: NodeRecord, node: DraNode) -> NodeRecord:
    """``base`` (the Node's name, address and labels) with the GPUs the slice publishes, in the node's unit.

    GPUs are 0..highest index; an index the slice skips (a GPU gone unhealthy and removed) has 0.
    """
    totals = node.totals()
    count = max(totals) + 1 if totals else 0
    mems = tuple(totals.get(index, 0) for index in range(count))
    unhealthy = frozenset(gpu.index for gpu in node.gpus if not gpu.healthy)
    return msgspec.structs.replace(
        base, alloc_mem=sum(mems), alloc_count=count, cap_mem=sum(mems), cap_count=count, gpu_mems=mems,
        unhealthy=base.unhealthy | unhealthy, driver=protocol.DRA_DRIVER, unit=node.unit,
    )


def with_gpus(records: Iterable[NodeRecord], nodes: Mapping[str, DraNode]) -> list[NodeRecord]:
    """The records, those of DRA nodes with their slices' GPUs.

    A node that also advertises ``aliyun.com/gpu-mem`` keeps the device plugin's numbers (the
    claims on it still count there, and doctor reports the node: both would sell the same GPUs).
    """
    return [
        node_record(record, nodes[record.name])
        if record.name in nodes and record.alloc_mem <= 0 and record.cap_mem <= 0 else record
        for record in records
    ]


def units(records: Iterable[NodeRecord], nodes: Mapping[str, DraNode]) -> dict[str, tuple[str, dict[int, int]]]:
    """Node -> (unit, GPU index -> total units) for `claim_records`: a DRA node's own unit, else the views' guess.

    The guess is the original tool's (more than 100 per GPU means MiB).
    """
    found: dict[str, tuple[str, dict[int, int]]] = {}
    for record in records:
        node = nodes.get(record.name)
        if record.driver and node is not None:
            found[record.name] = (node.unit, node.totals())
            continue
        count = record.alloc_count if 0 < record.alloc_count <= protocol.MAX_GPUS_PER_NODE else 0
        mems = record.gpu_mems if record.gpu_mems is not None and len(record.gpu_mems) == count else (
            (max(record.alloc_mem, 0) // count,) * count if count else ())
        unit = protocol.UNIT_MIB if count and max(record.alloc_mem, 0) // count > 100 else protocol.UNIT_GIB
        found[record.name] = (unit, dict(enumerate(mems)))
    return found


def request_units(node: DraNode, request: int) -> int | None:
    """What one claim asking ``request`` bytes of memory consumes on this node's GPUs, in its unit (rounded up).

    The allocator's rule (`dra_allocation.capacity_fit`: the request policy's rounding, its
    bounds, the capacity) on an empty GPU; None when no GPU of the node would take it even empty.
    """
    from kubectl_gpushare.kube import dra_allocation  # the allocator (and its CEL) only where asked

    asked = {protocol.DRA_CAPACITY_MEMORY: dra.quantity_from_millis(min(request, protocol.MAX_INT64 // 1000) * 1000,
                                                                     binary=True)}
    found: list[int] = []
    for gpu in node.gpus:
        if not gpu.memory:
            continue
        consumed = dra_allocation.capacity_fit(gpu.device, protocol.DRA_DRIVER, asked, {})
        if consumed is None:
            continue
        amounts = [q.value for name, q in consumed.items()
                   if dra.split_qualified_name(name, protocol.DRA_DRIVER)[1] == protocol.DRA_CAPACITY_MEMORY]
        if amounts:
            found.append(_units_up(amounts[0], node.unit_bytes))
    return min(found) if found else None


# --- Claims ----------------------------------------------------------------------------------------------
def pool_nodes(objects: DraObjects) -> dict[tuple[str, str], str]:
    """(driver, pool) -> the node whose slice it is (node-local slices of the drivers read here)."""
    found = {(s.driver, s.pool): s.node_name for s in objects.slices if s.node_name}
    found.update({(s.spec.driver, s.spec.pool.name): s.spec.node_name or "" for s in objects.nvidia
                  if s.spec.node_name})
    return found


def shared_pools(objects: DraObjects, local: Mapping[tuple[str, str], str]) -> set[tuple[str, str]]:
    """(driver, pool) of the pools whose slices are all on no one node (allNodes, a node selector).

    Their devices are no node's GPUs (`our_nodes` does not show them), so a claim's result on one is
    counted on no node, not on a node GPU that happens to have the same name. ``local``: `pool_nodes`
    of ``objects`` (every caller has it already).
    """
    found = {(s.driver, s.pool) for s in objects.slices if not s.node_name}
    found |= {(s.spec.driver, s.spec.pool.name) for s in objects.nvidia if not s.spec.node_name}
    return found.difference(local)


def result_node(claim: dra.ResourceClaim, result: dra.AllocatedDevice, pools: Mapping[tuple[str, str], str]) -> str:
    """The node a result's device is on: the allocation's node selector, else its pool's slice ("" unknown)."""
    assert claim.allocation is not None
    return claim.allocation.node_name or pools.get((result.driver, result.pool), "")


def consumed_memory(result: dra.AllocatedDevice, driver: str) -> int | None:
    """Bytes of ``memory`` a result consumes, rounded up; None: it holds the whole device.

    None for a result with no ``consumedCapacity`` (an exclusive allocation), one that cannot be
    read, or one without ``memory`` (the allocator records every capacity of a shared device).
    """
    if result.invalid or result.consumed_capacity is None:
        return None
    found = result.consumed_capacity.get(protocol.DRA_CAPACITY_MEMORY)
    if found is not None:
        return found.value
    for name, amount in result.consumed_capacity.items():
        domain, ident = dra.split_qualified_name(name, driver)
        if (domain, ident) == (driver, protocol.DRA_CAPACITY_MEMORY):
            return amount.value
    return None


def _units_up(amount: int, unit_bytes: int) -> int:
    return -(-amount // unit_bytes)


class Holder(msgspec.Struct, frozen=True, gc=False):
    """Who a claim's memory is shown under: its one pod, or the claim itself."""

    uid: str
    name: str
    pod: bool


def holder(claim: dra.ResourceClaim) -> Holder:
    """The one pod a claim is reserved for, else the claim (reserved for several pods, or none yet)."""
    reserved = claim.reserved_for
    if len(reserved) == 1 and reserved[0].resource == "pods" and not reserved[0].api_group:
        return Holder(reserved[0].uid or f"{claim.namespace}/{reserved[0].name}", reserved[0].name, True)
    pods = [c for c in reserved if c.resource == "pods" and not c.api_group]
    if len(pods) == 1:
        return Holder(pods[0].uid or f"{claim.namespace}/{pods[0].name}", pods[0].name, True)
    return Holder(claim.uid or claim.key, claim.name, False)


def reserved_pods(claims: Iterable[dra.ResourceClaim]) -> set[str]:
    """UIDs of the pods our drivers' allocated claims are reserved for (whose phases the records show)."""
    found: set[str] = set()
    for claim in claims:
        if claim.reserved_for and _ours_or_nvidia(claim):
            for consumer in claim.reserved_for:
                if consumer.resource == "pods":
                    found.add(consumer.uid)
    return found


@dataclass(slots=True)
class _Group:
    """A holder's claims on one node, once it has more than one (the common single claim needs none)."""

    namespace: str
    name: str
    node: str
    amounts: dict[int, int]
    claims: list[str]


def _whole(totals: Mapping[int, int], index: int) -> int:
    return totals[index] if index in totals else max(totals.values(), default=0)


Holding = tuple[str, str, str, int, int, str] | _Group
"""What one holder's claims hold (`claim_holdings`): (namespace, name, node, GPU index, units, claim)
for a holder seen once (the common case, kept cheap for 100,000 claims), a `_Group` for one with more."""


def claim_holdings(objects: DraObjects, units: Mapping[str, tuple[str, Mapping[int, int]]]) -> dict[str, Holding]:
    """`claim_records` before the pods' phases are known: holder UID -> what its claims hold.

    inspect groups the claims before it reads the pods (a pod counted by its claims builds no record
    of its own) and makes the records (`holding_records`) once the pods gave their phases.
    """
    pools = pool_nodes(objects)
    ours = protocol.DRA_DRIVER
    shared = shared_pools(objects, pools)
    held: dict[str, Holding] = {}  # a second claim of a holder makes it a `_Group`
    indices = _DeviceIndices()
    unit_bytes = {node: protocol.UNIT_BYTES[unit] for node, (unit, _) in units.items()}
    for claim in objects.claims:
        allocation = claim.allocation
        if allocation is None:
            continue
        owner: Holder | None = None
        for result in allocation.results:
            if result.driver != ours or result.admin_access or (ours, result.pool) in shared:
                continue
            node = allocation.node_name or pools.get((ours, result.pool), "")
            node_bytes = unit_bytes.get(node)
            index = indices[result.device]
            if index is None or node_bytes is None:
                continue
            consumed = consumed_memory(result, ours)
            amount = _whole(units[node][1], index) if consumed is None else -(-consumed // node_bytes)
            owner = owner or holder(claim)
            group = held.get(owner.uid)
            if group is None:
                held[owner.uid] = (claim.namespace, owner.name, node, index, amount, claim.name)
                continue
            if isinstance(group, tuple):
                group = held[owner.uid] = _Group(group[0], group[1], group[2], {group[3]: group[4]}, [group[5]])
            if group.node != node:
                continue  # one pod is on one node; a claim naming two is left to doctor
            group.amounts[index] = group.amounts.get(index, 0) + amount
            if claim.name not in group.claims:
                group.claims.append(claim.name)
    return held


def holding_node(holding: Holding) -> str:
    """The node a holding is on."""
    return holding[2] if isinstance(holding, tuple) else holding.node


def holding_records(held: Mapping[str, Holding], phases: Mapping[str, str]) -> list[PodRecord]:
    """The ledger records of `claim_holdings`, with the phases of the pods they are reserved for (unknown: "")."""
    found: list[PodRecord] = []
    for uid, group in held.items():
        if isinstance(group, tuple):
            namespace, name, node, index, amount, claim_name = group
            found.append(PodRecord(uid=uid, namespace=namespace, name=name, node=node, phase=phases.get(uid, ""),
                                   request=amount, gpu_index=index, allocation=((index, amount),), claim=claim_name))
        else:  # every group holds at least the amount it was made with
            found.append(PodRecord(
                uid=uid, namespace=group.namespace, name=group.name, node=group.node, phase=phases.get(uid, ""),
                request=sum(group.amounts.values()), gpu_index=min(group.amounts),
                allocation=tuple(sorted(group.amounts.items())), claim=",".join(group.claims),
            ))
    return found


def claim_records(
    objects: DraObjects, units: Mapping[str, tuple[str, Mapping[int, int]]], phases: Mapping[str, str],
) -> list[PodRecord]:
    """Ledger records of the memory claims hold on our driver's GPUs: one per holder (`holder`).

    Args:
        objects: the DRA objects.
        units: node -> (its unit, GPU index -> total units) for every node shown (DRA nodes and the
            device plugin's); claims on other nodes are left out (doctor names them).
        phases: pod UID -> phase, for the pods claims are reserved for (unknown: "").
    """
    return holding_records(claim_holdings(objects, units), phases)


# --- A pod's claims ---------------------------------------------------------------------------------------
class PodClaim(msgspec.Struct, frozen=True, gc=False):
    """One entry of a pod's ``spec.resourceClaims`` and the claim it resolves to (None: ``missing`` says why)."""

    name: str
    claim: dra.ResourceClaim | None
    missing: str = ""
    upstream: str = ""
    """kube-scheduler's words for an entry without a claim (``foreachPodResourceClaim``'s error), for the
    scheduler stand-in; ``missing`` says it in the views' words."""


UNREADABLE_CLAIMS: Final = (
    "has a spec.resourceClaims that cannot be read (not a list of objects whose fields are strings): which claims "
    "it needs is not known, so none is asked for it (a claim allocated and reserved for it still counts on its "
    "GPU); kube-apiserver refuses such a pod, so only a file or a tampered store holds one")
"""What explain and doctor say of a pod whose entries do not read (`types.PodSpec.resource_claims_unreadable`),
after the pod's name: either would otherwise take it for a pod with no claims. The views count a claim
from the claim's side (`claim_holdings`: its allocation and ``reservedFor``), never from the pod's entries,
so such a pod bound to a node still holds what its claims hold there; none is waiting for it."""


def claim_names(pod: Pod) -> list[tuple[PodResourceClaim, str | None]]:
    """The pod's ``spec.resourceClaims`` entries that name a claim (in order), and the claim each names.

    The rule of kubelet and the scheduler (``k8s.io/dynamic-resource-allocation/resourceclaim``
    ``Name``): an entry's ``resourceClaimName``; for a ``resourceClaimTemplateName``, the name the
    entry's first ``status.resourceClaimStatuses`` entry gives. A status entry without
    ``resourceClaimName`` (absent or null) says no claim was needed: ``Name`` returns no name and
    every caller skips the entry, so it is left out here. None where no name is known: no status
    entry yet (``ErrClaimNotFound``: not made yet), an empty name, or an entry with neither field.
    A claim is always in the pod's own namespace: no entry can name another's. The views
    (`ClaimIndex.of`), the DRA driver's enforcement (`dra.pod_claims`) and the kubelet stand-in
    resolve a pod's claims with it.
    """
    statuses: dict[str, str | None] = {}
    for status in pod.status.resource_claim_statuses:
        statuses.setdefault(status.name, status.resource_claim_name)  # Name returns the first match
    found: list[tuple[PodResourceClaim, str | None]] = []
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name or not entry.resource_claim_template_name:
            found.append((entry, entry.resource_claim_name or None))
        elif entry.name not in statuses:
            found.append((entry, None))
        elif statuses[entry.name] is not None:
            found.append((entry, statuses[entry.name] or None))
    return found


class ClaimIndex:
    """Claims by ``namespace/name`` and by (owner pod UID, ``pod-claim-name``), built once per snapshot."""

    def __init__(self, claims: Iterable[dra.ResourceClaim]) -> None:
        self.by_key: dict[tuple[str, str], dra.ResourceClaim] = {}
        self.by_owner: dict[tuple[str, str], dra.ResourceClaim] = {}
        for claim in claims:
            self.by_key[(claim.namespace, claim.name)] = claim
            if claim.owner is not None and claim.owner.kind == "Pod":
                entry = claim.annotations.get(dra.ANN_POD_CLAIM_NAME, "")
                self.by_owner[(claim.owner.uid, entry)] = claim

    def of(self, pod: Pod) -> list[PodClaim]:
        """The pod's claims in ``spec.resourceClaims`` order (`resolve_claims`).

        A claim made from a template that ``status.resourceClaimStatuses`` does not name yet is the one
        the pod owns with its entry's ``resource.kubernetes.io/pod-claim-name`` (the resourceclaim
        controller's annotation), if any.
        """
        namespace, uid = pod.metadata.namespace, pod.metadata.uid
        return resolve_claims(pod, lambda name: self.by_key.get((namespace, name)),
                              lambda entry: self.by_owner.get((uid, entry)))


def claim_index(objects: DraObjects) -> ClaimIndex:
    """The index a pod's claims are resolved in: every claim read, of the drivers read here and others'.

    kube-scheduler looks a pod's claims up among all claims, whatever their driver
    (dynamicresources.go ``foreachPodResourceClaim``: ``ResourceClaims().Get``), so a pod's allocated
    claim of another driver (a NIC's) is found, not missing. explain and doctor resolve with it.
    """
    return ClaimIndex(chain(objects.claims, objects.others))


def resolve_claims(pod: Pod, get: Callable[[str], dra.ResourceClaim | None],
                   made: Callable[[str], dra.ResourceClaim | None] | None = None) -> list[PodClaim]:
    """The pod's claims in ``spec.resourceClaims`` order, resolved as kube-scheduler and kubelet do.

    ``get``: the claim of that name in the pod's namespace (None: none). Each entry's claim is the one
    `claim_names` names (entries needing no claim are left out); one made from a template that the
    status does not name yet is ``made`` of the entry's name, where given (the views). A claim the
    status names but the pod does not control is not the pod's (`not_for_pod`): it resolves to none,
    in IsForPod's words, unless it is being deleted, which kube-scheduler says first
    (`first_unusable`). The views, through `ClaimIndex.of`, and the scheduler stand-in resolve a
    pod's claims with it.
    """
    meta = pod.metadata
    found: list[PodClaim] = []
    for entry, name in claim_names(pod):
        claim = get(name) if name else None
        # foreachPodResourceClaim's errors (dynamicresources.go): resourceclaim.Name's, then the claim
        # lookup's (the assume cache's NotFoundError), then IsForPod's.
        upstream = f"could not find ResourceClaim {go_quote(f'{meta.namespace}/{name}')}" if name else ""
        if entry.resource_claim_name:
            missing = f"ResourceClaim {entry.resource_claim_name} does not exist"
        elif claim is not None and not claim.deleting and (missing := not_for_pod(claim, pod)):
            claim, upstream = None, missing
        else:
            if claim is None and made is not None:
                claim = made(entry.name)
            template = entry.resource_claim_template_name or "?"
            missing = f"the claim from ResourceClaimTemplate {template} is not created yet"
            if not name:
                where = f'pod "{meta.namespace}/{meta.name}"'
                upstream = (f"{where}: ResourceClaim not created yet" if entry.resource_claim_template_name else
                            f"{where}, spec.resourceClaim {go_quote(entry.name)}: none of the supported fields are set")
        if claim is not None:
            missing = upstream = ""
        found.append(PodClaim(entry.name, claim, missing, upstream))
    return found


def not_for_pod(claim: dra.ResourceClaim, pod: Pod) -> str:
    """Why a claim made from a template is not ``pod``'s ("" when it is, or when its owner was not read).

    ``k8s.io/dynamic-resource-allocation/resourceclaim`` ``IsForPod``, in its words: the claim must
    be in the pod's namespace and controlled by the pod (``metav1.IsControlledBy``: its first
    ``ownerReferences`` entry with ``controller`` set has the pod's UID). kube-scheduler
    (``foreachPodResourceClaim``) and kubelet refuse such a claim, and the resourceclaim controller
    makes the pod a new one. A claim read for counting only (``owner_known`` False) is not judged.
    """
    if not claim.owner_known:
        return ""
    meta = pod.metadata
    if claim.namespace == meta.namespace and claim.owner is not None and claim.owner.uid == meta.uid:
        return ""
    return (f"ResourceClaim {claim.namespace}/{claim.name} was not created for pod {meta.namespace}/{meta.name} "
            "(pod is not owner)")


DRIVER_CLASSES: Final = {
    protocol.DRA_DRIVER: frozenset({protocol.DRA_DEVICE_CLASS}),
    protocol.NVIDIA_DRA_DRIVER: frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}),
}
"""The DeviceClasses each driver installs (ours: manifests/dra; NVIDIA's: its Helm chart's deviceclass-*.yaml)."""


def asks_driver(claim: dra.ResourceClaim, classes: Mapping[str, dra.DeviceClass] | None, driver: str) -> bool:
    """Whether a claim asks for a class of ``driver``: one the driver installs, or one whose selector names it."""
    for request in claim.requests:
        if request.exactly is None:
            continue
        name = request.exactly.device_class_name
        if name in DRIVER_CLASSES.get(driver, ()):
            return True
        klass = (classes or {}).get(name)
        if klass is not None and any(driver in selector for selector in klass.selectors):
            return True
    return False


def of_driver(claim: dra.ResourceClaim, classes: Mapping[str, dra.DeviceClass] | None, driver: str) -> bool:
    """Whether a claim is ``driver``'s: allocated on a device of it, or asking for a class of it (`asks_driver`).

    An allocated claim's results say so first: it may be read without its requests (`dra.read`, `dra.tally_claim`).
    """
    allocation = claim.allocation
    if allocation is not None and any(r.driver == driver for r in allocation.results):
        return True
    return asks_driver(claim, classes, driver)


def spec_problem(claim: dra.ResourceClaim, classes: Mapping[str, dra.DeviceClass] | None) -> str:
    """What kube-scheduler refuses in a claim as written: an invalid request, or a class with invalid selectors.

    Features only this project's allocator lacks (``dra_objects.ResourceClaim.unsupported``) are
    not problems of a real cluster, so they are not reported. "" when there is none.
    """
    if claim.spec_invalid:
        return f"claim {claim.name}: {claim.spec_invalid}"
    for request in claim.requests:
        klass = (classes or {}).get(request.exactly.device_class_name) if request.exactly is not None else None
        if klass is not None and klass.invalid:
            return f"class {klass.name}: {klass.invalid}"
    return ""


class Unusable(NamedTuple):
    """The first of a pod's claims kube-scheduler cannot use (`first_unusable`), and what is said of it."""

    name: str
    """The pod's entry (``spec.resourceClaims[].name``)."""
    upstream: str
    """kube-scheduler's words (``foreachPodResourceClaim``'s error: PreEnqueue's, PreFilter's), whichever the case."""
    missing: str = ""
    """Why the pod has no such claim (yet), as `resolve_claims` says it (none made, or one made for another pod:
    `not_for_pod`): the pod waits for it ("" when it exists)."""
    refused: str = ""
    """kube-scheduler's words refusing it (a claim being deleted); "" for a missing one."""


def first_unusable(resolved: Sequence[PodClaim]) -> Unusable | None:
    """The first of a pod's claims, in ``spec.resourceClaims`` order, that is missing or being deleted (None: none).

    kube-scheduler's DynamicResources plugin gathers a pod's claims in that order and stops at the
    first one it cannot get, that is being deleted or, made from a template, is not the pod's
    (`not_for_pod`, resolved as missing by `resolve_claims`) (dynamicresources.go ``foreachPodResourceClaim``,
    asked by PreEnqueue before any plugin's PreFilter, and again by PreFilter): the pod is not tried
    until that claim changes, whatever its later claims are. Every claim counts, of any driver.
    ``explain`` and ``doctor`` both ask this, so they name the same claim, and before anything
    `refused_before_nodes` says; so do the scheduler stand-in's PreEnqueue and PreFilter
    (`cli.dynamicresources`), which say ``upstream``.
    """
    from kubectl_gpushare.kube import dra_allocation  # the allocator (and its CEL) only where asked

    for entry in resolved:
        if entry.claim is None:
            return Unusable(entry.name, entry.upstream, missing=entry.missing)
        if entry.claim.deleting:
            words = dra_allocation.being_deleted(entry.claim)
            return Unusable(entry.name, words, refused=words)
    return None


def distinct_claims(resolved: Sequence[PodClaim]) -> list[dra.ResourceClaim]:
    """The claims the pod's entries resolve to, in its order, each once however many entries name it.

    What a pod asks for and holds is its claims': a claim two entries name is one claim, whose
    memory the views count once (`waiting_records`, explain, doctor). kube-scheduler takes it once
    per entry instead (`named_twice`), which is why it never binds such a pod.
    """
    seen: set[tuple[str, str]] = set()
    found: list[dra.ResourceClaim] = []
    for entry in resolved:
        claim = entry.claim
        if claim is not None and (claim.namespace, claim.name) not in seen:
            seen.add((claim.namespace, claim.name))
            found.append(claim)
    return found


class NamedTwice(NamedTuple):
    """A claim two or more of a pod's entries resolve to (`named_twice`)."""

    claim: str
    entries: tuple[str, ...]
    """The entries naming it, in the pod's order."""

    def words(self, entries: str) -> str:
        """What explain and doctor say of it; ``entries``: `entries` written for a sentence (``inspect.caps.named``)."""
        return (f"claim {self.claim} is named by entries {entries}: kube-scheduler takes a claim once per entry, "
                "allocating an unallocated one twice (else cannot allocate all claims) and reserving it for the pod "
                "twice, which the API refuses (status.reservedFor: Duplicate value), so it never binds the pod; "
                "kube-apiserver admits such a pod (only the entries' names must differ): name each claim from one "
                "entry")


def named_twice(resolved: Sequence[PodClaim]) -> NamedTwice | None:
    """The first claim, in the pod's order, that more than one of its entries resolve to (None: none).

    Pod validation (pkg/apis/core/validation ``validatePodResourceClaim``) refuses two entries of one
    ``name``, not two naming one claim, so such a pod is admitted. kube-scheduler's DynamicResources
    plugin keeps one claim per entry (dynamicresources.go ``podResourceClaims``, ``claimStore``):
    Filter passes each unallocated copy to the structured allocator, which allocates every claim it
    is given on its own (``Allocate``'s ``claimsToAllocate``: room for it twice); PreBind's
    ``bindClaim`` for the second copy then finds the claim allocated ("got allocated elsewhere in the
    meantime") or, allocated already, adds the pod to ``reservedFor`` a second time, which
    ResourceClaim status validation refuses (``validateSet`` over the consumers' UIDs). The
    scheduler stand-in does the same (`cli.dynamicresources`); explain and doctor say why.
    """
    entries: dict[tuple[str, str], list[str]] = {}
    for entry in resolved:
        if entry.claim is not None:
            entries.setdefault((entry.claim.namespace, entry.claim.name), []).append(entry.name)
    for (_, name), named in entries.items():
        if len(named) > 1:
            return NamedTwice(name, tuple(named))
    return None


def scheduled_claims(resolved: Sequence[PodClaim], ours: Sequence[dra.ResourceClaim]) -> list[dra.ResourceClaim]:
    """The pod's claims, in its order, that explain and doctor ask kube-scheduler's PreFilter and Filter questions of.

    Those of the drivers a face reads (``ours``), and the allocated claims of any other driver: the
    DynamicResources PreFilter refuses every allocated claim of the pod that is in use, and its Filter
    every node an allocated claim's node selector does not match, whatever the driver (dynamicresources.go
    PreFilter, Filter: ``informationsForClaim[].availableOnNodes``). An unallocated claim of another
    driver is left out: its devices are not read here, so Filter's allocation of it cannot be asked, nor
    is PreFilter's check that its requests' classes exist (kube-scheduler makes it; explain and doctor
    do not say it).
    """
    mine = {id(claim) for claim in ours}
    return [entry.claim for entry in resolved if entry.claim is not None
            and (id(entry.claim) in mine or entry.claim.allocation is not None)]


def refused_before_nodes(claims: Sequence[dra.ResourceClaim], classes: Mapping[str, dra.DeviceClass] | None,
                         pod_uid: str) -> str:
    """What kube-scheduler refuses of a pending pod's claims before it tries any node ("" when nothing).

    A claim's spec or class as written (`spec_problem`, the first claim that has one), then the
    DynamicResources PreFilter (`dra_allocation.prefilter`): what ``explain`` and ``doctor`` both say,
    once `first_unusable` found no claim missing or being deleted (PreEnqueue stops the pod first).
    """
    from kubectl_gpushare.kube import dra_allocation  # the allocator (and its CEL) only where asked

    for claim in claims:
        problem = spec_problem(claim, classes)
        if problem:
            return problem
    return dra_allocation.prefilter(claims, classes, pod_uid)


def requested_memory(claim: dra.ResourceClaim) -> int:
    """Bytes of ``memory`` a claim's requests name (count times amount; 0 where they name none)."""
    total = 0
    for request in claim.requests:
        exactly = request.exactly
        if exactly is None or not exactly.capacity:
            continue
        for name, amount in exactly.capacity.items():
            if dra.split_qualified_name(name, protocol.DRA_DRIVER)[1] == protocol.DRA_CAPACITY_MEMORY:
                total += amount.value * max(exactly.count, 1)
    return total


def waiting_records(pods: Iterable[Pod], objects: DraObjects, unit: str) -> list[PodRecord]:
    """Pods on no node yet whose claims of our driver wait to be allocated, asking what those claims ask.

    What a claim asks is its requests' ``capacity.requests.memory`` (count times amount), in
    ``unit`` rounded up; a pod whose waiting claims name no memory is left out (the policy's
    default applies, which only the node tells).
    """
    index = ClaimIndex(claim for claim in objects.claims if claim.allocation is None)  # only these wait
    unit_bytes = protocol.UNIT_BYTES[unit]
    found: list[PodRecord] = []
    for pod in pods:
        if pod.spec.node_name or not pod.spec.resource_claims:
            continue
        claims = distinct_claims(index.of(pod))  # a claim two entries name asks for its memory once
        waiting = [claim for claim in claims if asks_driver(claim, objects.classes, protocol.DRA_DRIVER)]
        asked = sum(requested_memory(claim) for claim in waiting)
        if asked <= 0:
            continue
        meta = pod.metadata
        found.append(PodRecord(
            uid=meta.uid or f"{meta.namespace}/{meta.name}", namespace=meta.namespace, name=meta.name,
            phase=pod.status.phase, request=_units_up(asked, unit_bytes),
            claim=",".join(claim.name for claim in waiting),
        ))  # fmt: skip
    return found


# --- NVIDIA's driver, read-only ---------------------------------------------------------------------------
def _wire_text(attributes: Mapping[str, dra.WireAttribute], name: str) -> str:
    attribute = attributes.get(name) or attributes.get(f"{protocol.NVIDIA_DRA_DRIVER}/{name}")
    return _text(attribute.string) if attribute is not None and attribute.string is not None else ""


def _wire_memory(device: dra.WireDevice, what: str, warnings: Warnings | None) -> int:
    capacity = device.capacity.get(protocol.NVIDIA_DRA_CAPACITY_MEMORY) or device.capacity.get(
        f"{protocol.NVIDIA_DRA_DRIVER}/{protocol.NVIDIA_DRA_CAPACITY_MEMORY}")
    if capacity is None or capacity.value is None:
        return 0
    try:
        return dra.read_quantity(capacity.value).value
    except ValueError as exc:
        _warn(warnings, f"{what}: memory {protocol.error_reason(exc, 120)}; counted as 0")
        return 0


def _device_order(name: str) -> tuple[tuple[int, str], ...]:
    """``gpu-2`` before ``gpu-10``: numbers compared as numbers."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in name.split("-"))


def nvidia_nodes(objects: DraObjects, ips: Mapping[str, str], warnings: Warnings | None) -> dict[str, StackNode]:
    """NVIDIA DRA nodes by name: one stack GPU per device name of their node-local slices (the first counts).

    A device of a pool kube-scheduler allocates nothing from on its node (`DraObjects.unusable_at`) is unhealthy.
    """
    devices: dict[str, dict[str, tuple[dra.WireDevice, bool]]] = {}
    for slice_ in objects.nvidia:
        node = slice_.spec.node_name
        if not node:
            continue  # allNodes or a node selector: no node to show it on
        on_node = devices.setdefault(node[:253], {})
        usable = not objects.unusable_at(slice_.spec.driver, slice_.spec.pool.name, node)
        for device in slice_.spec.devices[: dra.MAX_DEVICES_PER_SLICE]:
            if protocol.valid_dns_label(device.name) and device.name not in on_node:
                on_node[device.name] = (device, usable)
    nodes: dict[str, StackNode] = {}
    for name, found in devices.items():
        gpus: list[StackGPU] = []
        memories: set[int] = set()
        for index, device_name in enumerate(sorted(found, key=_device_order)):
            device, usable = found[device_name]
            memory = _wire_memory(device, f"ResourceSlice device {name}/{device_name}", warnings)
            memories.add(memory)
            shared = bool(device.allow_multiple_allocations) and memory > 0
            gpus.append(StackGPU(
                index=index, total=memory // MIB if shared else 1,
                unit=protocol.UNIT_MIB if shared else protocol.UNIT_GPUS, id=device_name,
                model=_wire_text(device.attributes, protocol.NVIDIA_DRA_ATTR_PRODUCT),
                healthy=usable and not any(t.effect in BLOCKING_TAINTS for t in device.taints),
            ))  # fmt: skip
        note = f"{protocol.NVIDIA_DRA_DRIVER}"
        if len(memories) == 1 and (memory := memories.pop()) > 0:
            note += f", {memory // MIB} MiB each"
        nodes[name] = StackNode(name, protocol.STACK_NVIDIA_DRA, ips.get(name, "unknown"), tuple(gpus), note)
    return nodes


def nvidia_uuids(objects: DraObjects) -> dict[str, set[str]]:
    """Node -> UUIDs of the GPUs NVIDIA's slices publish there (for doctor's two-drivers check)."""
    found: dict[str, set[str]] = {}
    for slice_ in objects.nvidia:
        for device in slice_.spec.devices[: dra.MAX_DEVICES_PER_SLICE]:
            uuid = _wire_text(device.attributes, protocol.NVIDIA_DRA_ATTR_UUID)
            if uuid and slice_.spec.node_name:
                found.setdefault(slice_.spec.node_name, set()).add(uuid)
    return found


def nvidia_claims(
    objects: DraObjects, nodes: Mapping[str, StackNode], phases: Mapping[str, str]
) -> dict[str, list[StackClaim]]:
    """Node -> what claims hold on NVIDIA DRA GPUs: 1 GPU per allocation, or MiB of a shared device.

    A result naming a device the node does not publish is claimed on GPU ``pending`` (-1).
    """
    pools = pool_nodes(objects)
    shared = shared_pools(objects, pools)
    found: dict[str, list[StackClaim]] = {}
    for claim in objects.claims:
        if claim.allocation is None:
            continue
        for result in claim.allocation.results:
            if (result.driver != protocol.NVIDIA_DRA_DRIVER or result.admin_access
                    or (result.driver, result.pool) in shared):
                continue
            node = nodes.get(result_node(claim, result, pools))
            if node is None:
                continue
            gpu = next((g for g in node.gpus if g.id == result.device), None)
            owner = holder(claim)
            consumed = consumed_memory(result, result.driver)
            if gpu is not None and gpu.unit == protocol.UNIT_MIB:
                amount, unit = (gpu.total if consumed is None else _units_up(consumed, MIB)), protocol.UNIT_MIB
            else:
                amount, unit = 1, protocol.UNIT_GPUS
            found.setdefault(node.name, []).append(StackClaim(
                namespace=claim.namespace, name=owner.name, uid=owner.uid, node=node.name,
                gpu=gpu.index if gpu is not None else PENDING, amount=amount, unit=unit,
                phase=phases.get(owner.uid, ""),
            ))  # fmt: skip
    return found


__all__ = [
    "DRIVERS",
    "DraGpu",
    "DraNode",
    "ClaimIndex",
    "claim_names",
    "DraObjects",
    "distinct_claims",
    "NamedTwice",
    "named_twice",
    "MAX_NAMED_NODES",
    "Holder",
    "PodClaim",
    "Unusable",
    "claim_index",
    "asks_driver",
    "first_unusable",
    "not_for_pod",
    "resolve_claims",
    "refused_before_nodes",
    "scheduled_claims",
    "spec_problem",
    "claim_holdings",
    "claim_records",
    "consumed_memory",
    "holder",
    "Holding",
    "holding_node",
    "holding_records",
    "node_record",
    "node_unit",
    "nvidia_claims",
    "nvidia_nodes",
    "nvidia_uuids",
    "of_driver",
    "our_nodes",
    "pool_name",
    "pool_nodes",
    "pool_states",
    "pool_warning",
    "pool_warnings",
    "UNREADABLE_CLAIMS",
    "UNUSABLE_EFFECT",
    "read",
    "read_classes",
    "request_units",
    "waiting_records",
    "requested_memory",
    "reserved_pods",
    "result_node",
    "shared_pools",
    "units",
    "with_gpus",
]
