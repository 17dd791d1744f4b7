"""What nano-gpu and elastic-gpu share: 100 percent per card, a per-container annotation naming cards.

Both advertise one node resource worth `PERCENT_PER_GPU` per card and record each container's
card(s) in ``<prefix><container name>``; only the resource and prefix differ.
"""

from __future__ import annotations

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings, node_ip, read_quantity
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode
from kubectl_gpushare.protocol import shown_value

MAX_PERCENT = protocol.MAX_GPUS_PER_NODE * protocol.PERCENT_PER_GPU


def cards_node(node: Node, stack: str, resource: str, warnings: Warnings | None, note: str = "") -> StackNode:
    """Cards 0..n-1 of 100 % each, n from the node's allocatable ``resource``."""
    name = node.metadata.name
    what = f"node {name} allocatable {resource}"
    total = read_quantity(node.status.allocatable.get(resource), what, warnings, MAX_PERCENT)
    gpus = tuple(
        StackGPU(index=index, total=protocol.PERCENT_PER_GPU, unit=protocol.UNIT_PERCENT)
        for index in range(total // protocol.PERCENT_PER_GPU)
    )
    return StackNode(name=name, stack=stack, ip=node_ip(node), gpus=gpus, note=note)


def parse_cards(text: str) -> list[int] | None:
    """A comma-separated list of card indices in ``[0, MAX_GPUS_PER_NODE)``, each once; None if not one."""
    if len(text) > 4 * protocol.MAX_GPUS_PER_NODE:
        return None
    indices = [protocol.parse_int_strict(part.strip()) for part in text.split(",")]
    if any(index is None or not protocol.valid_gpu_index(index) for index in indices):
        return None
    cards = [index for index in indices if index is not None]
    return cards if len(set(cards)) == len(cards) else None


def cards_claims(pod: Pod, resource: str, prefix: str, warnings: Warnings | None) -> list[StackClaim]:
    """Each container's percent on the card(s) its annotation names (split evenly), or pending."""
    meta = pod.metadata
    where = f"pod {meta.namespace}/{meta.name}"
    result: list[StackClaim] = []
    for container in pod.spec.containers:
        amount = read_quantity(
            container.resources.limits.get(resource), f"{where} container {container.name!r} limit {resource}",
            warnings, MAX_PERCENT,
        )
        if amount <= 0:
            continue
        key = prefix + container.name
        text = meta.annotations.get(key)
        cards = [PENDING] if text is None else parse_cards(text)
        if cards is None:
            if warnings is not None:
                reason = "is not a list of card indices; not counted"
                warnings.add(f"{where}: annotation {key}={shown_value(text or '')} {reason}")
            continue
        share, rest = divmod(amount, len(cards))
        for position, card in enumerate(cards):
            result.append(
                StackClaim(
                    namespace=meta.namespace, name=meta.name, uid=meta.uid, node=pod.spec.node_name, gpu=card,
                    amount=share + (rest if position == 0 else 0), unit=protocol.UNIT_PERCENT, phase=pod.status.phase,
                )
            )
    return result
