"""kube-scheduler's structured allocator for DRA claims, for what this project supports. Pure.

Given the ResourceSlices, the DeviceClasses, what allocated claims already hold and a pod's claims,
`allocate` picks devices on one node the way k8s.io/dynamic-resource-allocation ``structured``
(the "incubating" allocator, which carries consumable capacity) does, and `prefilter` says what the
DynamicResources scheduler plugin says before trying any node. The sandbox's scheduler stand-in
runs them for every pending pod; ``explain`` asks them why a pod is pending. Rules followed, each
named at its source (``allocator_incubating.go``, ``consumable_capacity.go``, ``pools_incubating.go``,
``allocatedstate.go``, ``dynamicresources.go``):

- Pools (`kube.dra_pools`, the one implementation of ``GatherPools`` the views use too): a node's
  slices (``nodeName`` equal to it, then in their order ``allNodes`` ones and those whose
  ``nodeSelector`` matches its labels and name: ``NodeMatches``, by the one rule of
  `node_affinity`) grouped by (driver, pool); only the highest ``generation`` among them counts.
  The node's slices of it are the pool when there are exactly ``resourceSliceCount`` (of the first),
  whatever other nodes publish; else all the pool's slices are read: a newer generation elsewhere
  makes the node's obsolete (the pool is ignored on the node), and more or fewer slices of the
  generation than ``resourceSliceCount`` make it incomplete: not allocated from. A complete pool
  repeating a device name on the node is invalid: not allocated from, and when nothing fits the
  node's reason is `REASON_INVALID_POOLS`.
- A request ``exactly``: ``ExactCount`` wants ``count`` devices, ``All`` every matching device of
  the node (at least one; an incomplete or invalid pool is an error). The first solution found by
  the exhaustive search (claims, requests, devices in pool/slice/device order) is taken.
- A device is a candidate when it is not in use (an allocation without a share ID holds it), the
  class's selectors and then the request's are true (CEL, `kube.cel`, over the ``device`` variable:
  driver, attributes and capacity by domain, allowMultipleAllocations), its capacity admits the
  request, and no NoSchedule/NoExecute taint is untolerated.
- Capacity (KEP-5075): a request names capacities (unqualified names mean the driver's domain);
  every capacity of the device is consumed: the request rounded by the request policy (up to the
  range's min, then to min + n*step; up to the next valid value), or the policy's default, or the
  whole capacity. A rounded amount above the range's max or not a valid value does not fit. The
  sum over every allocation of a device with ``allowMultipleAllocations`` (what allocated claims
  consumed, what this run assigned) must not exceed the capacity; a device without it is held
  whole by one allocation. Consumption is recorded on shared devices, with a new share ID.
- Admin-access results hold nothing (``allocatedstate.go`` skips them); a result whose consumption
  cannot be read holds its device whole: nothing free is credited from it.
- The allocation's node selector (``createNodeSelector``): a device of a node-local slice pins the
  claim to the node (``metadata.name In [node]``); else the requirements of the node selectors of
  the devices' slices, each once, in one term; else none (usable on every node). An allocated
  claim is usable on the nodes its node selector matches (`available_on`).

Where this differs: a slice whose node selector does not parse matches no node (upstream fails
the allocation; the caller warns once); slices chosen per device, counters (partitionable
devices), binding conditions, ``firstAvailable``, constraints and admin access are not allocated
(`prefilter` says so per claim); the search stops after `MAX_STEPS` device tries, as the plugin's
filter timeout would; quantities beyond int64 thousandths are refused when decoded, so the
"not representable" errors upstream raises past MaxInt64 cannot occur (a rounding past the range
simply does not fit). No I/O; the share IDs come from the caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, NamedTuple

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.kube import cel, dra_pools
from kubectl_gpushare.node_affinity import NodeSelector, merged

# --- The DynamicResources plugin's words (dynamicresources.go) --------------------------------------
REASON_CANNOT_ALLOCATE: Final = "cannot allocate all claims"
"""Filter: the allocator found no devices for every claim on this node."""
REASON_INVALID_POOLS: Final = "invalid resource pools were encountered"
"""Filter: no devices for every claim on this node, and a pool there is invalid (a device name twice)."""
REASON_NOT_ON_NODE: Final = "resourceclaim not available on the node"
"""Filter: an allocated claim's node selector does not match this node."""
REASON_TIMED_OUT: Final = "timed out trying to allocate devices"
"""Filter: the allocation search ran out of time (here: of `MAX_STEPS`)."""
REASON_IN_USE: Final = "resourceclaim in use"
"""PreFilter: an allocated claim cannot be reserved for one more consumer."""
FILTER_ERROR: Final = 'running "DynamicResources" filter plugin: {error}'
"""How kube-scheduler's framework wraps a filter's error status (``RunFilterPlugins``)."""

