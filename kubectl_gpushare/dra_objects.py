"""The parts of ``resource.k8s.io/v1`` objects kubectl-gpushare reads, decoded once, with bounds.

ResourceSlices, ResourceClaims (and their templates) and DeviceClasses arrive as JSON (a list page,
a watch event, the sandbox's store). This module turns each into a small frozen model whose numbers
are checked: quantities parsed (`Quantity`), counts bounded by the API's own limits
(k8s.io/api ``resource/v1/types.go``: 128 devices per slice, 32 attributes and capacities per
device, 32 requests and 32 selectors per claim, 10 valid values per request policy, 32 allocation
results, 256 ``reservedFor`` entries, 10 Ki per CEL expression), names as the API validates them.

What is hostile input here:

- An object whose JSON does not fit the type (a string where a list belongs, nesting that makes the
  decoder recurse) raises `InvalidObjectError` with a one-line reason: the caller warns once and skips it.
- A device that breaks a rule (a negative or absurd capacity, a request policy without a default,
  a step of zero, names that are not DNS labels) is kept with `Device.invalid` set: nothing is ever
  allocated from it and no free capacity is credited from it.
- A claim request that cannot be read sets `ResourceClaim.spec_invalid`; a request using a feature
  this project does not allocate (``firstAvailable``, constraints, admin access) sets
  `ResourceClaim.unsupported`. Its allocation is still read, so views count what it holds.
- An allocation result whose ``consumedCapacity`` cannot be read keeps ``consumed_capacity=None``
  and says so in ``invalid``: readers count it as holding the whole device (nothing free credited).

Each model carries ``problems``: one line per thing dropped or distrusted, for the caller's one
warning. The wire structs (``Wire*``) are public so `kube.types` can build list decoders from them;
the slice's structs omit defaults so the DRA driver writes its ResourceSlice with them (encoded, they
hold only the fields set, under the upstream names).

A slice's ``nodeSelector`` and an allocation's (other than one node's) are compiled once by
`node_affinity` (the rule every reader matches nodes with); one that does not parse is a problem
line and matches no node.

No I/O, no clock, no logging; imports only `protocol`, `node_affinity` and msgspec.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.node_affinity import NodeSelector, compile_selector
from kubectl_gpushare.protocol import valid_dns_label as valid_dns_label
from kubectl_gpushare.protocol import valid_dns_subdomain as valid_dns_subdomain

# --- The API's own limits (k8s.io/api resource/v1 types.go) ---------------------------------------
MAX_DEVICES_PER_SLICE: Final = 128  # ResourceSliceMaxDevices
MAX_ATTRIBUTES_AND_CAPACITIES: Final = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_ATTRIBUTE_VALUE_LENGTH: Final = 64  # DeviceAttributeMaxValueLength
MAX_ATTRIBUTE_VALUES: Final = 48  # ResourceSliceMaxAttributeValuesPerDevice
MAX_TAINTS: Final = 16  # DeviceTaintsMaxLength
MAX_TOLERATIONS: Final = 16  # DeviceTolerationsMaxLength
MAX_REQUESTS: Final = 32  # DeviceRequestsMaxSize
MAX_SELECTORS: Final = 32  # DeviceSelectorsMaxSize
MAX_VALID_VALUES: Final = 10  # CapacityRequestPolicy.ValidValues: "Must not contain more than 10 entries"
MAX_RESULTS: Final = 32  # AllocationResultsMaxSize
MAX_RESERVED_FOR: Final = 256  # ResourceClaimReservedForMaxSize
MAX_EXPRESSION_LENGTH: Final = 10 * 1024  # CELSelectorExpressionMaxLength
MAX_DRIVER_LENGTH: Final = 63  # DriverNameMaxLength
MAX_POOL_LENGTH: Final = 253  # PoolNameMaxLength
MAX_QUALIFIED_DOMAIN: Final = 63  # DeviceMaxDomainLength
MAX_QUALIFIED_ID: Final = 32  # DeviceMaxIDLength

# --- Enumerations (resource/v1 types.go) -----------------------------------------------------------
MODE_EXACT_COUNT: Final = "ExactCount"
MODE_ALL: Final = "All"
EFFECT_NO_SCHEDULE: Final = "NoSchedule"
EFFECT_NO_EXECUTE: Final = "NoExecute"
EFFECT_NONE: Final = "None"
OPERATOR_EXISTS: Final = "Exists"
OPERATOR_EQUAL: Final = "Equal"
ANN_POD_CLAIM_NAME: Final = "resource.kubernetes.io/pod-claim-name"
"""``PodResourceClaimAnnotation``: the pod's ``spec.resourceClaims[].name`` a generated claim is for."""
FINALIZER: Final = "resource.kubernetes.io/delete-protection"
"""``Finalizer``: set on claims the scheduler allocated (its PreBind), removed on deallocation."""

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)  # semver.org 2.0.0's own regular expression


class InvalidObjectError(ValueError):
    """An object that cannot be read at all; the message is one line and names the object."""


# --- Wire shapes: only the fields read; unknown fields are skipped by the decoder -----------------
QuantityValue = str | int | float | bool
"""A quantity as it may arrive (kube-apiserver sends strings; a stand-in may store numbers; a bool is
decoded only to be refused where it stands, not to fail the whole object)."""


