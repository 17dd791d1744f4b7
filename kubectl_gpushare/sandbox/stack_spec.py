"""Spec nodes and pods of other sharing stacks (``stack: hami|nvidia|nano-gpu|elastic-gpu|kai|volcano|koordinator``).

Builds what each stack's own components would leave in the API, so tests and the demo can show
``kubectl inspect gpushare`` reading them: HAMi's register/handshake annotations and
``vgpu-devices-allocated``; the NVIDIA device plugin's ``nvidia.com/gpu`` (times ``replicas``) or
MIG resources with GFD labels; nano-gpu's and elastic-gpu's percent resources and per-container
card annotations; KAI's GFD-labelled NVIDIA node, fractional pods (``gpu-fraction``/``gpu-memory``
annotations, ``runai-gpu-group`` label) and the reservation pod its binder runs per shared GPU;
Volcano's gpu-share capacity and ``volcano.sh/gpu-index``; Koordinator's GPU resources and
``scheduling.koordinator.sh/device-allocated``. Amounts are in the stack's unit: MiB for HAMi,
KAI, Volcano and Koordinator (``gpuMemory`` too), slots or GPUs for NVIDIA, percent for nano-gpu
and elastic-gpu. Pure: produces dicts, does no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Final

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.builders import node_object, pod_object

HAMI_SPLIT: Final = 10
"""HAMi's default ``deviceSplitCount``: ``nvidia.com/gpu`` advertises GPUs x 10."""
REPORTED_AT: Final = "Reported 2026-01-01 00:00:00"


def hami_uuid(node: str, index: int) -> str:
    """The fake GPU UUID a spec HAMi node registers for GPU ``index``."""
    return f"GPU-{node}-{index}"


def _hami_register(node: str, memories: list[int], product: str, register_format: str) -> str:
    if register_format == "colon":
        return "".join(
            f"{hami_uuid(node, i)},{HAMI_SPLIT},{memory},100,{product},0,true:" for i, memory in enumerate(memories)
        )
    devices = [
        {"id": hami_uuid(node, i), "index": i, "count": HAMI_SPLIT, "devmem": memory, "devcore": 100,
         "type": product, "numa": 0, "mode": "hami-core", "health": True}
        for i, memory in enumerate(memories)
    ]
    return json.dumps(devices, separators=(",", ":"))


