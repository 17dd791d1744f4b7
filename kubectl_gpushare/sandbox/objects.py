"""What kube-apiserver's registry strategies do to an object on create, update and load.

Owns system metadata (uid, creationTimestamp, generateName), defaulting (pod limits become
requests, pod status starts Pending, namespaces start Active), type checks that the real server's
decoder does (400), the validation this project relies on (422) and the status-subresource split
(the main resource cannot change status; ``/status`` can change only status). Pure functions on
dicts; no I/O and no locking.
"""

from __future__ import annotations

import copy
import random
import uuid
from datetime import UTC, datetime
from typing import Any, Final

from kubectl_gpushare import label_rule, protocol
from kubectl_gpushare.kube.go_format import go_quote
from kubectl_gpushare.sandbox import admission, dra_kinds, errors
from kubectl_gpushare.sandbox.resources import SCALABLE, WORKLOADS, Resource

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_STATUS_SPLIT = {"pods", "nodes", "namespaces", "services", admission.POLICIES, dra_kinds.CLAIMS, *WORKLOADS}
_MAX_INT32 = 2**31 - 1
_POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")
MAX_GENERATED_BASE = 58
"""kube-apiserver cuts ``generateName`` to 63 - 5 characters before adding 5 random ones
(k8s.io/apiserver ``pkg/storage/names/generate.go``, ``MaxGeneratedNameLength``)."""


def now() -> str:
    """The current time as Kubernetes writes timestamps (RFC 3339, UTC, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _random_suffix(rng: random.Random = random.Random()) -> str:  # noqa: B008 - one shared generator
    return "".join(rng.choice(_GENERATE_ALPHABET) for _ in range(5))


_CONTAINER_FIELDS: tuple[tuple[str, type, str], ...] = (
    ("[]", dict, "v1.Container"),
    ("[].name", str, "string"),
    ("[].image", str, "string"),
    ("[].resources", dict, "v1.ResourceRequirements"),
    ("[].resources.limits", dict, "v1.ResourceList"),
    ("[].resources.requests", dict, "v1.ResourceList"),
)
_REQUIRED = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
SHAPES: tuple[tuple[str, type, str], ...] = (
    ("metadata.finalizers", list, "[]string"),  # ObjectMeta (meta/v1 types.go): what holds a deletion
    ("metadata.finalizers[]", str, "string"),
    ("spec", dict, "spec"),
    ("status", dict, "status"),
    ("data", dict, "map[string]string"),
    ("spec.nodeName", str, "string"),
    ("spec.unschedulable", bool, "bool"),
    ("spec.taints", list, "[]v1.Taint"),
    ("spec.taints[]", dict, "v1.Taint"),
    *((f"spec.taints[].{field}", str, "string") for field in ("key", "value", "effect")),
    ("spec.tolerations", list, "[]v1.Toleration"),
    ("spec.tolerations[]", dict, "v1.Toleration"),
    *((f"spec.tolerations[].{field}", str, "string") for field in ("key", "operator", "value", "effect")),
    ("spec.nodeSelector", dict, "map[string]string"),
    ("spec.nodeSelector{}", str, "string"),
    ("spec.affinity", dict, "v1.Affinity"),
    ("spec.containers", list, "[]v1.Container"),
    *((f"spec.containers{path}", kind, go) for path, kind, go in _CONTAINER_FIELDS),
    ("spec.initContainers", list, "[]v1.Container"),
    *((f"spec.initContainers{path}", kind, go) for path, kind, go in _CONTAINER_FIELDS),
    ("status.phase", str, "string"),
    ("status.conditions", list, "[]Condition"),
    ("status.conditions[]", dict, "Condition"),
    *((f"status.conditions[].{field}", str, "string") for field in ("type", "status")),
)
"""JSON types of the fields the sandbox's own code reads (Go's decoder refuses others with 400).

