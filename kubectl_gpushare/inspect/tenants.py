"""Per-namespace views: ``-n NAMESPACE`` (one tenant's pods) and ``--group-by namespace`` (totals).

Both read the snapshot's ledger: ``-n`` rebuilds it from the same node records and only that
namespace's pods, so every view then shows one tenant's allocations against the whole GPUs;
``--group-by namespace`` sums each namespace's shares (pending included) from the ledger's pods,
as a table or (``-o json|yaml``) a versioned ``GPUShareTenants``::

    apiVersion: gpushare.kubectl-gpushare.io/v1
    kind: GPUShareTenants
    unit: GiB
    namespaces: [{name, pods, nodes, allocated, waiting, quota: {used, hard}}]  # quota only where set
    total: {pods, nodes, allocated, waiting}

Pure: snapshot in, text or report out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

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


def quota_by_namespace(quotas: Sequence[ResourceQuota]) -> dict[str, tuple[str, str]]:
    """Namespace -> ``(used, hard)`` of ``requests.aliyun.com/gpu-mem`` (the tightest quota if several)."""
    found: dict[str, tuple[int, tuple[str, str]]] = {}
    for quota in quotas:
        hard = quota.status.hard.get(QUOTA_RESOURCE)
        if hard is None:
            continue
        used = quota.status.used.get(QUOTA_RESOURCE, "0")
        try:
            room = protocol.parse_quantity(str(hard)) - protocol.parse_quantity(str(used))
        except (ValueError, TypeError):
            room = 0
        namespace = quota.metadata.namespace
        if namespace not in found or room < found[namespace][0]:
            found[namespace] = (room, (str(used), str(hard)))
    return {namespace: text for namespace, (_, text) in found.items()}


API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1"
KIND: Final = "GPUShareTenants"


class Quota(msgspec.Struct, frozen=True):
    """``requests.aliyun.com/gpu-mem`` of the namespace's tightest ResourceQuota, quantities as written."""

    used: str
    hard: str


class Tenant(msgspec.Struct, frozen=True, omit_defaults=True):
    """One namespace: distinct pods and nodes, memory allocated on the shown nodes and waiting for a node."""

    name: str
    pods: int
    nodes: int
    allocated: int
    waiting: int
    quota: Quota | None = None


class TenantTotal(msgspec.Struct, frozen=True):
    """Sums over every namespace (nodes counted once)."""

    pods: int
    nodes: int
    allocated: int
    waiting: int


class TenantReport(msgspec.Struct, frozen=True, rename="camel"):
    """``--group-by namespace -o json|yaml``: a versioned ``GPUShareTenants`` (fields only ever added)."""

    api_version: str
    kind: str
    unit: str
    namespaces: list[Tenant]
    total: TenantTotal


def tenants(snapshot: Snapshot, names: Sequence[str]) -> TenantReport:
    """Per-namespace totals from the ledger's pods on the shown nodes, plus pods waiting for a node."""
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
    namespaces = []
    for namespace in sorted(set(rows) | set(waiting) | set(quotas)):
        uids, nodes, memory = rows.get(namespace, (set(), set(), 0))
        quota = quotas.get(namespace)
        namespaces.append(Tenant(namespace, len(uids), len(nodes), memory, waiting.get(namespace, 0),
                                 Quota(*quota) if quota else None))
    total = TenantTotal(
        pods=sum(len(uids) for uids, _, _ in rows.values()),
        nodes=len(set().union(*(nodes for _, nodes, _ in rows.values()))) if rows else 0,
        allocated=sum(memory for _, _, memory in rows.values()),
        waiting=sum(waiting.values()),
    )
    unit = memory_unit(snapshot.ledger, names) or "GiB"
    return TenantReport(API_VERSION, KIND, unit, namespaces, total)


def by_namespace(snapshot: Snapshot, names: Sequence[str], *, headers: bool = True) -> str:
    """One row per namespace: pods, nodes used and GPU memory allocated on the shown nodes, then the total.

    Namespaces and quota quantities are written through `protocol.shown_text` (a file's may hold anything);
    `tenants` (JSON, YAML) keeps them exact.
    """
    shown = protocol.shown_text
    report = tenants(snapshot, names)
    quoted = any(tenant.quota for tenant in report.namespaces)
    quota_header = "\tQUOTA(USED/HARD)" if quoted else ""
    unit = report.unit
    lines = [f"NAMESPACE\tPODS\tNODES\tALLOCATED({unit})\tWAITING({unit}){quota_header}\n"] if headers else []
    for row in report.namespaces:
        quota = (f"\t{shown(row.quota.used)}/{shown(row.quota.hard)}" if row.quota else "\t-") if quoted else ""
        lines.append(f"{shown(row.name)}\t{row.pods}\t{row.nodes}\t{row.allocated}\t{row.waiting}{quota}\n")
    if headers:
        total = report.total
        quota = "\t" if quoted else ""
        lines.append(f"TOTAL\t{total.pods}\t{total.nodes}\t{total.allocated}\t{total.waiting}{quota}\n")
    return tabwriter.render("".join(lines))
