"""NVIDIA device plugin nodes and pods, read-only: exclusive GPUs, time-slicing/MPS slots, MIG profiles.

Formats followed (NVIDIA/k8s-device-plugin): resource names and sharing in ``README.md``
(§"Shared Access to GPUs", ``renameByDefault`` gives ``nvidia.com/gpu.shared``) and
``api/config/v1/sharing.go``; MIG ``mixed`` strategy resources ``nvidia.com/mig-<g>g.<mem>gb`` in
``docs/mig`` / ``internal/rm``; GPU Feature Discovery labels ``nvidia.com/gpu.replicas``,
``gpu.sharing-strategy``, ``gpu.count``, ``gpu.memory`` (MiB), ``gpu.product`` (``-SHARED``
suffix under un-renamed sharing) in ``docs/gpu-feature-discovery/README.md`` and
``internal/lm/resource.go``.

The plugin never says which physical GPU or replica a pod got (kubelet keeps that), so a node is
one pool per resource: ``GPUs`` (exclusive, count only) or ``slots`` (time-slicing/MPS replicas,
MIG instances), used/total from the pods' limits and the node's allocatable.
"""

from __future__ import annotations

from typing import Final

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings, node_ip, read_quantity
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import StackClaim, StackGPU, StackNode
from kubectl_gpushare.protocol import shown_value

SHARED_RESOURCE: Final = protocol.NVIDIA_RESOURCE_GPU + ".shared"
SHARING_STRATEGIES: Final = ("time-slicing", "mps")
MAX_SLOTS: Final = protocol.MAX_GPUS_PER_NODE * 1024
"""Most slots one resource of a node may advertise (64 GPUs x 1024 replicas)."""


def _resources(names: list[str]) -> list[str]:
    """NVIDIA resources of a node in display order: gpu, gpu.shared, then MIG profiles by name."""
    base = [name for name in (protocol.NVIDIA_RESOURCE_GPU, SHARED_RESOURCE) if name in names]
    mig = sorted(name for name in names if name.startswith(protocol.NVIDIA_MIG_PREFIX))
    return (base + mig)[: protocol.MAX_GPUS_PER_NODE]


def is_nvidia_node(node: Node) -> bool:
    """A node advertising ``nvidia.com/gpu`` (or its ``.shared``/MIG forms)."""
    return bool(_resources(list(node.status.capacity) + list(node.status.allocatable)))


def _label_int(labels: dict[str, str], key: str, name: str, warnings: Warnings | None, maximum: int) -> int | None:
    text = labels.get(key)
    if text is None:
        return None
    value = protocol.parse_int_strict(text)
    if value is None or not 0 <= value <= maximum:
        if warnings is not None:
            warnings.add(f"node {name}: label {key}={shown_value(text)} is not an integer in [0, {maximum}]; ignored")
        return None
    return value


def node(node: Node, warnings: Warnings | None) -> StackNode:
    """One pool per NVIDIA resource; sharing mode and replicas from the GFD labels."""
    name = node.metadata.name
    labels = node.metadata.labels
    replicas = _label_int(labels, protocol.NVIDIA_LABEL_REPLICAS, name, warnings, 1024) or 1
    count = _label_int(labels, protocol.NVIDIA_LABEL_COUNT, name, warnings, protocol.MAX_GPUS_PER_NODE)
    memory = _label_int(labels, protocol.NVIDIA_LABEL_MEMORY, name, warnings, protocol.MAX_GPU_MEMORY)
    product = labels.get(protocol.NVIDIA_LABEL_PRODUCT, "")[:128]
    strategy = labels.get(protocol.NVIDIA_LABEL_STRATEGY, "")
    shared = strategy in SHARING_STRATEGIES or replicas > 1 or product.endswith(protocol.NVIDIA_SHARED_SUFFIX)
    gpus = []
    for index, resource in enumerate(_resources(list(node.status.allocatable))):
        what = f"node {name} allocatable {resource}"
        total = read_quantity(node.status.allocatable.get(resource), what, warnings, MAX_SLOTS)
        is_mig = resource.startswith(protocol.NVIDIA_MIG_PREFIX)
        unit = protocol.UNIT_SLOTS if shared or is_mig or resource == SHARED_RESOURCE else protocol.UNIT_GPUS
        gpus.append(StackGPU(index=index, total=total, unit=unit, id=resource, model=product))
    note = ""
    if shared:
        mode = strategy if strategy in SHARING_STRATEGIES else "shared"
        physical = f" on {count} GPUs" if count is not None else ""
        note = f"{mode} x{replicas}{physical}"
        if memory is not None:
            note += f", {memory} MiB each"
    return StackNode(name=name, stack=protocol.STACK_NVIDIA, ip=node_ip(node), gpus=tuple(gpus), note=note)


def claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """One claim per NVIDIA resource the pod's regular containers limit, in its pool's unit."""
    meta = pod.metadata
    result = []
    for gpu in stack_node.gpus:
        amount = sum(
            read_quantity(
                container.resources.limits.get(gpu.id),
                f"pod {meta.namespace}/{meta.name} container {container.name!r} limit {gpu.id}", warnings, MAX_SLOTS,
            )
            for container in pod.spec.containers
        )
        if amount > 0:
            result.append(
                StackClaim(
                    namespace=meta.namespace, name=meta.name, uid=meta.uid, node=pod.spec.node_name,
                    gpu=gpu.index, amount=amount, unit=gpu.unit, phase=pod.status.phase,
                )
            )
    return result


__all__ = ["claims", "is_nvidia_node", "node"]
