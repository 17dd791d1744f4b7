"""The machine-readable views: a versioned JSON/YAML document and a CSV table.

Schema ``gpushare.kubectl-gpushare.io/v1``, kind ``GPUShareReport`` (fields are added in later
versions, never renamed or removed; a breaking change gets ``v2``)::

    apiVersion: gpushare.kubectl-gpushare.io/v1
    kind: GPUShareReport
    unit: GiB            # the unit label the text view prints ("MiB", or "" without GPU nodes)
    basis: allocatable   # node totals come from status.allocatable, as in the text views
    nodes:               # in display order
    - name, ip, gpuCount
      total, used, free, pending, usedPercent    # node memory; used includes pending
      gpus:              # index 0..gpuCount-1, plus any index a pod names beyond that
      - {index, total, used, free, pods: [{namespace, name, uid, phase, memory, claim}]}
      pendingPods: [{namespace, name, uid, phase, memory}]  # requested, no GPU index yet
      driver, unit       # only on a node of our DRA driver: its driver and its unit (known, not guessed)
    cluster: {nodes, gpus, total, used, free, pending, usedPercent}
    stackNodes:          # only when nodes of other sharing stacks are shown (absent otherwise)
    - name, ip, stack, note   # stack: hami | nvidia | nano-gpu | elastic-gpu | ... | nvidia-dra
      gpus:              # index -1: claims naming no GPU the node reports
      - {index, id, model, unit, total, used, free, cores, coresUsed, cordoned, healthy,
         pods: [{namespace, name, uid, phase, amount, cores}]}

A node of our DRA driver (``gpu-mem.kubectl-gpushare.io``) is a node like the device plugin's: its
GPUs are its ResourceSlice's devices, its pods the claims allocated on them (``claim`` names them;
a claim reserved for several pods, or none, is listed under its own name). ``claim``, ``driver``
and ``unit`` are omitted elsewhere. NVIDIA's DRA driver's nodes are ``stackNodes`` of stack
``nvidia-dra``.

``stackNodes`` is additive (v1 readers that ignore unknown keys are unaffected, and a
gpushare-only report is byte-for-byte what it was). Each stack GPU keeps its own ``unit``
(``MiB``, ``%``, ``slots``, ``GPUs``); ``cluster`` totals gpushare memory only and never adds
another unit to it.

``usedPercent`` is truncated to an integer exactly as the text view computes it. The CSV view
has one row per GPU (and one ``pending`` row per node that has pending memory); its column
``HEALTHY`` is ``false`` for a GPU an unhealthy-GPU ConfigMap lists, or a DRA GPU kube-scheduler
allocates no new claim on (a blocking taint, an incomplete or invalid pool) (empty on ``pending`` rows);
with other stacks present every row also gets ``STACK`` and ``UNIT`` after it.

This module reads a `ledger.Ledger`; it counts nothing itself and does no I/O.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect.compat import memory_unit, percent
from kubectl_gpushare.ledger import PENDING, DeviceUsage, Ledger, PodRecord, StackClaim, StackNode, stack_usage

API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1"
KIND: Final = "GPUShareReport"
CSV_HEADER: Final = ("NODE", "IPADDRESS", "GPU", "ALLOCATED", "TOTAL", "FREE", "PODS", "HEALTHY")
STACK_CSV_COLUMNS: Final = ("STACK", "UNIT")
"""Appended to every CSV row only when other stacks' nodes are shown (gpushare-only CSV is unchanged)."""
STACK_GPUSHARE: Final = protocol.STACK_GPUSHARE