def stack_node_object(
    name: str,
    stack: str,
    memories: list[int],
    *,
    ip: str,
    product: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    replicas: int = 1,
    mig: dict[str, int] | None = None,
    register_format: str = "json",
) -> dict[str, Any]:
    """A node of ``stack`` with ``len(memories)`` GPUs (memory only matters to HAMi and GFD labels)."""
    node = node_object(name, [], ip=ip, labels=labels, annotations=annotations)
    resources: dict[str, str] = {}
    meta_labels: dict[str, str] = node["metadata"]["labels"]
    meta_annotations: dict[str, str] = node["metadata"].setdefault("annotations", {})
    count = len(memories)
    if stack == protocol.STACK_HAMI:
        resources[protocol.NVIDIA_RESOURCE_GPU] = str(count * HAMI_SPLIT)
        meta_labels.setdefault("gpu", "on")
        register = _hami_register(name, memories, product, register_format)
        meta_annotations.setdefault(protocol.HAMI_ANN_REGISTER, register)
        meta_annotations.setdefault(protocol.HAMI_ANN_HANDSHAKE, REPORTED_AT)
    elif stack == protocol.STACK_NVIDIA:
        shared = replicas > 1
        if count:
            resources[protocol.NVIDIA_RESOURCE_GPU] = str(count * replicas)
        for profile, instances in sorted((mig or {}).items()):
            resources[protocol.NVIDIA_MIG_PREFIX + profile] = str(instances)
        meta_labels.update({
            protocol.NVIDIA_LABEL_COUNT: str(count),
            protocol.NVIDIA_LABEL_REPLICAS: str(replicas),
            protocol.NVIDIA_LABEL_STRATEGY: "time-slicing" if shared else "none",
            protocol.NVIDIA_LABEL_PRODUCT: product + (protocol.NVIDIA_SHARED_SUFFIX if shared else ""),
        })
        if memories and min(memories) > 0:
            meta_labels[protocol.NVIDIA_LABEL_MEMORY] = str(min(memories))
    elif stack == protocol.STACK_KAI:  # an NVIDIA device-plugin node with GFD labels (KAI reads gpu.memory)
        resources[protocol.NVIDIA_RESOURCE_GPU] = str(count)
        meta_labels.update({protocol.NVIDIA_LABEL_COUNT: str(count), protocol.NVIDIA_LABEL_PRODUCT: product})
        if memories and min(memories) > 0:
            meta_labels[protocol.NVIDIA_LABEL_MEMORY] = str(min(memories))
    elif stack == protocol.STACK_VOLCANO:  # gpu-share: Volcano reads capacity, memory over all cards
        resources[protocol.VOLCANO_RESOURCE_MEMORY] = str(sum(memories))
        resources[protocol.VOLCANO_RESOURCE_NUMBER] = str(count)
    elif stack == protocol.STACK_KOORDINATOR:
        resources[protocol.KOORD_RESOURCE_GPU_CORE] = str(count * protocol.PERCENT_PER_GPU)
        resources[protocol.KOORD_RESOURCE_GPU_MEMORY_RATIO] = str(count * protocol.PERCENT_PER_GPU)
        resources[protocol.KOORD_RESOURCE_GPU_MEMORY] = f"{sum(memories)}Mi"
        meta_labels.setdefault("node.koordinator.sh/gpu-model", product)
    elif stack == protocol.STACK_NANO_GPU:
        resources[protocol.NANO_GPU_RESOURCE] = str(count * protocol.PERCENT_PER_GPU)
    elif stack == protocol.STACK_ELASTIC_GPU:
        resources[protocol.ELASTIC_GPU_RESOURCE_CORE] = str(count * protocol.PERCENT_PER_GPU)
        resources[protocol.ELASTIC_GPU_RESOURCE_MEMORY] = str(sum(memories))
    else:
        raise ValueError(f"unknown stack {stack!r}")
    if not meta_annotations:
        del node["metadata"]["annotations"]
    node["status"]["capacity"].update(resources)
    node["status"]["allocatable"].update(resources)
    return node


def kai_group(node: str, gpu: int) -> str:
    """The GPU group a spec KAI pod on ``node``'s GPU ``gpu`` joins (one reservation pod per group)."""
    return f"{node}-gpu{gpu}"


def kai_reservation_object(node: str, gpu: int) -> dict[str, Any]:
    """The reservation pod KAI's binder runs for a shared GPU, once it reported the GPU's UUID.

    As ``resource_reservation.go`` creates it: ``nvidia.com/gpu: 1`` in the reservation namespace,
    labels ``app`` and ``runai-gpu-group``, the UUID in ``run.ai/reserve_for_gpu_index``.
    """
    namespace = protocol.KAI_RESERVATION_NAMESPACES[0]
    pod = pod_object(f"gpu-reservation-{node}-{gpu}", namespace, [0], node=node, phase="Running",
                     labels={"app": protocol.KAI_RESERVATION_APP, protocol.KAI_LABEL_GROUP: kai_group(node, gpu)},
                     annotations={protocol.KAI_ANN_RESERVED_GPU: hami_uuid(node, gpu)})
    container = pod["spec"]["containers"][0]
    container["name"] = "resource-reservation"
    one = {protocol.NVIDIA_RESOURCE_GPU: "1"}
    container["resources"] = {"limits": dict(one), "requests": dict(one)}
    return pod


