"""Per-namespace views: ``-n NAMESPACE`` (one tenant's pods) and ``--group-by namespace`` (totals).

Both read the snapshot's ledger: ``-n`` rebuilds it from the same node records and only that
namespace's pods, so every view then shows one tenant's allocations against the whole GPUs;
``--group-by namespace`` sums each namespace's shares (pending included) from the ledger's pods.
Pure; renders text only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import tabwriter
from kubectl_gpushare.inspect.compat import memory_unit
from kubectl_gpushare.inspect.source import Snapshot
from kubectl_gpushare.kube.types import ResourceQuota
from kubectl_gpushare.ledger import Ledger, NodeRecord, shares


def only_namespace(snapshot: Snapshot, namespace: str) -> Snapshot:
    """The snapshot as if only ``namespace``'s pods existed (nodes and their totals unchanged)."""
    ledger = snapshot.ledger
    nodes = [node for node in (ledger.node(name) for name in ledger.node_names()) if isinstance(node, NodeRecord)]
    pods = [pod for pod in ledger.pods() if pod.namespace == namespace]
    return Snapshot(
        ledger=Ledger.build(nodes, pods, basis=ledger.basis),
        names=snapshot.names,
        warnings=snapshot.warnings,
        unscheduled=[pod for pod in snapshot.unscheduled if pod.namespace == namespace],
        quotas=[quota for quota in snapshot.quotas if quota.metadata.namespace == namespace],
    )


QUOTA_RESOURCE: Final = f"requests.{protocol.RESOURCE_MEM}"


def quota_by_namespace(quotas: Sequence[ResourceQuota]) -> dict[str, str]:
    """Namespace -> ``used/hard`` of ``requests.aliyun.com/gpu-mem`` (the tightest quota if several)."""
    found: dict[str, tuple[int, str]] = {}
    for quota in quotas:
        hard = quota.status.hard.get(QUOTA_RESOURCE)
        if hard is None:
            continue
        used = quota.status.used.get(QUOTA_RESOURCE, "0")
        try:
            room = protocol.parse_quantity(hard) - protocol.parse_quantity(used)
        except (ValueError, TypeError):
            room = 0
        namespace = quota.metadata.namespace
        if namespace not in found or room < found[namespace][0]:
            found[namespace] = (room, f"{used}/{hard}")
    return {namespace: text for namespace, (_, text) in found.items()}


def by_namespace(snapshot: Snapshot, names: Sequence[str], *, headers: bool = True) -> str:
    """One row per namespace: pods, nodes used and GPU memory allocated on the shown nodes, then the total."""
    shown = set(names)
    rows: dict[str, tuple[set[str], set[str], int]] = {}
    for pod in snapshot.ledger.pods():
        if pod.node not in shown:
            continue
        uids, nodes, memory = rows.get(pod.namespace, (set(), set(), 0))
        uids.add(pod.uid)
        nodes.add(pod.node)
        rows[pod.namespace] = (uids, nodes, memory + sum(shares(pod).values()))
    waiting: dict[str, int] = {}
    for pod in snapshot.unscheduled:
        waiting[pod.namespace] = waiting.get(pod.namespace, 0) + pod.request
    quotas = quota_by_namespace(snapshot.quotas)
    quota_header = "\tQUOTA(USED/HARD)" if quotas else ""
    unit = memory_unit(snapshot.ledger, names) or "GiB"
    lines = [f"NAMESPACE\tPODS\tNODES\tALLOCATED({unit})\tWAITING({unit}){quota_header}\n"] if headers else []
    for namespace in sorted(set(rows) | set(waiting) | set(quotas)):
        uids, nodes, memory = rows.get(namespace, (set(), set(), 0))
        quota = f"\t{quotas.get(namespace, '-')}" if quotas else ""
        lines.append(f"{namespace}\t{len(uids)}\t{len(nodes)}\t{memory}\t{waiting.get(namespace, 0)}{quota}\n")
    if headers:
        total_pods = sum(len(uids) for uids, _, _ in rows.values())
        total_nodes = len(set().union(*(nodes for _, nodes, _ in rows.values()))) if rows else 0
        total = sum(memory for _, _, memory in rows.values())
        quota = "\t" if quotas else ""
        lines.append(f"TOTAL\t{total_pods}\t{total_nodes}\t{total}\t{sum(waiting.values())}{quota}\n")
    return tabwriter.render("".join(lines))
