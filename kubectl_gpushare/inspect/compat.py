"""The original tool's two text views, byte for byte: the summary and ``-d`` (details).

Scripts and runbooks parse these views, so every quirk of the original is kept on purpose: the
``PENDING(Allocated)`` / ``Pending(Allocated)`` spellings, dash lines whose length comes from the
byte length of the first node's unformatted rows, the GiB/MiB guess (more than 100 per GPU means
MiB), percentages truncated from a float (29/100 prints 28%), ``0/0`` under GPUs a node lacks, and
trailing spaces from the tab writer. Only the order is ours: the original iterated Go maps, so
node and device order (and with them the dash-line length) changed from run to run. Here nodes
come in the order the caller passes (by name unless ``--sort`` says otherwise) and devices by
index with the pending device last, and the bytes equal what the original prints for that order.

This module renders from a `ledger.Ledger` only; it never counts pods itself and does no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import tabwriter
from kubectl_gpushare.ledger import PENDING, Ledger, NodeUsage, PodRecord

CLUSTER_FOOTER = "Allocated/Total GPU Memory In Cluster:"
SUMMARY_DASH_EXTRA = 20
DETAIL_DASH_EXTRA = 10
MIB_THRESHOLD = 100
"""More GPU memory than this per GPU means the node advertises MiB, not GiB (the original's guess)."""


def waiting_line(pods: Sequence[PodRecord], unit: str) -> str:
    """One line about pods that ask for GPU memory but are on no node yet (wide and pretty views).

    Those views are ours, not the original's: names pass `protocol.shown_text`.
    """
    ordered = sorted(pods, key=lambda p: (p.namespace, p.name))
    listed = ", ".join(f"{protocol.shown_text(p.namespace)}/{protocol.shown_text(p.name)} ({p.request})"
                       for p in ordered)
    plural = "" if len(pods) == 1 else "s"
    return f"Waiting for a node: {len(pods)} pod{plural}, {sum(p.request for p in pods)} {unit or 'GiB'}: {listed}"


def percent(used: int, total: int) -> int:
    """``int64(float64(used) / float64(total) * 100)`` as Go computes it; 0 when total is 0."""
    if total == 0:
        return 0
    return int(used / total * 100)


def memory_unit(ledger: Ledger, names: Sequence[str]) -> str:
    """The unit label: set by the first node (in display order) that has GPU memory and GPUs.

    Returns:
        That node's unit when known (a DRA node's), else ``"MiB"`` when it has more than 100 per
        GPU and ``"GiB"`` otherwise; ``""`` when no node qualifies (the original then prints
        ``GPU Memory()``).
    """
    for name in names:
        mem, count = ledger.gpu_mem_and_count(name)
        if mem > 0 and count > 0:
            record = ledger.node(name)
            if record is not None and record.unit:
                return record.unit  # a DRA node's unit is known, not guessed
            return protocol.UNIT_MIB if mem // count > MIB_THRESHOLD else protocol.UNIT_GIB
    return ""


def _usages(ledger: Ledger, names: Sequence[str]) -> list[NodeUsage]:
    return [ledger.usage(name, pods=False) for name in names]  # the summary shows sums only


def summary(ledger: Ledger, names: Sequence[str], *, headers: bool = True) -> str:
    """The default view: one row per GPU-share node with Allocated/Total per GPU.

    Args:
        ledger: the accounting (basis ``allocatable``, as the original).
        names: the nodes the original would have fetched, in display order. Nodes without GPU
            memory are skipped when printed but, as in the original, still widen the GPU columns
            and can add the pending column.
        headers: print the header row and the cluster footer; ``--no-headers`` gives the node rows
            only (the rows' bytes are the same either way: the dash line flushes the tab writer).

    Returns:
        The view's exact text.
    """
    usages = _usages(ledger, names)
    max_gpus = max((usage.gpu_count for usage in usages), default=0)
    has_pending = any(PENDING in usage.devices for usage in usages)
    unit = memory_unit(ledger, names)

    buffer: list[str] = []
    if headers:
        header = ["NAME\tIPADDRESS\t"]
        header.extend(f"GPU{index}(Allocated/Total)\t" for index in range(max_gpus))
        if has_pending:
            header.append("PENDING(Allocated)\t")
        header.append(f"GPU Memory({unit})\n")
        buffer.append("".join(header))

    first_row_bytes = 0
    cluster_used = cluster_total = 0
    for usage in usages:
        if usage.total_mem <= 0:
            continue
        cells = [f"{usage.node.name}\t{usage.node.ip}\t"]
        node_used = 0
        for index in range(max_gpus):
            device = usage.devices.get(index)
            if device is None:
                cells.append("0/0\t")
            else:
                cells.append(f"{device.used}/{device.total}\t")
                node_used += device.used
        pending = usage.devices.get(PENDING)
        if pending is not None:
            node_used += pending.used
        if has_pending:
            cells.append(f"{pending.used}\t" if pending is not None else "\t")
        cells.append(f"{node_used}/{usage.total_mem}\n")
        row = "".join(cells)
        if not first_row_bytes:
            first_row_bytes = len(row.encode())
        buffer.append(row)
        cluster_used += node_used
        cluster_total += usage.total_mem

    if headers:
        dashes = first_row_bytes + SUMMARY_DASH_EXTRA if first_row_bytes else 0
        buffer.append("-" * dashes + "\n")
        buffer.append(f"{CLUSTER_FOOTER}\n")
        buffer.append(f"{cluster_used}/{cluster_total} ({percent(cluster_used, cluster_total)}%)\t\n")
    return tabwriter.render("".join(buffer))


def details(ledger: Ledger, names: Sequence[str], *, headers: bool = True) -> str:
    """The ``-d`` view: per node, which pod holds how much memory on which GPU.

    Args:
        ledger: the accounting (basis ``allocatable``, as the original).
        names: the nodes to show, in display order; nodes without GPU memory are skipped.
        headers: print each node's table header row.

    Returns:
        The view's exact text.
    """
    rendered: list[str] = []
    dashes = -1
    cluster_used = cluster_total = 0
    # Each node's block starts with a blank line and ends with the tab-free dash line, both of
    # which flush the tab writer, so blocks are rendered one at a time (bounded memory at 100k pods).
    for name in names:
        usage = ledger.usage(name)
        if usage.total_mem <= 0:
            continue
        buffer: list[str] = []
        has_pending = PENDING in usage.devices
        buffer.append("\n")
        buffer.append(f"NAME:\t{usage.node.name}\nIPADDRESS:\t{usage.node.ip}\n\n")
        if headers:
            header = ["NAME\tNAMESPACE\t"]
            header.extend(f"GPU{index}(Allocated)\t" for index in range(usage.gpu_count))
            if has_pending:
                header.append("Pending(Allocated)\t")
            header.append("\n")
            buffer.append("".join(header))

        columns = usage.gpu_count + (1 if has_pending else 0)
        rows: list[str] = []
        printed: set[str] = set()
        for device in usage.devices.values():
            for pod, _amount in device.pods:
                if pod.uid in printed:
                    continue
                printed.add(pod.uid)
                cells = [f"{pod.name}\t{pod.namespace}\t"]
                if pod.allocation:
                    per_gpu = dict(pod.allocation)
                    cells.extend(f"{per_gpu.get(column, 0)}\t" for column in range(columns))
                else:
                    for column in range(columns):
                        mine = column == device.index or (device.index == PENDING and column == usage.gpu_count)
                        cells.append(f"{pod.request}\t" if mine else "0\t")
                cells.append("\n")
                rows.append("".join(cells))
        pod_rows = "".join(rows)
        buffer.append(pod_rows)
        if dashes < 0:
            dashes = len(pod_rows.encode()) + DETAIL_DASH_EXTRA

        node_used = usage.used
        buffer.append(f"Allocated :\t{node_used} ({percent(node_used, usage.total_mem)}%)\t\n")
        buffer.append(f"Total :\t{usage.total_mem} \t\n")
        buffer.append("-" * dashes + "\n")
        cluster_used += node_used
        cluster_total += usage.total_mem
        rendered.append(tabwriter.render("".join(buffer)))

    footer = f"\n\n{CLUSTER_FOOTER}\t{cluster_used}/{cluster_total} ({percent(cluster_used, cluster_total)}%)\t\n"
    rendered.append(tabwriter.render(footer))
    return "".join(rendered)
