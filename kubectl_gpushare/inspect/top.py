"""``kubectl gpushare top``: what each GPU and pod really uses, beside what the ledger grants it.

Pure: the ledger (nodes and pods from the API, as inspect counts them) and one observation per
node (a device plugin's usage document, or the same numbers read from Prometheus) in, a
versioned ``GPUShareTop`` document and its tables out. Shares are counted in the node's memory
unit (the device plugin's ``--memory-unit``, GiB unless told) and shown in bytes, as ``kubectl
top`` shows memory (``Mi``). A node without an observation is shown as ``<unknown>``, never as 0.

The JSON is ``gpushare.kubectl-gpushare.io/v1`` ``GPUShareTop``; fields are only ever added::

    gpus: [{node, index, allocatedBytes, usedBytes, totalBytes, enforced, reason}]
    pods: [{namespace, name, node, gpu, allocatedBytes, usedBytes, limitBytes, over}]
    unknownNodes: [name]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import tabwriter
from kubectl_gpushare.ledger import PENDING, Ledger

API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1"
KIND: Final = "GPUShareTop"
UNKNOWN: Final = "<unknown>"
"""kubectl top's word for a value it has no metrics for."""
NONE: Final = "<none>"
SORT_KEYS: Final = ("name", "used", "allocated", "over")
UNIT_BYTES: Final = {protocol.UNIT_GIB: 1 << 30, protocol.UNIT_MIB: 1 << 20}


class GpuObserved(msgspec.Struct, frozen=True, gc=False):
    """One GPU as its node reported it."""

    used: int | None = None
    enforced: bool | None = None
    reason: str = ""


class PodObserved(msgspec.Struct, frozen=True, gc=False):
    """One pod on one GPU as its node reported it."""

    used: int | None = None
    limit: int | None = None


class NodeObserved(msgspec.Struct, frozen=True, gc=False):
    """What one node's device plugin observed: GPUs by index, pods by (namespace, name, GPU)."""

    gpus: dict[int, GpuObserved]
    pods: dict[tuple[str, str, int], PodObserved]


def from_report(report: protocol.UsageReport) -> NodeObserved:
    """A decoded usage document (`protocol.decode_usage_report`) as an observation."""
    gpus = {
        gpu.index: GpuObserved(gpu.used_bytes, gpu.enforcement != protocol.ENFORCE_OFF,
                               protocol.printable(gpu.reason, protocol.MAX_ENFORCEMENT_REASON))
        for gpu in report.gpus
    }
    pods = {  # two entries under one name (a pod replaced while the old one ends): merged as /metrics does
        key: PodObserved(usage.used_bytes, usage.limit_bytes)
        for key, usage in protocol.pod_usage_by_name(report.pods).items()
    }
    return NodeObserved(gpus, pods)