def stack_pod_object(
    name: str,
    namespace: str,
    stack: str,
    amounts: list[int],
    *,
    node: str | None,
    gpu: int | None,
    cores: int = 0,
    resource: str | None = None,
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    fraction: float | None = None,
) -> dict[str, Any]:
    """A pod of ``stack`` whose containers claim ``amounts`` (in the stack's unit) on GPU ``gpu``.

    A KAI pod asks by annotation (``fraction`` of a GPU, else the summed ``amounts`` in MiB) and,
    once placed, joins the group of `kai_reservation_object` for that GPU (the caller adds it).
    """
    pod = pod_object(name, namespace, [0] * len(amounts), node=node, phase=phase or ("Running" if node else None),
                     labels=labels)
    containers: list[dict[str, Any]] = pod["spec"]["containers"]
    pod_annotations: dict[str, str] = {}
    shares: list[str] = []
    for container, amount in zip(containers, amounts, strict=True):
        if amount <= 0:
            shares.append("")
            continue
        limits: dict[str, str]
        if stack == protocol.STACK_HAMI:
            limits = {protocol.NVIDIA_RESOURCE_GPU: "1", "nvidia.com/gpumem": str(amount)}
            if cores:
                limits["nvidia.com/gpucores"] = str(cores)
            if node and gpu is not None:
                shares.append(f"{hami_uuid(node, gpu)},NVIDIA,{amount},{cores}:")
        elif stack == protocol.STACK_NVIDIA:
            limits = {resource or protocol.NVIDIA_RESOURCE_GPU: str(amount)}
        elif stack == protocol.STACK_KAI:
            continue  # KAI asks by pod annotation, not by container limit
        elif stack == protocol.STACK_VOLCANO:
            limits = {protocol.VOLCANO_RESOURCE_MEMORY: str(amount)}
        elif stack == protocol.STACK_KOORDINATOR:
            limits = {protocol.KOORD_RESOURCE_GPU_MEMORY: f"{amount}Mi"}
        elif stack in (protocol.STACK_NANO_GPU, protocol.STACK_ELASTIC_GPU):
            nano = stack == protocol.STACK_NANO_GPU
            limits = {(protocol.NANO_GPU_RESOURCE if nano else protocol.ELASTIC_GPU_RESOURCE_CORE): str(amount)}
            if node and gpu is not None:
                prefix = protocol.NANO_GPU_ANN_CONTAINER if nano else protocol.ELASTIC_GPU_ANN_CONTAINER
                pod_annotations[prefix + container["name"]] = str(gpu)
                pod_annotations["nano-gpu/assume" if nano else "elasticgpu.io/assumed"] = "true"
        else:
            raise ValueError(f"unknown stack {stack!r}")
        container["resources"] = {"limits": dict(limits), "requests": dict(limits)}
    if stack == protocol.STACK_HAMI and node and gpu is not None:
        pod_annotations[protocol.HAMI_ANN_ALLOCATED] = ";".join(shares) + ";"
        pod_annotations[protocol.HAMI_ANN_NODE] = node
        pod_annotations[protocol.HAMI_ANN_BIND_PHASE] = "success"
    if stack == protocol.STACK_KAI:
        if fraction is not None:
            pod_annotations[protocol.KAI_ANN_FRACTION] = str(fraction)
        else:
            pod_annotations[protocol.KAI_ANN_MEMORY] = str(sum(amounts))
        pod["spec"]["schedulerName"] = "kai-scheduler"
        if node and gpu is not None:
            pod["metadata"].setdefault("labels", {})[protocol.KAI_LABEL_GROUP] = kai_group(node, gpu)
    if stack == protocol.STACK_VOLCANO and node and gpu is not None:
        pod_annotations[protocol.VOLCANO_ANN_GPU_INDEX] = str(gpu)
    if stack == protocol.STACK_KOORDINATOR and node and gpu is not None:
        held = {protocol.KOORD_RESOURCE_GPU_MEMORY: f"{sum(amounts)}Mi"}
        if cores:
            held[protocol.KOORD_RESOURCE_GPU_CORE] = str(cores)
        allocated = {"gpu": [{"minor": gpu, "resources": held}]}
        pod_annotations[protocol.KOORD_ANN_DEVICE_ALLOCATED] = json.dumps(allocated, separators=(",", ":"))
    pod_annotations.update(annotations or {})
    if pod_annotations:
        pod["metadata"]["annotations"] = pod_annotations
    return pod
