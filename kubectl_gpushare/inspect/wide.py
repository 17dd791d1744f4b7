"""``-o wide``: the summary's per-GPU columns plus what an operator asks next.

Adds, per node: the GPU count, free memory, pending memory, the largest free memory on a single
healthy GPU (the biggest pod that still fits, since a pod never spans GPUs without gpushare 2.0)
and the number of pods holding memory. Ends, after a blank line, with the cluster total. Unlike the compatible
summary, this layout is ours and not parsed by existing scripts; column names may grow, never
change. Renders from a `ledger.Ledger`; does no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import tabwriter
from kubectl_gpushare.inspect.compat import CLUSTER_FOOTER, memory_unit, percent, waiting_line
from kubectl_gpushare.ledger import PENDING, Ledger, PodRecord

UNHEALTHY_MARK = "!"
"""Suffix of an unhealthy GPU's cell, explained in a legend line under the table."""


def render(
    ledger: Ledger, names: Sequence[str], *, headers: bool = True, unscheduled: Sequence[PodRecord] = ()
) -> str:
    """The wide table for the given nodes (nodes without GPU memory are left out).

    Pods that ask for GPU memory but are on no node yet get one line after the cluster total. Node names
    and addresses are written through `protocol.shown_text` (a file's may hold anything).
    """
    usages = [usage for usage in (ledger.usage(name) for name in names) if usage.total_mem > 0]
    max_gpus = max((usage.gpu_count for usage in usages), default=0)
    unit = memory_unit(ledger, names)
    lines: list[str] = []
    if headers:
        gpu_columns = "".join(f"GPU{index}(Allocated/Total)\t" for index in range(max_gpus))
        lines.append(
            f"NAME\tIPADDRESS\tGPUS\t{gpu_columns}PENDING\tALLOCATED/TOTAL{f'({unit})' if unit else ''}\tUSED%\tFREE"
            "\tLARGEST-FREE-GPU\tPODS\n"  # no GPU-share node, no unit: no empty "()" (the default view keeps it)
        )
    cluster_used = cluster_total = 0
    for usage in usages:
        cells = [f"{protocol.shown_text(usage.node.name)}\t{protocol.shown_text(usage.node.ip)}\t{usage.gpu_count}\t"]
        for index in range(max_gpus):
            device = usage.devices.get(index)
            mark = UNHEALTHY_MARK if index in usage.node.unhealthy else ""
            cells.append(f"{device.used}/{device.total}{mark}\t" if device is not None else "-\t")
        pending = usage.devices.get(PENDING)
        used = usage.used
        largest = ledger.largest_free(usage.node.name)
        pods = len({pod.uid for device in usage.devices.values() for pod, _ in device.pods})
        cells.append(
            f"{pending.used if pending else 0}\t{used}/{usage.total_mem}\t{percent(used, usage.total_mem)}%\t"
            f"{usage.total_mem - used}\t{largest}\t{pods}\n"
        )
        lines.append("".join(cells))
        cluster_used += used
        cluster_total += usage.total_mem
    if not headers:  # rows only
        return tabwriter.render("".join(lines))
    lines.append("\n")
    lines.append(f"{CLUSTER_FOOTER}\t{cluster_used}/{cluster_total} ({percent(cluster_used, cluster_total)}%)\n")
    if unscheduled:
        lines.append(waiting_line(unscheduled, unit) + "\n")
    if any(usage.node.unhealthy for usage in usages):
        lines.append(f"{UNHEALTHY_MARK} unhealthy GPU: no new pods go there, and LARGEST-FREE-GPU leaves it out\n")
    return tabwriter.render("".join(lines))
