"""``kubectl inspect gpushare -w``: redraw the view whenever anything a one-shot inspect reads changes.

Informers (`kube.informer.Informer`: one list, then a watch from its resourceVersion; no polling)
keep what a one-shot inspect (`source.from_api`) reads, and only where it reads it: nodes and
active pods; ResourceSlices where the API serves ``resource.k8s.io/v1``, and ResourceClaims once a
slice of a driver read there exists; the unhealthy-GPU ConfigMaps for the views that mark them;
Koordinator's Devices once a Koordinator node is read; ResourceQuotas for ``--group-by
namespace``. Every change marks the view dirty and the main thread builds the frame from the
caches with `source.from_objects` and the same listing rules (`source.dra_of_lists`,
`source.devices_of`, `source.unhealthy_of`, `source.quotas_of`), so a frame is what a one-shot
inspect prints for the same state. Bursts are coalesced (`SETTLE` seconds). On a terminal the view
is redrawn in place with rich's live display; piped, each change prints a new table, separated by
a blank line. Ctrl-C stops at once: the informers' threads are daemons and are told to stop
without waiting.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import source
from kubectl_gpushare.inspect.source import ACTIVE_PODS, READS_DRA, Snapshot
from kubectl_gpushare.kube import informer as informer_module
from kubectl_gpushare.kube import stacks, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import Forbidden, NotFound
from kubectl_gpushare.kube.informer import Informer, object_key
from kubectl_gpushare.kube.lenient import Undecodable, skipped
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.types import ItemT

SETTLE: Final = 0.2
"""Seconds to wait after a change for more changes, so a burst (a bind writes several) draws once."""
POLL: Final = 0.05
"""Seconds between looks at an event the main thread waits for (see `_set_within`)."""
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


def _in_key_order(informer: Informer[ItemT]) -> list[ItemT]:
    """The cached objects in the API server's list order (etcd key order), as a one-shot list has them."""
    return sorted(informer.items(), key=object_key)


def _set_within(event: threading.Event, timeout: float) -> bool:
    """``event.wait(timeout)`` for the main thread, waiting in `time.sleep` rather than in `threading.Condition.wait`.

    Ctrl-C raises KeyboardInterrupt in the main thread wherever it is. Raised inside the
    Condition's own bookkeeping (``_acquire_restore``), it leaves the Event's lock released and
    ``with`` releases it again: ``RuntimeError: release unlocked lock`` and a traceback instead of
    exit 130 (python/cpython#118433, seen here under load). A sleep is a safe place to be
    interrupted; the event is seen within `POLL` seconds.
    """
    deadline = time.monotonic() + timeout
    while not event.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(POLL, left))
    return True


def _first_list(informer: Informer[Any]) -> BaseException | None:
    """Wait for the first list: None once it is delivered, else the failure that ended the wait (retried)."""
    while not _set_within(informer.synced, 0.2):
        error = informer.last_error
        if error is not None:
            return error
    return None


class _Optional(Generic[ItemT]):
    """An informer of a kind one-shot reads only where the API serves it and the user may list it.

    Started at its first use. Where its first list is answered 404 or 403 it is stopped and
    `items` raises that answer every time (the shared listing rules then say nothing, or warn),
    as the one-shot request would. Another failure of the first list is raised at the first frame
    (a one-shot inspect fails then too); later the informer keeps retrying, the view is marked
    stale meanwhile (`informers`), and `items` holds nothing until the list succeeds.
    """

    def __init__(self, make: Callable[[threading.Event], Informer[ItemT]]) -> None:
        self._make = make
        self.informer: Informer[ItemT] | None = None
        self.refused: NotFound | Forbidden | None = None
        self.quiet = threading.Event()
        """Set while the main thread waits for the first list: its objects are read right after, not redrawn for."""

    def items(self, *, first: bool) -> list[ItemT]:
        """The cached objects in list order; raises NotFound or Forbidden as the first list was answered."""
        if self.refused is not None:
            raise self.refused
        informer = self.informer
        if informer is None:
            self.quiet.set()
            informer = self.informer = self._make(self.quiet).start()
            _first_list(informer)
            self.quiet.clear()
        if not informer.synced.is_set():
            error = informer.last_error
            if isinstance(error, (NotFound, Forbidden)):
                informer.stop(timeout=0)
                self.informer, self.refused = None, error
                raise error
            if error is not None and first:
                raise error
            return []
        return _in_key_order(informer)

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop(timeout=0)


