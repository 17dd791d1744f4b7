"""Server-side printing: ``meta.k8s.io/v1`` Table responses, as ``kubectl get`` asks for them.

Columns follow kube-apiserver's printers for nodes (NAME, STATUS, ROLES, AGE, VERSION and the
``-o wide`` ones), pods (NAME, READY, STATUS, RESTARTS, AGE, IP, NODE, ...), namespaces, events,
configmaps, leases, ResourceClaims (NAME, STATE, AGE) and ResourceSlices (NAME, NODE, DRIVER, POOL,
AGE) (``pkg/printers/internalversion/printers.go``). Simplified where the real printer reads state the sandbox
never has (container probes, init-container progress). No I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubectl_gpushare.sandbox import dra_kinds
from kubectl_gpushare.sandbox.resources import Resource

Column = tuple[str, str, int, str]  # name, type, priority, format

_COLUMNS: dict[str, list[Column]] = {
    "nodes": [
        ("Name", "string", 0, "name"),
        ("Status", "string", 0, ""),
        ("Roles", "string", 0, ""),
        ("Age", "string", 0, ""),
        ("Version", "string", 0, ""),
        ("Internal-IP", "string", 1, ""),
        ("External-IP", "string", 1, ""),
        ("OS-Image", "string", 1, ""),
        ("Kernel-Version", "string", 1, ""),
        ("Container-Runtime", "string", 1, ""),
    ],
    "pods": [
        ("Name", "string", 0, "name"),
        ("Ready", "string", 0, ""),
        ("Status", "string", 0, ""),
        ("Restarts", "string", 0, ""),
        ("Age", "string", 0, ""),
        ("IP", "string", 1, ""),
        ("Node", "string", 1, ""),
        ("Nominated Node", "string", 1, ""),
        ("Readiness Gates", "string", 1, ""),
    ],
    "namespaces": [("Name", "string", 0, "name"), ("Status", "string", 0, ""), ("Age", "string", 0, "")],
    "events": [
        ("Last Seen", "string", 0, ""),
        ("Type", "string", 0, ""),
        ("Reason", "string", 0, ""),
        ("Object", "string", 0, ""),
        ("Message", "string", 0, ""),
        ("Name", "string", 1, "name"),
    ],
    "configmaps": [("Name", "string", 0, "name"), ("Data", "integer", 0, ""), ("Age", "string", 0, "")],
    "leases": [("Name", "string", 0, "name"), ("Holder", "string", 0, ""), ("Age", "string", 0, "")],
    "deployments": [
        ("Name", "string", 0, "name"),
        ("Ready", "string", 0, ""),
        ("Up-to-date", "integer", 0, ""),
        ("Available", "integer", 0, ""),
        ("Age", "string", 0, ""),
    ],
    "replicasets": [
        ("Name", "string", 0, "name"),
        ("Desired", "integer", 0, ""),
        ("Current", "integer", 0, ""),
        ("Ready", "integer", 0, ""),
        ("Age", "string", 0, ""),
    ],
    "statefulsets": [("Name", "string", 0, "name"), ("Ready", "string", 0, ""), ("Age", "string", 0, "")],
    "jobs": [
        ("Name", "string", 0, "name"),
        ("Status", "string", 0, ""),
        ("Completions", "string", 0, ""),
        ("Age", "string", 0, ""),
    ],
    "services": [
        ("Name", "string", 0, "name"),
        ("Type", "string", 0, ""),
        ("Cluster-IP", "string", 0, ""),
        ("Age", "string", 0, ""),
    ],
    dra_kinds.CLAIMS: [("Name", "string", 0, "name"), ("State", "string", 0, ""), ("Age", "string", 0, "")],
    dra_kinds.SLICES: [
        ("Name", "string", 0, "name"),
        ("Node", "string", 0, ""),
        ("Driver", "string", 0, ""),
        ("Pool", "string", 0, ""),
        ("Age", "string", 0, ""),
    ],
}
_GENERIC: list[Column] = [("Name", "string", 0, "name"), ("Age", "string", 0, "")]


def human_duration(seconds: float) -> str:
    """Kubernetes' short duration format (``5s``, ``3m2s``, ``4h``, ``2d3h``, ``400d``)."""
    seconds = int(max(seconds, 0))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        years = days // 365
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{days // 365}y"


def _age(obj: dict[str, Any], now: datetime) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    try:
        created = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((now - created).total_seconds())


def _node_cells(node: dict[str, Any], age: str) -> list[Any]:
    status = node.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)}
    ready = conditions.get("Ready")
    state = "Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(key.split("/", 1)[1] for key in labels if key.startswith("node-role.kubernetes.io/") and "/" in key)
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or [] if isinstance(a, dict)}
    info = status.get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        age,
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _pod_cells(pod: dict[str, Any], age: str) -> list[Any]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    total = len(spec.get("containers") or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in statuses:
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        reason,
        restarts,
        age,
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _parse_time(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    seen = _parse_time(event.get("lastTimestamp")) or _parse_time(event.get("eventTime"))
    seen = seen or _parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    involved = event.get("involvedObject") or {}
    target = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    return [
        human_duration((now - seen).total_seconds()) if seen else "<unknown>",
        event.get("type", ""),
        event.get("reason", ""),
        target,
        str(event.get("message", "")).strip(),
        event["metadata"]["name"],
    ]


def _cells(resource: Resource, obj: dict[str, Any], now: datetime) -> list[Any]:
    age = _age(obj, now)
    if resource.plural == "events":
        return _event_cells(obj, now)
    if resource.plural == "configmaps":
        return [obj["metadata"]["name"], len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), age]
    if resource.plural == "leases":
        return [obj["metadata"]["name"], (obj.get("spec") or {}).get("holderIdentity") or "", age]
    if resource.plural == "nodes":
        return _node_cells(obj, age)
    if resource.plural == "pods":
        return _pod_cells(obj, age)
    if resource.plural == "namespaces":
        return [obj["metadata"]["name"], (obj.get("status") or {}).get("phase", ""), age]
    if resource.plural == dra_kinds.CLAIMS:
        return [obj["metadata"]["name"], dra_kinds.claim_state(obj), age]
    if resource.plural == dra_kinds.SLICES:
        return [obj["metadata"]["name"], *dra_kinds.slice_cells(obj), age]
    workload = _workload_cells(resource.plural, obj, age)
    if workload is not None:
        return workload
    return [obj["metadata"]["name"], age]


def _count(section: Any, key: str) -> int:
    value = section.get(key, 0) if isinstance(section, dict) else 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _workload_cells(plural: str, obj: dict[str, Any], age: str) -> list[Any] | None:
    name, spec, status = obj["metadata"]["name"], obj.get("spec") or {}, obj.get("status") or {}
    desired, ready = _count(spec, "replicas"), _count(status, "readyReplicas")
    if plural == "deployments":
        return [name, f"{ready}/{desired}", _count(status, "updatedReplicas"), _count(status, "availableReplicas"), age]
    if plural == "replicasets":
        return [name, desired, _count(status, "replicas"), ready, age]
    if plural == "statefulsets":
        return [name, f"{ready}/{desired}", age]
    if plural == "jobs":
        found = status.get("conditions")
        conditions: list[Any] = found if isinstance(found, list) else []
        done = any(isinstance(c, dict) and c.get("type") == "Complete" for c in conditions)
        state = "Complete" if done else ("Running" if _count(status, "active") else "Pending")
        return [name, state, f"{_count(status, 'succeeded')}/{_count(spec, 'completions') or 1}", age]
    if plural == "services":
        return [name, spec.get("type") or "ClusterIP", spec.get("clusterIP") or "None", age]
    return None


def column_definitions(resource: Resource) -> list[dict[str, Any]]:
    """The Table's ``columnDefinitions`` for a resource."""
    return [
        {"name": name, "type": kind, "format": fmt, "description": "", "priority": priority}
        for name, kind, priority, fmt in _COLUMNS.get(resource.plural, _GENERIC)
    ]


def row(resource: Resource, obj: dict[str, Any], include_object: str, now: datetime) -> dict[str, Any]:
    """One Table row, with the object as ``includeObject`` asks (None, Object, PartialObjectMetadata)."""
    result: dict[str, Any] = {"cells": _cells(resource, obj, now)}
    if include_object == "Object":
        result["object"] = obj
    elif include_object != "None":
        result["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {},
        }
    return result


def table(
    resource: Resource,
    objects: list[dict[str, Any]],
    metadata: dict[str, Any],
    include_object: str = "PartialObjectMetadata",
    *,
    headers: bool = True,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table for ``objects`` (headers left out after a watch's first event)."""
    now = datetime.now(UTC)
    result: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    if headers:
        result["columnDefinitions"] = column_definitions(resource)
    result["rows"] = [row(resource, obj, include_object, now) for obj in objects]
    return result
