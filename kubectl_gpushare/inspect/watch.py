"""``kubectl inspect gpushare -w``: redraw the view whenever nodes or pods change.

Two informers (`kube.informer.Informer`: one list, then a watch from its resourceVersion; no
polling) keep nodes and active pods; every change marks the view dirty and the main thread
re-renders from the informers' caches with the same records, ledger and renderers as a one-shot
inspect. Bursts are coalesced (`SETTLE` seconds). On a terminal the view is redrawn in place with
rich's live display; piped, each change prints a new table, separated by a blank line. Ctrl-C
stops at once: the informers' threads are daemons and are told to stop without waiting.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from kubectl_gpushare.inspect.source import ACTIVE_PODS, Snapshot, not_found
from kubectl_gpushare.kube import selectors, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.informer import Informer
from kubectl_gpushare.kube.records import Warnings, node_record, pod_record
from kubectl_gpushare.ledger import Ledger

SETTLE: Final = 0.2
"""Seconds to wait after a change for more changes, so a burst (a bind writes several) draws once."""
STALE_AFTER: Final = 2.0
"""Seconds an informer must keep failing before the view is marked stale (a watch that the server
ends and that reconnects at once is not an outage)."""


def stale_since(informers: Sequence[Informer[Any]], now: float) -> float | None:
    """Wall-clock time since which some informer has failed to list or watch, or None when current."""
    stale = max((informer.stale_for() for informer in informers), default=0.0)
    return now - stale if stale >= STALE_AFTER else None


def stale_line(since: float) -> str:
    """The line above a view the API server no longer confirms."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    return (f"STALE since {when} ({time.time() - since:.0f}s): the API server is not answering; "
            "below is the last state seen, retrying.\n")


def snapshot(
    nodes: Sequence[types.Node], pods: Sequence[types.Pod], names: Sequence[str], selector: str | None
) -> Snapshot:
    """The same snapshot a one-shot inspect would build from these objects."""
    warnings = Warnings()
    matches = selectors.matcher(selector)
    chosen = [node for node in nodes if matches(node.metadata.labels)]
    if names:
        by_name = {node.metadata.name: node for node in chosen}
        missing = [name for name in names if name not in by_name]
        if missing:
            raise not_found(missing[0])
        chosen = [by_name[name] for name in dict.fromkeys(names)]
    records = [node_record(node, warnings=warnings) for node in chosen]
    wanted = {record.name for record in records if names or record.alloc_mem > 0}
    ledger = Ledger.build(
        records, (pod_record(pod, warnings) for pod in pods if pod.spec.node_name in wanted), basis="allocatable"
    )
    shown = sorted(wanted) if not names else sorted(record.name for record in records)
    return Snapshot(ledger=ledger, names=shown, warnings=warnings)


def watch(client: Client, options: dict[str, Any], render: Callable[[Snapshot, dict[str, Any]], str | None]) -> None:
    """Draw, then redraw on every change until Ctrl-C (which propagates as KeyboardInterrupt).

    Raises:
        KubeError: the first list failed (a failure later is retried by the informers).
    """
    changed = threading.Event()

    def mark(*_: object) -> None:
        changed.set()

    node_informer = Informer(client, types.NODES, label_selector=options["selector"] or None,
                             on_add=mark, on_update=mark, on_delete=mark, name="watch-nodes")
    pod_informer = Informer(client, types.PODS, field_selector=ACTIVE_PODS,
                            on_add=mark, on_update=mark, on_delete=mark, name="watch-pods")
    informers = (node_informer, pod_informer)
    for informer in informers:
        informer.start()
    live = None
    try:
        for informer in informers:
            while not informer.wait_synced(0.2):
                if informer.last_error is not None:
                    raise informer.last_error  # the first list failed: fail as a one-shot inspect does
        if sys.stdout.isatty():
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            live = Live(console=Console(), auto_refresh=False)
            live.start()
        first = True
        while True:
            changed.clear()
            since = stale_since(informers, time.time())
            view = snapshot(node_informer.items(), pod_informer.items(), options["nodes"], options["selector"])
            text = (stale_line(since) if since is not None else "") + (render(view, options) or "")
            if live is not None:
                live.update(Text(text), refresh=True)
            else:
                sys.stdout.write(text if first else "\n" + text)
                sys.stdout.flush()
            first = False
            # Redraw on a change, and when the API server stops or starts answering again.
            while not changed.wait(0.5) and (stale_since(informers, time.time()) is None) == (since is None):
                pass
            time.sleep(SETTLE)  # let a burst of changes (a bind writes several) land before drawing
    finally:
        if live is not None:
            live.stop()
        for informer in informers:
            informer.stop(timeout=0)