A path segment ending in ``[]`` means every element of that array, ``{}`` every value of that map. A
null is what Go's encoding/json makes of it (``literalStore``: a null into a string or a struct leaves
the zero value): a struct field is dropped, an array element or map value becomes its type's zero
value (``""``, ``{}``; ``nodeSelector: {"rack": null}`` asks for ``rack=""``, it is not dropped).
Every ``[]``/``{}`` path holds a string or a struct, never a slice or map, whose null would stay null."""


AFFINITY_SHAPES: tuple[tuple[str, type, str], ...] = (
    ("spec.affinity.nodeAffinity", dict, "v1.NodeAffinity"),
    (f"{_REQUIRED}", dict, "v1.NodeSelector"),
    (f"{_REQUIRED}.nodeSelectorTerms", list, "[]v1.NodeSelectorTerm"),
    (f"{_REQUIRED}.nodeSelectorTerms[]", dict, "v1.NodeSelectorTerm"),
    *(shape for part in ("matchExpressions", "matchFields") for shape in (
        (f"{_REQUIRED}.nodeSelectorTerms[].{part}", list, "[]v1.NodeSelectorRequirement"),
        (f"{_REQUIRED}.nodeSelectorTerms[].{part}[]", dict, "v1.NodeSelectorRequirement"),
        (f"{_REQUIRED}.nodeSelectorTerms[].{part}[].key", str, "string"),
        (f"{_REQUIRED}.nodeSelectorTerms[].{part}[].operator", str, "v1.NodeSelectorOperator"),
        (f"{_REQUIRED}.nodeSelectorTerms[].{part}[].values", list, "[]string"),
        (f"{_REQUIRED}.nodeSelectorTerms[].{part}[].values[]", str, "string"),
    )),
)
"""`SHAPES` under a pod's ``spec.affinity`` (the scheduler stand-in reads the required node
affinity), walked only when the pod has one: most pods carry none, and walking sixteen absent
paths would near double the cost of checking a pod."""


_POD_ONLY: tuple[str, ...] = ("spec.nodeSelector", "spec.nodeSelector{}", "spec.affinity")
"""Pod paths another kind may hold with another type (a ResourceSlice's ``spec.nodeSelector`` is a v1.NodeSelector)."""


_OTHER_KIND_SHAPES: Final = tuple(shape for shape in SHAPES if shape[0] not in _POD_ONLY)
_POD_WITH_AFFINITY_SHAPES: Final = (*SHAPES, *AFFINITY_SHAPES)


def _check_shapes(kind: str, obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if kind != "Pod":
        shapes = _OTHER_KIND_SHAPES
    elif isinstance(spec, dict) and isinstance(spec.get("affinity"), dict):
        shapes = _POD_WITH_AFFINITY_SHAPES
    else:
        shapes = SHAPES
    for path, expected, go_type in shapes:
        element = path.endswith(("[]", "{}"))
        for parent, key in _leaves(*_parents(obj, path)):
            value = parent[key]
            if value is None and element:  # an array element or map value: the element type's zero value
                parent[key] = expected()
            elif value is None:  # a struct field: absent
                del parent[key]
            elif not isinstance(value, expected):
                raise errors.bad_request(
                    f"json: cannot unmarshal {_json_name(value)} into Go struct field {kind}.{path} of type {go_type}"
                )


def _parents(obj: dict[str, Any], path: str) -> tuple[list[Any], str]:
    """The containers of a dotted path's last segment in ``obj``, and that segment (`SHAPES`' path syntax)."""
    *heads, last = path.split(".")
    parents: list[Any] = [obj]
    for head in heads:
        parents = _step(parents, head)
        if not parents:  # the path is absent (most objects carry no affinity): nothing further to walk
            break
    return parents, last


def _step(parents: list[Any], segment: str) -> list[Any]:
    name, each = (segment[:-2], segment[-2:]) if segment.endswith(("[]", "{}")) else (segment, "")
    found = [p[name] for p in parents if isinstance(p, dict) and isinstance(p.get(name), (dict, list))]
    if each == "[]":
        return [item for value in found if isinstance(value, list) for item in value]
    if each == "{}":
        return [item for value in found if isinstance(value, dict) for item in value.values()]
    return [value for value in found if isinstance(value, dict)]


def _leaves(parents: list[Any], segment: str) -> list[tuple[Any, Any]]:
    if segment.endswith("[]"):
        lists = [p[segment[:-2]] for p in parents if isinstance(p, dict) and isinstance(p.get(segment[:-2]), list)]
        return [(items, i) for items in lists for i in range(len(items))]
    if segment.endswith("{}"):  # every value of a map
        maps = [p[segment[:-2]] for p in parents if isinstance(p, dict) and isinstance(p.get(segment[:-2]), dict)]
        return [(mapping, key) for mapping in maps for key in list(mapping)]
    return [(p, segment) for p in parents if isinstance(p, dict) and segment in p]


INT64_FIELDS: tuple[tuple[str, str], ...] = (
    ("metadata.generation", "ObjectMeta"),
    ("metadata.deletionGracePeriodSeconds", "ObjectMeta"),
)
"""The ``int64`` fields of every kind (ObjectMeta), with their Go struct; a kind's own: `dra_kinds.INT64_FIELDS`."""
_INT64 = range(-(2**63), 2**63)


def _check_int64(resource: Resource, obj: dict[str, Any]) -> None:
    """Go's JSON decoder into an int64 field: a non-integer or a value outside int64 is a 400.

    The message is ``UnmarshalTypeError``'s (sigs.k8s.io/json, the decoder kube-apiserver uses:
    the innermost struct, the JSON field path without indices or map keys) wrapped as the handlers'
    ``transformDecodeError`` wraps it. Differs: a float is shown as Python prints it (Go shows the
    literal as sent), and the first field in table order is reported, not the first in the body.
    """
    for path, struct in (*INT64_FIELDS, *dra_kinds.INT64_FIELDS.get(resource.plural, ())):
        for parent, key in _leaves(*_parents(obj, path)):
            value = parent[key]
            if value is None or (type(value) is int and value in _INT64):
                continue
            shown = f"number {value!r}" if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else _json_name(value)
            field = path.replace("[]", "").replace("{}", "")
            raise errors.bad_request(
                f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: '
                f"json: cannot unmarshal {shown} into Go struct field {struct}.{field} of type int64")


def _json_name(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def check_types(resource: Resource, obj: Any) -> None:
    """Refuse bodies the real server's decoder would refuse (400 BadRequest).

    Raises:
        ApiError: the body is not an object, or metadata fields have the wrong JSON types.
    """
    if not isinstance(obj, dict):
        raise errors.bad_request(f"json: cannot unmarshal {type(obj).__name__} into Go value of type {resource.kind}")
    meta = obj.get("metadata")
    if meta is None:  # absent or null: an empty ObjectMeta, as Go decodes it
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("json: cannot unmarshal into Go struct field .metadata of type v1.ObjectMeta")
    # A null is what Go's decoder makes of it, as in `SHAPES`: a string field is absent, a map value "".
    for key in ("name", "namespace", "generateName", "resourceVersion", "uid"):
        if key in meta and meta[key] is None:
            del meta[key]
        elif key in meta and not isinstance(meta[key], str):
            raise errors.bad_request(
                f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{key} of type string"
            )
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if isinstance(value, dict):
            value.update((name, "") for name, item in list(value.items()) if item is None)
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise errors.bad_request(
                f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{key} of type map[string]string"
            )
    _check_shapes(resource.kind, obj)
    _check_int64(resource, obj)
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if (kind and kind != resource.kind) or (api_version and api_version != resource.api_version):
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({resource.api_version})"
            if api_version != resource.api_version
            else f"kind {kind} does not match the expected kind {resource.kind}"
        )


_POD_SPEC_QUANTITIES = (
    "containers[].resources.limits",
    "containers[].resources.requests",
    "initContainers[].resources.limits",
    "initContainers[].resources.requests",
    "overhead",
)
_QUANTITY_MAPS: dict[str, tuple[str, ...]] = {
    "pods": tuple(f"spec.{path}" for path in _POD_SPEC_QUANTITIES),
    "nodes": ("status.capacity", "status.allocatable"),
    **dra_kinds.QUANTITY_PATHS,
}
"""Where each kind holds ``ResourceList`` maps (a workload's pod template is under spec.template.spec)."""


def quantity_maps(plural: str) -> tuple[str, ...]:
    """The dotted paths of a kind's ``ResourceList`` maps (``[]`` marks every element of an array)."""
    if plural in WORKLOADS:
        return tuple(f"spec.template.spec.{path}" for path in _POD_SPEC_QUANTITIES)
    return _QUANTITY_MAPS.get(plural, ())


def normalise_quantities(resource: Resource, obj: dict[str, Any]) -> None:
    """Rewrite every quantity as the canonical string kube-apiserver stores (``1`` becomes ``"1"``).

    Raises:
        ApiError: 400 for a value that is not a quantity, worded as the real decoder words it.
    """
    for path in quantity_maps(resource.plural):
        parents, last = _parents(obj, path)
        for parent in parents:
            values = parent.get(last) if isinstance(parent, dict) else None
            if not isinstance(values, dict):
                continue
            for name, value in values.items():
                values[name] = _canonical(resource, value)


def _canonical(resource: Resource, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        text = ""
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    try:
        return protocol.canonical_quantity(text)
    except ValueError as exc:
        raise errors.bad_request(
            f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: {exc}'
        ) from None


def _name_causes(resource: Resource, name: str) -> list[str]:
    valid = protocol.valid_dns_label if resource.plural == "namespaces" else protocol.valid_dns_subdomain
    if not valid(name):
        return [
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 '
            f"{'label' if resource.plural == 'namespaces' else 'subdomain'} must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        ]
    return []


_DNS_LABEL_RULE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
"""``IsDNS1123Label``'s words (k8s.io/apimachinery/pkg/util/validation/validation.go: ``RegexError``
joins its examples with ``", "`` and ``" or "``, hence the two spaces)."""


def _namespace_causes(resource: Resource, meta: dict[str, Any]) -> list[str]:
    """A namespaced object's ``metadata.namespace``: present, and a DNS-1123 label.

    ``ValidateObjectMeta`` (k8s.io/apimachinery/pkg/api/validation/objectmeta.go) with
    ``ValidateNamespaceName`` (``IsDNS1123Label``): an empty one is ``Required value``; a longer one
    than 63 bytes, one with dots that is otherwise a subdomain, or one off the pattern is ``Invalid
    value`` (reads in such a namespace find nothing; only writes are refused).
    """
    if not resource.namespaced:
        return []
    namespace = str(meta.get("namespace") or "")
    if not namespace:
        return ["metadata.namespace: Required value"]
    shown = f"metadata.namespace: Invalid value: {go_quote(namespace)}: "
    too_long = len(namespace.encode()) > protocol.DNS1123_LABEL_MAX
    causes = [f"{shown}must be no more than {protocol.DNS1123_LABEL_MAX} characters"] if too_long else []
    if not protocol.DNS_LABEL.fullmatch(namespace):
        dotted = protocol.DNS_SUBDOMAIN.fullmatch(namespace) is not None
        causes.append(shown + ("must not contain dots" if dotted else _DNS_LABEL_RULE))
    return causes


def _validate(resource: Resource, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    name = meta.get("name", "")
    causes = _name_causes(resource, name) + _namespace_causes(resource, meta) + _finalizers_causes(meta)
    if resource.plural == "pods":
        causes.extend(_container_causes((obj.get("spec") or {}).get("containers"), "spec.containers"))
    if resource.plural in WORKLOADS:
        causes.extend(_workload_causes(resource, obj))
    causes.extend(admission.spec_causes(resource, obj))
    if dra_kinds.is_dra(resource):
        causes.extend(dra_kinds.causes(resource, obj))
    if causes:
        raise errors.invalid(resource.kind, name, causes, resource.group)


def _finalizers_causes(meta: dict[str, Any]) -> list[str]:
    """``ValidateFinalizers`` (apimachinery pkg/api/validation/objectmeta.go), on create and update.

    Each name is a qualified name (``ValidateFinalizerName``: ``IsQualifiedName``, the label key rule);
    ``orphan`` and ``foregroundDeletion`` together are refused. Duplicates and any count are allowed.
    """
    finalizers = meta.get("finalizers")
    if not isinstance(finalizers, list):
        return []
    causes: list[str] = []
    for finalizer in finalizers:
        if isinstance(finalizer, str) and not label_rule.valid_label_key(finalizer):
            shown = f"metadata.finalizers: Invalid value: {go_quote(finalizer)}: "
            causes.extend(shown + message for message in label_rule.label_key_errors(finalizer))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        causes.append(f"metadata.finalizers: Invalid value: {errors.go_string_slice(finalizers)}: "
                      "finalizer orphan and foregroundDeletion cannot be both set")
    return causes


def _container_causes(containers: Any, path: str) -> list[str]:
    """A pod spec's containers: present, each with a name and an image."""
    if not isinstance(containers, list) or not containers:
        return [f"{path}: Required value"]
    causes: list[str] = []
    for i, container in enumerate(containers):
        if not isinstance(container, dict) or not container.get("name"):
            causes.append(f"{path}[{i}].name: Required value")
        elif not container.get("image"):
            causes.append(f"{path}[{i}].image: Required value")
    return causes


def _workload_causes(resource: Resource, obj: dict[str, Any]) -> list[str]:
    """What apps/v1 and batch/v1 validation refuses that the controller would trip over."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    causes: list[str] = []
    replicas = spec.get("replicas")
    if resource.plural in SCALABLE and (
        isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= _MAX_INT32
    ):
        causes.append(f"spec.replicas: Invalid value: {replicas!r}: must be greater than or equal to 0")
    template = spec.get("template")
    labels = ((template or {}).get("metadata") or {}).get("labels") if isinstance(template, dict) else None
    selector = spec.get("selector")
    match = selector.get("matchLabels") if isinstance(selector, dict) else None
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        causes.append("spec.template.spec: Required value")
    else:
        causes.extend(_container_causes(template["spec"].get("containers"), "spec.template.spec.containers"))
    if not isinstance(selector, dict) or not selector:
        causes.append("spec.selector: Required value")
    elif match is not None and (
        not isinstance(match, dict)
        or not isinstance(labels, dict)
        or any(labels.get(key) != value for key, value in match.items())
    ):
        causes.append(
            f"spec.template.metadata.labels: Invalid value: {labels!r}: `selector` does not match template `labels`"
        )
    return causes


def _default_workload(resource: Resource, obj: dict[str, Any]) -> None:
    """The defaults apps/v1 and batch/v1 apply (replicas 1; a Job's generated selector)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if resource.plural in SCALABLE:
        spec.setdefault("replicas", 1)
    if resource.plural in ("deployments", "statefulsets", "daemonsets"):
        spec.setdefault("revisionHistoryLimit", 10)
    if resource.plural == "statefulsets":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    if resource.plural == "deployments":
        spec.setdefault(
            "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
        )
        spec.setdefault("progressDeadlineSeconds", 600)
    if resource.plural == "jobs":
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        template = spec.get("template")
        if "selector" not in spec and isinstance(template, dict):
            uid = obj["metadata"]["uid"]
            generated = {"batch.kubernetes.io/controller-uid": uid}
            spec["selector"] = {"matchLabels": dict(generated)}
            template_meta = template.setdefault("metadata", {})
            if isinstance(template_meta, dict):
                labels = template_meta.setdefault("labels", {})
                if isinstance(labels, dict):
                    labels.update(generated, **{"batch.kubernetes.io/job-name": obj["metadata"]["name"]})
        template_spec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(template_spec, dict):  # the real server refuses a Job without one; tutorials set it
            template_spec.setdefault("restartPolicy", "Never")


def _default_pod(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            image = str(container.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            latest = ":" not in tag or tag.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest and "@" not in tag else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            resources = container.setdefault("resources", {})
            limits = resources.get("limits")
            if isinstance(limits, dict) and limits:
                requests = resources.setdefault("requests", {})
                for resource_name, quantity in limits.items():
                    requests.setdefault(resource_name, quantity)


def _stamp_new(resource: Resource, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    obj.clear()
    obj.update(apiVersion=resource.api_version, kind=resource.kind, **rest)
    meta.setdefault("uid", str(uuid.uuid4()))
    meta.setdefault("creationTimestamp", now())
    if resource.plural == "namespaces":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        # PrepareForCreate (pkg/registry/core/namespace/strategy.go): "kubernetes" is added where missing,
        # so the namespace controller's finalizer holds every namespace until its content is gone.
        spec = obj.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if isinstance(finalizers, list) and "kubernetes" not in finalizers:
            spec["finalizers"] = [*finalizers, "kubernetes"]
        obj.setdefault("status", {}).setdefault("phase", "Active")


def prepare_loaded(resource: Resource, obj: dict[str, Any]) -> None:
    """Complete an object seeded with `Sandbox.load`: kind, uid, timestamp and namespace.

    Loaded objects skip validation and status resets, so tests can seed any state (a Running
    pod, a terminating one).

    Raises:
        ValueError: the object has no name, or one that is not a string (the store orders its keys by name).
    """
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") or not isinstance(meta["name"], str):
        raise ValueError(f"cannot load a {resource.kind} without metadata.name (a non-empty string)")
    if resource.namespaced:
        meta.setdefault("namespace", "default")
    else:
        meta.pop("namespace", None)
    _stamp_new(resource, obj)


def prepare_create(resource: Resource, obj: Any, namespace: str) -> dict[str, Any]:
    """Turn a create body into the object to store (name still to be checked for uniqueness).

    Raises:
        ApiError: 400 for a namespace mismatch or undecodable body, 422 for an invalid object,
            500 when a resourceVersion is set (the real storage layer's answer).
    """
    check_types(resource, obj)
    created: dict[str, Any] = obj
    normalise_quantities(resource, created)
    meta = created["metadata"]
    if resource.namespaced:
        # rest.EnsureObjectNamespaceMatchesRequestNamespace: an empty request namespace (an empty
        # {namespace} segment) clears the object's, which validation then requires (`_namespace_causes`).
        if namespace and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if meta.get("resourceVersion"):
        # etcd3 store.Create's storage.ErrResourceVersionSetOnCreate, in its words. kube-apiserver passes
        # that error on unconverted (a 500); the sandbox answers no bad input with a 500: a 400.
        raise errors.bad_request("resourceVersion should not be set on objects to be created")
    if not meta.get("name"):
        if meta.get("generateName"):
            meta["name"] = str(meta["generateName"])[:MAX_GENERATED_BASE] + _random_suffix()
        else:
            raise errors.invalid(
                resource.kind, "", ["metadata.name: Required value: name or generateName is required"], resource.group
            )
    for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        meta.pop(key, None)
    if resource.plural == "pods":
        _default_pod(created)
        created["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    dra_kinds.prepare_create(resource, created)
    _stamp_new(resource, created)
    if resource.plural in WORKLOADS:
        meta["generation"] = 1
        created.pop("status", None)
        _default_workload(resource, created)
    admission.default(resource, created)
    _validate(resource, created)
    return created


def check_url_name(obj: dict[str, Any], name: str) -> None:
    """Refuse an update whose body names another object than its URL (``checkName`` in endpoints/handlers/rest.go).

    Raises:
        ApiError: 400 for a name that differs (an absent one is the URL's).
    """
    meta = obj["metadata"]  # check_types made it a dict
    if meta.get("name", name) != name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
        )


def prepare_update(
    resource: Resource, old: dict[str, Any], new: Any, name: str, subresource: str, *, check_rv: bool = True
) -> dict[str, Any]:
    """Turn an update (or patched) body into the object to store.

    Args:
        resource: the kind.
        old: the stored object.
        new: the body (PUT) or the patch result.
        name: the name in the URL.
        subresource: "" or "status".
        check_rv: compare a resourceVersion in ``new`` with the stored one (the precondition).

    Raises:
        ApiError: 400 (name mismatch, undecodable), 409 (stale resourceVersion or another UID), 422 (invalid or a
            forbidden pod spec change).
    """
    check_types(resource, new)
    updated: dict[str, Any] = new
    normalise_quantities(resource, updated)
    meta = updated["metadata"]
    check_url_name(updated, name)
    old_meta = old["metadata"]
    rv = meta.get("resourceVersion")
    if check_rv and rv and rv != old_meta["resourceVersion"]:
        raise errors.conflict(resource.plural, name, errors.STALE_RV, resource.group)
    uid = meta.get("uid")
    if uid and uid != old_meta.get("uid"):
        why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta.get('uid', '')}"
        raise errors.conflict(resource.plural, name, why, resource.group)
    meta["name"] = name
    # rest.BeforeUpdate (k8s.io/apiserver/pkg/registry/rest/update.go): an update never removes or
    # changes a deletion timestamp or grace period.
    for key in ("uid", "creationTimestamp", "namespace", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    updated["apiVersion"], updated["kind"] = resource.api_version, resource.kind
    if resource.plural in _STATUS_SPLIT:
        if subresource == "status":
            status = updated.get("status")
            updated = copy.deepcopy(old)
            if status is None:
                updated.pop("status", None)
            else:
                updated["status"] = status
        elif "status" in old:
            updated["status"] = copy.deepcopy(old["status"])
        else:
            updated.pop("status", None)
    if resource.plural == "namespaces" and subresource == "":
        _keep_namespace_finalizers(old, updated)
    finalizer_causes = new_finalizer_causes(old, updated)
    if finalizer_causes:
        raise errors.invalid(resource.kind, name, finalizer_causes, resource.group)
    if resource.plural == "pods" and subresource == "":
        _check_pod_spec_update(old, updated, name)
    if dra_kinds.is_dra(resource):
        dra_kinds.set_defaults(resource, updated)  # defaults apply to every decoded body, as in the API server
        immutable = dra_kinds.update_causes(resource, old, updated, subresource)
        if immutable:
            raise errors.invalid(resource.kind, name, immutable, resource.group)
    if resource.plural in WORKLOADS:
        if subresource == "":
            _default_workload(resource, updated)
        generation = old_meta.get("generation", 1)
        if subresource == "" and updated.get("spec") != old.get("spec"):
            generation = int(generation) + 1 if isinstance(generation, int) else 1
        updated["metadata"]["generation"] = generation
    admission.default(resource, updated)
    _validate(resource, updated)
    return updated


def _keep_namespace_finalizers(old: dict[str, Any], updated: dict[str, Any]) -> None:
    """Only ``/finalize`` changes ``spec.finalizers``, or a plain update could drop a namespace under its content.

    ``namespaceStrategy.PrepareForUpdate`` (pkg/registry/core/namespace/strategy.go) copies them from the
    stored namespace.
    """
    old_spec, spec = old.get("spec"), updated.setdefault("spec", {})
    kept = old_spec.get("finalizers") if isinstance(old_spec, dict) else None
    if kept is None:
        spec.pop("finalizers", None)
    else:
        spec["finalizers"] = copy.deepcopy(kept)


def new_finalizer_causes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """An object being deleted takes no new finalizer.

    ``ValidateObjectMetaAccessorUpdate`` (apimachinery pkg/api/validation/objectmeta.go).
    """
    old_meta, new_meta = old["metadata"], new["metadata"]
    if not old_meta.get("deletionTimestamp"):
        return []
    before = {f for f in old_meta.get("finalizers") or [] if isinstance(f, str)}
    extra = sorted({f for f in new_meta.get("finalizers") or [] if isinstance(f, str)} - before)
    if not extra:
        return []
    return ["metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, "
            f"found new finalizers {errors.go_string_slice(extra)}"]


def _masked_spec(pod: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(pod.get("spec") or {})
    for key in _POD_MUTABLE_SPEC:
        spec.pop(key, None)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                container.pop("image", None)
    return spec


def _check_pod_spec_update(old: dict[str, Any], new: dict[str, Any], name: str) -> None:
    if _masked_spec(old) != _masked_spec(new):
        raise errors.invalid(
            "Pod",
            name,
            [
                "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                "to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
                "was previously negative)"
            ],
        )


def selector_string(obj: dict[str, Any]) -> str:
    """A workload's ``spec.selector.matchLabels`` as a label selector string (``app=a,tier=b``)."""
    selector = (obj.get("spec") or {}).get("selector")
    match = selector.get("matchLabels") if isinstance(selector, dict) else None
    if not isinstance(match, dict):
        return ""
    return ",".join(f"{key}={value}" for key, value in sorted(match.items()))


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The ``autoscaling/v1`` Scale view of a Deployment, ReplicaSet or StatefulSet."""
    meta = obj["metadata"]
    kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {key: meta[key] for key in kept if key in meta},
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": {"replicas": (obj.get("status") or {}).get("replicas", 0), "selector": selector_string(obj)},
    }
