"""NVIDIA KAI Scheduler GPU sharing, read-only: reservation pods name the GPUs, fractional pods share them.

Formats followed (NVIDIA/KAI-Scheduler; keys in `protocol`, ``KAI_*``): a pod asks ``gpu-fraction``
(a share of one GPU's memory) or ``gpu-memory`` (MiB) by annotation, ``gpu-fraction-num-devices``
GPUs of it (``pkg/common/constants/constants.go``, ``docs/gpu-sharing/README.md``). The binder
reserves each shared GPU with a *reservation pod* asking ``nvidia.com/gpu: 1``, labelled
``runai-gpu-group: <group>`` and ``app: kai-resource-reservation`` in the reservation namespace; once
it runs it writes the GPU's UUID to ``run.ai/reserve_for_gpu_index`` (``-1`` while unknown)
(``pkg/binder/binding/resourcereservation/resource_reservation.go``,
``pkg/resourcereservation/patcher/pod_patcher.go``). Fractional pods carry the same group label, or
one ``runai-gpu-group/<group>`` label per GPU when they span several (``pkg/common/resources/gpu_sharing.go``).
A GPU's memory comes from the GPU Feature Discovery label ``nvidia.com/gpu.memory`` (MiB), as KAI's
scheduler reads it (``pkg/scheduler/api/node_info/node_info.go``).

A KAI node is an NVIDIA device-plugin node: its whole-GPU pool stays as the `nvidia` decoder reads
it, less the GPUs reservation pods hold, and each reserved GPU becomes a GPU in MiB with the
fractional pods' claims. Reservation pods are not workloads and make no claims; they are counted in
the node's note. Pure: the caller gathers the node's KAI pods and passes them in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode
from kubectl_gpushare.protocol import shown_value

NO_RESERVATION: Final = "has no reservation pod"
"""Words of the warning for a group label no reservation pod backs (doctor shows it as its own check)."""


def is_reservation(pod: Pod) -> bool:
    """A KAI reservation pod: the group label, in a reservation namespace or with KAI's app label."""
    labels = pod.metadata.labels
    return protocol.KAI_LABEL_GROUP in labels and (
        pod.metadata.namespace in protocol.KAI_RESERVATION_NAMESPACES
        or labels.get("app") == protocol.KAI_RESERVATION_APP
    )


def groups(pod: Pod) -> list[str]:
    """The GPU groups a fractional pod is bound to (one, or one per GPU for multi-GPU fractions)."""
    labels = pod.metadata.labels
    multi = sorted(
        value for key, value in labels.items() if key.startswith(protocol.KAI_LABEL_GROUP_PREFIX) and value
    )
    if multi:
        return multi[: protocol.MAX_KAI_DEVICES]
    single = labels.get(protocol.KAI_LABEL_GROUP, "")
    return [single] if single else []


def is_kai_pod(pod: Pod) -> bool:
    """A reservation pod or a pod asking KAI for a share of a GPU (by annotation or group label)."""
    annotations = pod.metadata.annotations
    return (
        protocol.KAI_ANN_FRACTION in annotations
        or protocol.KAI_ANN_MEMORY in annotations
        or protocol.KAI_LABEL_GROUP in pod.metadata.labels
        or any(key.startswith(protocol.KAI_LABEL_GROUP_PREFIX) for key in pod.metadata.labels)
    )


def _valid_uuid(text: str) -> bool:
    return 0 < len(text) <= 256 and text.isascii() and text.isprintable() and " " not in text


def _label_mib(node: Node, warnings: Warnings | None) -> int | None:
    text = node.metadata.labels.get(protocol.NVIDIA_LABEL_MEMORY)
    if text is None:
        return None
    value = protocol.parse_int_strict(text)
    if value is None or not 0 < value <= protocol.MAX_KAI_GPU_MEMORY_MIB:
        if warnings is not None:
            warnings.add(f"node {node.metadata.name}: label {protocol.NVIDIA_LABEL_MEMORY}={shown_value(text)} "
                         f"is not a MiB count in [1, {protocol.MAX_KAI_GPU_MEMORY_MIB}]; KAI fractions not sized")
        return None
    return value


