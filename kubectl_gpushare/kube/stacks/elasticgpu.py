"""elastic-gpu (nano-gpu's successor) nodes and pods, read-only: ``elasticgpu.io/gpu-core`` per card.

Format followed: elastic-ai/elastic-gpu-scheduler ``pkg/utils/types.go`` (``GPUCoreEachCard = 100``,
annotation ``elasticgpu.io/container-%s``, ``elasticgpu.io/assumed``) and the resources
``elasticgpu.io/gpu-core`` (100 per card; 200 means two cards) and ``elasticgpu.io/gpu-memory``
from its README. A container's annotation lists its card indices, comma-separated; its core
percent is split evenly over them. ``gpu-memory`` has no per-card claim, so it is shown only as a
node note, never added to the percent.
"""

from __future__ import annotations

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings, read_quantity
from kubectl_gpushare.kube.stacks._cards import cards_claims, cards_node
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import StackClaim, StackNode


def is_elastic_gpu_node(node: Node) -> bool:
    """A node advertising ``elasticgpu.io/gpu-core``."""
    resource = protocol.ELASTIC_GPU_RESOURCE_CORE
    return resource in node.status.allocatable or resource in node.status.capacity


def node(node: Node, warnings: Warnings | None) -> StackNode:
    """Cards 0..n-1 of 100 % each; the node's ``gpu-memory`` in the note."""
    memory_text = node.status.allocatable.get(protocol.ELASTIC_GPU_RESOURCE_MEMORY)
    note = ""
    if memory_text is not None:
        what = f"node {node.metadata.name} allocatable {protocol.ELASTIC_GPU_RESOURCE_MEMORY}"
        maximum = protocol.MAX_GPUS_PER_NODE * protocol.MAX_GPU_MEMORY
        note = f"gpu-memory {read_quantity(memory_text, what, warnings, maximum)}"
    return cards_node(node, protocol.STACK_ELASTIC_GPU, protocol.ELASTIC_GPU_RESOURCE_CORE, warnings, note)


def claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """Each container's core percent over the cards its annotation lists; pending without one."""
    return cards_claims(pod, protocol.ELASTIC_GPU_RESOURCE_CORE, protocol.ELASTIC_GPU_ANN_CONTAINER, warnings)


__all__ = ["claims", "is_elastic_gpu_node", "node"]
