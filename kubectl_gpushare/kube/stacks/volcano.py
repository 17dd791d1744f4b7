"""Volcano GPU nodes and pods, read-only: gpu-share (memory per card) and vGPU (HAMi-like register).

Formats followed (volcano-sh/volcano):
- gpu-share, ``pkg/scheduler/api/devices/nvidia/gpushare/``: ``device_info.go`` NewGPUDevices reads
  node *capacity* ``volcano.sh/gpu-memory`` (total) and ``volcano.sh/gpu-number``; each card 0..n-1
  holds total / number (integer division); cards in ``volcano.sh/gpu-unhealthy-ids`` (node annotation,
  comma-separated indices) are left out of scheduling. ``share.go``: a pod's memory is the larger
  of its regular containers' summed ``volcano.sh/gpu-memory`` limits and its largest init
  container's; ``volcano.sh/gpu-index`` (comma-separated) names its cards, and each named card is
  charged the pod's whole memory (``getUsedGPUMemory``). A ``volcano.sh/gpu-number`` pod holds its
  cards whole. Units: the user guide (``docs/user-guide/how_to_use_gpu_sharing.md``) says MB; the
  device plugin reports NVML's MiB, so MiB is shown.
- vGPU, ``pkg/scheduler/api/devices/nvidia/vgpu/utils.go``: node ``volcano.sh/node-vgpu-register``
  (``UUID,count,devmemMiB,type,health,mode:``, id by position) and pod ``volcano.sh/vgpu-ids-new``
  (HAMi's ``UUID,type,memMiB,cores:`` per device, ``;`` per container); a pod still binding counts
  on its ``volcano.sh/vgpu-node``, one whose ``volcano.sh/bind-phase`` is ``failed`` holds nothing.
"""

from __future__ import annotations

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings, node_ip, read_quantity
from kubectl_gpushare.kube.stacks import hami
from kubectl_gpushare.kube.types import Container, Node, Pod
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode
from kubectl_gpushare.protocol import shown_value

MAX_NODE_MEMORY = protocol.MAX_GPUS_PER_NODE * protocol.MAX_KAI_GPU_MEMORY_MIB


def is_volcano_node(node: Node) -> bool:
    """A node with Volcano's gpu-share capacity or its vGPU register."""
    return (
        protocol.VOLCANO_RESOURCE_MEMORY in node.status.capacity
        or protocol.VOLCANO_ANN_VGPU_REGISTER in node.metadata.annotations
    )


def _vgpu_node(node: Node, warnings: Warnings | None) -> StackNode:
    name = node.metadata.name
    text = node.metadata.annotations.get(protocol.VOLCANO_ANN_VGPU_REGISTER)
    if text is None:  # ``--stack volcano`` on a node Volcano does not run: no GPUs, nothing to warn about
        return StackNode(name=name, stack=protocol.STACK_VOLCANO, ip=node_ip(node))
    try:
        devices = protocol.parse_volcano_register(text)
    except protocol.AnnotationError as exc:
        if warnings is not None:
            warnings.add(f"node {name}: annotation {protocol.VOLCANO_ANN_VGPU_REGISTER} {exc}; no Volcano GPUs counted")
        devices = []
    gpus = tuple(
        StackGPU(index=d.index, total=d.memory, unit=protocol.UNIT_MIB, id=d.uuid, model=d.model, healthy=d.healthy)
        for d in devices
    )
    return StackNode(name=name, stack=protocol.STACK_VOLCANO, ip=node_ip(node), gpus=gpus, note="vGPU")


