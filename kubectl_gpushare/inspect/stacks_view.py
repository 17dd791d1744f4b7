"""The text views of GPUs run by other sharing stacks (HAMi, NVIDIA, nano-gpu, elastic-gpu).

Shown after the gpushare views, and only when such nodes exist, so a gpushare-only cluster prints
exactly what it did. Each GPU carries its stack and its own unit (MiB, %, slots, GPUs); nothing
adds one unit to another, so there is no cluster total across stacks. GPU ``pending`` holds
claims that name no GPU the node reports (HAMi UUIDs not registered, nano-gpu containers not
yet assumed); an NVIDIA node's pools show their resource as GPU (``gpu``,
``mig-1g.10gb``: kubelet alone knows the physical GPU), an NVIDIA DRA node's GPUs their device
names (``gpu-0``, ``gpu-0-mig-...``). Renders from the ledger's
`stack_usage`; counts nothing itself and does no I/O. Every string from an object (node, address, GPU id and
model, pod, note) is written through `protocol.shown_text`, so a file's names cannot forge a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import tabwriter
from kubectl_gpushare.ledger import PENDING, StackClaim, StackDeviceUsage, StackNode, stack_usage

HEADER = ("STACK", "NAME", "IPADDRESS", "GPU", "MODEL", "ALLOCATED/TOTAL", "UNIT", "CORES", "PODS", "NOTE")
DETAIL_HEADER = "GPU\tNAMESPACE\tNAME\tALLOCATED\tUNIT\tCORES\n"


def gpu_label(device: StackDeviceUsage, stack: str = "") -> str:
    """``0``, ``1``... or ``pending``; an NVIDIA pool by its resource (``gpu``, ``mig-1g.10gb``)."""
    if device.gpu.index == PENDING:
        return "pending"
    if stack == protocol.STACK_NVIDIA or (stack == protocol.STACK_KAI and device.gpu.unit != protocol.UNIT_MIB):
        # KAI keeps the NVIDIA pools beside its shared GPUs
        return protocol.shown_text(device.gpu.id.removeprefix("nvidia.com/"))
    if stack == protocol.STACK_NVIDIA_DRA:
        return protocol.shown_text(device.gpu.id)  # as its ResourceSlice names it (gpu-<minor>, gpu-<minor>-mig-...)
    return str(device.gpu.index)


def _flags(device: StackDeviceUsage) -> str:
    flags = [word for word, on in (("cordoned", device.gpu.cordoned), ("unhealthy", not device.gpu.healthy)) if on]
    return ",".join(flags)


def _cores(device: StackDeviceUsage) -> str:
    return f"{device.cores_used}/{device.gpu.cores}" if device.gpu.cores else "-"


def summary(
    nodes: Sequence[StackNode], claims: Mapping[str, list[StackClaim]], *, headers: bool = True
) -> str:
    """One row per GPU (or slot pool) of each stack node: allocated/total in the GPU's own unit.

    Columns are two spaces apart and the last one is not padded (a simple aligner, not the Go
    tab writer: this table is ours, and one row per GPU must stay cheap at 40,000 GPUs).
    """
    shown = protocol.shown_text
    rows: list[tuple[str, ...]] = [HEADER] if headers else []
    for node in nodes:
        devices = stack_usage(node, claims.get(node.name, ()))
        name, ip, node_note = shown(node.name), shown(node.ip), shown(node.note, protocol.SENTENCE_NAMES)
        if not devices:
            rows.append((node.stack, name, ip, "-", "-", "-", "-", "-", "0", node_note))
        for device in devices:
            pods = len({claim.uid or (claim.namespace, claim.name) for claim in device.claims})
            note = ", ".join(part for part in (_flags(device), node_note) if part)
            total = "-" if device.gpu.index == PENDING else str(device.gpu.total)
            rows.append((
                node.stack, name, ip, gpu_label(device, node.stack), shown(device.gpu.model) or "-",
                f"{device.used}/{total}", device.gpu.unit, _cores(device), str(pods), note,
            ))
    return align(rows)


def align(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as left-aligned columns two spaces apart; trailing blanks removed from each line."""
    if not rows:
        return ""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        cells.append(row[-1])
        lines.append("  ".join(cells).rstrip() + "\n")
    return "".join(lines)


def details(
    nodes: Sequence[StackNode], claims: Mapping[str, list[StackClaim]], *, headers: bool = True
) -> str:
    """Per stack node, which pod holds how much of which GPU, in the GPU's unit."""
    shown = protocol.shown_text
    out: list[str] = []
    for node in nodes:
        lines = [f"\nNAME:\t{shown(node.name)}\nIPADDRESS:\t{shown(node.ip)}\nSTACK:\t{node.stack}\n"]
        if node.note:
            lines.append(f"NOTE:\t{shown(node.note, protocol.SENTENCE_NAMES)}\n")
        for position, (pod, index, uuid) in enumerate(node.reservations):
            gpu = f"GPU {index} ({shown(uuid)})" if index != PENDING else "a GPU not reported yet"
            lines.append(f"{'RESERVED:' if position == 0 else ''}\t{shown(pod, 2)} holds {gpu}\n")
        lines.append("\n")
        if headers:
            lines.append(DETAIL_HEADER)
        devices = stack_usage(node, claims.get(node.name, ()))
        for device in devices:
            for claim in device.claims:
                cores = str(claim.cores) if device.gpu.cores else "-"
                label = gpu_label(device, node.stack)
                lines.append(f"{label}\t{shown(claim.namespace)}\t{shown(claim.name)}\t{claim.amount}\t"
                             f"{device.gpu.unit}\t{cores}\n")
        lines.append("\n")
        for device in devices:
            total = "-" if device.gpu.index == PENDING else str(device.gpu.total)
            flags = _flags(device)
            lines.append(
                f"GPU {gpu_label(device, node.stack)}:\t{device.used}/{total} {device.gpu.unit}"
                f"{'  ' + flags if flags else ''}\n"
            )
        out.append(tabwriter.render("".join(lines)))
    return "".join(out)


def combine(gpushare: str | None, stacks: str) -> str:
    """The gpushare view, a blank line, then the stacks view; either alone when the other is empty."""
    if not gpushare:
        return stacks
    return gpushare + "\n" + stacks
