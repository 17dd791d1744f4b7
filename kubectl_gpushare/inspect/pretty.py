"""``-o pretty``: a view for people, drawn with rich.

One row per node with a usage bar per GPU, coloured by fill level (green below 50%, yellow below
80%, red from 80%, magenta for memory pending a GPU), then a cluster total. Colours follow rich's
rules: none when the output is not a terminal or ``NO_COLOR`` is set. rich is imported only
here, and this module only when ``-o pretty`` is asked for, so other views never pay for it.
Renders from a `ledger.Ledger`; does no I/O beyond writing to the given stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect.compat import memory_unit, percent, waiting_line
from kubectl_gpushare.ledger import PENDING, Ledger, PodRecord

BAR_WIDTH: Final = 20


def _style(used: int, total: int) -> str:
    fill = used / total if total > 0 else (1.0 if used else 0.0)
    if fill >= 0.8:
        return "red"
    if fill >= 0.5:
        return "yellow"
    return "green"


def _bar(label: str, used: int, total: int) -> Text:
    fill = min(max(used / total, 0.0), 1.0) if total > 0 else (1.0 if used else 0.0)
    filled = round(fill * BAR_WIDTH)
    style = _style(used, total)
    text = Text(f"{label} ")
    text.append("█" * filled, style=style)
    text.append("░" * (BAR_WIDTH - filled), style="dim")
    text.append(f" {used}/{total}", style=style)
    return text


def render(
    ledger: Ledger,
    names: Sequence[str],
    stream: IO[str],
    *,
    details: bool = False,
    unscheduled: Sequence[PodRecord] = (),
) -> None:
    """Draw the nodes (with each GPU's pods when ``details``) onto ``stream``, then pods waiting for a node.

    rich writes an ESC or a newline in a cell as it is: names pass `protocol.shown_text` first. Nothing here is
    rich markup or an emoji code, so a name holding ``[/]``, ``[link=...]`` or ``:smile:`` is written as it reads.
    """
    shown = protocol.shown_text
    console = Console(file=stream, highlight=False, soft_wrap=False, markup=False, emoji=False)
    unit = memory_unit(ledger, names)
    title = f"Shared GPU memory ({unit})" if unit else "Shared GPU memory"  # no GPU-share node: no unit
    table = Table(title=title, title_justify="left", show_lines=details)
    table.add_column("NODE", style="bold")
    table.add_column("IP")
    table.add_column("GPUS")
    table.add_column("ALLOCATED", justify="right")
    cluster_used = cluster_total = 0
    for name in names:
        usage = ledger.usage(name)
        if usage.total_mem <= 0:
            continue
        bars = Text()
        for device in usage.devices.values():
            if bars:
                bars.append("\n")
            if device.index == PENDING:
                bars.append(Text(f"pending {device.used}", style="magenta"))
            else:
                bars.append(_bar(f"GPU{device.index}", device.used, device.total))
                if device.index in usage.node.unhealthy:
                    bars.append(" unhealthy", style="bold red")
            if details:
                for pod, amount in device.pods:
                    line = f"\n    {shown(pod.namespace)}/{shown(pod.name)} {amount}"
                    bars.append(line, style="dim" if pod.terminating else "")
        used = usage.used
        summary = Text(
            f"{used}/{usage.total_mem} ({percent(used, usage.total_mem)}%)", style=_style(used, usage.total_mem)
        )
        table.add_row(shown(usage.node.name), shown(usage.node.ip), bars, summary)
        cluster_used += used
        cluster_total += usage.total_mem
    console.print(table)
    console.print(
        Text("Cluster: ").append(
            f"{cluster_used}/{cluster_total} ({percent(cluster_used, cluster_total)}%)",
            style=_style(cluster_used, cluster_total),
        )
    )
    if unscheduled:
        console.print(Text(waiting_line(unscheduled, unit), style="magenta"))
