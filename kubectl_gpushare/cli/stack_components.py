"""What the stack's in-process components leave in the API, as a real install of our manifests would.

A real install shows its components as objects: the extender Deployment's pod and Service in
``kube-system`` (``manifests/base/extender.yaml``) and its leader Lease (the extender itself keeps
that one, `extender.leader`), and one DaemonSet pod per labelled node for the device plugin
(``manifests/base/device-plugin.yaml``) with its ``usage`` port. ``kubectl gpushare doctor`` and
``kubectl get pods -n kube-system`` look for exactly these, so the stack creates them through the
API: pods with the manifests' labels, bound to their node, which the stack's kubelet stand-in then
reports Running and Ready like any other pod. The extender's pod goes on the first node (a real
Deployment's pod lands on some node too); with no node yet it waits for the scheduler.

Node confinement is on, as with the shipped manifests: the device plugin's ServiceAccount and its
ValidatingAdmissionPolicy and binding are created from the packaged ``manifests/base/device-plugin.yaml``,
the device-plugin pods run as that ServiceAccount, and each node's plugin talks to the API with a
token bound to its own pod (`device_plugin_token`), which names its node, as kubelet's projected
token does. Where kubelet refreshes that token before it expires, the stack asks for one valid for a
year.

Not created: Endpoints/EndpointSlices (the sandbox does not serve them), ReplicaSet and DaemonSet
owners (the sandbox would run a ReplicaSet's pods itself).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from kubectl_gpushare import __version__, protocol
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import Conflict, KubeError, NotFound

log = logging.getLogger("kubectl_gpushare.stack")

NAMESPACE: Final = "kube-system"
DEVICE_PLUGIN_ACCOUNT: Final = protocol.DEVICE_PLUGIN_SERVICE_ACCOUNT[1]
TOKEN_LIFETIME: Final = 365 * 24 * 3600
"""Seconds a device plugin's token is valid (kubelet would refresh a projected one; the stack does not)."""
_CONFINEMENT_PATHS: Final = {
    "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
    "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
}
EXTENDER_NAME: Final = "gpushare-schd-extender"
EXTENDER_POD: Final = f"{EXTENDER_NAME}-stack"
"""The extender's pod (and its leader identity): one replica, in this process."""
EXTENDER_PORT: Final = 12345
"""The manifest's container port and Service port (the stack's extender listens elsewhere, on loopback)."""
EXTENDER_NODE_PORT: Final = 32766
EXTENDER_LABELS: Final = {"app": "gpushare", "component": EXTENDER_NAME}
DEVICE_PLUGIN_LABELS: Final = {"app": "gpushare", "component": "gpushare-device-plugin",
                               "name": "gpushare-device-plugin-ds"}
"""The DaemonSet template's labels."""
IMAGE: Final = f"ghcr.io/kubectl-gpushare/kubectl-gpushare:{__version__}"
MAX_NAME: Final = 253


def device_plugin_pod_name(node: str) -> str:
    """``gpushare-device-plugin-<node>``, cut to the 253 characters a pod name may have."""
    return f"gpushare-device-plugin-{node}"[:MAX_NAME].rstrip("-.")


def _create(api: Client, path: str, body: Mapping[str, Any]) -> None:
    """POST an object; one that exists already (a restart with ``--state``) is left as it is."""
    try:
        api.request("POST", path, body=json.dumps(body).encode(), content_type="application/json")
    except Conflict:
        pass


def _pod(name: str, labels: Mapping[str, str], container: Mapping[str, Any], node: str | None,
         tolerations: list[dict[str, str]], account: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [dict(container)], "tolerations": tolerations,
                            "priorityClassName": "system-node-critical", "serviceAccountName": account}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels)}, "spec": spec}


def ensure_namespace(api: Client) -> None:
    """``kube-system``, where the Lease, the Service and the pods go."""
    _create(api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})