class TopGpu(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """One GPU: what the pods on it were granted, what is in use, its size, and whether limits hold."""

    node: str
    index: int
    allocated_bytes: int
    used_bytes: int | None
    total_bytes: int
    enforced: bool | None
    reason: str = ""


class TopPod(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """One pod's share of one GPU; ``over`` is True where it uses more than its share (None: unknown)."""

    namespace: str
    name: str
    node: str
    gpu: int
    allocated_bytes: int
    used_bytes: int | None
    limit_bytes: int | None
    over: bool | None


class TopReport(msgspec.Struct, rename="camel", kw_only=True):
    """Every GPU and pod of the nodes shown; nodes whose plugin did not answer are listed."""

    api_version: str = API_VERSION
    kind: str = KIND
    gpus: list[TopGpu]
    pods: list[TopPod]
    unknown_nodes: list[str]


def build(
    ledger: Ledger,
    names: Sequence[str],
    observed: Mapping[str, NodeObserved | None],
    *,
    unit: str = protocol.UNIT_GIB,
    namespace: str | None = None,
    sort: str = "name",
) -> TopReport:
    """The report for ``names`` (ledger order kept for ``sort=name``).

    Args:
        ledger: a ledger that keeps pods (`Ledger` ``keep_pods=True``).
        names: the nodes to show, in order.
        observed: node -> its observation; missing or None is unknown.
        unit: the nodes' memory unit (`protocol.UNIT_GIB` or `protocol.UNIT_MIB`).
        namespace: only this namespace's pods (None: every namespace).
        sort: one of `SORT_KEYS`: numbers sort largest first.
    """
    scale = UNIT_BYTES[unit]
    gpus: list[TopGpu] = []
    pods: list[TopPod] = []
    unknown: list[str] = []
    for name in names:
        seen = observed.get(name)
        if seen is None:
            unknown.append(name)
        usage = ledger.usage(name)
        for device in usage.devices.values():
            if device.index == PENDING:
                continue
            gpu = seen.gpus.get(device.index) if seen is not None else None
            gpus.append(TopGpu(
                name, device.index, device.used * scale, gpu.used if gpu else None, device.total * scale,
                gpu.enforced if gpu else None, gpu.reason if gpu else "",
            ))  # fmt: skip
            for record, mem in device.pods:
                if namespace is not None and record.namespace != namespace:
                    continue
                share = mem * scale
                pod = seen.pods.get((record.namespace, record.name, device.index)) if seen is not None else None
                if pod is None and seen is not None:
                    pod = PodObserved()
                used = pod.used if pod else None
                pods.append(TopPod(
                    record.namespace, record.name, name, device.index, share, used, pod.limit if pod else None,
                    None if used is None else used > share,
                ))  # fmt: skip
    if sort != "name":  # largest first, unknown usage last; stable, so ties keep node and pod order
        gpus.sort(key=lambda g: _key(g.used_bytes, g.allocated_bytes, sort))
        pods.sort(key=lambda p: _key(p.used_bytes, p.allocated_bytes, sort))
    return TopReport(gpus=gpus, pods=pods, unknown_nodes=unknown)


def _key(used: int | None, allocated: int, sort: str) -> tuple[bool, int]:
    if sort == "allocated":
        return False, -allocated
    if used is None:
        return True, 0
    return False, -(used if sort == "used" else used - allocated)


def mebibytes(value: int | None) -> str:
    """Bytes as ``kubectl top`` prints memory: whole ``Mi``."""
    return UNKNOWN if value is None else f"{value >> 20}Mi"


def _enforced(gpu: TopGpu) -> str:
    if gpu.enforced is None:
        return UNKNOWN
    return "yes" if gpu.enforced else "no"


def _percent(used: int | None, total: int) -> str:
    if used is None:
        return UNKNOWN
    return f"{used * 100 // total}%" if total > 0 else "0%"


def _status(pod: TopPod) -> str:
    if pod.over is None:
        return UNKNOWN
    return "OVER" if pod.over else "ok"


def to_text(report: TopReport, *, headers: bool = True, namespaces: bool = True) -> str:
    """Two tables, GPUs then pods, laid out as kubectl lays out its tables.

    Names (nodes, namespaces, pods: a file's or a plugin document's may hold anything) are written through
    `protocol.shown_text`; `to_json` and `to_yaml` keep them exact.
    """
    shown = protocol.shown_text
    rows: list[str] = ["NODE\tGPU\tALLOCATED\tUSED\tTOTAL\tUSED(%)\tENFORCED\n"] if headers else []
    rows += [
        f"{shown(g.node)}\t{g.index}\t{mebibytes(g.allocated_bytes)}\t{mebibytes(g.used_bytes)}\t{mebibytes(g.total_bytes)}\t"
        f"{_percent(g.used_bytes, g.total_bytes)}\t{_enforced(g)}\n"
        for g in report.gpus
    ]
    text = tabwriter.render("".join(rows)) if rows else ""
    if not report.pods:
        return text
    head = ("NAMESPACE\t" if namespaces else "") + "POD\tNODE\tGPU\tALLOCATED\tUSED\tLIMIT\tSTATUS\n"
    pod_rows: list[str] = [head] if headers else []
    for p in report.pods:
        limit = NONE if p.limit_bytes is None and p.used_bytes is not None else mebibytes(p.limit_bytes)
        pod_rows.append(
            (f"{shown(p.namespace)}\t" if namespaces else "")
            + f"{shown(p.name)}\t{shown(p.node)}\t{p.gpu}\t{mebibytes(p.allocated_bytes)}\t"
            f"{mebibytes(p.used_bytes)}\t{limit}\t{_status(p)}\n"
        )
    return f"{text}\n{tabwriter.render(''.join(pod_rows))}" if text else tabwriter.render("".join(pod_rows))


def to_json(report: TopReport) -> str:
    """The report as indented JSON, in schema order."""
    from kubectl_gpushare.inspect import report as documents

    return documents.to_json(report)


def to_yaml(report: TopReport) -> str:
    """The report as YAML (the same fields as `to_json`)."""
    from kubectl_gpushare.inspect import report as documents

    return documents.to_yaml(report)


def over_share(report: TopReport) -> Iterable[TopPod]:
    """Pods that use more than their share."""
    return (pod for pod in report.pods if pod.over)
