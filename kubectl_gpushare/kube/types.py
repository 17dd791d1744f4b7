"""Typed views of the Kubernetes objects kubectl-gpushare reads, and their reusable decoders.

One frozen `msgspec.Struct` per kind, declaring only the fields some component reads; every other
field in the API's JSON is skipped by the decoder without being materialised, which is what makes
a 100,000-pod list cheap. Field names are snake_case in Python and camelCase on the wire
(``rename="camel"``). Quantities (``"4"``, ``"10Gi"``) stay strings here; `kube.records` parses them.

The module-level ``*_DECODER`` objects are built once and reused (msgspec's fastest path).
`KINDS` describes each readable resource (URL path, namespaced or not, item and list types) so the
client and the informer stay generic.

This module owns the shapes only: no I/O, no parsing of annotation values, no business rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Generic, TypedDict, TypeVar

import msgspec

from kubectl_gpushare import dra_objects
from kubectl_gpushare.kube.errors import ConfigError

# --- Metadata -------------------------------------------------------------------------------------


class OwnerReference(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata.ownerReferences[]``: lets views group pods under their controller."""

    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ObjectMeta(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata`` of any object."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generate_name: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    creation_timestamp: str = ""
    deletion_timestamp: str | None = None
    owner_references: tuple[OwnerReference, ...] = ()


class ListMeta(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``metadata`` of a list: the snapshot's resourceVersion and the next page's token."""

    resource_version: str = ""
    continue_: str = ""
    remaining_item_count: int | None = None


# --- Pods -------------------------------------------------------------------------------------------


QuantityValue = str | int | float
"""A quantity as it may arrive: kube-apiserver always sends strings, but a stand-in or an old
client may store JSON numbers (``aliyun.com/gpu-mem: 1``). Decoding both keeps one such object
from failing a whole list page; `kube.records` turns the value into a string before parsing it."""


class ResourceRequirements(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``resources`` of a container; quantities keyed by resource name."""

    limits: dict[str, QuantityValue] = {}
    requests: dict[str, QuantityValue] = {}


class Container(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of ``spec.containers`` or ``spec.initContainers``."""

    name: str = ""
    resources: ResourceRequirements = ResourceRequirements()


if TYPE_CHECKING:
    _NullAsEmpty = str
else:  # what msgspec decodes: a JSON null too, made "" by the struct's __post_init__ (`_nulls_as_empty`)
    _NullAsEmpty = str | None


def _nulls_as_empty(entry: msgspec.Struct) -> None:
    """Set each field of ``entry`` decoded from a JSON ``null`` to "", as Go's encoding/json reads it.

    Go's decoder leaves a string field at "" for ``null`` (src/encoding/json/decode.go,
    ``literalStore``: null only clears a pointer, slice, map or interface), so kube-apiserver stores
    ``{"key": "k", "value": null}`` as ``{"key": "k"}`` and kube-scheduler reads the value "".
    """
    for field in entry.__struct_fields__:
        if getattr(entry, field) is None:
            msgspec.structs.force_setattr(entry, field, "")


class Toleration(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of a pod's ``spec.tolerations``, each field "" when ``null`` (`_nulls_as_empty`).

    Read so by every reader (the scheduler stand-in's TaintToleration, ``explain``, the views), as
    kube-scheduler reads such a pod: an operator ``null`` is "", which ``ToleratesTaint`` takes for
    ``Equal`` (k8s.io/api core/v1 toleration.go). ``tolerationSeconds`` (a ``*int64``, NoExecute
    eviction only) is not read.
    """

    key: _NullAsEmpty = ""
    operator: _NullAsEmpty = "Equal"
    value: _NullAsEmpty = ""
    effect: _NullAsEmpty = ""

    def __post_init__(self) -> None:
        """Each field decoded from ``null`` becomes "" (see the class)."""
        if self.key is None or self.operator is None or self.value is None or self.effect is None:
            _nulls_as_empty(self)


_EntryT = TypeVar("_EntryT", bound=msgspec.Struct)


def _entries(raw: object, entry: type[_EntryT]) -> tuple[_EntryT, ...]:
    """A list field kept as raw JSON, converted on read; () for anything that is not a list of ``entry``."""
    if not raw or not isinstance(raw, list):
        return ()
    try:
        return tuple(msgspec.convert(item, entry) for item in raw)
    except msgspec.ValidationError:
        return ()


class PodResourceClaim(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of a pod's ``spec.resourceClaims``: a claim by name, or a template to make one from."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of a pod's ``status.resourceClaimStatuses``: the claim made from a template (None: none needed)."""

    name: str = ""
    resource_claim_name: str | None = None


class PodSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``spec`` of a pod."""

    node_name: str = ""
    scheduler_name: str = ""
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()
    resource_claims_raw: object = msgspec.field(default=(), name="resourceClaims")
    """Any JSON value, read through `resource_claims`: a malformed entry must not make the pod undecodable."""

    @property
    def resource_claims(self) -> tuple[PodResourceClaim, ...]:
        """``spec.resourceClaims`` as entries; () when it is not a list of claim references."""
        return _entries(self.resource_claims_raw, PodResourceClaim)

    @property
    def resource_claims_unreadable(self) -> bool:
        """Whether ``spec.resourceClaims`` is given but does not read as entries (`resource_claims` is ()).

        Not a list (an empty object, string, 0 or false too), an entry that is not an object, a field
        that is not a string (the claim and template names may be null): kube-apiserver refuses such a
        pod, so only a file or a tampered store holds one. Which claims it needs cannot be told; the
        scheduler stand-in, explain and doctor say so instead of taking it for a pod with no claims.
        Only an empty list, ``null`` or no field at all is no claims, as Go's ``encoding/json`` decodes
        the field into ``[]PodResourceClaim`` (``Unmarshal``: ``null`` is a nil slice, any other
        value that is not an array an ``UnmarshalTypeError``).
        """
        raw = self.resource_claims_raw
        if raw is None or raw == ():  # null, or no field (the default)
            return False
        return not isinstance(raw, list) or (bool(raw) and not self.resource_claims)


class PodCondition(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """One entry of a pod's ``status.conditions``: what `PodStatus.ready` reads, any JSON value each."""

    type: object = None
    status: object = None


JsonScalar = str | int | float | bool | None

PodConditions = tuple[PodCondition | list[object] | JsonScalar, ...] | dict[str, object] | JsonScalar
"""``status.conditions`` as any JSON value: a list's objects become `PodCondition` (their other
fields, two timestamps and a message, are skipped unread: a third of a real pod's decoding was
these generic objects), anything else stays as it came."""


class PodStatus(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``status`` of a pod."""

    phase: str = ""
    conditions: PodConditions = ()
    """Any JSON value, narrowed by `ready`: a malformed entry must not make the whole pod (and its
    GPU memory) undecodable, so every shape decodes."""
    resource_claim_statuses_raw: object = msgspec.field(default=(), name="resourceClaimStatuses")
    """Any JSON value, read through `resource_claim_statuses` (as `conditions`, no shape imposed)."""

    @property
    def resource_claim_statuses(self) -> tuple[PodResourceClaimStatus, ...]:
        """``status.resourceClaimStatuses`` as entries; () when it is not a list of such entries."""
        return _entries(self.resource_claim_statuses_raw, PodResourceClaimStatus)

    @property
    def ready(self) -> bool:
        """Running with condition ``Ready=True``, what a Deployment or DaemonSet counts as ready.

        Conditions that are not a list of objects count as not ready.
        """
        if self.phase != "Running" or not isinstance(self.conditions, tuple):
            return False
        return any(
            isinstance(c, PodCondition) and c.type == "Ready" and c.status == "True" for c in self.conditions
        )


class NodeSelectorRequirement(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One ``matchExpressions`` / ``matchFields`` entry of a node selector term."""

    key: str = ""
    operator: str = ""
    values: tuple[str, ...] = ()


class NodeSelectorTerm(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One term of a required node affinity (the terms are ORed, their requirements ANDed)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class _RequiredNodeSelector(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class _NodeAffinity(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    required_during_scheduling_ignored_during_execution: _RequiredNodeSelector | None = None


class _Affinity(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    node_affinity: _NodeAffinity | None = None


class _PlacementSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    affinity: _Affinity | None = None


class PodPlacement(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A pod's required node affinity only: decoded apart for ``explain``, so lists of pods stay cheap."""

    spec: _PlacementSpec = _PlacementSpec()

    @property
    def node_terms(self) -> tuple[NodeSelectorTerm, ...]:
        """The required node-affinity terms (empty: no requirement)."""
        affinity = self.spec.affinity
        required = affinity.node_affinity.required_during_scheduling_ignored_during_execution if (
            affinity and affinity.node_affinity) else None
        return required.node_selector_terms if required else ()


class Pod(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A pod, reduced to what GPU accounting reads."""

    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# --- Nodes -----------------------------------------------------------------------------------------


class Taint(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of ``spec.taints``, each field "" when absent or ``null`` (`_nulls_as_empty`).

    Read so, every reader of taints (the scheduler stand-in, ``explain``, ``doctor``,
    ``--from-file``) takes such a node as upstream does instead of refusing it.
    """

    key: _NullAsEmpty = ""
    value: _NullAsEmpty = ""
    effect: _NullAsEmpty = ""

    def __post_init__(self) -> None:
        """Each field decoded from ``null`` becomes "" (see the class)."""
        if self.key is None or self.value is None or self.effect is None:  # the rare case: one test per field
            _nulls_as_empty(self)


class NodeSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``spec`` of a node."""

    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


class NodeAddress(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of ``status.addresses`` (``InternalIP``, ``Hostname``, ...)."""

    type: str = ""
    address: str = ""


class NodeCondition(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of ``status.conditions`` (``Ready``, ``MemoryPressure``, ...)."""

    type: str = ""
    status: str = ""
    reason: str = ""


class NodeStatus(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``status`` of a node: quantity strings keyed by resource name, addresses and conditions."""

    capacity: dict[str, QuantityValue] = {}
    allocatable: dict[str, QuantityValue] = {}
    addresses: tuple[NodeAddress, ...] = ()
    conditions: tuple[NodeCondition, ...] = ()


class Node(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A node, reduced to what GPU accounting and scheduling read."""

    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# --- ConfigMaps, Leases, Events ------------------------------------------------------------------


class ConfigMap(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A ConfigMap (the unhealthy-GPU lists live in these)."""

    metadata: ObjectMeta = ObjectMeta()
    data: dict[str, str] = {}


class ResourceQuotaStatus(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``status`` of a ResourceQuota: quantities keyed by resource name."""

    hard: dict[str, QuantityValue] = {}
    used: dict[str, QuantityValue] = {}


class ResourceQuota(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A ResourceQuota (per-tenant GPU-memory limits: ``requests.aliyun.com/gpu-mem``)."""

    metadata: ObjectMeta = ObjectMeta()
    status: ResourceQuotaStatus = ResourceQuotaStatus()


class LeaseSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``spec`` of a coordination.k8s.io/v1 Lease (leader election)."""

    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None


class Lease(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A coordination.k8s.io/v1 Lease."""

    metadata: ObjectMeta = ObjectMeta()
    spec: LeaseSpec = LeaseSpec()


class ObjectReference(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``involvedObject`` of an Event."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    field_path: str = ""


class EventSource(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``source`` of a core/v1 Event."""

    component: str = ""
    host: str = ""


class Event(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """A core/v1 Event, as written by the extender and the device plugin and read by views."""

    metadata: ObjectMeta = ObjectMeta()
    involved_object: ObjectReference = ObjectReference()
    reason: str = ""
    message: str = ""
    type: str = "Normal"
    count: int = 0
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    source: EventSource = EventSource()
    reporting_component: str = ""
    reporting_instance: str = ""


# --- Koordinator devices ---------------------------------------------------------------------------

class KoordDeviceInfo(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One device of a Koordinator ``Device`` (koordinator ``apis/scheduling/v1alpha1/device_types.go`` DeviceInfo)."""

    type: str = ""
    id: str = ""
    minor: int | None = None
    health: bool = False
    resources: dict[str, QuantityValue] = {}


class KoordDeviceSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``spec`` of a Koordinator ``Device``."""

    devices: tuple[KoordDeviceInfo, ...] = ()


class KoordDevice(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """Koordinator's per-node device inventory (cluster-scoped, named after its node)."""

    metadata: ObjectMeta = ObjectMeta()
    spec: KoordDeviceSpec = KoordDeviceSpec()



class AdmissionPolicy(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """An ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy: only its name and labels are read."""

    metadata: ObjectMeta = ObjectMeta()


class AdmissionPolicyBindingSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``spec`` of a ValidatingAdmissionPolicyBinding: which policy, and what a refusal does."""

    policy_name: str = ""
    validation_actions: tuple[str, ...] = ()


class AdmissionPolicyBinding(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """An ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicyBinding."""

    metadata: ObjectMeta = ObjectMeta()
    spec: AdmissionPolicyBindingSpec = AdmissionPolicyBindingSpec()


# --- Lists, watch events, Status -------------------------------------------------------------------


KubeObject = (
    Pod | Node | ConfigMap | Lease | Event | ResourceQuota | KoordDevice | AdmissionPolicy
    | AdmissionPolicyBinding | dra_objects.WireResourceSlice | dra_objects.WireResourceClaim
    | dra_objects.WireDeviceClass
)
"""Every kind the client decodes: what an object of a kind named only by its plural (``"pods"``) can be."""
ItemT = TypeVar("ItemT", bound=KubeObject)
"""One kind's item type, in functions generic over kinds (`Client.get` returns a `Pod` for `PODS`)."""
ItemT_co = TypeVar("ItemT_co", bound=KubeObject, covariant=True)
"""Covariant twin of `ItemT` for the frozen containers (`Kind`, `ObjectList`): a ``Kind[Pod]`` is a
``Kind[KubeObject]``, which is what a kind looked up by name is typed as."""


class ObjectList(msgspec.Struct, Generic[ItemT_co], frozen=True, rename="camel", gc=False):
    """One page of a list of one kind (``PodList``, ``NodeList``, ...)."""

    metadata: ListMeta = ListMeta()
    items: tuple[ItemT_co, ...] = ()



class ListEnvelope(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """A list of any kind with its items skipped: reads the continue token without decoding items."""

    metadata: ListMeta = ListMeta()


class RawList(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """A list page whose items are kept undecoded, to decode them one by one (`kube.lenient.decode_page`)."""

    metadata: ListMeta = ListMeta()
    items: tuple[msgspec.Raw, ...] = ()


class StatusCause(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """One entry of ``Status.details.causes`` (validation failures name the field here)."""

    reason: str = ""
    message: str = ""
    field: str = ""


class StatusDetails(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``details`` of a Status."""

    name: str = ""
    kind: str = ""
    causes: tuple[StatusCause, ...] = ()
    retry_after_seconds: int | None = None


class Status(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    """``kind: Status``: the body of every API error, of a watch ERROR event, and of a Binding reply."""

    kind: str = ""
    status: str = ""
    message: str = ""
    reason: str = ""
    code: int = 0
    details: StatusDetails | None = None
    metadata: ListMeta | None = None
    """On a 410 for an expired ``continue`` token, may carry a token to resume inconsistently."""


class RawWatchEvent(msgspec.Struct, frozen=True):
    """One line of a watch stream before its object is decoded (its type decides how)."""

    type: str
    object: msgspec.Raw = msgspec.Raw(b"null")


T = TypeVar("T")


class WatchEvent(msgspec.Struct, Generic[T], frozen=True):
    """A decoded watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK.

    ERROR events never become a `WatchEvent`; the client raises them as errors instead.
    """

    type: str
    object: T


class BookmarkMeta(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """``metadata`` of a BOOKMARK event's object: only the resourceVersion is meaningful."""

    resource_version: str = ""


class Bookmark(msgspec.Struct, frozen=True):
    """The object of a BOOKMARK event."""

    metadata: BookmarkMeta = BookmarkMeta()


# --- Patch bodies (typed like kopf's bodies.py: what the faces send) ---------------------------------


class MetadataPatch(TypedDict, total=False):
    """``metadata`` of a merge or strategic patch; a None value deletes the key."""

    annotations: dict[str, str | None]
    labels: dict[str, str | None]
    resourceVersion: str  # noqa: N815 - wire name; makes the patch conditional (409 if stale)


class ObjectPatch(TypedDict, total=False):
    """A metadata-only patch (annotations, labels) of any object."""

    metadata: MetadataPatch


class ResourceListPatch(TypedDict, total=False):
    """``status.capacity`` / ``status.allocatable`` of a node status patch (quantity strings)."""

    capacity: dict[str, str | None]
    allocatable: dict[str, str | None]


class NodeStatusPatch(TypedDict):
    """The body of a node ``status`` subresource patch."""

    status: ResourceListPatch


def annotations_patch(annotations: Mapping[str, str | None], resource_version: str | None = None) -> ObjectPatch:
    """A patch setting (or, with None, removing) annotations, optionally only if unchanged since a version."""
    meta: MetadataPatch = {"annotations": dict(annotations)}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta}


# --- Reusable decoders -----------------------------------------------------------------------------

POD_DECODER: Final = msgspec.json.Decoder(Pod)
NODE_DECODER: Final = msgspec.json.Decoder(Node)
CONFIGMAP_DECODER: Final = msgspec.json.Decoder(ConfigMap)
LEASE_DECODER: Final = msgspec.json.Decoder(Lease)
EVENT_DECODER: Final = msgspec.json.Decoder(Event)
POD_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[Pod])
NODE_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[Node])
CONFIGMAP_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[ConfigMap])
LEASE_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[Lease])
EVENT_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[Event])
LIST_META_DECODER: Final = msgspec.json.Decoder(ListEnvelope)
STATUS_DECODER: Final = msgspec.json.Decoder(Status)
RAW_WATCH_EVENT_DECODER: Final = msgspec.json.Decoder(RawWatchEvent)
RAW_LIST_DECODER: Final = msgspec.json.Decoder(RawList)
BOOKMARK_DECODER: Final = msgspec.json.Decoder(Bookmark)
RESOURCEQUOTA_DECODER: Final = msgspec.json.Decoder(ResourceQuota)
RESOURCEQUOTA_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[ResourceQuota])
KOORD_DEVICE_DECODER: Final = msgspec.json.Decoder(KoordDevice)
KOORD_DEVICE_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[KoordDevice])
POD_PLACEMENT_DECODER: Final = msgspec.json.Decoder(PodPlacement)
ADMISSION_POLICY_DECODER: Final = msgspec.json.Decoder(AdmissionPolicy)
ADMISSION_POLICY_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[AdmissionPolicy])
ADMISSION_POLICY_BINDING_DECODER: Final = msgspec.json.Decoder(AdmissionPolicyBinding)
ADMISSION_POLICY_BINDING_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[AdmissionPolicyBinding])
DRA_SLICE_DECODER: Final = msgspec.json.Decoder(dra_objects.WireResourceSlice)
DRA_SLICE_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[dra_objects.WireResourceSlice])
DRA_CLAIM_DECODER: Final = msgspec.json.Decoder(dra_objects.WireResourceClaim)
DRA_CLAIM_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[dra_objects.WireResourceClaim])
DRA_CLASS_DECODER: Final = msgspec.json.Decoder(dra_objects.WireDeviceClass)
DRA_CLASS_LIST_DECODER: Final = msgspec.json.Decoder(ObjectList[dra_objects.WireDeviceClass])
ENCODER: Final = msgspec.json.Encoder()
"""Encodes Structs (camelCase, defaults omitted) and plain dicts for request bodies."""
DECODE_ERRORS: Final = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)
"""What a decoder above raises for bytes from the wire: not JSON or the wrong shape (``DecodeError``,
``ValidationError`` among them), nested past Python's recursion limit, or a string that is not UTF-8."""


class Kind(msgspec.Struct, Generic[ItemT_co], frozen=True):
    """How to reach and decode one resource type.

    Attributes:
        kind: the object kind (``Pod``), as in ``kind:`` fields.
        plural: the URL resource name (``pods``).
        api_path: the group-version prefix (``/api/v1`` or ``/apis/<group>/<version>``).
        namespaced: whether objects live in namespaces.
        item_decoder: decodes one object.
        list_decoder: decodes one list page; its ``items`` are of the item type.
    """

    kind: str
    plural: str
    api_path: str
    namespaced: bool
    item_decoder: msgspec.json.Decoder[ItemT_co]
    list_decoder: msgspec.json.Decoder[ObjectList[ItemT_co]]

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of a collection (all namespaces when ``namespace`` is None) or one object.

        Raises:
            ConfigError: ``namespace`` or ``name`` cannot be one path segment (`path_segment`).
        """
        parts = [self.api_path]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{path_segment(namespace)}")
        parts.append(self.plural)
        if name:
            parts.append(path_segment(name))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


def path_segment(name: str) -> str:
    """``name``, unchanged, if it can be one segment of a URL path; else the error client-go gives.

    client-go's ``Request.Name``/``Namespace`` (``rest/request.go``) refuse a name that
    ``IsValidPathSegmentName`` (``apimachinery/pkg/api/validation/path/name.go``) rejects: ``.``,
    ``..``, or one holding ``/`` or ``%``, so ``gpu-a/status`` or ``../x`` never walks the URL.

    Raises:
        ConfigError: the name is ``.`` or ``..`` or holds ``/`` or ``%`` (a usage error, exit 2).
    """
    problems = [f"may not be '{name}'"] if name in (".", "..") else []
    problems += [f"may not contain '{c}'" for c in "/%" if c in name]
    if problems:
        shown = name if len(name) <= 70 else name[:70] + "..."
        raise ConfigError(f"invalid resource name {shown!r}: {'; '.join(problems)}")
    return name


PODS: Final = Kind("Pod", "pods", "/api/v1", True, POD_DECODER, POD_LIST_DECODER)
NODES: Final = Kind("Node", "nodes", "/api/v1", False, NODE_DECODER, NODE_LIST_DECODER)
CONFIGMAPS: Final = Kind("ConfigMap", "configmaps", "/api/v1", True, CONFIGMAP_DECODER, CONFIGMAP_LIST_DECODER)
LEASES: Final = Kind("Lease", "leases", "/apis/coordination.k8s.io/v1", True, LEASE_DECODER, LEASE_LIST_DECODER)
EVENTS: Final = Kind("Event", "events", "/api/v1", True, EVENT_DECODER, EVENT_LIST_DECODER)
RESOURCEQUOTAS: Final = Kind(
    "ResourceQuota", "resourcequotas", "/api/v1", True, RESOURCEQUOTA_DECODER, RESOURCEQUOTA_LIST_DECODER
)
KOORD_DEVICES: Final = Kind(
    "Device", "devices", "/apis/scheduling.koordinator.sh/v1alpha1", False, KOORD_DEVICE_DECODER,
    KOORD_DEVICE_LIST_DECODER,
)
"""Koordinator's ``Device`` (served only where Koordinator's CRD is installed)."""
ADMISSION_POLICIES: Final = Kind(
    "ValidatingAdmissionPolicy", "validatingadmissionpolicies", "/apis/admissionregistration.k8s.io/v1", False,
    ADMISSION_POLICY_DECODER, ADMISSION_POLICY_LIST_DECODER,
)
ADMISSION_POLICY_BINDINGS: Final = Kind(
    "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", "/apis/admissionregistration.k8s.io/v1",
    False, ADMISSION_POLICY_BINDING_DECODER, ADMISSION_POLICY_BINDING_LIST_DECODER,
)
"""Served from Kubernetes 1.30 (``admissionregistration.k8s.io/v1``); doctor checks node confinement with them."""
DRA_SLICES: Final = Kind(
    "ResourceSlice", "resourceslices", "/apis/resource.k8s.io/v1", False, DRA_SLICE_DECODER, DRA_SLICE_LIST_DECODER
)
"""ResourceSlices (served from Kubernetes 1.34; a 404 where the cluster has no ``resource.k8s.io/v1``)."""
DRA_CLAIMS: Final = Kind(
    "ResourceClaim", "resourceclaims", "/apis/resource.k8s.io/v1", True, DRA_CLAIM_DECODER, DRA_CLAIM_LIST_DECODER
)
"""ResourceClaims (the views list them; the DRA driver and the kubelet stand-in get single claims)."""
DRA_CLASSES: Final = Kind(
    "DeviceClass", "deviceclasses", "/apis/resource.k8s.io/v1", False, DRA_CLASS_DECODER, DRA_CLASS_LIST_DECODER
)
"""DeviceClasses (explain and doctor: the selectors a claim's class adds)."""

KINDS: Final[dict[str, Kind[KubeObject]]] = {
    "pods": PODS,
    "nodes": NODES,
    "configmaps": CONFIGMAPS,
    "leases": LEASES,
    "events": EVENTS,
    "resourcequotas": RESOURCEQUOTAS,
}
"""Readable kinds by plural name."""