class PodShare(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """A pod's memory on one GPU (or pending); ``claim`` names the DRA claim(s) the memory is allocated to."""

    namespace: str
    name: str
    uid: str
    phase: str
    memory: int
    claim: str = ""


class GPU(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """One GPU of a node (``healthy: false`` where no new pod or claim goes: see the module's docstring)."""

    index: int
    total: int
    used: int
    free: int
    pods: list[PodShare]
    healthy: bool = True


class NodeReport(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """One node with its GPUs and pending pods; ``driver`` and ``unit`` only for a node of our DRA driver."""

    name: str
    ip: str
    gpu_count: int
    total: int
    used: int
    free: int
    pending: int
    used_percent: int
    gpus: list[GPU]
    pending_pods: list[PodShare]
    driver: str = ""
    unit: str = ""


class ClusterReport(msgspec.Struct, rename="camel", gc=False):
    """Totals over the nodes shown."""

    nodes: int
    gpus: int
    total: int
    used: int
    free: int
    pending: int
    used_percent: int


class StackPodShare(msgspec.Struct, rename="camel", gc=False):
    """A pod's claim on one GPU of another stack, in that GPU's unit."""

    namespace: str
    name: str
    uid: str
    phase: str
    amount: int
    cores: int


class StackGPUReport(msgspec.Struct, rename="camel", gc=False):
    """One GPU (or slot pool) of another stack, in its own unit."""

    index: int
    id: str
    model: str
    unit: str
    total: int
    used: int
    free: int
    cores: int
    cores_used: int
    cordoned: bool
    healthy: bool
    pods: list[StackPodShare]


class StackNodeReport(msgspec.Struct, rename="camel", gc=False):
    """A node of another sharing stack."""

    name: str
    ip: str
    stack: str
    note: str
    gpus: list[StackGPUReport]


class Report(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """The whole document (``unscheduledPods`` and ``stackNodes`` only when there are some)."""

    api_version: str
    kind: str
    unit: str
    basis: str
    nodes: list[NodeReport]
    cluster: ClusterReport
    unscheduled_pods: list[PodShare] = []
    stack_nodes: list[StackNodeReport] = []


def _shares(device: DeviceUsage) -> list[PodShare]:
    return [PodShare(pod.namespace, pod.name, pod.uid, pod.phase, amount, pod.claim) for pod, amount in device.pods]


def stack_nodes(nodes: Sequence[StackNode], claims: Mapping[str, list[StackClaim]]) -> list[StackNodeReport]:
    """The ``stackNodes`` part: every GPU of each stack node with its claims, in its own unit."""
    result = []
    for node in nodes:
        gpus = [
            StackGPUReport(
                index=device.gpu.index, id=device.gpu.id, model=device.gpu.model, unit=device.gpu.unit,
                total=device.gpu.total, used=device.used, free=device.free, cores=device.gpu.cores,
                cores_used=device.cores_used, cordoned=device.gpu.cordoned, healthy=device.gpu.healthy,
                pods=[StackPodShare(c.namespace, c.name, c.uid, c.phase, c.amount, c.cores) for c in device.claims],
            )
            for device in stack_usage(node, claims.get(node.name, ()))
        ]
        result.append(StackNodeReport(node.name, node.ip, node.stack, node.note, gpus))
    return result


def build(
    ledger: Ledger,
    names: Sequence[str],
    unscheduled: Sequence[PodRecord] = (),
    stacks: Sequence[StackNode] = (),
    claims: Mapping[str, list[StackClaim]] | None = None,
) -> Report:
    """The report for the given nodes (nodes without GPU memory are left out, as in the text views).

    ``unscheduled`` pods (asking for GPU memory, on no node yet) are listed apart, in API order;
    ``stacks`` are nodes of other sharing stacks with their ``claims``, each GPU in its own unit.
    """
    nodes: list[NodeReport] = []
    for name in names:
        usage = ledger.usage(name)
        if usage.total_mem <= 0:
            continue
        gpus = [
            GPU(device.index, device.total, device.used, device.free, _shares(device),
                device.index not in usage.node.unhealthy)
            for device in usage.devices.values()
            if device.index != PENDING
        ]
        pending_device = usage.devices.get(PENDING)
        pending = pending_device.used if pending_device else 0
        used = usage.used
        nodes.append(
            NodeReport(
                name=usage.node.name,
                ip=usage.node.ip,
                gpu_count=usage.gpu_count,
                total=usage.total_mem,
                used=used,
                free=usage.total_mem - used,
                pending=pending,
                used_percent=percent(used, usage.total_mem),
                gpus=gpus,
                pending_pods=_shares(pending_device) if pending_device else [],
                driver=usage.node.driver,
                unit=usage.node.unit,
            )
        )
    total = sum(node.total for node in nodes)
    used = sum(node.used for node in nodes)
    cluster = ClusterReport(
        nodes=len(nodes),
        gpus=sum(node.gpu_count for node in nodes),
        total=total,
        used=used,
        free=total - used,
        pending=sum(node.pending for node in nodes),
        used_percent=percent(used, total),
    )
    waiting = [PodShare(p.namespace, p.name, p.uid, p.phase, p.request, p.claim)
               for p in sorted(unscheduled, key=lambda p: (p.namespace, p.name))]
    extra = stack_nodes(stacks, claims or {})
    return Report(
        API_VERSION, KIND, memory_unit(ledger, names), ledger.basis, nodes, cluster,
        unscheduled_pods=waiting, stack_nodes=extra,
    )


def to_json(report: msgspec.Struct) -> str:
    """The report (or another versioned document, fields in schema order) as indented JSON."""
    return msgspec.json.format(msgspec.json.encode(report), indent=2).decode() + "\n"


def to_yaml(report: msgspec.Struct) -> str:
    """The report (or another versioned document) as YAML (block style, keys in schema order).

    Written by `yaml_block` (the same bytes as PyYAML, 4x faster), or by PyYAML's C emitter where a
    value needs quoting beyond plain and single-quoted names.
    """
    from kubectl_gpushare.inspect import yaml_block

    data = msgspec.to_builtins(report)
    written = yaml_block.dump(data)
    if written is not None:
        return written
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False)
    return text


def to_csv(report: Report, *, headers: bool = True) -> str:
    """One row per GPU (GPU ``pending`` for memory without an index); PODS is ``ns/name=memory ...``.

    HEALTHY is the last column (``true``/``false``; empty for ``pending``), so readers by position of
    the first seven columns are unaffected.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    stacked = bool(report.stack_nodes)
    if headers:
        writer.writerow(CSV_HEADER + STACK_CSV_COLUMNS if stacked else CSV_HEADER)
    for node in report.nodes:
        extra: tuple[str, ...] = (STACK_GPUSHARE, node.unit or report.unit) if stacked else ()
        rows: list[tuple[str, int, int | str, int | str, list[PodShare], str]] = [
            (str(gpu.index), gpu.used, gpu.total, gpu.free, gpu.pods, "true" if gpu.healthy else "false")
            for gpu in node.gpus
        ]
        if node.pending_pods or node.pending:
            rows.append(("pending", node.pending, "", "", node.pending_pods, ""))
        for gpu, used, total, free, pods, healthy in rows:
            shares = " ".join(f"{pod.namespace}/{pod.name}={pod.memory}" for pod in pods)
            writer.writerow((node.name, node.ip, gpu, used, total, free, shares, healthy, *extra))
    for stack_node in report.stack_nodes:
        for stack_gpu in stack_node.gpus:
            pending = stack_gpu.index == PENDING
            claims = " ".join(f"{pod.namespace}/{pod.name}={pod.amount}" for pod in stack_gpu.pods)
            writer.writerow((
                stack_node.name, stack_node.ip, "pending" if pending else str(stack_gpu.index), stack_gpu.used,
                "" if pending else stack_gpu.total, "" if pending else stack_gpu.free, claims,
                "" if pending else ("true" if stack_gpu.healthy else "false"), stack_node.stack, stack_gpu.unit,
            ))
    return out.getvalue()
