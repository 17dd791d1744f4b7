"""Decoders for GPU-sharing stacks other than gpushare, read-only, into the ledger's stack records.

Each stack is a small pure module (`hami`, `nvidia`, `nanogpu`, `elasticgpu`, `volcano`,
`koordinator`) with ``node`` and ``claims``; `kai` reads a whole node's pods at once, since a GPU is
named by one pod (the reservation) and shared by others. `detect` picks a node's stack from its
resources and annotations; gpushare stays with `kube.records` and the gpushare `ledger.Ledger`, so
the extender and device plugin see no change.
"""

from __future__ import annotations

from typing import Final

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks import elasticgpu, hami, koordinator, nanogpu, nvidia, volcano
from kubectl_gpushare.kube.types import KoordDevice, Node, Pod
from kubectl_gpushare.ledger import StackClaim, StackNode

AUTO: Final = "auto"
CHOICES: Final = (AUTO, *protocol.STACKS)
"""Values of ``inspect --stack``."""


def _is_gpushare(node: Node) -> bool:
    return protocol.RESOURCE_MEM in node.status.allocatable or protocol.RESOURCE_MEM in node.status.capacity


def detect(node: Node, forced: str = AUTO) -> str | None:
    """The stack a node is read with: ``forced`` unless ``auto``, else the first that matches.

    Order: gpushare (so gpushare clusters read exactly as before), HAMi (its nodes also advertise
    ``nvidia.com/gpu``), nano-gpu, elastic-gpu, Volcano, Koordinator, the NVIDIA device plugin. None:
    no GPU stack. A KAI node is an NVIDIA node until its pods show KAI sharing (`StackSplit`).
    """
    if forced != AUTO:
        return forced
    if _is_gpushare(node):
        return protocol.STACK_GPUSHARE
    if hami.is_hami_node(node):
        return protocol.STACK_HAMI
    if nanogpu.is_nano_gpu_node(node):
        return protocol.STACK_NANO_GPU
    if elasticgpu.is_elastic_gpu_node(node):
        return protocol.STACK_ELASTIC_GPU
    if volcano.is_volcano_node(node):
        return protocol.STACK_VOLCANO
    if koordinator.is_koordinator_node(node):
        return protocol.STACK_KOORDINATOR
    if nvidia.is_nvidia_node(node):
        return protocol.STACK_NVIDIA
    return None


def stack_node(
    node: Node, stack: str, warnings: Warnings | None, now: float, device: KoordDevice | None = None
) -> StackNode:
    """Decode a node of a non-gpushare ``stack`` (``device``: Koordinator's ``Device`` of that node, if read).

    Raises:
        ValueError: ``stack`` is gpushare or unknown (a caller's bug, not hostile input).
    """
    if stack == protocol.STACK_HAMI:
        return hami.node(node, warnings, now)
    if stack in (protocol.STACK_NVIDIA, protocol.STACK_KAI):
        return nvidia.node(node, warnings)  # KAI: `kai.node` adds the reserved GPUs once the pods are read
    if stack == protocol.STACK_VOLCANO:
        return volcano.node(node, warnings)
    if stack == protocol.STACK_KOORDINATOR:
        return koordinator.node(node, warnings, device)
    if stack == protocol.STACK_NANO_GPU:
        return nanogpu.node(node, warnings)
    if stack == protocol.STACK_ELASTIC_GPU:
        return elasticgpu.node(node, warnings)
    raise ValueError(f"no stack decoder for {stack!r}")


def stack_claims(pod: Pod, node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """A pod's claims on a node of a non-gpushare stack, in that stack's units."""
    if node.stack == protocol.STACK_HAMI:
        return hami.claims(pod, node, warnings)
    if node.stack in (protocol.STACK_NVIDIA, protocol.STACK_KAI):
        return nvidia.claims(pod, node, warnings)
    if node.stack == protocol.STACK_VOLCANO:
        return volcano.claims(pod, node, warnings)
    if node.stack == protocol.STACK_KOORDINATOR:
        return koordinator.claims(pod, node, warnings)
    if node.stack == protocol.STACK_NANO_GPU:
        return nanogpu.claims(pod, node, warnings)
    if node.stack == protocol.STACK_ELASTIC_GPU:
        return elasticgpu.claims(pod, node, warnings)
    if node.stack == protocol.STACK_NVIDIA_DRA:
        return []  # NVIDIA's DRA claims are ResourceClaims (`dra.nvidia_claims`), not pod fields
    raise ValueError(f"no stack decoder for {node.stack!r}")


__all__ = ["AUTO", "CHOICES", "detect", "stack_claims", "stack_node"]
