"""nano-gpu nodes and pods, read-only: cards of 100 %, ``nano-gpu/gpu-percent``.

Format followed: nano-gpu/nano-gpu-agent ``pkg/common/const.go`` (resource ``nano-gpu/gpu-percent``,
100 per card; annotation ``nano-gpu/container-<name>`` holds the card index, read with
``strconv.Atoi`` in ``pkg/kube/...`` / ``pkg/server``) and the nano-gpu-scheduler README.
"""

from __future__ import annotations

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks._cards import cards_claims, cards_node
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import StackClaim, StackNode


def is_nano_gpu_node(node: Node) -> bool:
    """A node advertising ``nano-gpu/gpu-percent``."""
    return protocol.NANO_GPU_RESOURCE in node.status.allocatable or protocol.NANO_GPU_RESOURCE in node.status.capacity


def node(node: Node, warnings: Warnings | None) -> StackNode:
    """Cards 0..n-1 of 100 % each."""
    return cards_node(node, protocol.STACK_NANO_GPU, protocol.NANO_GPU_RESOURCE, warnings)


def claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """Each container's percent on the card its annotation names; pending without one."""
    return cards_claims(pod, protocol.NANO_GPU_RESOURCE, protocol.NANO_GPU_ANN_CONTAINER, warnings)


__all__ = ["claims", "is_nano_gpu_node", "node"]