MAX_STEPS: Final = 100_000
"""Device tries per node before giving up (the plugin's filter timeout, as a count: no clock here)."""


class AllocationError(Exception):
    """A claim or class the allocator cannot work with (a CEL error, a bad request); one line.

    kube-scheduler returns these as the filter's error status: the pod is not scheduled and the
    message is reported, wrapped in `FILTER_ERROR`.
    """


class DeviceId(NamedTuple):
    """``<driver>/<pool>/<device>``: how the allocator names a device."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        """The upstream spelling."""
        return f"{self.driver}/{self.pool}/{self.device}"


def _fq(name: str, driver: str) -> str:
    domain, ident = dra.split_qualified_name(name, driver)
    return f"{domain}/{ident}"


@dataclass(frozen=True)
class AllocatedState:
    """What allocated claims hold (``GatherAllocatedState``): whole devices and shared consumption.

    Attributes:
        in_use: devices held whole (results without a share ID, or whose consumption is unreadable).
        consumed: per shared device, thousandths consumed per fully qualified capacity name.
    """

    in_use: frozenset[DeviceId] = frozenset()
    consumed: Mapping[DeviceId, Mapping[str, int]] = field(default_factory=dict)


def allocated_state(allocations: Iterable[dra.Allocation]) -> AllocatedState:
    """Sum what every allocation holds; admin-access results hold nothing (``allocatedstate.go``)."""
    in_use: set[DeviceId] = set()
    consumed: dict[DeviceId, dict[str, int]] = {}
    for allocation in allocations:
        for result in allocation.results:
            if result.admin_access:
                continue
            device = DeviceId(result.driver, result.pool, result.device)
            if not result.share_id or result.invalid:
                in_use.add(device)
                continue
            totals = consumed.setdefault(device, {})
            for name, amount in (result.consumed_capacity or {}).items():
                key = _fq(name, result.driver)
                totals[key] = totals.get(key, 0) + amount.millis
    return AllocatedState(frozenset(in_use), consumed)


@dataclass(frozen=True)
class Inventory:
    """Everything allocation reads that is the same for every node and every pod of one pass."""

    slices: Sequence[dra.ResourceSlice]
    classes: Mapping[str, dra.DeviceClass]
    state: AllocatedState = AllocatedState()
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Node name -> its labels, which slices' and allocations' node selectors are matched against."""
    generations: dra.PoolGenerations = field(init=False, repr=False, compare=False)
    """Each pool's newest generation, counted once for every node."""
    by_node: Mapping[str, Sequence[dra.ResourceSlice]] = field(init=False, repr=False, compare=False)
    """Node-local slices by node (`on_node`: no pass over every slice per node)."""
    shared: Sequence[dra.ResourceSlice] = field(init=False, repr=False, compare=False)
    """The slices on no one node, in their order, matched per node."""

    def __post_init__(self) -> None:
        by_node: dict[str, list[dra.ResourceSlice]] = {}
        for slice_ in self.slices:
            if slice_.node_name:
                by_node.setdefault(slice_.node_name, []).append(slice_)
        object.__setattr__(self, "generations", dra.PoolGenerations.of(self.slices))
        object.__setattr__(self, "by_node", by_node)
        object.__setattr__(self, "shared", [s for s in self.slices if not s.node_name])

    def labels_of(self, node: str) -> Mapping[str, str]:
        """The node's labels (none when it is not known)."""
        return self.labels.get(node, {})

    def on_node(self, node: str) -> list[dra.ResourceSlice]:
        """The slices whose devices ``node`` can use (``allocatable_on``), as the allocator lists them.

        Its own, then those on no one node in their order (``slicesOnNode[node]`` then
        ``slicesShared``, which ``GatherPools`` reads in this order: the first slice of a pool's
        generation gives its ``resourceSliceCount``).
        """
        labels = self.labels_of(node)
        return [*self.by_node.get(node, ()), *(s for s in self.shared if s.allocatable_on(node, labels))]


