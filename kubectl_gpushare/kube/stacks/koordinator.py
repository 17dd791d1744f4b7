"""Koordinator DeviceShare nodes and pods, read-only: GPUs by minor, memory in MiB, core percent.

Formats followed (koordinator-sh/koordinator ``apis/extension/device_share.go``): node resources
``koordinator.sh/gpu-memory`` (a quantity, all GPUs together), ``koordinator.sh/gpu-memory-ratio``
(100 per GPU) and ``koordinator.sh/gpu-core`` (100 per GPU); the pod annotation
``scheduling.koordinator.sh/device-allocated``, ``{"gpu":[{"minor":1,"resources":{...}}]}``
(``DeviceAllocations``), parsed by `protocol.parse_koord_allocated`.

The per-GPU inventory is the cluster-scoped ``Device`` object of the same name as the node
(``apis/scheduling/v1alpha1/device_types.go``: ``spec.devices[]`` of ``type``, ``id`` (UUID),
``minor``, ``health``, ``resources``). When the caller has it, the GPUs are its ``gpu`` entries;
without it (the CRD not served, no permission, a file without it, an unusable object) the GPUs
are minors 0..n-1 (n = ratio / 100) sharing the node's memory evenly, as koordlet reports a node
of identical GPUs.
"""

from __future__ import annotations

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings, node_ip, read_quantity
from kubectl_gpushare.kube.types import KoordDevice, Node, Pod
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode

MAX_RATIO = protocol.MAX_GPUS_PER_NODE * protocol.PERCENT_PER_GPU


def _mib(amount: int) -> int:
    """Bytes in MiB, rounded up: the same rule for a GPU and a claim, so a claim of a whole GPU fills it exactly."""
    return -(-amount // protocol.MIB)


def is_koordinator_node(node: Node) -> bool:
    """A node advertising Koordinator's GPU memory or memory-ratio resource."""
    status = node.status
    return any(
        key in status.allocatable or key in status.capacity
        for key in (protocol.KOORD_RESOURCE_GPU_MEMORY_RATIO, protocol.KOORD_RESOURCE_GPU_MEMORY)
    )


def _device_gpus(device: KoordDevice, name: str, model: str, warnings: Warnings | None) -> tuple[StackGPU, ...] | None:
    """The ``gpu`` entries of a ``Device`` as GPUs, or None (warned) if one is unusable."""
    gpus: list[StackGPU] = []
    for entry in device.spec.devices[: 4 * protocol.MAX_GPUS_PER_NODE]:
        if entry.type != "gpu":
            continue
        what = f"node {name}: Device entry minor {entry.minor}"
        minor = entry.minor
        if minor is None or not protocol.valid_gpu_index(minor) or any(gpu.index == minor for gpu in gpus):
            if warnings is not None:
                warnings.add(f"{what} is missing, outside [0, {protocol.MAX_GPUS_PER_NODE}) or repeated; "
                             "GPUs read from the node's resources")
            return None
        memory = read_quantity(entry.resources.get(protocol.KOORD_RESOURCE_GPU_MEMORY), f"{what} gpu-memory",
                               warnings, protocol.MAX_KAI_GPU_MEMORY_MIB * protocol.MIB)
        core = read_quantity(entry.resources.get(protocol.KOORD_RESOURCE_GPU_CORE), f"{what} gpu-core", warnings,
                             100 * protocol.PERCENT_PER_GPU)
        uuid = entry.id if entry.id.isascii() and entry.id.isprintable() else ""
        gpus.append(StackGPU(index=minor, total=_mib(memory), unit=protocol.UNIT_MIB, id=uuid[:256],
                             model=model, cores=core, healthy=entry.health))
    return tuple(sorted(gpus, key=lambda gpu: gpu.index)) or None


def node(node: Node, warnings: Warnings | None, device: KoordDevice | None = None) -> StackNode:
    """The ``Device`` object's GPUs when given and usable, else minors 0..n-1 from the node's resources."""
    name = node.metadata.name
    model = node.metadata.labels.get("node.koordinator.sh/gpu-model", "")[:128]
    if device is not None:
        from_device = _device_gpus(device, name, model, warnings)
        if from_device is not None:
            return StackNode(name=name, stack=protocol.STACK_KOORDINATOR, ip=node_ip(node), gpus=from_device)
    resources = node.status.allocatable or node.status.capacity
    ratio = read_quantity(
        resources.get(protocol.KOORD_RESOURCE_GPU_MEMORY_RATIO),
        f"node {name} allocatable {protocol.KOORD_RESOURCE_GPU_MEMORY_RATIO}", warnings, MAX_RATIO,
    )
    memory = read_quantity(
        resources.get(protocol.KOORD_RESOURCE_GPU_MEMORY),
        f"node {name} allocatable {protocol.KOORD_RESOURCE_GPU_MEMORY}",
        warnings, protocol.MAX_GPUS_PER_NODE * protocol.MAX_KAI_GPU_MEMORY_MIB * protocol.MIB,
    )
    count = ratio // protocol.PERCENT_PER_GPU
    if count <= 0:
        if warnings is not None and is_koordinator_node(node):  # silent under ``--stack`` on another node
            ratio_key = protocol.KOORD_RESOURCE_GPU_MEMORY_RATIO
            warnings.add(f"node {name}: no usable {ratio_key}; no Koordinator GPUs counted")
        return StackNode(name=name, stack=protocol.STACK_KOORDINATOR, ip=node_ip(node))
    per_gpu = _mib(memory // count)
    gpus = tuple(
        StackGPU(index=minor, total=per_gpu, unit=protocol.UNIT_MIB, model=model, cores=protocol.PERCENT_PER_GPU)
        for minor in range(count)
    )
    return StackNode(name=name, stack=protocol.STACK_KOORDINATOR, ip=node_ip(node), gpus=gpus)


def claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """One claim per GPU entry of ``device-allocated`` in MiB (rounded up) with its core percent."""
    meta = pod.metadata
    text = meta.annotations.get(protocol.KOORD_ANN_DEVICE_ALLOCATED)
    if text is None:
        return []
    where = f"pod {meta.namespace}/{meta.name}"
    try:
        entries = protocol.parse_koord_allocated(text)
    except protocol.AnnotationError as exc:
        if warnings is not None:
            warnings.add(f"{where}: annotation {protocol.KOORD_ANN_DEVICE_ALLOCATED} {exc}; not counted")
        return []
    by_minor = {gpu.index: gpu for gpu in stack_node.gpus}
    result = []
    for minor, memory, ratio, core in entries:
        gpu = by_minor.get(minor)
        if gpu is None:
            if warnings is not None:
                warnings.add(f"{where}: {protocol.KOORD_ANN_DEVICE_ALLOCATED} names minor {minor}, "
                             f"which node {stack_node.name} does not have; shown as pending")
        mib = _mib(memory)
        if mib == 0 and ratio > 0 and gpu is not None:
            mib = -(-gpu.total * ratio // protocol.PERCENT_PER_GPU)
        result.append(
            StackClaim(
                namespace=meta.namespace, name=meta.name, uid=meta.uid, node=pod.spec.node_name,
                gpu=minor if gpu is not None else PENDING, amount=mib, unit=protocol.UNIT_MIB,
                phase=pod.status.phase, cores=core,
            )
        )
    return result


__all__ = ["claims", "is_koordinator_node", "node"]