class WireOwnerReference(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata.ownerReferences[]``."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class WireMeta(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata``: what the DRA readers use."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generate_name: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    finalizers: list[str] = []
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    owner_references: list[WireOwnerReference] = []


class WireAttribute(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``DeviceAttribute``: exactly one value (the list forms are the DRAListTypeAttributes gate's)."""

    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None
    ints: list[int] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None


class WireRange(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``CapacityRequestPolicyRange``."""

    min: QuantityValue | None = None
    max: QuantityValue | None = None
    step: QuantityValue | None = None


class WireRequestPolicy(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``CapacityRequestPolicy``."""

    default: QuantityValue | None = None
    valid_values: list[QuantityValue] | None = None
    valid_range: WireRange | None = None


class WireCapacity(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``DeviceCapacity``."""

    value: QuantityValue | None = None
    request_policy: WireRequestPolicy | None = None


class WireTaint(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``DeviceTaint``."""

    key: str = ""
    value: str = ""
    effect: str = ""


class WireDevice(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``Device``; the fields of features not allocated here are read only to refuse the device."""

    name: str = ""
    attributes: dict[str, WireAttribute] = {}
    capacity: dict[str, WireCapacity] = {}
    allow_multiple_allocations: bool | None = None
    taints: list[WireTaint] = []
    consumes_counters: list[Any] = []
    binding_conditions: list[str] = []
    node_name: str | None = None
    node_selector: Any | None = None
    all_nodes: bool | None = None


class WirePool(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``ResourcePool``."""

    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class WireSliceSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``ResourceSliceSpec``."""

    driver: str = ""
    pool: WirePool = WirePool()
    node_name: str | None = None
    node_selector: WireNodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[WireDevice] = []


class WireResourceSlice(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """``ResourceSlice``."""

    metadata: WireMeta = WireMeta()
    spec: WireSliceSpec = WireSliceSpec()


class WireCelSelector(msgspec.Struct, frozen=True, gc=False):
    """``CELDeviceSelector``."""

    expression: str = ""


class WireSelector(msgspec.Struct, frozen=True, gc=False):
    """``DeviceSelector``: one CEL expression (the only selector type)."""

    cel: WireCelSelector | None = None


class WireToleration(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``DeviceToleration``."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


class WireCapacityRequirements(msgspec.Struct, frozen=True, gc=False):
    """``CapacityRequirements``."""

    requests: dict[str, QuantityValue] | None = None


class WireExactRequest(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``ExactDeviceRequest``."""

    device_class_name: str = ""
    selectors: list[WireSelector] = []
    allocation_mode: str = ""
    count: int = 0
    admin_access: bool | None = None
    tolerations: list[WireToleration] = []
    capacity: WireCapacityRequirements | None = None


class WireRequest(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``DeviceRequest``."""

    name: str = ""
    exactly: WireExactRequest | None = None
    first_available: list[Any] | None = None


class WireDeviceClaim(msgspec.Struct, frozen=True, gc=False):
    """``DeviceClaim``."""

    requests: list[WireRequest] = []
    constraints: list[Any] = []
    config: list[Any] = []


class WireClaimSpec(msgspec.Struct, frozen=True, gc=False):
    """``ResourceClaimSpec``."""

    devices: WireDeviceClaim = WireDeviceClaim()


class WireResult(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``DeviceRequestAllocationResult``."""

    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    share_id: str | None = msgspec.field(default=None, name="shareID")
    consumed_capacity: dict[str, QuantityValue] | None = None


class WireNodeSelectorRequirement(msgspec.Struct, frozen=True, gc=False):
    """``NodeSelectorRequirement``."""

    key: str = ""
    operator: str = ""
    values: list[str] = []


class WireNodeSelectorTerm(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``NodeSelectorTerm``."""

    match_expressions: list[WireNodeSelectorRequirement] = []
    match_fields: list[WireNodeSelectorRequirement] = []


class WireNodeSelector(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``NodeSelector``."""

    node_selector_terms: list[WireNodeSelectorTerm] = []


class WireDeviceResults(msgspec.Struct, frozen=True, gc=False):
    """``DeviceAllocationResult``."""

    results: list[WireResult] = []


class WireAllocation(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``AllocationResult``."""

    devices: WireDeviceResults = WireDeviceResults()
    node_selector: WireNodeSelector | None = None


class WireConsumer(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``ResourceClaimConsumerReference``."""

    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class WireClaimStatus(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``ResourceClaimStatus``."""

    allocation: WireAllocation | None = None
    reserved_for: list[WireConsumer] = []


class WireResourceClaim(msgspec.Struct, frozen=True, gc=False):
    """``ResourceClaim``."""

    metadata: WireMeta = WireMeta()
    spec: WireClaimSpec = WireClaimSpec()
    status: WireClaimStatus = WireClaimStatus()


class WireAllocatedClaim(msgspec.Struct, frozen=True, gc=False):
    """A ResourceClaim without its ``spec``: what counts an allocated claim (its allocation, not its requests).

    Decoding skips the requests of the many allocated claims; a claim found unallocated is decoded
    again as `WireResourceClaim` where its requests are wanted.
    """

    metadata: WireMeta = WireMeta()
    status: WireClaimStatus = WireClaimStatus()


class WireTallyAllocation(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``AllocationResult`` with its node selector left undecoded (`tally_claim` decodes each distinct one once)."""

    devices: WireDeviceResults = WireDeviceResults()
    node_selector: msgspec.Raw = msgspec.Raw()


class WireTallyStatus(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``ResourceClaimStatus`` of a claim read only to count it."""

    allocation: WireTallyAllocation | None = None
    reserved_for: list[WireConsumer] = []


class WireTallyClaim(msgspec.Struct, frozen=True, gc=False):
    """A ResourceClaim read only to count what it holds: its key, allocation and consumers (and deletion).

    What inspect needs of the many allocated claims of a large cluster, read at under half the cost
    of `WireAllocatedClaim` and `read_claim` (each distinct node selector decoded once). ``metadata`` is `WireMeta`, so
    a claim whose metadata the whole reading refuses (a mistyped label, finalizer, owner ...) does not
    decode here either, and is read whole, for its warning. `tally_claim` takes a claim only where
    nothing in it needs the whole reading.
    """

    metadata: WireMeta = WireMeta()
    status: WireTallyStatus = WireTallyStatus()


class WireTemplateSpec(msgspec.Struct, frozen=True, gc=False):
    """``ResourceClaimTemplateSpec``."""

    metadata: WireMeta = WireMeta()
    spec: WireClaimSpec = WireClaimSpec()


class WireResourceClaimTemplate(msgspec.Struct, frozen=True, gc=False):
    """``ResourceClaimTemplate``."""

    metadata: WireMeta = WireMeta()
    spec: WireTemplateSpec = WireTemplateSpec()


class WireClassSpec(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``DeviceClassSpec``."""

    selectors: list[WireSelector] = []
    extended_resource_name: str | None = None


class WireDeviceClass(msgspec.Struct, frozen=True, gc=False):
    """``DeviceClass``."""

    metadata: WireMeta = WireMeta()
    spec: WireClassSpec = WireClassSpec()


# --- Checked model ----------------------------------------------------------------------------------
class Quantity(msgspec.Struct, frozen=True, gc=False):
    """A non-negative quantity: its value in thousandths, the text kube-apiserver stores, its format.

    Thousandths are exact for every quantity with at most three decimals; finer ones round up, as
    ``MilliValue()`` does. ``binary`` is Go's BinarySI format (a ``Ki``..``Ei`` suffix), which a
    value computed from this quantity is written in.
    """

    millis: int
    text: str
    binary: bool = False

    @property
    def value(self) -> int:
        """The integer value, rounded up (``Quantity.Value()``)."""
        return -(-self.millis // 1000)


class Version(msgspec.Struct, frozen=True, gc=False):
    """A semantic version attribute (semver.org 2.0.0), compared as its spec says."""

    text: str
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()


AttributeValue = int | bool | str | Version | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...] | tuple[Version, ...]


class CapacityRange(msgspec.Struct, frozen=True, gc=False):
    """``validRange``: ``min`` is always set (validation requires it), ``step`` positive when set."""

    min: Quantity
    max: Quantity | None = None
    step: Quantity | None = None


class RequestPolicy(msgspec.Struct, frozen=True, gc=False):
    """``requestPolicy``: how a claim's request of one capacity is rounded and bounded."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRange | None = None


class DeviceCapacity(msgspec.Struct, frozen=True, gc=False):
    """One capacity of a device: its total and, on shared devices, its request policy."""

    value: Quantity
    request_policy: RequestPolicy | None = None


class Taint(msgspec.Struct, frozen=True, gc=False):
    """A device taint; unknown effects are kept and treated like ``None`` (types.go)."""

    key: str
    value: str = ""
    effect: str = ""


class Device(msgspec.Struct, frozen=True, gc=False):
    """One device of a slice. ``invalid`` non-empty: never allocated, never credited as free."""

    name: str
    attributes: dict[str, AttributeValue] = {}
    capacity: dict[str, DeviceCapacity] = {}
    allow_multiple_allocations: bool = False
    taints: tuple[Taint, ...] = ()
    invalid: str = ""


class ResourceSlice(msgspec.Struct, frozen=True, gc=False):
    """A ResourceSlice: one driver's devices in one pool, local to a node or not."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str = ""
    all_nodes: bool = False
    node_selector: NodeSelector | None = None
    """The slice's node selector, compiled (`node_affinity`); one that is refused matches no node."""
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    problems: tuple[str, ...] = ()
    repeated: str = ""
    """The first device name the slice lists twice ("" none): the pool rule reads it (`repeated_device`)."""

    def allocatable_on(self, node: str, labels: Mapping[str, str] | None = None) -> bool:
        """Whether this slice's devices are usable from ``node`` (``NodeMatches``).

        Its own node's, all nodes', or those of the nodes its selector matches (by ``labels``, the
        node's, and its name); per-device node selection is not allocated from.
        """
        if self.node_name:
            return self.node_name == node
        return shared_slice_reaches(self.node_selector, self.all_nodes, node, labels)


def shared_slice_reaches(
    node_selector: NodeSelector | None, all_nodes: bool, node: str, labels: Mapping[str, str] | None
) -> bool:
    """Whether a slice on no one node is usable from ``node`` (``NodeMatches``), for any driver's slice.

    A selector matches a named node by ``labels`` (the node's) and its name; without one, allNodes
    reaches every node ("" included: the pool judged by no node).
    """
    if node_selector is not None:
        return bool(node) and node_selector.matches(labels or {}, node)
    return all_nodes


class Toleration(msgspec.Struct, frozen=True, gc=False):
    """A request's toleration of device taints."""

    key: str = ""
    operator: str = OPERATOR_EQUAL
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``ToleratesTaint`` (k8s.io/dynamic-resource-allocation resourceclaim): effect, key, operator."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == OPERATOR_EXISTS:
            return True
        return self.operator in ("", OPERATOR_EQUAL) and self.value == taint.value


class ExactRequest(msgspec.Struct, frozen=True, gc=False):
    """``exactly``: devices of one class, all selectors true, ``count`` of them or all."""

    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = MODE_EXACT_COUNT
    count: int = 1
    tolerations: tuple[Toleration, ...] = ()
    capacity: dict[str, Quantity] | None = None
    """``capacity.requests``; None when the request names none (the policies' defaults apply)."""


class DeviceRequest(msgspec.Struct, frozen=True, gc=False):
    """One request of a claim; ``exactly`` is None for requests this project does not allocate."""

    name: str
    exactly: ExactRequest | None = None


class AllocatedDevice(msgspec.Struct, frozen=True, gc=False):
    """One allocation result: a device given to a request, and what it consumes of a shared device."""

    request: str
    driver: str
    pool: str
    device: str
    share_id: str = ""
    consumed_capacity: dict[str, Quantity] | None = None
    """None when the result records none (an exclusive device) or it cannot be read (see ``invalid``)."""
    admin_access: bool = False
    invalid: str = ""
    unread_capacity: dict[str, str] | None = None
    """The ``consumedCapacity`` entries as written (cut to 100 characters) when one cannot be read, for
    the node driver's per-claim error; None otherwise."""


class Allocation(msgspec.Struct, frozen=True, gc=False):
    """``status.allocation``: the results, and the one node the allocation is bound to (if any)."""

    results: tuple[AllocatedDevice, ...] = ()
    node_name: str = ""
    """The node of a ``metadata.name In [node]`` node selector, the scheduler's form for local devices."""
    selector: NodeSelector | None = None
    """Any other node selector, compiled (devices of slices with a node selector); None: usable on every node."""

    def usable_on(self, node: str, labels: Mapping[str, str] | None = None) -> bool:
        """Whether the allocation's node selector matches ``node`` (and its ``labels``), as Filter checks it."""
        if self.node_name:
            return self.node_name == node
        return self.selector is None or self.selector.matches(labels or {}, node)


class Consumer(msgspec.Struct, frozen=True, gc=False):
    """A ``reservedFor`` entry."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


class OwnerReference(msgspec.Struct, frozen=True, gc=False):
    """The controlling owner of a claim (its pod, for claims made from a template)."""

    api_version: str
    kind: str
    name: str
    uid: str


class ResourceClaim(msgspec.Struct, frozen=True, gc=False):
    """A ResourceClaim (or a template's claim spec, with empty status)."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    annotations: dict[str, str] = {}
    finalizers: tuple[str, ...] = ()
    owner: OwnerReference | None = None
    owner_known: bool = True
    """False where the claim was read for counting only (`tally_claim`): ``owner`` is None whatever it is."""
    deleting: bool = False
    requests: tuple[DeviceRequest, ...] = ()
    spec_invalid: str = ""
    """Why the requests cannot be allocated as written (a bad quantity, count, selector ...)."""
    unsupported: str = ""
    """A feature this project does not allocate (firstAvailable, constraints, admin access)."""
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


class DeviceClass(msgspec.Struct, frozen=True, gc=False):
    """A DeviceClass: the selectors every request of the class adds."""

    name: str
    selectors: tuple[str, ...] = ()
    invalid: str = ""


class ResourceClaimTemplate(msgspec.Struct, frozen=True, gc=False):
    """A ResourceClaimTemplate: its name and the claim it stamps out (labels, annotations, spec)."""

    namespace: str
    name: str
    claim: ResourceClaim


# --- Quantities ---------------------------------------------------------------------------------------
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _quantity_text(raw: object) -> str:
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError(f"{raw!r} is not a quantity")
    return repr(raw) if isinstance(raw, float) else str(raw)


def read_quantity(raw: object) -> Quantity:
    """A non-negative quantity within int64 thousandths.

    Raises:
        ValueError: not a quantity, negative, or too large (one line).
    """
    return _text_quantity(raw if type(raw) is str else _quantity_text(raw))


@functools.lru_cache(maxsize=4096)
def _text_quantity(text: str) -> Quantity:
    """`read_quantity` of a text; the same few amounts fill every slice and claim, so each is parsed once.

    Bounded, and a refused text is not kept (the error is raised again each time).
    """
    millis = protocol.parse_milli_quantity(text)  # length, syntax and range bounds
    if millis < 0:
        raise ValueError(f"quantity {text[:64]!r} is negative")
    canonical = protocol.canonical_quantity(text.strip())
    return Quantity(millis, canonical, text.strip().endswith(_BINARY_SUFFIXES))


def quantity_from_millis(millis: int, binary: bool) -> Quantity:
    """The quantity Go's ``NewMilliQuantity(millis, format)`` prints (BinarySI or DecimalSI).

    Raises:
        ValueError: negative or beyond int64 thousandths.
    """
    if not 0 <= millis <= protocol.MAX_INT64:
        raise ValueError(f"{millis} thousandths is outside the quantity range")
    if binary and millis % 1000 == 0 and millis // 1000 >= 1024:
        value, power = millis // 1000, 0
        while value % 1024 == 0 and power < len(_BINARY_SUFFIXES):
            value //= 1024
            power += 1
        # Go's BinarySI form: the largest power of 1024 that divides, else the plain integer.
        return Quantity(millis, f"{value}{_BINARY_SUFFIXES[power - 1]}" if power else str(millis // 1000), True)
    text = f"{millis}m" if millis % 1000 else str(millis // 1000)
    return Quantity(millis, protocol.canonical_quantity(text), binary)


# --- Names (`valid_dns_label`, `valid_dns_subdomain`: protocol's) ---------------------------------------

def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``domain/id`` -> (domain, id); an unqualified name belongs to ``driver`` (the CEL and allocator rule)."""
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


@functools.lru_cache(maxsize=1024)
def _valid_qualified_name(name: str) -> bool:
    """Cached: every device of a slice names the same few attributes and capacities."""
    domain, slash, ident = name.partition("/")
    if not slash:
        return len(name) <= MAX_QUALIFIED_ID and _C_IDENTIFIER.fullmatch(name) is not None
    return (
        len(domain) <= MAX_QUALIFIED_DOMAIN
        and valid_dns_subdomain(domain)
        and len(ident) <= MAX_QUALIFIED_ID
        and _C_IDENTIFIER.fullmatch(ident) is not None
    )


def parse_version(text: str) -> Version | None:
    """A semantic version, or None (semver.org 2.0.0; at most 64 characters, as the API allows)."""
    if len(text) > MAX_ATTRIBUTE_VALUE_LENGTH:
        return None
    match = _SEMVER.fullmatch(text)
    if match is None:
        return None
    major, minor, patch, pre = match.group(1), match.group(2), match.group(3), match.group(4)
    return Version(text, int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ())


def compare_versions(a: Version, b: Version) -> int:
    """-1, 0 or 1 by semver precedence (build metadata ignored; a prerelease sorts before its release)."""
    left, right = (a.major, a.minor, a.patch), (b.major, b.minor, b.patch)
    if left != right:
        return -1 if left < right else 1
    if a.prerelease == b.prerelease:
        return 0
    if not a.prerelease or not b.prerelease:
        return -1 if a.prerelease else 1
    for x, y in zip(a.prerelease, b.prerelease, strict=False):
        if x == y:
            continue
        xi, yi = x.isdigit(), y.isdigit()
        if xi and yi:
            return -1 if int(x) < int(y) else 1
        if xi != yi:
            return -1 if xi else 1
        return -1 if x < y else 1
    return -1 if len(a.prerelease) < len(b.prerelease) else 1


# --- Decoding -----------------------------------------------------------------------------------------
_W = TypeVar("_W", bound=msgspec.Struct)
_DECODERS: dict[type, msgspec.json.Decoder[object]] = {}


def _key(meta: Mapping[str, object] | None) -> str:
    if not isinstance(meta, Mapping):
        return ""
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name[:253] if isinstance(name, str) else ""
    if isinstance(namespace, str) and namespace:
        return f"{namespace[:63]}/{name}"
    return name


def decode_wire(data: bytes | Mapping[str, object], wire: type[_W], kind: str, key: str = "") -> _W:
    """One object as its wire struct, from JSON bytes or an already decoded mapping.

    Args:
        data: the JSON, or what a YAML or JSON document decoded to.
        wire: the wire struct to decode into.
        kind: the object's kind, as the error names it.
        key: the object's ``<namespace>/<name>`` where the caller knows it (a reply about the object it
            asked for): the error names it so. Else the error names what a mapping's metadata says, or
            nothing (``a <kind>``).

    Raises:
        InvalidObjectError: ``<kind> <key>: cannot be decoded (<why>)``: the JSON does not fit the type,
            nests so deep that decoding recurses, or is not UTF-8 (msgspec raises `UnicodeDecodeError`
            for that, not `msgspec.DecodeError`).
    """
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            decoder = _DECODERS.get(wire)
            if decoder is None:
                decoder = _DECODERS[wire] = msgspec.json.Decoder(wire)
            result = decoder.decode(data)
            assert isinstance(result, wire)
            return result
        return msgspec.convert(data, wire)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, TypeError, UnicodeDecodeError) as exc:
        if not key and isinstance(data, Mapping):
            key = _key(data.get("metadata"))  # type: ignore[arg-type]
        what = f"{kind} {key}" if key else f"a {kind}"
        raise InvalidObjectError(f"{what}: cannot be decoded ({protocol.error_reason(exc)})") from None


def _meta_key(meta: WireMeta) -> str:
    return f"{meta.namespace[:63]}/{meta.name[:253]}" if meta.namespace else meta.name[:253]


def _require_name(meta: WireMeta, kind: str) -> None:
    if not meta.name or len(meta.name) > 253:
        raise InvalidObjectError(f"a {kind} without a valid metadata.name")


# --- Slices ---------------------------------------------------------------------------------------------
def _attribute(raw: WireAttribute) -> AttributeValue:
    text, number = raw.string, raw.int_
    if (raw.bool_ is None and raw.version is None and raw.ints is None and raw.bools is None and raw.strings is None
            and raw.versions is None and (text is None) != (number is None)):
        # The common ones, a single string or int within bounds (every device's uuid, model and index).
        if text is not None and len(text) <= MAX_ATTRIBUTE_VALUE_LENGTH:
            return text
        if number is not None and -protocol.MAX_INT64 - 1 <= number <= protocol.MAX_INT64:
            return number
    values: list[AttributeValue] = []
    if raw.int_ is not None:
        if not -protocol.MAX_INT64 - 1 <= raw.int_ <= protocol.MAX_INT64:
            raise ValueError("int attribute outside int64")
        values.append(raw.int_)
    if raw.bool_ is not None:
        values.append(raw.bool_)
    if raw.string is not None:
        if len(raw.string) > MAX_ATTRIBUTE_VALUE_LENGTH:
            raise ValueError(f"string attribute longer than {MAX_ATTRIBUTE_VALUE_LENGTH} characters")
        values.append(raw.string)
    if raw.version is not None:
        version = parse_version(raw.version)
        if version is None:
            raise ValueError(f"version attribute {raw.version[:64]!r} is not a semantic version")
        values.append(version)
    if raw.ints is not None:
        if any(not -protocol.MAX_INT64 - 1 <= i <= protocol.MAX_INT64 for i in raw.ints):
            raise ValueError("list attribute value outside int64")
        values.append(tuple(raw.ints))
    if raw.bools is not None:
        values.append(tuple(raw.bools))
    if raw.strings is not None:
        if any(len(i) > MAX_ATTRIBUTE_VALUE_LENGTH for i in raw.strings):
            raise ValueError("list attribute value too long")
        values.append(tuple(raw.strings))
    for items in (raw.ints, raw.bools, raw.strings):
        if items is not None and (not items or len(items) > MAX_ATTRIBUTE_VALUES):
            raise ValueError("list attribute empty or too long")
    if raw.versions is not None:
        parsed = [parse_version(v) for v in raw.versions[:MAX_ATTRIBUTE_VALUES]]
        if not parsed or len(raw.versions) > MAX_ATTRIBUTE_VALUES or any(v is None for v in parsed):
            raise ValueError("versions attribute empty, too long or not semantic versions")
        values.append(tuple(v for v in parsed if v is not None))
    if len(values) != 1:
        raise ValueError("an attribute must have exactly one value")
    return values[0]


def _policy(raw: WireRequestPolicy, value: Quantity) -> RequestPolicy:
    """Checked as kube-apiserver validates a request policy (resource validation, KEP-5075)."""
    default = read_quantity(raw.default) if raw.default is not None else None
    if raw.valid_values is not None and raw.valid_range is not None:
        raise ValueError("requestPolicy sets both validValues and validRange")
    valid_values: tuple[Quantity, ...] = ()
    valid_range: CapacityRange | None = None
    if raw.valid_values is not None:
        if not raw.valid_values or len(raw.valid_values) > MAX_VALID_VALUES:
            raise ValueError(f"validValues must have 1 to {MAX_VALID_VALUES} entries")
        valid_values = tuple(read_quantity(v) for v in raw.valid_values)
        if any(a.millis >= b.millis for a, b in zip(valid_values, valid_values[1:], strict=False)):
            raise ValueError("validValues must be sorted in ascending order without duplicates")
        if default is None or all(v.millis != default.millis for v in valid_values):
            raise ValueError("requestPolicy.default must be one of validValues")
        if valid_values[-1].millis > value.millis:
            raise ValueError("validValues must not exceed the capacity value")
    if raw.valid_range is not None:
        if raw.valid_range.min is None:
            raise ValueError("validRange.min is required")
        low = read_quantity(raw.valid_range.min)
        high = read_quantity(raw.valid_range.max) if raw.valid_range.max is not None else None
        step = read_quantity(raw.valid_range.step) if raw.valid_range.step is not None else None
        if step is not None and step.value <= 0:
            raise ValueError("validRange.step must be at least 1")
        if low.millis > value.millis or (high is not None and (high.millis < low.millis or high.millis > value.millis)):
            raise ValueError("validRange must satisfy min <= max <= capacity value")
        if default is None or default.millis < low.millis or (high is not None and default.millis > high.millis):
            raise ValueError("requestPolicy.default must be within validRange")
        if step is not None and ((default.value - low.value) % step.value
                                 or (high is not None and (high.value - low.value) % step.value)):
            raise ValueError("requestPolicy.default and validRange.max must be min plus a multiple of step")
        valid_range = CapacityRange(low, high, step)
    if default is not None and default.millis > value.millis:
        raise ValueError("requestPolicy.default must not exceed the capacity value")
    return RequestPolicy(default, valid_values, valid_range)


@functools.lru_cache(maxsize=512, typed=True)
def _ranged_capacity(
    value: QuantityValue, default: QuantityValue | None, ranged: bool, low: QuantityValue | None,
    high: QuantityValue | None, step: QuantityValue | None,
) -> DeviceCapacity:
    """A capacity with a policy of a default and maybe a range, checked by `_policy` once per distinct one.

    ``typed``: ``1``, ``1.0`` and ``True`` are different quantities (the last one invalid).
    Raises ValueError as `_policy` (not cached: raised again each time).
    """
    quantity = read_quantity(value)
    span = WireRange(low, high, step) if ranged else None
    return DeviceCapacity(quantity, _policy(WireRequestPolicy(default, None, span), quantity))


def _device(raw: WireDevice) -> Device:
    name = raw.name[:63]
    try:
        if not valid_dns_label(raw.name):
            raise ValueError(f"device name {raw.name[:64]!r} is not a DNS label")
        if len(raw.attributes) + len(raw.capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
            raise ValueError(f"more than {MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities")
        if len(raw.taints) > MAX_TAINTS:
            raise ValueError(f"more than {MAX_TAINTS} taints")
        if raw.consumes_counters or raw.binding_conditions:
            raise ValueError("consumesCounters and bindingConditions are not supported here")
        shared = bool(raw.allow_multiple_allocations)
        attributes: dict[str, AttributeValue] = {}
        for key, attr in raw.attributes.items():
            if not _valid_qualified_name(key):
                raise ValueError(f"attribute name {key[:100]!r} is not a qualified name")
            attributes[key] = _attribute(attr)
        capacity: dict[str, DeviceCapacity] = {}
        for key, cap in raw.capacity.items():
            if not _valid_qualified_name(key):
                raise ValueError(f"capacity name {key[:100]!r} is not a qualified name")
            if cap.value is None:
                raise ValueError(f"capacity {key} has no value")
            policy = cap.request_policy
            if policy is None:
                capacity[key] = DeviceCapacity(read_quantity(cap.value))
                continue
            if not shared:
                raise ValueError(f"capacity {key} has a requestPolicy, but the device does not allow "
                                 "multiple allocations")
            span = policy.valid_range
            if policy.valid_values is None:  # every GPU of a node, and of a fleet, repeats one of a few
                capacity[key] = (
                    _ranged_capacity(cap.value, policy.default, False, None, None, None) if span is None
                    else _ranged_capacity(cap.value, policy.default, True, span.min, span.max, span.step))
                continue
            value = read_quantity(cap.value)
            capacity[key] = DeviceCapacity(value, _policy(policy, value))
        taints = tuple([Taint(t.key[:317], t.value[:63], t.effect[:32]) for t in raw.taints]) if raw.taints else ()
        return Device(name, attributes, capacity, shared, taints)
    except ValueError as exc:
        return Device(name, invalid=protocol.error_reason(exc, 300))


def read_slice(wire: WireResourceSlice) -> ResourceSlice:
    """A decoded slice, checked.

    Raises:
        InvalidObjectError: no name, driver or pool, more devices than the API allows, a bad node choice.
    """
    meta, spec = wire.metadata, wire.spec
    _require_name(meta, "ResourceSlice")
    what = f"ResourceSlice {meta.name}"
    if not valid_dns_subdomain(spec.driver) or len(spec.driver) > MAX_DRIVER_LENGTH:
        raise InvalidObjectError(f"{what}: spec.driver {spec.driver[:64]!r} is not a driver name")
    if not spec.pool.name or len(spec.pool.name) > MAX_POOL_LENGTH:
        raise InvalidObjectError(f"{what}: spec.pool.name is missing or too long")
    if spec.pool.generation < 0 or spec.pool.resource_slice_count < 1:
        raise InvalidObjectError(f"{what}: spec.pool needs a generation >= 0 and a resourceSliceCount >= 1")
    if len(spec.devices) > MAX_DEVICES_PER_SLICE:
        raise InvalidObjectError(f"{what}: more than {MAX_DEVICES_PER_SLICE} devices")
    node_name = spec.node_name or ""
    if len(node_name) > 253:
        raise InvalidObjectError(f"{what}: spec.nodeName is too long")
    choices = sum((bool(node_name), bool(spec.all_nodes), spec.node_selector is not None,
                   bool(spec.per_device_node_selection)))
    if choices != 1:
        raise InvalidObjectError(
            f"{what}: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required")
    devices: list[Device] = []
    problems: list[str] = []
    selector = read_slice_selector(spec.node_selector, what, problems)
    seen: set[str] = set()
    repeated = ""
    for raw in spec.devices:
        device = _device(raw)
        if device.name in seen:
            repeated = repeated or device.name
            device = Device(device.name, invalid="duplicate device name in the slice")
        seen.add(device.name)
        if device.invalid:
            problems.append(f"{what}: device {device.name}: {device.invalid}; not allocatable")
        devices.append(device)
    return ResourceSlice(
        name=meta.name, driver=spec.driver, pool=spec.pool.name, generation=spec.pool.generation,
        slice_count=spec.pool.resource_slice_count, node_name=node_name, all_nodes=bool(spec.all_nodes),
        node_selector=selector, per_device_node_selection=bool(spec.per_device_node_selection),
        devices=tuple(devices), problems=tuple(problems), repeated=repeated,
    )


def read_slice_selector(raw: WireNodeSelector | None, what: str, problems: list[str]) -> NodeSelector | None:
    """A slice's node selector compiled (``NewNodeSelector``; ``what`` names the slice); None: it has none.

    One that validation or parsing refuses matches nothing and adds its warning to ``problems``. The
    one reading of any driver's slice selector: ours (`read_slice`) and NVIDIA's (read unchecked,
    `kube.stacks.dra.read`) are warned about in the same words.
    """
    if raw is None:
        return None
    terms = raw.node_selector_terms
    selector = compile_selector(terms) if len(terms) == 1 else NodeSelector(  # resource validation.go
        error=f"{len(terms)} terms: must have exactly one node selector term")  # validateResourceSliceSpec
    if selector.error:
        problems.append(f"{what}: spec.nodeSelector cannot be used ({selector.error}); it matches no node")
    return selector


def decode_slice(data: bytes | Mapping[str, object]) -> ResourceSlice:
    """`read_slice` of JSON bytes or a mapping. Raises `InvalidObjectError`."""
    return read_slice(decode_wire(data, WireResourceSlice, "ResourceSlice"))


# --- Whose a slice is, read from one that may not decode as a whole -------------------------------------
class _IdentityMeta(msgspec.Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""


class _IdentitySpec(msgspec.Struct, frozen=True, rename="camel", gc=False):
    driver: str = ""
    node_name: str | None = None


class _IdentitySlice(msgspec.Struct, frozen=True, gc=False):
    metadata: _IdentityMeta = _IdentityMeta()
    spec: _IdentitySpec = _IdentitySpec()


_IDENTITY: Final = msgspec.json.Decoder(_IdentitySlice)


class SliceIdentity(msgspec.Struct, frozen=True, gc=False):
    """Whose a ResourceSlice is and how to name it in a delete: the few fields `slice_identity` reads.

    Attributes:
        name: ``metadata.name``, a DNS subdomain (so it is one URL path segment).
        uid: ``metadata.uid`` ("" if absent), for a delete's precondition.
        resource_version: ``metadata.resourceVersion`` ("" if absent), for a delete's precondition.
        driver: ``spec.driver``.
        node_name: ``spec.nodeName`` ("" for a slice of no one node).
    """

    name: str
    uid: str
    resource_version: str
    driver: str
    node_name: str

    def published_by(self, driver: str, node: str) -> bool:
        """Whether the slice is ``driver``'s for ``node``: the two fields the list selects by.

        The resourceslice controller's rule (k8s.io/dynamic-resource-allocation
        ``resourceslicecontroller.go`` ``initInformer``): a node's driver owns the slices whose
        ``spec.driver`` and ``spec.nodeName`` name it, as the field selectors
        ``spec.driver``/``spec.nodeName`` list them. Applied to each item as read, not trusted to
        the selector: a reply that ignored it (a proxy, a stand-in) must not make another driver's or
        node's slice ours.
        """
        return self.driver == driver and self.node_name == node


def slice_identity(data: bytes | msgspec.Raw) -> SliceIdentity | None:
    """`SliceIdentity` of one ResourceSlice's JSON, read past anything else in it; None if it cannot be read.

    Lean and tolerant: only ``metadata.name``/``namespace``/``uid``/``resourceVersion`` and
    ``spec.driver``/``nodeName`` are decoded, so a slice whose devices (or pool, or labels) have the
    wrong JSON type still says whose it is. None when one of those fields has the wrong type, the JSON
    nests so deep that decoding recurses, or it is not an object, not UTF-8; also when the name is no
    DNS subdomain (kube-apiserver validates slice names so: it could not be deleted by name) or a
    namespace is set (a ResourceSlice is cluster-scoped). The caller leaves such an item alone.
    """
    try:
        raw = _IDENTITY.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    meta, spec = raw.metadata, raw.spec
    if meta.namespace or not valid_dns_subdomain(meta.name):
        return None
    return SliceIdentity(meta.name, meta.uid, meta.resource_version, spec.driver, spec.node_name or "")


# --- Claims ---------------------------------------------------------------------------------------------
def _selectors(raw: list[WireSelector], where: str) -> tuple[str, ...]:
    if len(raw) > MAX_SELECTORS:
        raise ValueError(f"{where}: more than {MAX_SELECTORS} selectors")
    found: list[str] = []
    for i, selector in enumerate(raw):
        if selector.cel is None or not selector.cel.expression.strip():
            raise ValueError(f"{where}[{i}].cel.expression: Required value")
        if len(selector.cel.expression) > MAX_EXPRESSION_LENGTH:
            raise ValueError(f"{where}[{i}].cel.expression: longer than {MAX_EXPRESSION_LENGTH} characters")
        found.append(selector.cel.expression)
    return tuple(found)


def _exact(raw: WireExactRequest, where: str) -> ExactRequest:
    if not raw.device_class_name:
        raise ValueError(f"{where}.deviceClassName: Required value")
    if not valid_dns_subdomain(raw.device_class_name):
        raise ValueError(f"{where}.deviceClassName: Invalid value: {raw.device_class_name[:64]!r}: not a DNS subdomain")
    mode = raw.allocation_mode or MODE_EXACT_COUNT
    count = raw.count
    if mode == MODE_EXACT_COUNT:
        count = count or 1  # defaulted by the API server when unset
        if count < 1:
            raise ValueError(f"{where}.count: Invalid value: {count}: must be greater than zero")
    elif mode == MODE_ALL:
        if count:
            raise ValueError(
                f"{where}.count: Invalid value: {count}: must not be specified when allocationMode is 'All'")
    else:
        raise ValueError(
            f'{where}.allocationMode: Unsupported value: "{mode[:32]}": supported values: "All", "ExactCount"')
    if len(raw.tolerations) > MAX_TOLERATIONS:
        raise ValueError(f"{where}.tolerations: more than {MAX_TOLERATIONS}")
    tolerations = tuple(Toleration(t.key[:317], t.operator or OPERATOR_EQUAL, t.value[:63], t.effect[:32])
                        for t in raw.tolerations)
    for i, toleration in enumerate(tolerations):
        if toleration.operator not in (OPERATOR_EQUAL, OPERATOR_EXISTS):
            raise ValueError(f'{where}.tolerations[{i}].operator: Unsupported value: "{toleration.operator[:32]}"')
    capacity: dict[str, Quantity] | None = None
    if raw.capacity is not None and raw.capacity.requests is not None:
        capacity = {}
        if len(raw.capacity.requests) > MAX_ATTRIBUTES_AND_CAPACITIES:
            raise ValueError(f"{where}.capacity.requests: more than {MAX_ATTRIBUTES_AND_CAPACITIES} entries")
        for name, value in raw.capacity.requests.items():
            if not _valid_qualified_name(name):
                raise ValueError(f"{where}.capacity.requests: {name[:100]!r} is not a qualified name")
            try:
                capacity[name] = read_quantity(value)
            except ValueError as exc:
                raise ValueError(f"{where}.capacity.requests[{name}]: Invalid value: {exc}") from None
    return ExactRequest(raw.device_class_name, _selectors(raw.selectors, f"{where}.selectors"), mode, count,
                        tolerations, capacity)


def _requests(devices: WireDeviceClaim) -> tuple[tuple[DeviceRequest, ...], str, str]:
    """The requests, why they cannot be allocated (spec_invalid) and what is not supported."""
    if len(devices.requests) > MAX_REQUESTS:
        return (), f"spec.devices.requests: more than {MAX_REQUESTS} requests", ""
    requests: list[DeviceRequest] = []
    unsupported: list[str] = []
    names: set[str] = set()
    try:
        for i, raw in enumerate(devices.requests):
            where = f"spec.devices.requests[{i}]"
            if not valid_dns_label(raw.name):
                raise ValueError(f"{where}.name: Invalid value: {raw.name[:64]!r}: not a DNS label")
            if raw.name in names:
                raise ValueError(f"{where}.name: Duplicate value: {raw.name!r}")
            names.add(raw.name)
            if (raw.exactly is None) == (not raw.first_available):
                raise ValueError(f"{where}: exactly one of `exactly` or `firstAvailable` must be specified")
            if raw.exactly is None:
                unsupported.append(f"request {raw.name}: firstAvailable (a prioritized list) is not allocated by "
                                   "kubectl-gpushare's allocator")
                requests.append(DeviceRequest(raw.name))
                continue
            if raw.exactly.admin_access:
                unsupported.append(f"request {raw.name}: adminAccess is not allocated by kubectl-gpushare's allocator")
            requests.append(DeviceRequest(raw.name, _exact(raw.exactly, f"{where}.exactly")))
    except ValueError as exc:
        return tuple(requests), protocol.error_reason(exc, 400), "; ".join(unsupported)
    if devices.constraints:
        unsupported.append("spec.devices.constraints are not allocated by kubectl-gpushare's allocator")
    return tuple(requests), "", "; ".join(unsupported)


def _result(raw: WireResult) -> AllocatedDevice:
    request, driver, pool, device, share_id = raw.request, raw.driver, raw.pool, raw.device, raw.share_id or ""
    capacity = raw.consumed_capacity
    consumed: dict[str, Quantity] | None = None
    unread: dict[str, str] | None = None
    invalid = ""
    if capacity is not None:
        try:
            if len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
                raise ValueError("too many consumedCapacity entries")
            consumed = {}
            for name, value in capacity.items():  # a loop, not a comprehension: one entry, 100,000 claims
                consumed[name[:100]] = read_quantity(value)
        except ValueError as exc:
            entries = list(capacity.items())[:MAX_ATTRIBUTES_AND_CAPACITIES]
            unread = {name[:100]: str(value)[:100] for name, value in entries}
            consumed, invalid = None, f"consumedCapacity: {protocol.error_reason(exc)}"
    # Cut names would stand for other objects (two share IDs equal once cut): such a result is kept
    # but marked, so the driver refuses to prepare it and views trust none of its names.
    if len(request) > 128 or len(driver) > 63 or len(pool) > 253 or len(device) > 63 or len(share_id) > 64:
        invalid = invalid or "a name (request, driver, pool, device or shareID) longer than the API allows"
        request, driver, pool, device, share_id = request[:128], driver[:63], pool[:253], device[:63], share_id[:64]
    return AllocatedDevice(request, driver, pool, device, share_id, consumed, raw.admin_access is True, invalid, unread)


def _allocation(raw: WireAllocation, meta: WireMeta, problems: list[str]) -> Allocation:
    results = raw.devices.results
    if len(results) > MAX_RESULTS:
        problems.append(f"ResourceClaim {_meta_key(meta)}: more than {MAX_RESULTS} allocation results; "
                        f"the first {MAX_RESULTS} are read")
        results = results[:MAX_RESULTS]
    read = tuple([_result(r) for r in results])
    for result in read:
        if result.invalid:
            problems.append(f"ResourceClaim {_meta_key(meta)}: device {result.driver}/{result.pool}/{result.device}: "
                            f"{result.invalid}; counted as using the whole device")
    node = _selector_node(raw.node_selector)
    selector = None
    if raw.node_selector is not None and not node:
        selector = compile_selector(raw.node_selector.node_selector_terms)
        if selector.error:
            problems.append(f"ResourceClaim {_meta_key(meta)}: status.allocation.nodeSelector cannot be used "
                            f"({selector.error}); the claim is usable on no node")
    return Allocation(read, node, selector)


def _selector_node(selector: WireNodeSelector | None) -> str:
    """The node of a ``metadata.name In [node]`` node selector (the scheduler's form for local devices), else ""."""
    if selector is not None and len(selector.node_selector_terms) == 1:
        term = selector.node_selector_terms[0]
        fields = term.match_fields
        if (not term.match_expressions and len(fields) == 1 and fields[0].key == "metadata.name"
                and fields[0].operator == "In" and len(fields[0].values) == 1):
            return fields[0].values[0][:253]
    return ""


def _owner(meta: WireMeta) -> OwnerReference | None:
    """The first ``ownerReferences`` entry with ``controller`` true, however many come before it.

    apimachinery ``metav1.GetControllerOfNoCopy`` (what ``IsControlledBy`` and so
    ``resourceclaim.IsForPod`` ask) scans them all; the entries are decoded already, so the scan costs
    nothing the object's size did not.
    """
    for ref in meta.owner_references:
        if ref.controller:
            return OwnerReference(ref.api_version[:64], ref.kind[:64], ref.name[:253], ref.uid[:64])
    return None


_NONE: Final[tuple[tuple[DeviceRequest, ...], str, str]] = ((), "", "")
"""`_requests` of a claim without requests or constraints."""


def read_claim(wire: WireResourceClaim) -> ResourceClaim:
    """A decoded claim, checked. Raises `InvalidObjectError` when it has no name or namespace."""
    meta = wire.metadata
    _require_name(meta, "ResourceClaim")
    if not meta.namespace:
        raise InvalidObjectError(f"ResourceClaim {meta.name[:253]}: no metadata.namespace")
    devices = wire.spec.devices
    requests, spec_invalid, unsupported = _requests(devices) if devices.requests or devices.constraints else _NONE
    problems: list[str] = []
    allocation = _allocation(wire.status.allocation, meta, problems) if wire.status.allocation else None
    reserved = wire.status.reserved_for
    if len(reserved) > MAX_RESERVED_FOR:
        problems.append(f"ResourceClaim {_meta_key(meta)}: more than {MAX_RESERVED_FOR} reservedFor entries; "
                        "the first are read")
        reserved = reserved[:MAX_RESERVED_FOR]
    return ResourceClaim(
        namespace=meta.namespace[:63], name=meta.name, uid=meta.uid[:64], resource_version=meta.resource_version[:64],
        annotations=meta.annotations, finalizers=tuple(meta.finalizers[:64]), owner=_owner(meta),
        deleting=meta.deletion_timestamp is not None, requests=requests, spec_invalid=spec_invalid,
        unsupported=unsupported, allocation=allocation,
        reserved_for=tuple(Consumer(c.resource[:64], c.name[:253], c.uid[:64], c.api_group[:253]) for c in reserved),
        problems=tuple(problems),
    )


_SELECTOR_DECODER: Final = msgspec.json.Decoder(WireNodeSelector)


def tally_claim(wire: WireTallyClaim, selectors: dict[bytes, str | None]) -> ResourceClaim | None:
    """An allocated claim read for counting, with the checks of `read_claim`; None: read it whole instead.

    The claim carries its key, UID, allocation, consumers and whether it is being deleted (which
    `dra_allocation.prefilter` asks, for doctor) only: no requests, annotations, finalizers or
    owner, which the tables do not count by (``owner_known`` False: whose claim it is stays unasked;
    copying the owner costs a sixth of this reading). Anything `read_claim` would warn about, cut or refuse
    (no name, names longer than the API allows, too many results or consumers, a result it marks
    invalid, an undecodable node selector), a node selector other than one node's and an
    unallocated claim give None, so such a claim is read whole and says why there; a plain claim is
    read the same either way.

    Args:
        wire: the claim as `WireTallyClaim`.
        selectors: node selector JSON -> its node (None: undecodable or not one node's), shared by
            the calls of one reading; a cluster's claims repeat one selector per node.
    """
    meta, status = wire.metadata, wire.status
    allocation = status.allocation
    if (allocation is None or not meta.name or len(meta.name) > 253 or not meta.namespace
            or len(meta.namespace) > 63 or len(meta.uid) > 64):
        return None
    results = allocation.devices.results
    reserved = status.reserved_for
    if len(results) > MAX_RESULTS or len(reserved) > MAX_RESERVED_FOR:
        return None
    read: list[AllocatedDevice] = []
    for wire_result in results:
        result = _result(wire_result)
        if result.invalid:
            return None
        read.append(result)
    consumers: list[Consumer] = []
    for c in reserved:
        if len(c.resource) > 64 or len(c.name) > 253 or len(c.uid) > 64 or len(c.api_group) > 253:
            return None
        consumers.append(Consumer(c.resource, c.name, c.uid, c.api_group))
    node: str | None = ""
    raw = allocation.node_selector
    if raw:
        key = bytes(raw)
        if key in selectors:
            node = selectors[key]
        else:
            try:
                node = _selector_node(_SELECTOR_DECODER.decode(key)) or None
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                node = None
            selectors[key] = node
    if node is None:
        return None
    return ResourceClaim(namespace=meta.namespace, name=meta.name, uid=meta.uid, owner_known=False,
                         deleting=meta.deletion_timestamp is not None,
                         allocation=Allocation(tuple(read), node), reserved_for=tuple(consumers))


def decode_claim(data: bytes | Mapping[str, object]) -> ResourceClaim:
    """`read_claim` of JSON bytes or a mapping. Raises `InvalidObjectError`."""
    return read_claim(decode_wire(data, WireResourceClaim, "ResourceClaim"))


def read_template(wire: WireResourceClaimTemplate) -> ResourceClaimTemplate:
    """A decoded template; its claim is the one the resourceclaim controller would create."""
    meta = wire.metadata
    _require_name(meta, "ResourceClaimTemplate")
    requests, spec_invalid, unsupported = _requests(wire.spec.spec.devices)
    claim = ResourceClaim(namespace=meta.namespace[:63], name="", annotations=wire.spec.metadata.annotations,
                          requests=requests, spec_invalid=spec_invalid, unsupported=unsupported)
    return ResourceClaimTemplate(meta.namespace[:63], meta.name, claim)


def decode_template(data: bytes | Mapping[str, object]) -> ResourceClaimTemplate:
    """`read_template` of JSON bytes or a mapping. Raises `InvalidObjectError`."""
    return read_template(decode_wire(data, WireResourceClaimTemplate, "ResourceClaimTemplate"))


# --- Classes --------------------------------------------------------------------------------------------
def read_class(wire: WireDeviceClass) -> DeviceClass:
    """A decoded class; selectors it cannot hold leave it ``invalid`` (nothing allocated through it)."""
    meta = wire.metadata
    _require_name(meta, "DeviceClass")
    try:
        return DeviceClass(meta.name, _selectors(wire.spec.selectors, "spec.selectors"))
    except ValueError as exc:
        return DeviceClass(meta.name, invalid=protocol.error_reason(exc, 300))


def decode_class(data: bytes | Mapping[str, object]) -> DeviceClass:
    """`read_class` of JSON bytes or a mapping. Raises `InvalidObjectError`."""
    return read_class(decode_wire(data, WireDeviceClass, "DeviceClass"))


# --- Reading our driver's devices -----------------------------------------------------------------------
class PoolView(enum.Enum):
    """What one node makes of a pool from the slices it sees (`PoolGenerations.judge`)."""

    USED = "used"
    """Complete: its devices are allocated from (when the slices also name each device once)."""
    INCOMPLETE = "incomplete"
    """``IsIncomplete``, "currently being updated": nothing new is allocated from it."""
    OBSOLETE = "obsolete"
    """A newer generation exists where this node does not see it: the pool is ignored on the node."""


class PoolGenerations:
    """Each pool's newest generation and how many slices publish it, counted in one pass over all slices.

    The pool rule (k8s.io/dynamic-resource-allocation structured, internal/incubating/
    pools_incubating.go ``GatherPools``, ``addSlice``, ``checkSlicesInPool``; `kube.dra_pools`), per
    node: of the slices the node sees only their highest generation counts; they are the pool when they are
    that generation's ``resourceSliceCount`` (of the first of them), whatever other nodes publish.
    Else the whole pool is read: a newer generation anywhere makes the node's obsolete (ignored),
    and the pool is incomplete unless the generation has exactly ``resourceSliceCount`` slices.
    """

    __slots__ = ("newest", "published")

    def __init__(self, pools: Iterable[tuple[str, str, int]]) -> None:
        """``pools``: (driver, pool name, generation) of each slice.

        Each node's ``resourceSliceCount`` is the first of the slices it sees (`judge`'s ``expected``),
        not counted here.
        """
        self.newest: dict[tuple[str, str], int] = {}
        self.published: dict[tuple[str, str], int] = {}
        for driver, name, generation in pools:
            key = (driver, name)
            current = self.newest.get(key)
            if current is None or generation > current:
                self.newest[key], self.published[key] = generation, 1
            elif generation == current:
                self.published[key] += 1

    def judge(self, driver: str, pool: str, generation: int, seen: int, expected: int) -> PoolView:
        """What a node makes of the pool: ``seen`` slices of ``generation``, the newest among those it sees.

        ``expected``: the first of them's ``resourceSliceCount``. Asked by the one pool gathering
        (`kube.dra_pools.gather`) the allocator and the views share.
        """
        if seen == expected:
            return PoolView.USED  # the node's slices are the whole pool
        key = (driver, pool)
        if generation < self.newest.get(key, generation):
            return PoolView.OBSOLETE  # checkSlicesInPool: "the DRA driver is in the process of replacing" it
        return PoolView.USED if self.published.get(key, seen) == expected else PoolView.INCOMPLETE

    @classmethod
    def of(cls, slices: Iterable[ResourceSlice]) -> PoolGenerations:
        """Of checked slices."""
        return cls((slice_.driver, slice_.pool, slice_.generation) for slice_ in slices)


def repeated_name(names: Iterable[str]) -> str | None:
    """The first name ``names`` repeats, else None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def repeated_device(slices: Iterable[ResourceSlice]) -> str | None:
    """The first device name the slices of one pool (one generation) repeat, else None.

    The allocator's pool rule (``GatherPools``, ``poolIsInvalid``: a pool listing a device name
    twice is invalid, and nothing is allocated from it), shared by the allocator and the views. One
    slice says it without a look at its devices (`ResourceSlice.repeated`).
    """
    members = slices if isinstance(slices, Sequence) else list(slices)
    if len(members) == 1:
        return members[0].repeated or None
    return repeated_name(device.name for slice_ in members for device in slice_.devices)


def lookup_capacity(device: Device, name: str, driver: str) -> DeviceCapacity | None:
    """A device's capacity by name, qualified or not, as the allocator resolves it.

    ``resolveCapacityName`` (structured allocator, consumable_capacity.go): an unqualified name means
    the driver's domain; a name qualified with the driver's domain also finds an unqualified entry.
    """
    found = device.capacity.get(name)
    if found is not None:
        return found
    domain, ident = split_qualified_name(name, driver)
    if domain != driver:
        return None
    return device.capacity.get(ident) if "/" in name else device.capacity.get(f"{driver}/{name}")


def lookup_attribute(device: Device, name: str, driver: str) -> AttributeValue | None:
    """A device's attribute by name, with the same domain rule as `lookup_capacity`."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, ident = split_qualified_name(name, driver)
    if domain != driver:
        return None
    return device.attributes.get(ident) if "/" in name else device.attributes.get(f"{driver}/{name}")


__all__ = [
    "ANN_POD_CLAIM_NAME",
    "FINALIZER",
    "AllocatedDevice",
    "Allocation",
    "AttributeValue",
    "CapacityRange",
    "Consumer",
    "Device",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceRequest",
    "ExactRequest",
    "InvalidObjectError",
    "OwnerReference",
    "Quantity",
    "RequestPolicy",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "PoolGenerations",
    "PoolView",
    "ResourceSlice",
    "Taint",
    "Toleration",
    "Version",
    "compare_versions",
    "decode_claim",
    "decode_class",
    "decode_slice",
    "decode_template",
    "decode_wire",
    "lookup_attribute",
    "lookup_capacity",
    "parse_version",
    "quantity_from_millis",
    "read_claim",
    "read_class",
    "read_quantity",
    "read_slice",
    "read_slice_selector",
    "read_template",
    "repeated_device",
    "repeated_name",
    "shared_slice_reaches",
    "split_qualified_name",
    "valid_dns_label",
    "valid_dns_subdomain",
]