# --- Pools --------------------------------------------------------------------------------------------
@dataclass
class _Pool:
    driver: str
    name: str
    slices: list[dra.ResourceSlice]
    """Sorted by name (``buildPool``); none when incomplete."""
    incomplete: bool = False
    invalid: str = ""


_MATCHED: Final = replace(dra_pools.checked_reading({}), sees=lambda s, node: bool(node) or s.all_nodes,
                          reached=lambda s: None)
"""`dra_pools.checked_reading` of the slices `Inventory.on_node` matched already (each selector once per node)."""


def gather_pools(node: str, inventory: Inventory) -> list[_Pool]:
    """The pools with devices for ``node`` (``GatherPools``), sorted by driver and pool name.

    The slices ``node`` can use (`Inventory.on_node`, which matches each selector slice against the
    node's labels once), gathered by the one pool rule (`dra_pools.gather`), judged against every
    slice of the cluster (`Inventory.generations`).
    """
    _, views = dra_pools.gather(inventory.on_node(node), inventory.generations, _MATCHED, (node,))
    result: list[_Pool] = []
    for (driver, name), seen in sorted(views.items()):
        view = seen[0]  # the node's (or, seeing only allNodes slices, "" every other node's)
        if view.view is dra.PoolView.OBSOLETE:
            continue  # checkSlicesInPool: being replaced; ignored on this node
        if view.view is dra.PoolView.INCOMPLETE:
            result.append(_Pool(driver, name, [], incomplete=True))
            continue
        invalid = f"duplicate device name {view.repeated}" if view.repeated is not None else ""
        result.append(_Pool(driver, name, sorted(view.slices, key=lambda s: s.name), invalid=invalid))
    return result