class _Said:
    """The warnings already printed: each distinct one is printed once per watch, not once per frame."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def new(self, warnings: Warnings) -> list[str]:
        """Lines for the messages not printed yet (at most five, as a one-shot inspect prints them)."""
        fresh = Warnings()
        for message in warnings.messages:
            if message not in self.said:
                self.said.add(message)
                fresh.add(message)
        return fresh.summary()


class _Sources:
    """The informers a watch keeps, and the snapshot a one-shot inspect would build from their caches."""

    def __init__(self, client: Client, options: dict[str, Any], mark: Callable[..., None], unhealthy: bool) -> None:
        self.names: list[str] = list(dict.fromkeys(options["nodes"]))
        self.selector: str | None = options["selector"] or None
        self.stack: str = options.get("stack", stacks.AUTO)
        self.cluster_wide = not self.names and not self.selector

        def informer(
            kind: types.Kind[ItemT], name: str, quiet: threading.Event, *, namespace: str | None = None,
            label_selector: str | None = None, field_selector: str | None = None,
        ) -> Informer[ItemT]:
            def changed(*_: object) -> None:
                if not quiet.is_set():
                    mark()

            def undecodable(bad: Undecodable) -> None:
                self._skipped.append(skipped(kind, bad))  # said with the next frame's warnings
                changed()

            return Informer(client, kind, namespace=namespace, label_selector=label_selector,
                            field_selector=field_selector, on_add=changed, on_update=changed, on_delete=changed,
                            on_undecodable=undecodable, name=f"watch-{name}")

        self._skipped: deque[str] = deque()
        """Lines for objects that did not decode (the informer keeps their last good copy, if any)."""
        self._quiet = threading.Event()
        """Set while the first lists of nodes and pods are awaited (the first frame reads them after)."""
        self.nodes = informer(types.NODES, "nodes", self._quiet, label_selector=self.selector)
        self.pods = informer(types.PODS, "pods", self._quiet, field_selector=ACTIVE_PODS)
        self.slices = _Optional(lambda quiet: informer(types.DRA_SLICES, "resourceslices", quiet))
        self.claims = _Optional(lambda quiet: informer(types.DRA_CLAIMS, "resourceclaims", quiet))
        self.devices = _Optional(lambda quiet: informer(types.KOORD_DEVICES, "devices", quiet))
        self.configmaps = (
            _Optional(lambda quiet: informer(types.CONFIGMAPS, "configmaps", quiet,
                                             namespace=protocol.UNHEALTHY_CM_NAMESPACE))
            if unhealthy else None)  # fmt: skip
        self.quotas = (
            _Optional(lambda quiet: informer(types.RESOURCEQUOTAS, "resourcequotas", quiet))
            if options.get("group_by") == "namespace" else None)  # fmt: skip

    def start(self) -> None:
        """Start the informers of nodes and pods and wait for their first lists (a failure is raised)."""
        self._quiet.set()
        for informer in (self.nodes, self.pods):
            informer.start()
        needed: tuple[tuple[Informer[Any], source.Permission], ...] = (
            (self.nodes, "list nodes"), (self.pods, "list pods in all namespaces"))
        for informer, permission in needed:
            error = _first_list(informer)
            if error is not None:
                with source.needs_permission(permission):  # a 403 names what to bind, as without -w
                    raise error
        self._quiet.clear()

    @property
    def _optionals(self) -> list[_Optional[Any]]:
        """The kinds followed only once a frame reads them (those this view follows at all)."""
        optional = (self.slices, self.claims, self.devices, self.configmaps, self.quotas)
        return [o for o in optional if o is not None]

    @property
    def informers(self) -> list[Informer[Any]]:
        """The informers running now (for the stale mark)."""
        return [self.nodes, self.pods, *(o.informer for o in self._optionals if o.informer is not None)]

    def snapshot(self, *, first: bool) -> Snapshot:
        """The snapshot `source.from_api` would build now, from the caches.

        Raises:
            NotFound: a named node is not (or no longer) there, as a one-shot inspect says.
        """
        warnings = Warnings()
        self._say_skipped(warnings)
        nodes = _in_key_order(self.nodes)  # once: the view's nodes and the labels DRA slices match are one reading
        chosen = source.choose_nodes(nodes, self.names, self.selector)
        sick: dict[str, frozenset[int]] = {}
        configmaps = self.configmaps
        if configmaps is not None:
            sick = source.unhealthy_of(lambda: configmaps.items(first=first), warnings)
        devices = source.devices_of(lambda: self.devices.items(first=first), chosen, self.stack, warnings)
        objects = None
        if self.stack in READS_DRA:
            objects = source.dra_of_lists(lambda: self.slices.items(first=first),
                                          lambda: self.claims.items(first=first), warnings, pending=self.cluster_wide,
                                          nodes=nodes)
        self._say_skipped(warnings)  # a kind first listed above has just reported the objects that do not decode
        snapshot = source.from_objects(chosen, _in_key_order(self.pods), self.names, cluster_wide=self.cluster_wide,
                                       stack=self.stack, warnings=warnings, sick=sick, devices=devices,
                                       objects=objects)
        quotas = self.quotas
        if quotas is not None:
            snapshot.quotas = source.quotas_of(lambda: quotas.items(first=first), warnings)
            self._say_skipped(warnings)
        return snapshot

    def _say_skipped(self, warnings: Warnings) -> None:
        while self._skipped:
            warnings.add(self._skipped.popleft())

    def stop(self) -> None:
        for informer in (self.nodes, self.pods):
            informer.stop(timeout=0)
        for optional in self._optionals:
            optional.stop()


def watch(
    client: Client, options: dict[str, Any], render: Callable[[Snapshot, dict[str, Any]], str | None], *,
    unhealthy: bool = False,
) -> None:
    """Draw, then redraw on every change until Ctrl-C (which propagates as KeyboardInterrupt).

    Args:
        client: the API client.
        options: the inspect command's options.
        render: draws a snapshot (the one-shot inspect's renderer).
        unhealthy: the view marks unhealthy GPUs (`source.from_api` ``unhealthy``): follow their ConfigMaps.

    Raises:
        KubeError: a first list failed (a failure later is retried by the informers).
    """
    # The informers log each failed list or watch; here the STALE line says it, and a 404 or 403 on
    # a kind one-shot reads only where served and allowed is an answer (said once, as one-shot says it).
    logging.getLogger(informer_module.__name__).setLevel(logging.ERROR)
    changed = threading.Event()

    def mark(*_: object) -> None:
        changed.set()

    sources = _Sources(client, options, mark, unhealthy)
    said = _Said()
    live = None
    try:
        sources.start()
        first = True
        view = sources.snapshot(first=True)  # the first lists of the other kinds fail as a one-shot inspect's do
        if sys.stdout.isatty():
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            live = Live(console=Console(), auto_refresh=False)
            live.start()
        while True:
            for line in said.new(view.warnings):
                # names objects: one short line whatever they hold, as the one-shot views write it (command._run)
                sys.stderr.write(f"warning: {protocol.one_line(line)}\n")
            since = stale_since(sources.informers, time.time())
            text = (stale_line(since) if since is not None else "") + (render(view, options) or "")
            if live is not None:
                live.update(Text(text), refresh=True)
            else:
                sys.stdout.write(text if first else "\n" + text)
                sys.stdout.flush()
            first = False
            # Redraw on a change, and when the API server stops or starts answering again.
            while not _set_within(changed, 0.5) and (stale_since(sources.informers, time.time()) is None) == (
                    since is None):
                pass
            time.sleep(SETTLE)  # let a burst of changes (a bind writes several) land before drawing
            changed.clear()
            view = sources.snapshot(first=False)
    finally:
        if live is not None:
            live.stop()
        sources.stop()
