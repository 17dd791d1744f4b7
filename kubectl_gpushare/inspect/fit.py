"""``kubectl gpushare fit``: where pods of a given GPU memory would fit, asked of the ledger.

Every number comes from `ledger.Ledger`: a GPU takes a pod when its free memory is at least the
request (`Ledger.fit_counts`, `Ledger.largest_free`, unhealthy GPUs left out), the node for the
next pod is the one the extender's prioritize scores highest (`Ledger.score`, ties by name) and
the GPU is `Ledger.choose_gpu`'s under the same policy. So ``fit`` cannot disagree with the inspect
tables or with the extender's filter. Placements are simulated with ledger reservations, which
are released before returning. Pure: no I/O.

The JSON is a versioned ``GPUShareFit`` (``gpushare.kubectl-gpushare.io/v1``); fields are only ever
added::

    request, count, policy, unit
    fits                      # how many pods of `request` fit in total
    largestFit                # the largest request that still fits on some GPU
    nodes: [{name, fits, largestFree, gpus: [{index, free, fits}]}]   # nodes and GPUs that take one
    placements: [{node, gpu}] # where the first `count` pods go, one after another
    otherStacks: {stack: nodes}  # nodes of other sharing stacks, not considered (absent when none)

``fit`` answers for gpushare memory: ``aliyun.com/gpu-mem`` and the GPUs of our DRA driver, where
one pod's claim takes what the driver's request policy rounds it up to (the structured allocator's
rule, `kube.stacks.dra.request_units`). HAMi, NVIDIA (device plugin or DRA), nano-gpu and
elastic-gpu nodes are placed by their own schedulers with their own rules, so they are counted and
named as not considered, never offered.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import caps, tabwriter
from kubectl_gpushare.inspect.compat import memory_unit
from kubectl_gpushare.ledger import Ledger, Policy

API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1"
KIND: Final = "GPUShareFit"
MAX_COUNT: Final = 100_000
"""Upper bound on ``--count``: placements are simulated one by one."""


class GpuFit(msgspec.Struct, rename="camel"):
    """One healthy GPU that takes at least one more pod."""

    index: int
    free: int
    fits: int


class NodeFit(msgspec.Struct, rename="camel"):
    """A node that takes at least one more pod, and on which GPUs."""

    name: str
    fits: int
    largest_free: int
    gpus: list[GpuFit]


class Placement(msgspec.Struct):
    """Where one simulated pod goes."""

    node: str
    gpu: int


class FitReport(msgspec.Struct, rename="camel"):
    """The answer to "where would pods of this size fit?"."""

    request: int
    count: int
    policy: str
    unit: str
    fits: int
    largest_fit: int
    nodes: list[NodeFit]
    placements: list[Placement]
    other_stacks: dict[str, int] = msgspec.field(default_factory=dict)
    api_version: str = API_VERSION
    kind: str = KIND


def _place(
    ledger: Ledger, names: Sequence[str], asked: Mapping[str, int], count: int, policy: Policy
) -> list[Placement]:
    """Place ``count`` pods one by one as kube-scheduler and the extender would, then undo it.

    ``asked`` is what one pod takes on each node, in that node's unit. Only the node that took a
    pod changes score, so a heap keeps this O(count * log nodes).
    """
    heap = [(-ledger.score(name, asked[name], policy), name) for name in names
            if ledger.fits(name, asked[name]) is None]
    heapq.heapify(heap)
    placements: list[Placement] = []
    try:
        while heap and len(placements) < count:
            _, name = heapq.heappop(heap)
            request = asked[name]
            gpu = ledger.choose_gpu(name, request, policy)
            if gpu is None:
                continue
            ledger.reserve(f"fit-{len(placements)}", "", "", name, gpu, request)
            placements.append(Placement(name, gpu))
            if ledger.fits(name, request) is None:
                heapq.heappush(heap, (-ledger.score(name, request, policy), name))
    finally:
        for number in range(len(placements)):
            ledger.release(f"fit-{number}")
    return placements


def plan(
    ledger: Ledger,
    names: Sequence[str],
    request: int,
    count: int = 1,
    policy: Policy = "binpack",
    other_stacks: Mapping[str, int] | None = None,
    per_node: Mapping[str, int | None] | None = None,
) -> FitReport:
    """Answer where pods of ``request`` fit on the given nodes.

    Args:
        ledger: the snapshot's ledger (its reservations are left as they were).
        names: the nodes to consider, in display order.
        request: GPU memory per pod, in the nodes' unit (as ``aliyun.com/gpu-mem``).
        count: how many pods to place one after another.
        policy: the extender's GPU policy.
        other_stacks: how many nodes of each other sharing stack were left out (reported, not used).
        per_node: what one pod takes on a node where that is not ``request``: a node of our DRA
            driver, whose request policy rounds a claim up (`kube.stacks.dra.request_units`), in its
            own unit; None where no GPU of it takes such a claim.
    """
    unit = memory_unit(ledger, names) or protocol.UNIT_GIB
    unreachable = protocol.MAX_GPU_MEMORY + 1  # more than any GPU has: the node takes no pod
    asked = {name: request for name in names}
    for name, amount in (per_node or {}).items():
        if name in asked:
            asked[name] = unreachable if amount is None else amount
    nodes: list[NodeFit] = []
    largest = 0
    for name in names:
        shown = ledger.in_unit(name, unit)
        node_largest = ledger.largest_free(name)
        largest = max(largest, shown(node_largest))
        node_request = asked[name]
        per_gpu = ledger.fit_counts(name, node_request) if node_largest >= node_request else {}
        if per_gpu:
            free = ledger.free(name)
            gpus = [GpuFit(index, shown(free[index]), fits) for index, fits in sorted(per_gpu.items())]
            nodes.append(NodeFit(name, sum(per_gpu.values()), shown(node_largest), gpus))
    placements = _place(ledger, names, asked, count, policy)
    return FitReport(
        request=request,
        count=count,
        policy=policy,
        unit=unit,
        fits=sum(node.fits for node in nodes),
        largest_fit=largest,
        nodes=nodes,
        placements=placements,
        other_stacks=dict(sorted((other_stacks or {}).items())),
    )


def to_json(report: FitReport) -> str:
    """The report as indented JSON, ``apiVersion`` and ``kind`` first."""
    data = msgspec.to_builtins(report)
    if not data["otherStacks"]:
        del data["otherStacks"]  # gpushare-only clusters print what they always did
    ordered = {"apiVersion": data.pop("apiVersion"), "kind": data.pop("kind"), **data}
    return msgspec.json.format(msgspec.json.encode(ordered), indent=2).decode() + "\n"


def _other_stacks_note(other_stacks: Mapping[str, int]) -> str:
    """One line naming the nodes of other stacks that fit did not consider."""
    parts = [f"{count} {stack} node{'' if count == 1 else 's'}" for stack, count in other_stacks.items()]
    return (f"\nNot considered: {', '.join(parts)} (fit answers for {protocol.RESOURCE_MEM} and "
            f"{protocol.DRA_DRIVER} GPUs only; kubectl gpushare inspect shows them).\n")


def to_text(report: FitReport, *, headers: bool = True, limit: int | None = None) -> str:
    """A summary line, one row per GPU that takes a pod, and where the next pods go.

    Each list shows at most ``limit`` rows (`inspect.caps`), then a line counting the rest. Node names
    are written through `protocol.shown_text` (a file's may hold anything); `to_json` keeps them exact.
    """
    unit = report.unit
    pods = "pod" if report.fits == 1 else "pods"
    lines = [
        f"{report.fits} {pods} of {report.request} {unit} fit on {len(report.nodes)} "
        f"node{'' if len(report.nodes) == 1 else 's'} (policy {report.policy}); "
        f"the largest request that fits on one GPU is {report.largest_fit} {unit}.\n"
    ]
    if report.nodes:
        gpus, hidden = caps.capped([(node.name, gpu) for node in report.nodes for gpu in node.gpus], limit)
        rows = [f"NODE\tGPU\tFREE({unit})\tFITS\n"] if headers else []
        rows += [f"{protocol.shown_text(name)}\t{gpu.index}\t{gpu.free}\t{gpu.fits}\n" for name, gpu in gpus]
        lines += ["\n", tabwriter.render("".join(rows))]
        if hidden:
            lines.append(caps.more_line(hidden, "GPUs that take a pod"))
    if report.placements:
        placements, hidden = caps.capped(report.placements, limit)
        rows = ["POD\tNODE\tGPU\n"] if headers else []
        rows += [f"{number}\t{protocol.shown_text(p.node)}\t{p.gpu}\n" for number, p in enumerate(placements, 1)]
        lines += ["\n", tabwriter.render("".join(rows))]
        if hidden:
            lines.append(caps.more_line(hidden, "placements"))
    if len(report.placements) < report.count:
        lines.append(f"\nOnly {len(report.placements)} of the {report.count} pods asked for fit.\n")
    if report.other_stacks:
        lines.append(_other_stacks_note(report.other_stacks))
    return "".join(lines)
