"""The plain API objects a spec cluster is made of: namespaces, GPU nodes, GPU pods, unhealthy ConfigMaps.

Shapes them as the gpushare components leave them: nodes with ``aliyun.com/gpu-mem`` and
``aliyun.com/gpu-count`` in capacity and allocatable, ``InternalIP`` addresses (data only, never
contacted), the ``gpushare=true`` and ``nvidia.com/gpu.*`` labels; pods with ``aliyun.com/gpu-mem``
limits, phases and the annotations the original scheduler extender writes on bind. `spec` (YAML
specs and the generator) and `stack_spec` (other sharing stacks) both build on these, so this
module imports neither. Pure: produces dicts, does no I/O.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from kubectl_gpushare import protocol

DEFAULT_PRODUCT = "NVIDIA-A100-SXM4-80GB"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Generated objects are dated from here, so output is identical for a seed."""


def stable_hex(seed: str, length: int) -> str:
    """``length`` hex digits that depend only on ``seed`` (machine IDs, UUIDs)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def timestamp(offset_seconds: int, epoch: datetime = EPOCH) -> str:
    """``epoch`` plus ``offset_seconds`` as an API timestamp."""
    return (epoch + timedelta(seconds=offset_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def namespace_object(name: str) -> dict[str, Any]:
    """A Namespace object."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def node_object(
    name: str,
    gpu_memories: list[int],
    *,
    ip: str,
    product: str = DEFAULT_PRODUCT,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    gpushare: bool = True,
    ready: bool = True,
    created: str | None = None,
    dra: bool = False,
) -> dict[str, Any]:
    """A GPU node as the gpushare device plugin leaves it (an empty list gives a CPU-only node).

    ``dra``: a node for the DRA driver instead: its label, and no ``aliyun.com/gpu-*`` resources.
    """
    total = sum(gpu_memories)
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    resources: dict[str, str] = {"cpu": "96", "memory": "1056816536Ki", "pods": "110", "ephemeral-storage": "1Ti"}
    if gpu_memories:
        if dra:
            all_labels[protocol.LABEL_DRA] = "true"
        elif gpushare:
            all_labels[protocol.LABEL_GPUSHARE] = "true"
        all_labels[protocol.LABEL_GPU_PRODUCT] = product
        all_labels[protocol.LABEL_GPU_COUNT] = str(len(gpu_memories))
        all_labels[protocol.LABEL_GPU_MEMORY] = str(min(gpu_memories) * 1024)
        if not dra:
            resources[protocol.RESOURCE_MEM] = str(total)
            resources[protocol.RESOURCE_COUNT] = str(len(gpu_memories))
    all_labels.update(labels or {})
    node_annotations = dict(annotations or {})
    if gpu_memories and len(set(gpu_memories)) > 1:
        node_annotations.setdefault(
            protocol.ANN_NODE_GPUS,
            protocol.format_node_gpus(
                [{"index": i, "memory": m, "model": product} for i, m in enumerate(gpu_memories)]
            ),
        )
    heartbeat = created or timestamp(0)
    metadata: dict[str, Any] = {"name": name, "labels": all_labels}
    if node_annotations:
        metadata["annotations"] = node_annotations
    if created:
        metadata["creationTimestamp"] = created
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": heartbeat,
                }
            ],
            "nodeInfo": {
                "machineID": stable_hex(name, 32),
                "systemUUID": str(uuid.UUID(stable_hex(name + "/system", 32))),
                "bootID": str(uuid.UUID(stable_hex(name + "/boot", 32))),
                "kubeletVersion": "v1.32.0",
                "kubeProxyVersion": "v1.32.0",
                "osImage": "Ubuntu 22.04.4 LTS",
                "kernelVersion": "5.15.0-105-generic",
                "containerRuntimeVersion": "containerd://1.7.13",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def unhealthy_configmap(node: str, gpus: list[int]) -> dict[str, Any]:
    """The ConfigMap that marks GPUs of a node unhealthy (read by the extender)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": protocol.UNHEALTHY_CM_PREFIX + node, "namespace": protocol.UNHEALTHY_CM_NAMESPACE},
        "data": {protocol.UNHEALTHY_CM_KEY: ",".join(str(g) for g in gpus)},
    }


def pod_object(
    name: str,
    namespace: str,
    requests: list[int],
    *,
    node: str | None = None,
    gpu: int | None = None,
    gpu_memory: int | None = None,
    phase: str | None = None,
    assigned: bool | None = None,
    assume_time: int = 0,
    ip: str | None = None,
    uid: str | None = None,
    created: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ready: bool | None = None,
) -> dict[str, Any]:
    """A pod with per-container ``aliyun.com/gpu-mem`` limits and, when placed, the extender's annotations.

    Args:
        name: pod name.
        namespace: its namespace.
        requests: GPU memory per container (0 leaves a container without the limit).
        node: the node it is bound to (None: unbound and Pending).
        gpu: the GPU index the extender chose (None: no ``ALIYUN_COM_GPU_MEM_IDX``).
        gpu_memory: that GPU's total memory, for ``ALIYUN_COM_GPU_MEM_DEV``.
        phase: the pod phase (default Running when bound with an index, else Pending).
        assigned: ``ALIYUN_COM_GPU_MEM_ASSIGNED`` (default: true once Running).
        assume_time: ``ALIYUN_COM_GPU_MEM_ASSUME_TIME`` in unix nanoseconds.
        ip: status.podIP when running (None: none yet; `ipam.assign` gives one from the node's range).
        uid: metadata.uid (generated on load when None).
        created: creationTimestamp.
        labels: extra labels.
        annotations: extra annotations.
        ready: a ``Ready`` condition with this status (None: no conditions, as before).
    """
    phase = phase or ("Running" if node and gpu is not None else "Pending")
    containers: list[dict[str, Any]] = []
    for i, request in enumerate(requests):
        container: dict[str, Any] = {
            "name": "main" if i == 0 else f"sidecar-{i}",
            "image": "nvcr.io/nvidia/cuda:12.4.1-base",
        }
        if request > 0:
            quantity = {protocol.RESOURCE_MEM: str(request)}
            container["resources"] = {"limits": dict(quantity), "requests": dict(quantity)}
        containers.append(container)
    pod_annotations: dict[str, str] = {}
    if node and gpu is not None:
        pod_annotations[protocol.ANN_IDX] = str(gpu)
        pod_annotations[protocol.ANN_POD] = str(sum(requests))
        if gpu_memory is not None:
            pod_annotations[protocol.ANN_DEV] = str(gpu_memory)
        is_assigned = assigned if assigned is not None else phase != "Pending"
        pod_annotations[protocol.ANN_ASSIGNED] = protocol.ASSIGNED_TRUE if is_assigned else protocol.ASSIGNED_FALSE
        pod_annotations[protocol.ANN_ASSUME_TIME] = str(assume_time)
    pod_annotations.update(annotations or {})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": name.rsplit("-", 1)[0]}}
    metadata["labels"].update(labels or {})
    if pod_annotations:
        metadata["annotations"] = pod_annotations
    if uid:
        metadata["uid"] = uid
    if created:
        metadata["creationTimestamp"] = created
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Always", "schedulerName": "default-scheduler"}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if phase == "Running":
        if ip:  # else `ipam.assign` gives one from the node's range when the seed is built
            status["podIP"] = ip
            status["podIPs"] = [{"ip": ip}]
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "image": c["image"],
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": created or timestamp(0)}},
            }
            for c in containers
        ]
    if not node:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "waiting for a GPU"}
        ]
    elif ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