def _reservations(
    pods: Sequence[Pod], node: str, warnings: Warnings | None
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Group -> GPU UUID ("" while unknown) of the node's active reservation pods, and (pod, UUID) of each."""
    found: dict[str, str] = {}
    holder: dict[str, str] = {}
    held: list[tuple[str, str]] = []
    for pod in sorted(pods, key=lambda pod: (pod.metadata.namespace, pod.metadata.name)):
        if not is_reservation(pod) or protocol.pod_phase_terminal(pod.status.phase):
            continue
        meta = pod.metadata
        where = f"pod {meta.namespace}/{meta.name}"
        group = meta.labels[protocol.KAI_LABEL_GROUP]
        text = meta.annotations.get(protocol.KAI_ANN_RESERVED_GPU, protocol.KAI_RESERVED_UNKNOWN).strip()
        uuid = "" if text == protocol.KAI_RESERVED_UNKNOWN else text
        if uuid and not _valid_uuid(uuid):
            if warnings is not None:
                warnings.add(f"{where}: annotation {protocol.KAI_ANN_RESERVED_GPU}={shown_value(text)} "
                             "is not a GPU UUID; its group is shown as pending")
            uuid = ""
        if uuid and uuid in holder and warnings is not None:
            warnings.add(f"node {node}: reservation pods {holder[uuid]} and {meta.namespace}/{meta.name} both "
                         f"claim GPU {uuid}; both groups are counted on it")
        if uuid:
            holder.setdefault(uuid, f"{meta.namespace}/{meta.name}")
        if group in found and warnings is not None:
            warnings.add(f"node {node}: KAI group {shown_value(group)} has two reservation pods; the first is counted")
        found.setdefault(group, uuid)
        held.append((f"{meta.namespace}/{meta.name}", uuid))
    return found, held


def _request(pod: Pod, warnings: Warnings | None) -> tuple[float | None, int | None, int] | None:
    """(fraction, MiB, devices) from the annotations, or None (warned) when one is unreadable."""
    meta = pod.metadata
    annotations = meta.annotations
    where = f"pod {meta.namespace}/{meta.name}"
    key = ""
    try:
        key = protocol.KAI_ANN_NUM_DEVICES
        devices = protocol.parse_kai_devices(annotations.get(key))
        if protocol.KAI_ANN_FRACTION in annotations:
            key = protocol.KAI_ANN_FRACTION
            return protocol.parse_kai_fraction(annotations[key]), None, devices
        if protocol.KAI_ANN_MEMORY in annotations:
            key = protocol.KAI_ANN_MEMORY
            return None, protocol.parse_kai_mib(annotations[key]), devices
    except protocol.AnnotationError as exc:
        if warnings is not None:
            warnings.add(f"{where}: annotation {key}={shown_value(annotations.get(key, ''))} {exc}; not counted")
        return None
    return None


def node(
    base: StackNode, raw: Node, pods: Sequence[Pod], warnings: Warnings | None
) -> tuple[StackNode, list[StackClaim]]:
    """The KAI view of an NVIDIA node: reserved GPUs in MiB after its pools, and the fractional pods' claims.

    ``base`` is the node as the `nvidia` decoder read it (its pool claims stay valid: indices are
    kept); ``pods`` are the node's KAI pods (`is_kai_pod`).
    """
    reserved, held = _reservations(pods, base.name, warnings)
    holding = len(held)
    memory = _label_mib(raw, warnings)
    uuids = sorted({uuid for uuid in reserved.values() if uuid})
    first = len(base.gpus)
    index_of = {uuid: first + position for position, uuid in enumerate(uuids)}
    product = raw.metadata.labels.get(protocol.NVIDIA_LABEL_PRODUCT, "")[:128]
    pools = tuple(
        msgspec.structs.replace(gpu, total=max(gpu.total - holding, 0))
        if gpu.id == protocol.NVIDIA_RESOURCE_GPU else gpu
        for gpu in base.gpus
    )
    shared = tuple(
        StackGPU(index=index_of[uuid], total=memory or 0, unit=protocol.UNIT_MIB, id=uuid, model=product)
        for uuid in uuids
    )
    waiting = sum(1 for uuid in reserved.values() if not uuid)
    note = f"KAI: {len(uuids)} shared GPU{'s' if len(uuids) != 1 else ''}"
    if waiting:
        note += f", {waiting} reservation{'s' if waiting != 1 else ''} without a GPU yet"
    note = f"{base.note}; {note}" if base.note else note
    reservations = tuple((pod, index_of.get(uuid, PENDING), uuid) for pod, uuid in held)
    stack_node = StackNode(name=base.name, stack=protocol.STACK_KAI, ip=base.ip, gpus=pools + shared, note=note,
                           reservations=reservations)
    claims: list[StackClaim] = []
    for pod in pods:
        if is_reservation(pod) or protocol.pod_phase_terminal(pod.status.phase):
            continue
        claims.extend(_claims(pod, reserved, index_of, memory, base.name, warnings))
    return stack_node, claims


def _claims(
    pod: Pod, reserved: dict[str, str], index_of: dict[str, int], memory: int | None, node: str,
    warnings: Warnings | None,
) -> list[StackClaim]:
    meta = pod.metadata
    request = _request(pod, warnings)
    bound = groups(pod)
    if request is None:
        if bound and warnings is not None and not (
            protocol.KAI_ANN_FRACTION in meta.annotations or protocol.KAI_ANN_MEMORY in meta.annotations
        ):
            warnings.add(f"pod {meta.namespace}/{meta.name}: has a KAI GPU group but no gpu-fraction or gpu-memory; "
                         "not counted")
        return []
    fraction, mib, devices = request
    targets: list[int] = []
    for group in bound or [""] * devices:
        if group and group not in reserved and warnings is not None:
            warnings.add(f"pod {meta.namespace}/{meta.name}: KAI group {shown_value(group)} {NO_RESERVATION} on "
                         f"node {node}; shown as pending")
        uuid = reserved.get(group, "")
        targets.append(index_of[uuid] if uuid else PENDING)
    unit = protocol.UNIT_MIB
    if mib is not None:
        amount = mib
    elif memory is not None and fraction is not None:
        amount = math.ceil(fraction * memory)
    else:  # no GPU memory label: the share is kept as a percent, pending (never taken off a GPU in MiB)
        amount, unit = math.ceil((fraction or 0) * protocol.PERCENT_PER_GPU), protocol.UNIT_PERCENT
    return [
        StackClaim(
            namespace=meta.namespace, name=meta.name, uid=meta.uid, node=pod.spec.node_name, gpu=gpu,
            amount=amount, unit=unit, phase=pod.status.phase,
        )
        for gpu in targets
    ]


__all__ = ["NO_RESERVATION", "groups", "is_kai_pod", "is_reservation", "node"]