def register_extender(api: Client, node: str | None) -> None:
    """The extender's Service and pod, as ``manifests/base/extender.yaml`` creates them."""
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": EXTENDER_NAME, "namespace": NAMESPACE, "labels": dict(EXTENDER_LABELS)},
        "spec": {"type": "NodePort", "selector": dict(EXTENDER_LABELS),
                 "ports": [{"name": "http", "port": EXTENDER_PORT, "targetPort": "http",
                            "nodePort": EXTENDER_NODE_PORT}]},
    }
    _create(api, f"/api/v1/namespaces/{NAMESPACE}/services", service)
    container = {"name": EXTENDER_NAME, "image": IMAGE, "command": ["kubectl-gpushare", "serve-extender"],
                 "ports": [{"name": "http", "containerPort": EXTENDER_PORT}]}
    tolerations = [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]
    _create(api, f"/api/v1/namespaces/{NAMESPACE}/pods",
            _pod(EXTENDER_POD, EXTENDER_LABELS, container, node, tolerations))


def register_device_plugin(api: Client, node: str) -> tuple[str, str]:
    """The DaemonSet's pod on ``node``; returns its (namespace, name)."""
    name = device_plugin_pod_name(node)
    container = {"name": "gpushare", "image": IMAGE, "args": ["serve-device-plugin"],
                 "ports": [{"name": protocol.USAGE_PORT_NAME, "containerPort": protocol.USAGE_PORT}]}
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoSchedule"}
                   for key in (protocol.NVIDIA_RESOURCE_GPU, protocol.RESOURCE_MEM)]
    tolerations.append({"key": "CriticalAddonsOnly", "operator": "Exists"})
    try:
        _create(api, f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(name, DEVICE_PLUGIN_LABELS, container, node,
                                                                  tolerations, DEVICE_PLUGIN_ACCOUNT))
    except KubeError as exc:
        log.warning("cannot create the device-plugin pod of node %s: %s", node, exc)
    return NAMESPACE, name


def install_confinement(api: Client) -> None:
    """The device plugin's ServiceAccount, ValidatingAdmissionPolicy and binding, from the shipped manifest.

    One that cannot be created is logged; the stack then runs unconfined rather than not at all.
    """
    import yaml

    from kubectl_gpushare.cli.manifests import read_manifest

    for doc in yaml.safe_load_all(read_manifest("device-plugin")):
        path = _CONFINEMENT_PATHS.get(str((doc or {}).get("kind")))
        if path is None:
            continue
        try:
            _create(api, path, doc)
        except KubeError as exc:
            log.warning("cannot create the device plugin's %s: %s", doc["kind"], exc)


def device_plugin_token(api: Client, node: str) -> str:
    """A token of the device plugin's ServiceAccount bound to its pod on ``node`` (a TokenRequest).

    The API server writes the pod's node into it (``authentication.kubernetes.io/node-name``), which
    is what the node-confinement policy keys on.

    Raises:
        KubeError: the API refused (no ServiceAccount, no such pod, a pod running as another account).
    """
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": TOKEN_LIFETIME,
                        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": device_plugin_pod_name(node)}}}
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{DEVICE_PLUGIN_ACCOUNT}/token"
    reply = api.request("POST", path, body=json.dumps(request).encode(), content_type="application/json")
    try:
        answer = json.loads(reply)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, too deep: a token was issued, but not a readable one
        answer = None
    token = (answer.get("status") or {}).get("token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise KubeError(f"the TokenRequest for node {node} was answered without a token")
    return token


def unregister_device_plugin(api: Client, node: str) -> None:
    """The DaemonSet's pod leaves the node with the label."""
    try:
        api.delete(types.PODS, device_plugin_pod_name(node), NAMESPACE)
    except NotFound:
        pass
    except KubeError as exc:
        log.warning("cannot delete the device-plugin pod of node %s: %s", node, exc)


def install_device_class(api: Client) -> None:
    """Create the DRA driver's DeviceClass, as ``kubectl apply -k manifests/dra`` does (kept if it exists)."""
    import yaml

    from kubectl_gpushare.cli.manifests import read_manifest

    text = read_manifest("device-class")
    try:
        _create(api, "/apis/resource.k8s.io/v1/deviceclasses", yaml.safe_load(text))
    except KubeError as exc:
        log.warning("cannot install the DRA DeviceClass: %s", exc)