def node(node: Node, warnings: Warnings | None) -> StackNode:
    """Cards 0..n-1 of total/n MiB each (gpu-share), or the vGPU register's GPUs."""
    name = node.metadata.name
    if protocol.VOLCANO_RESOURCE_MEMORY not in node.status.capacity:
        return _vgpu_node(node, warnings)
    capacity = node.status.capacity
    total = read_quantity(
        capacity.get(protocol.VOLCANO_RESOURCE_MEMORY), f"node {name} capacity {protocol.VOLCANO_RESOURCE_MEMORY}",
        warnings, MAX_NODE_MEMORY,
    )
    number = read_quantity(
        capacity.get(protocol.VOLCANO_RESOURCE_NUMBER), f"node {name} capacity {protocol.VOLCANO_RESOURCE_NUMBER}",
        warnings, protocol.MAX_GPUS_PER_NODE,
    )
    if number <= 0:
        if warnings is not None:
            warnings.add(f"node {name}: no usable {protocol.VOLCANO_RESOURCE_NUMBER}; no Volcano GPUs counted")
        return StackNode(name=name, stack=protocol.STACK_VOLCANO, ip=node_ip(node))
    unhealthy = protocol.parse_unhealthy_indices(node.metadata.annotations.get(protocol.VOLCANO_ANN_UNHEALTHY, ""))
    gpus = tuple(
        StackGPU(index=index, total=total // number, unit=protocol.UNIT_MIB, healthy=index not in unhealthy)
        for index in range(number)
    )
    return StackNode(name=name, stack=protocol.STACK_VOLCANO, ip=node_ip(node), gpus=gpus, note="gpu-share")


def _pod_amount(pod: Pod, resource: str, warnings: Warnings | None, maximum: int) -> int:
    """Volcano's rule: max(sum over regular containers, largest init container)."""
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name}"

    def limit(container: Container) -> int:
        value = container.resources.limits.get(resource)
        return read_quantity(value, f"{where} container {container.name!r} limit {resource}", warnings, maximum)

    regular = sum(limit(container) for container in pod.spec.containers)
    init = max((limit(container) for container in pod.spec.init_containers), default=0)
    return max(regular, init)


def _vgpu_claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    meta = pod.metadata
    text = meta.annotations.get(protocol.VOLCANO_ANN_VGPU_IDS)
    if text is None or meta.annotations.get(protocol.VOLCANO_ANN_BIND_PHASE) == hami.BIND_FAILED:
        return []
    try:
        containers = hami.parse_allocated(text)
    except protocol.AnnotationError as exc:
        if warnings is not None:
            key = protocol.VOLCANO_ANN_VGPU_IDS
            warnings.add(f"pod {meta.namespace}/{meta.name}: annotation {key} {exc}; not counted")
        return []
    return [
        StackClaim(
            namespace=meta.namespace, name=meta.name, uid=meta.uid,
            node=pod.spec.node_name or meta.annotations.get(protocol.VOLCANO_ANN_VGPU_NODE, ""),
            gpu=next((gpu.index for gpu in stack_node.gpus if gpu.id == share.uuid), PENDING),
            amount=share.memory, unit=protocol.UNIT_MIB, phase=pod.status.phase, cores=share.cores,
        )
        for shares in containers
        for share in shares
    ]


def claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """The pod's MiB on each card its ``gpu-index`` names (pending without one), or its vGPU shares."""
    if stack_node.note == "vGPU":
        return _vgpu_claims(pod, stack_node, warnings)
    meta = pod.metadata
    memory = _pod_amount(pod, protocol.VOLCANO_RESOURCE_MEMORY, warnings, protocol.MAX_KAI_GPU_MEMORY_MIB)
    whole = _pod_amount(pod, protocol.VOLCANO_RESOURCE_NUMBER, warnings, protocol.MAX_GPUS_PER_NODE)
    if memory <= 0 and whole <= 0:
        return []
    text = meta.annotations.get(protocol.VOLCANO_ANN_GPU_INDEX)
    indices = [PENDING] * max(whole, 1) if memory <= 0 else [PENDING]
    if text is not None:
        try:
            indices = protocol.parse_index_list(text)
        except protocol.AnnotationError as exc:
            if warnings is not None:
                key = protocol.VOLCANO_ANN_GPU_INDEX
                where = f"pod {meta.namespace}/{meta.name}"
                warnings.add(f"{where}: annotation {key}={shown_value(text)} {exc}; not counted")
            return []
    by_index = {gpu.index: gpu for gpu in stack_node.gpus}
    per_card = stack_node.gpus[0].total if stack_node.gpus else 0  # gpu-share cards are all total / number
    result = []
    for index in indices:
        gpu = by_index.get(index)
        amount = memory if memory > 0 else (gpu.total if gpu is not None else per_card)
        if index != PENDING and gpu is None and warnings is not None:
            warnings.add(f"pod {meta.namespace}/{meta.name}: {protocol.VOLCANO_ANN_GPU_INDEX} names GPU {index}, "
                         f"which node {stack_node.name} does not have; shown as pending")
        result.append(
            StackClaim(
                namespace=meta.namespace, name=meta.name, uid=meta.uid, node=pod.spec.node_name, gpu=index,
                amount=amount, unit=protocol.UNIT_MIB, phase=pod.status.phase,
            )
        )
    return result


__all__ = ["claims", "is_volcano_node", "node"]
