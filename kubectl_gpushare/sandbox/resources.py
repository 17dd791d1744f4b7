"""The resources the sandbox serves, declared as data (one `Resource` per kind).

Owns each kind's names, scope, verbs, subresources and the field labels its field selectors may
use. Discovery, routing, the store and the Table printer all read this table, so adding a kind is
one entry here. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from kubectl_gpushare.kube.go_format import go_quote

RBAC = "rbac.authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
DRA = "resource.k8s.io"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _path(obj: dict[str, Any], *keys: str) -> str:
    value: Any = obj
    for key in keys:
        if not isinstance(value, dict):
            return ""
        value = value.get(key)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


FieldGetter = Callable[[dict[str, Any]], str]

CORE_REFUSAL: Final = "field label not supported: {label}"
"""The words of the field label conversion funcs k8s.io/kubernetes pkg/apis/core/v1/conversion.go
registers (Pod, Node, Namespace, Event, Service, ...), and of a custom resource's
(apiextensions-apiserver pkg/apiserver/conversion/converter.go ``ConvertFieldLabel``)."""


def _getter(dotted: str) -> FieldGetter:
    keys = tuple(dotted.split("."))
    return lambda obj: _path(obj, *keys)


@dataclass(frozen=True)
class Resource:
    """One kind the sandbox stores and serves."""

    plural: str
    kind: str
    singular: str
    namespaced: bool
    group: str = ""
    version: str = "v1"
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    """Discovery categories (``kubectl get all`` lists the kinds in ``all``)."""
    fields: tuple[str, ...] = ()
    """Field labels usable in ``fieldSelector`` besides metadata.name and metadata.namespace."""
    field_label_renames: dict[str, str] = field(default_factory=dict, compare=False)
    """Labels the kind's conversion func takes and renames to another (`convert_field_label`)."""
    field_label_refusal: str | None = None
    """The error of the kind's own field label conversion func, a format of ``label`` (Go's ``%s``) and
    ``quoted`` (``%q``); None where the kind registers none (`refuse_field_label`)."""
    getters: dict[str, FieldGetter] = field(default_factory=dict, compare=False, repr=False)

    @property
    def api_version(self) -> str:
        """``v1`` or ``group/version``, as written in an object's ``apiVersion``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """The kind of a list response (``PodList``)."""
        return self.kind + "List"

    def refuse_field_label(self, label: str) -> str | None:
        """kube-apiserver's 400 message for ``label`` in this kind's field selector; None where it accepts it.

        ``Scheme.ConvertFieldLabel`` (k8s.io/apimachinery/pkg/runtime/scheme.go) calls the kind's own
        conversion func where one is registered (`field_label_refusal`), else
        ``DefaultMetaV1FieldSelectorConversion`` (runtime/conversion.go), which takes metadata.name and
        metadata.namespace on every kind, a cluster-scoped one too (where a namespace then selects
        nothing but "": k8s.io/apiserver/pkg/storage/selection_predicate.go ``DefaultClusterScopedAttr``
        has no metadata.namespace, and a missing field reads as ""). The own funcs of the cluster-scoped
        kinds served here (Node and Namespace in pkg/apis/core/v1/conversion.go, ResourceSlice in
        pkg/apis/resource/v1/conversion.go, a cluster-scoped custom resource's ``ConvertFieldLabel``)
        refuse metadata.namespace, and those of the namespaced ones take it: an own func takes it
        exactly where the kind is namespaced.
        """
        namespace_known = self.namespaced or self.field_label_refusal is None
        if label == "metadata.name" or label in self.fields or label in self.field_label_renames:
            return None
        if label == "metadata.namespace" and namespace_known:
            return None
        if self.field_label_refusal is None:
            return f'{go_quote(label)} is not a known field selector: only "metadata.name", "metadata.namespace"'
        return self.field_label_refusal.format(label=label, quoted=go_quote(label))

    def convert_field_label(self, label: str) -> str:
        """The field label a label `refuse_field_label` took selects on: the conversion func's returned label.

        ``Scheme.ConvertFieldLabel`` returns the label the store's field set is keyed by, which is the
        label itself but for `field_label_renames` (Pod's ``spec.host``, pkg/apis/core/v1/conversion.go).
        """
        return self.field_label_renames.get(label, label)

    def field_values(self, obj: dict[str, Any]) -> dict[str, str]:
        """Every selectable field of ``obj``, as strings ("" when absent, as the real server does)."""
        meta = obj.get("metadata") or {}
        values = {"metadata.name": str(meta.get("name", "")), "metadata.namespace": str(meta.get("namespace", ""))}
        for label in self.fields:
            values[label] = self.getters[label](obj)
        return values


def _job_successful(obj: dict[str, Any]) -> str:
    """A Job's ``status.successful`` field: its succeeded count, 0 when absent (an int32 upstream)."""
    status = obj.get("status")
    succeeded = status.get("succeeded") if isinstance(status, dict) else None
    return str(succeeded) if isinstance(succeeded, int) and not isinstance(succeeded, bool) else "0"


_DERIVED: Final[dict[str, FieldGetter]] = {
    "source": lambda obj: _path(obj, "source", "component") or _path(obj, "reportingComponent"),
    # Pod's conversion func takes status.podIPs, but pkg/registry/core/pod/strategy.go ToSelectableFields
    # sets no such field (its "TODO: add podIPs ..."; status.podIP is PodIPs[0]), and a field the set
    # lacks reads as "" (k8s.io/apimachinery/pkg/fields fields.Set.Get): = "" selects every pod, an IP none.
    "status.podIPs": lambda obj: "",
    "status.successful": _job_successful,  # pkg/registry/batch/job/strategy.go: strconv.Itoa(int(Status.Succeeded))
    # Service: SetDefaults_Service (pkg/apis/core/v1/defaults.go), no type is ClusterIP.
    "spec.type": lambda obj: _path(obj, "spec", "type") or "ClusterIP",
}
"""Field labels whose value is not simply the object's value at that path."""


def _resource(plural: str, kind: str, namespaced: bool, **kwargs: Any) -> Resource:
    fields = tuple(kwargs.pop("fields", ()))
    getters = {label: _DERIVED.get(label) or _getter(label) for label in fields}
    return Resource(plural, kind, kind.lower(), namespaced, fields=fields, getters=getters, **kwargs)


RESOURCES: tuple[Resource, ...] = (
    _resource(
        "nodes",
        "Node",
        False,
        short_names=("no",),
        subresources=("status",),
        fields=("spec.unschedulable",),
        field_label_refusal=CORE_REFUSAL,
    ),
    _resource(
        "pods",
        "Pod",
        True,
        short_names=("po",),
        categories=("all",),
        subresources=("status", "binding", "log"),
        fields=(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ),
        # pkg/apis/core/v1/conversion.go: "spec.host" (old v1 clients) is converted to spec.nodeName.
        field_label_renames={"spec.host": "spec.nodeName"},
        field_label_refusal=CORE_REFUSAL,
    ),
    _resource(
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        subresources=("status",),
        fields=("status.phase",),
        field_label_refusal=CORE_REFUSAL,
    ),
    _resource(
        "events",
        "Event",
        True,
        short_names=("ev",),
        fields=(
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ),
        field_label_refusal=CORE_REFUSAL,
    ),
    _resource("configmaps", "ConfigMap", True, short_names=("cm",)),
    _resource("resourcequotas", "ResourceQuota", True, short_names=("quota",)),
    _resource("bindings", "Binding", True),
    _resource("leases", "Lease", True, group="coordination.k8s.io"),
    _resource("serviceaccounts", "ServiceAccount", True, short_names=("sa",), subresources=("token",)),
    # Service's own func takes spec.clusterIP and spec.type (pkg/apis/core/v1/conversion.go); the
    # sandbox allocates no cluster IP, so a Service without one selects as "".
    _resource("services", "Service", True, short_names=("svc",), categories=("all",), subresources=("status",),
              fields=("spec.clusterIP", "spec.type"), field_label_refusal=CORE_REFUSAL),
    _resource(
        "deployments",
        "Deployment",
        True,
        group="apps",
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    _resource(
        "replicasets",
        "ReplicaSet",
        True,
        group="apps",
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    _resource(
        "statefulsets",
        "StatefulSet",
        True,
        group="apps",
        short_names=("sts",),
        categories=("all",),
        subresources=("status", "scale"),
    ),
    _resource(
        "daemonsets",
        "DaemonSet",
        True,
        group="apps",
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
    ),
    # pkg/apis/batch/v1/conversion.go: Job's own func, whose words differ from core's; it takes
    # status.successful besides the metadata ones.
    _resource("jobs", "Job", True, group="batch", categories=("all",), subresources=("status",),
              fields=("status.successful",), field_label_refusal="field label {quoted} not supported for Job"),
    _resource("roles", "Role", True, group=RBAC),
    _resource("rolebindings", "RoleBinding", True, group=RBAC),
    _resource("clusterroles", "ClusterRole", False, group=RBAC),
    _resource("clusterrolebindings", "ClusterRoleBinding", False, group=RBAC),
    _resource("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False, group=ADMISSION),
    _resource("validatingadmissionpolicies", "ValidatingAdmissionPolicy", False, group=ADMISSION,
              subresources=("status",)),
    _resource("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False, group=ADMISSION),
    # Koordinator's per-node GPU inventory, as its CRD serves it (koordinator
    # ``apis/scheduling/v1alpha1/device_types.go``: cluster-scoped, named after the node); a custom
    # resource's field labels are converted by apiextensions-apiserver's ``ConvertFieldLabel``.
    _resource("devices", "Device", False, group="scheduling.koordinator.sh", version="v1alpha1",
              field_label_refusal=CORE_REFUSAL),
    # Dynamic Resource Allocation, resource.k8s.io/v1 (k8s.io/api resource/v1 types.go): slices are
    # selectable by spec.nodeName and spec.driver (ResourceSliceSelectorNodeName, ...Driver); a claim
    # has a status subresource, which the scheduler writes the allocation through.
    _resource("deviceclasses", "DeviceClass", False, group=DRA),
    _resource("resourceslices", "ResourceSlice", False, group=DRA, fields=("spec.nodeName", "spec.driver"),
              field_label_refusal="field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {label}"),
    _resource("resourceclaims", "ResourceClaim", True, group=DRA, subresources=("status",)),
    _resource("resourceclaimtemplates", "ResourceClaimTemplate", True, group=DRA),
)
WORKLOADS = frozenset({"deployments", "replicasets", "statefulsets", "daemonsets", "jobs"})
"""Kinds with a pod template, a ``metadata.generation`` and a ``status.observedGeneration``."""
SCALABLE = frozenset({"deployments", "replicasets", "statefulsets"})
"""Kinds with a ``/scale`` subresource (``autoscaling/v1`` Scale)."""

BY_GROUP_PLURAL: dict[tuple[str, str], Resource] = {(r.group, r.plural): r for r in RESOURCES}
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in RESOURCES}
STORED: tuple[Resource, ...] = tuple(r for r in RESOURCES if r.plural != "bindings")
"""Kinds kept in the store (a Binding is a write-only action on a pod)."""
BY_KIND: dict[str, Resource] = {r.kind: r for r in STORED}


def resource_for(group: str, version: str, plural: str) -> Resource | None:
    """The resource served at ``/api[s]/<group>/<version>/<plural>``, if any."""
    found = BY_GROUP_PLURAL.get((group, plural))
    if found is None or found.version != version:
        return None
    return found


def verbs_of(resource: Resource) -> tuple[str, ...]:
    """The verbs discovery advertises for a resource, and the only ones its routes take.

    kube-apiserver's installer (k8s.io/apiserver/pkg/endpoints/installer.go) offers a verb where the
    storage implements it: namespaces' REST (pkg/registry/core/namespace/storage/storage.go) wraps its
    store without a ``DeleteCollection``, so a DELETE of the collection is go-restful's 405.
    """
    if resource.plural == "bindings":
        return ("create",)
    if resource.plural == "namespaces":
        return tuple(verb for verb in ALL_VERBS if verb != "deletecollection")
    return ALL_VERBS