# --- Capacity (consumable_capacity.go) ----------------------------------------------------------------
def consumed_amount(requested: dra.Quantity | None, capacity: dra.DeviceCapacity) -> dra.Quantity | None:
    """What one request consumes of one capacity (``calculateConsumedCapacity``); None: cannot be rounded.

    No request: the policy's default, else the whole capacity. No policy: the request as is. A
    range: up to ``min``, then up to ``min + n*step`` in whole units (``Value()``), written in the
    step's format. Valid values: the smallest one at least the request (else the request itself,
    which then violates the policy).
    """
    policy = capacity.request_policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None:
        low, step = policy.valid_range.min, policy.valid_range.step
        if requested.millis < low.millis:
            return low
        if step is None:
            return requested
        added = requested.value - low.value
        steps = -(-added // step.value)
        try:
            return dra.quantity_from_millis((low.value + step.value * steps) * 1000, step.binary)
        except ValueError:
            return None  # past int64 thousandths: past any capacity
    for valid in policy.valid_values:
        if requested.millis <= valid.millis:
            return valid
    return requested


def violates_policy(amount: dra.Quantity, policy: dra.RequestPolicy | None) -> bool:
    """Whether a rounded amount breaks the request policy (``violatesPolicy``).

    Differs in one detail: the default is recognised by value, where Go compares Quantity structs.
    """
    if policy is None:
        return False
    if policy.default is not None and amount.millis == policy.default.millis:
        return False
    if policy.valid_range is not None:
        high, step, low = policy.valid_range.max, policy.valid_range.step, policy.valid_range.min
        if high is not None and amount.millis > high.millis:
            return True
        return step is not None and (amount.value - low.value) % step.value != 0
    if policy.valid_values:
        return all(amount.millis != valid.millis for valid in policy.valid_values)
    return False


def _resolve_requests(requests: Mapping[str, dra.Quantity] | None, device: dra.Device, driver: str,
                      claim: str) -> dict[str, dra.Quantity] | None:
    """Requested amounts by fully qualified name, or None when the device lacks one (``resolveCapacityRequests``).

    Raises:
        AllocationError: one capacity requested under both spellings.
    """
    resolved: dict[str, dra.Quantity] = {}
    for name, amount in (requests or {}).items():
        if dra.lookup_capacity(device, name, driver) is None:
            return None
        key = _fq(name, driver)
        if key in resolved:
            raise AllocationError(f"claim {claim}: capacity {key.split('/', 1)[1]!r} requested under two names")
        resolved[key] = amount
    return resolved


def _device_capacity(device: dra.Device, driver: str) -> dict[str, tuple[str, dra.DeviceCapacity]]:
    """Fully qualified name -> (name as published, capacity); the driver-qualified entry wins."""
    resolved: dict[str, tuple[str, dra.DeviceCapacity]] = {}
    for name, capacity in sorted(device.capacity.items(), key=lambda item: "/" not in item[0]):
        resolved.setdefault(_fq(name, driver), (name, capacity))
    return resolved


def capacity_fit(device: dra.Device, driver: str, requests: Mapping[str, dra.Quantity] | None,
                 held: Mapping[str, int], claim: str = "") -> dict[str, dra.Quantity] | None:
    """What the request consumes of each capacity if it fits beside ``held``, else None (``cmpRequestOverCapacity``).

    The result is keyed as the status records it (``capacityNameForStatus``: the name as published).

    Raises:
        AllocationError: a request that names one capacity twice.
    """
    resolved = _resolve_requests(requests, device, driver, claim)
    if resolved is None:
        return None
    consumed: dict[str, dra.Quantity] = {}
    for key, (published, capacity) in _device_capacity(device, driver).items():
        amount = consumed_amount(resolved.get(key), capacity)
        if amount is None or violates_policy(amount, capacity.request_policy):
            return None
        if held.get(key, 0) + amount.millis > capacity.value.millis:
            return None
        consumed[published] = amount
    return consumed


# --- CEL ------------------------------------------------------------------------------------------------
def _cel_value(value: dra.AttributeValue) -> object:
    if isinstance(value, dra.Version):
        return cel.semver(value.text)
    if isinstance(value, tuple):
        return [cel.semver(v.text) if isinstance(v, dra.Version) else v for v in value]
    return value


def device_activation(driver: str, device: dra.Device) -> dict[str, object]:
    """The ``device`` CEL variable (dynamic-resource-allocation ``cel/compile.go``: ``DeviceMatches``)."""
    attributes: dict[str, dict[str, object]] = {}
    for name, value in device.attributes.items():
        domain, ident = dra.split_qualified_name(name, driver)
        attributes.setdefault(domain, {})[ident] = _cel_value(value)
    capacity: dict[str, dict[str, object]] = {}
    for name, cap in device.capacity.items():
        domain, ident = dra.split_qualified_name(name, driver)
        capacity.setdefault(domain, {})[ident] = cel.quantity(cap.value.text)
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": device.allow_multiple_allocations}


def _with_domains(activation: dict[str, object], domains: frozenset[str]) -> dict[str, object]:
    """An unknown domain looks up as an empty map (``newStringInterfaceMapWithDefault``).

    CEL maps here are plain values, so the domains the expression spells as string literals are
    added empty; a domain computed at run time still fails as an unknown key.
    """
    result = dict(activation)
    for key in ("attributes", "capacity"):
        maps = activation[key]
        assert isinstance(maps, dict)
        missing = domains - maps.keys()
        if missing:
            result[key] = {**maps, **{domain: {} for domain in missing}}
    return result


# --- The search -------------------------------------------------------------------------------------
@dataclass
class _Request:
    claim_index: int
    claim: dra.ResourceClaim
    name: str
    exactly: dra.ExactRequest
    klass: dra.DeviceClass
    count: int = 0
    all_devices: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class _Chosen:
    request: _Request
    device: DeviceId
    location: tuple[int, int, int]
    consumed: dict[str, dra.Quantity] | None
    node_local: bool
    selector: NodeSelector | None
    """The device's slice's node selector (None: the slice has none)."""


class _Search:
    """One `allocate` run on one node (``allocator``): the in-flight choices and their undo."""

    def __init__(self, node: str, claims: Sequence[dra.ResourceClaim], inventory: Inventory,
                 new_share_id: Callable[[], str]) -> None:
        self.node = node
        self.claims = claims
        self.inventory = inventory
        self.new_share_id = new_share_id
        self.pools = gather_pools(node, inventory)
        self.requests: list[_Request] = []
        self.allocating: set[DeviceId] = set()
        self.allocating_consumed: dict[DeviceId, dict[str, int]] = {}
        self.chosen: list[_Chosen] = []
        self.matches: dict[tuple[int, DeviceId], bool] = {}
        self.activations: dict[DeviceId, dict[str, object]] = {}
        self.steps = 0

    # device access
    def device_at(self, location: tuple[int, int, int]) -> tuple[dra.ResourceSlice, dra.Device]:
        pool, slice_index, device_index = location
        slice_ = self.pools[pool].slices[slice_index]
        return slice_, slice_.devices[device_index]

    def locations(self, start: tuple[int, int, int] = (0, 0, 0)) -> Iterable[tuple[int, int, int]]:
        for p in range(start[0], len(self.pools)):
            pool = self.pools[p]
            if pool.incomplete or pool.invalid:
                continue
            for s in range(start[1] if p == start[0] else 0, len(pool.slices)):
                first = start[2] if (p, s) == start[:2] else 0
                for d in range(first, len(pool.slices[s].devices)):
                    yield (p, s, d)

    # checks
    def selectable(self, index: int, request: _Request, slice_: dra.ResourceSlice, device: dra.Device) -> bool:
        """Class selectors, then the request's (``isSelectable``), cached per request and device."""
        if device.invalid:
            return False
        key = DeviceId(slice_.driver, slice_.pool, device.name)
        cached = self.matches.get((index, key))
        if cached is not None:
            return cached
        base = self.activations.get(key)
        if base is None:
            base = self.activations[key] = device_activation(slice_.driver, device)
        result = (self._matches(request.klass.selectors, base, key, f"class {request.klass.name}")
                  and self._matches(request.exactly.selectors, base, key, f"claim {request.claim.key}"))
        self.matches[(index, key)] = result
        return result

    @staticmethod
    def _matches(selectors: Sequence[str], base: dict[str, object], key: DeviceId, owner: str) -> bool:
        for i, source in enumerate(selectors):
            try:
                expression = cel.compile_selector(source)
            except cel.CelError as exc:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {exc}") from None
            try:
                matched = expression.evaluate_bool({"device": _with_domains(base, cel.selector_domains(source))})
            except cel.CelError as exc:
                raise AllocationError(f"{owner}: selector #{i} on device {key}: CEL runtime error: {exc}") from None
            if not matched:
                return False
        return True

    def in_use(self, device: DeviceId) -> bool:
        return device in self.inventory.state.in_use or device in self.allocating

    def held(self, device: DeviceId) -> dict[str, int]:
        held = dict(self.inventory.state.consumed.get(device, {}))
        for name, amount in self.allocating_consumed.get(device, {}).items():
            held[name] = held.get(name, 0) + amount
        return held

    def fits(self, request: _Request, slice_: dra.ResourceSlice, device: dra.Device) -> dict[str, dra.Quantity] | None:
        key = DeviceId(slice_.driver, slice_.pool, device.name)
        return capacity_fit(device, slice_.driver, request.exactly.capacity, self.held(key), request.claim.key)

    @staticmethod
    def tainted(device: dra.Device, request: _Request) -> bool:
        """An untolerated NoSchedule or NoExecute taint (``taintPreventsAllocation``); other effects are ignored."""
        return any(taint.effect in (dra.EFFECT_NO_SCHEDULE, dra.EFFECT_NO_EXECUTE)
                   and not any(t.tolerates(taint) for t in request.exactly.tolerations)
                   for taint in device.taints)

    # allocation of one device, with its undo
    def take(self, request: _Request, location: tuple[int, int, int]) -> bool:
        slice_, device = self.device_at(location)
        key = DeviceId(slice_.driver, slice_.pool, device.name)
        if self.in_use(key) or self.tainted(device, request):
            return False
        consumed = self.fits(request, slice_, device)
        if consumed is None:
            return False
        shared = device.allow_multiple_allocations
        if shared:
            totals = self.allocating_consumed.setdefault(key, {})
            for name, amount in consumed.items():
                fq = _fq(name, slice_.driver)
                totals[fq] = totals.get(fq, 0) + amount.millis
        else:
            self.allocating.add(key)
        self.chosen.append(_Chosen(request, key, location, consumed if shared else None, bool(slice_.node_name),
                                   slice_.node_selector))
        return True

    def undo(self) -> None:
        chosen = self.chosen.pop()
        if chosen.consumed is None:
            self.allocating.discard(chosen.device)
            return
        totals = self.allocating_consumed[chosen.device]
        for name, amount in chosen.consumed.items():
            fq = _fq(name, chosen.device.driver)
            totals[fq] -= amount.millis
        if not any(totals.values()):
            del self.allocating_consumed[chosen.device]

    def run(self, request_index: int, device_index: int, start: tuple[int, int, int]) -> bool:
        """``allocateOne``: choose the device ``device_index`` of request ``request_index``, then the rest."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _OutOfStepsError
        if request_index == len(self.requests):
            return True
        request = self.requests[request_index]
        if device_index == request.count:
            return self.run(request_index + 1, 0, (0, 0, 0))
        if request.exactly.allocation_mode == dra.MODE_ALL:
            # The devices are known; each must be usable, in any order (only one try).
            if not self.take(request, request.all_devices[device_index]):
                return False
            if self.run(request_index, device_index + 1, (0, 0, 0)):
                return True
            self.undo()
            return False
        for location in self.locations(start):
            slice_, device = self.device_at(location)
            if self.in_use(DeviceId(slice_.driver, slice_.pool, device.name)):
                continue
            if (not self.selectable(request_index, request, slice_, device)
                    or self.fits(request, slice_, device) is None):  # {}: fits, consuming nothing
                continue
            if not self.take(request, location):
                continue
            following = (location[0], location[1], location[2] + 1)
            if self.run(request_index, device_index + 1, following):
                return True
            self.undo()
        return False


class _OutOfStepsError(Exception):
    pass


def _requests(claims: Sequence[dra.ResourceClaim], classes: Mapping[str, dra.DeviceClass]) -> list[_Request]:
    requests: list[_Request] = []
    for index, claim in enumerate(claims):
        problem = claim_problem(claim, classes)
        if problem:
            raise AllocationError(problem)
        for request in claim.requests:
            assert request.exactly is not None  # claim_problem refused the others
            klass = classes.get(request.exactly.device_class_name)
            if klass is None:  # validateDeviceRequest's words; prefilter normally stops the pod first
                raise AllocationError(f"claim {claim.key}, request {request.name}: could not retrieve device class "
                                      f"{request.exactly.device_class_name}: not found")
            requests.append(_Request(index, claim, request.name, request.exactly, klass))
    return requests


def claim_problem(claim: dra.ResourceClaim, classes: Mapping[str, dra.DeviceClass]) -> str:
    """Why this allocator cannot allocate a claim as written ("" when it can); a scheduler error, one line."""
    if claim.spec_invalid:
        return f"claim {claim.key}: {claim.spec_invalid}"
    if claim.unsupported:
        return f"claim {claim.key}: {claim.unsupported}"
    for request in claim.requests:
        if request.exactly is None:
            return f"claim {claim.key}, request {request.name}: unknown request type"
        klass = classes.get(request.exactly.device_class_name)
        if klass is not None and klass.invalid:
            return f"class {klass.name}: {klass.invalid}"
    return ""


def allocate(node: str, claims: Sequence[dra.ResourceClaim], inventory: Inventory,
             new_share_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> tuple[dra.Allocation, ...] | str:
    """Allocate every claim on ``node``: one `Allocation` per claim, or the Filter's reason it cannot.

    Args:
        node: the node's name.
        claims: the pod's claims that are not allocated yet (every class must exist: see `prefilter`).
        inventory: slices, classes and what is already allocated (in-flight allocations included).
        new_share_id: a fresh share ID for each allocation of a shared device.

    Returns:
        The allocations, in the order of ``claims``, or `REASON_CANNOT_ALLOCATE` / `REASON_INVALID_POOLS` /
        `REASON_TIMED_OUT`.

    Raises:
        AllocationError: a claim or class that cannot be evaluated (CEL errors, unsupported requests,
            more than 32 devices for one claim, "All" on an incomplete pool): a scheduler error.
    """
    search = _Search(node, claims, inventory, new_share_id)
    search.requests = _requests(claims, inventory.classes)
    per_claim: dict[int, int] = {}
    for index, request in enumerate(search.requests):
        if request.exactly.allocation_mode == dra.MODE_ALL:
            for pool in search.pools:
                if pool.incomplete or pool.invalid:
                    state = "currently being updated" if pool.incomplete else "currently invalid"
                    raise AllocationError(f"claim {request.claim.key}, request {request.name}: asks for all "
                                          f"devices, but resource pool {pool.driver}/{pool.name} is {state}")
            for location in search.locations():
                slice_, device = search.device_at(location)
                if (search.selectable(index, request, slice_, device)
                        and search.fits(request, slice_, device) is not None):
                    request.all_devices.append(location)
            request.count = len(request.all_devices)
            if not request.count:
                return REASON_CANNOT_ALLOCATE  # "at least one device must exist on the node"
        else:
            request.count = request.exactly.count
        per_claim[request.claim_index] = per_claim.get(request.claim_index, 0) + request.count
    for index, count in per_claim.items():
        if count > dra.MAX_RESULTS:
            raise AllocationError(f"claim {claims[index].key}: number of requested devices {count} exceeds the "
                                  f"claim limit of {dra.MAX_RESULTS}")
    try:
        done = search.run(0, 0, (0, 0, 0))
    except _OutOfStepsError:
        return REASON_TIMED_OUT
    except RecursionError:
        return REASON_TIMED_OUT
    if not done:
        # allocator_incubating.go Allocate: no solution, and an invalid pool seen on the node says so
        # (ErrFailedAllocationOnNode: this node's unschedulable reason, other nodes are still tried)
        return REASON_INVALID_POOLS if any(pool.invalid for pool in search.pools) else REASON_CANNOT_ALLOCATE
    return tuple(_allocation(index, search.chosen, node, new_share_id) for index in range(len(claims)))


def _allocation(index: int, chosen: Sequence[_Chosen], node: str, new_share_id: Callable[[], str]) -> dra.Allocation:
    results: list[dra.AllocatedDevice] = []
    local = False
    selectors: list[NodeSelector] = []
    for item in chosen:
        if item.request.claim_index != index:
            continue
        local = local or item.node_local
        if item.selector is not None:
            selectors.append(item.selector)
        results.append(dra.AllocatedDevice(
            request=item.request.name, driver=item.device.driver, pool=item.device.pool, device=item.device.device,
            share_id=new_share_id() if item.consumed is not None else "", consumed_capacity=item.consumed))
    # createNodeSelector: a node-local device pins the claim to the node; allNodes devices do not; the
    # selectors of node-selector slices' devices become one term of all their requirements.
    if local:
        return dra.Allocation(tuple(results), node)
    return dra.Allocation(tuple(results), "", merged(selectors))


@dataclass(frozen=True)
class Placement:
    """Where a pod's claims can go: the first node that holds them all, and every other node's reason."""

    node: str | None
    allocations: tuple[dra.Allocation, ...]
    """One per claim to allocate, on ``node`` (empty when no node fits)."""
    reasons: Mapping[str, str]
    """node -> the Filter's reason it was refused (`REASON_CANNOT_ALLOCATE`, `REASON_NOT_ON_NODE` ...)."""


def place(nodes: Sequence[str], claims: Sequence[dra.ResourceClaim], inventory: Inventory,
          new_share_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> Placement:
    """The DynamicResources Filter over ``nodes`` in order, for ``fit``/``explain``-style questions.

    Allocated claims must be usable on the node; the others are allocated there (`allocate`). Only
    this plugin's answer: the node filters of other plugins (taints, resources) are the caller's.

    Raises:
        AllocationError: a claim or class the allocator cannot evaluate.
    """
    pending = [c for c in claims if c.allocation is None]
    reasons: dict[str, str] = {}
    for node in nodes:
        if any(not available_on(c, node, inventory.labels_of(node)) for c in claims):
            reasons[node] = REASON_NOT_ON_NODE
            continue
        found = allocate(node, pending, inventory, new_share_id) if pending else ()
        if isinstance(found, str):
            reasons[node] = found
            continue
        return Placement(node, found, reasons)
    return Placement(None, (), reasons)


def prefilter(claims: Sequence[dra.ResourceClaim], classes: Mapping[str, dra.DeviceClass] | None,
              pod_uid: str) -> str:
    """What the plugin's PreFilter says before any node is tried ("" when nothing stops the pod).

    Only the unschedulable cases; problems with a claim's spec are `claim_problem`'s (an error).
    ``classes`` None: the classes were not read (doctor without them), so whether one exists is not
    asked; a claim being deleted or in use is still said.
    In the plugin's order: ``foreachPodResourceClaim`` refuses a claim being deleted while it
    gathers all of the pod's claims, before the loop over them that asks whether an allocated one
    is in use and an unallocated one's classes exist (dynamicresources.go PreFilter).
    """
    for claim in claims:
        if claim.deleting:
            return being_deleted(claim)
    for claim in claims:
        if claim.allocation is not None:
            reserved = any(c.uid == pod_uid for c in claim.reserved_for)
            if not reserved and len(claim.reserved_for) >= dra.MAX_RESERVED_FOR:
                return REASON_IN_USE
            continue
        for request in claim.requests:
            if request.exactly is None:
                continue
            name = request.exactly.device_class_name
            if classes is not None and name not in classes:
                return f"request {request.name}: device class {name} does not exist"
    return ""


def being_deleted(claim: dra.ResourceClaim) -> str:
    """kube-scheduler's words for a claim being deleted (dynamicresources.go ``foreachPodResourceClaim``)."""
    return f'resourceclaim "{claim.name}" is being deleted'


def available_on(claim: dra.ResourceClaim, node: str, labels: Mapping[str, str] | None = None) -> bool:
    """Whether an allocated claim can be used from ``node`` with ``labels`` (its node selector, as Filter checks it)."""
    return claim.allocation is None or claim.allocation.usable_on(node, labels)


def encode_allocation(allocation: dra.Allocation) -> dict[str, object]:
    """``status.allocation`` as kube-scheduler writes it (``AllocationResult``, Go field names)."""
    results: list[dict[str, object]] = []
    for result in allocation.results:
        entry: dict[str, object] = {"request": result.request, "driver": result.driver, "pool": result.pool,
                                    "device": result.device}
        if result.share_id:
            entry["shareID"] = result.share_id
        if result.consumed_capacity:
            entry["consumedCapacity"] = {name: q.text for name, q in sorted(result.consumed_capacity.items())}
        results.append(entry)
    body: dict[str, object] = {"devices": {"results": results}}
    if allocation.node_name:
        body["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [allocation.node_name]}]}]}
    elif allocation.selector is not None:
        body["nodeSelector"] = allocation.selector.wire()
    return body


__all__ = [
    "FILTER_ERROR",
    "MAX_STEPS",
    "Placement",
    "REASON_CANNOT_ALLOCATE",
    "REASON_INVALID_POOLS",
    "REASON_IN_USE",
    "REASON_NOT_ON_NODE",
    "REASON_TIMED_OUT",
    "AllocatedState",
    "AllocationError",
    "DeviceId",
    "Inventory",
    "allocate",
    "allocated_state",
    "available_on",
    "being_deleted",
    "capacity_fit",
    "claim_problem",
    "consumed_amount",
    "device_activation",
    "encode_allocation",
    "gather_pools",
    "place",
    "prefilter",
    "violates_policy",
]
