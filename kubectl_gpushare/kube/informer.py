"""A list-and-watch cache of one resource kind, on a thread, with typed callbacks.

The shape of client-go's reflector plus informer, reduced to what the extender and the device
plugin need: list (paginated, one consistent snapshot), then watch from the list's resourceVersion;
on a dropped stream resume from the last version seen; on 410 Expired list again and emit the
adds, updates and deletes that reconcile the cache with the new list (so nothing that vanished
while the watch was down is kept); back off with jitter on errors. `Informer.synced` is set once
the first list has been delivered; `Informer.relist` forces the same reconciliation on demand.

One object that does not decode as its kind (`kube.lenient.Undecodable`) never stops the informer:
in a list or a watch event it is reported once per resourceVersion to ``on_undecodable`` (logged
by default), the cache keeps the last copy of that object that did decode (none if it never did),
and a deletion of it is still honoured. `Informer.stale_for` says how long the cache has not been
known to be current (list or watch failing), for readiness checks.

Differences from client-go, on purpose: no periodic resync (a re-list happens only when needed),
updates are emitted only when the resourceVersion changed, and objects are keyed by
``namespace/name`` (a re-created object arrives as an update whose uid changed).

This module owns the cache and its thread. Callbacks run on that thread, one at a time, and must
not block for long; an exception in a callback is logged and does not stop the informer.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Final, Generic

from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import Expired, KubeError
from kubectl_gpushare.kube.lenient import Undecodable
from kubectl_gpushare.kube.retry import RetryPolicy, backoff_delay
from kubectl_gpushare.kube.types import ItemT, Kind, KubeObject
from kubectl_gpushare.kube.watch import UndecodableEventError, Watch

log = logging.getLogger(__name__)

ERROR_BACKOFF: Final = RetryPolicy(attempts=1_000_000, base=0.5, cap=30.0, jitter=0.5, deadline=None)
"""Delays between failed list or watch attempts: 0.5 s doubling to 30 s, reset after a success."""
_REPORTED_LIMIT: Final = 10_000
"""How many (key, resourceVersion) pairs of undecodable objects are remembered to report each once."""


def _ignore(_message: str) -> None:
    pass


def object_key(obj: KubeObject) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), as client-go keys its caches."""
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


class Informer(Generic[ItemT]):
    """Keep a local copy of one kind in sync and report every change.

    Args:
        client: the API client (shared; it is thread-safe).
        kind: what to watch, e.g. `kube.types.PODS`.
        namespace: one namespace, or None for all.
        field_selector: e.g. ``spec.nodeName=<node>`` (the device plugin's pods).
        label_selector: e.g. ``gpushare=true``.
        on_add: called with each new object.
        on_update: called with (old, new) when an object's resourceVersion changed.
        on_delete: called with the last known state of a removed object.
        on_undecodable: called once per key and resourceVersion with an object that does not
            decode as the kind; None logs a warning instead.
        page_size: items per list page.
        watch_timeout: seconds after which the server ends each watch (it is then resumed);
            jittered up to +50% so many informers do not reconnect together.
        name: names the thread and log lines.

    Example:
        >>> pods = Informer(client, types.PODS, field_selector="spec.nodeName=n1",
        ...                 on_add=print).start()  # doctest: +SKIP
        >>> pods.wait_synced(10)  # doctest: +SKIP
    """

    def __init__(
        self,
        client: Client,
        kind: Kind[ItemT],
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        on_add: Callable[[ItemT], object] | None = None,
        on_update: Callable[[ItemT, ItemT], object] | None = None,
        on_delete: Callable[[ItemT], object] | None = None,
        on_undecodable: Callable[[Undecodable], object] | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        name: str | None = None,
    ) -> None:
        self.client = client
        self.kind: Kind[ItemT] = kind
        self.namespace = namespace
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.on_add: Callable[[ItemT], object] | None = on_add
        self.on_update: Callable[[ItemT, ItemT], object] | None = on_update
        self.on_delete: Callable[[ItemT], object] | None = on_delete
        self.on_undecodable: Callable[[Undecodable], object] = on_undecodable or self._log_undecodable
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.name = name or f"informer-{kind.plural}"
        self.synced = threading.Event()
        """Set once the first full list has been delivered to the callbacks."""
        self.lists = 0
        """How many full lists were made (1 + re-lists after 410 or errors): for tests and metrics."""
        self.last_error: KubeError | None = None
        self.undecodable = 0
        """How many distinct (key, resourceVersion) objects did not decode: for tests and metrics."""
        self._reported: set[tuple[str, str]] = set()
        self._failing_since: float | None = None
        self._store: dict[str, ItemT] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch: Watch[ItemT] | None = None
        self._thread: threading.Thread | None = None
        self._resource_version = ""
        self._relist_requested = threading.Event()
        self._wake = threading.Event()
        self._relist_waiters: list[threading.Event] = []

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> Informer[ItemT]:
        """Start the background thread (once) and return self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread: closes the open watch and waits up to ``timeout`` seconds."""
        self._stop.set()
        self._wake.set()
        watch = self._watch
        if watch is not None:
            watch.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def relist(self, timeout: float | None = None) -> bool:
        """List from scratch now and reconcile the cache, as after a 410.

        Objects the fresh list lacks are reported to ``on_delete``, changed ones to ``on_update``,
        new ones to ``on_add`` (e.g. to catch up after winning leader election).

        Args:
            timeout: seconds to wait for the list to be delivered; None waits as long as it takes.

        Returns:
            True once a list that started after this call has been delivered; False on timeout
            or when the informer stops first. A list that fails is retried (with back-off) until
            one is delivered.
        """
        done = threading.Event()
        with self._lock:
            self._relist_waiters.append(done)
            self._relist_requested.set()
        self._wake.set()
        watch = self._watch
        if watch is not None:
            watch.close()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic()))):
            if self._stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                return done.is_set()
        return True

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until the first list is delivered; False on timeout."""
        return self.synced.wait(timeout)

    def __enter__(self) -> Informer[ItemT]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def watching(self) -> bool:
        """Whether a watch stream is open right now (False while listing or backing off)."""
        return self._watch is not None

    def stale_for(self) -> float:
        """Seconds since list or watch started failing without a success since; 0.0 while current.

        An informer that has not listed yet is stale from its start.
        """
        since = self._failing_since
        return 0.0 if since is None else time.monotonic() - since

    @property
    def running(self) -> bool:
        """Whether the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    # --- the cache -------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self._resource_version

    def get(self, key: str) -> ItemT | None:
        """The cached object with ``namespace/name`` (or ``name``) key, or None."""
        with self._lock:
            return self._store.get(key)

    def items(self) -> list[ItemT]:
        """A snapshot of every cached object."""
        with self._lock:
            return list(self._store.values())

    def keys(self) -> list[str]:
        """A snapshot of every cached key."""
        with self._lock:
            return list(self._store)

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    # --- the loop --------------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        need_list = True
        self._failing_since = time.monotonic()
        while not self._stop.is_set():
            try:
                if need_list or self._relist_requested.is_set():
                    self._list()
                    need_list = False
                started = time.monotonic()
                if self._watch_once() or time.monotonic() - started > 1.0 or self._relist_requested.is_set():
                    failures = 0
                else:
                    # The server ended an empty watch at once: do not spin on it.
                    failures += 1
                    self._pause(backoff_delay(failures, ERROR_BACKOFF))
            except Expired as error:
                log.info("%s: %s; listing again", self.name, error)
                need_list = True
            except UndecodableEventError as error:
                self._failing()
                self.last_error = error
                failures += 1
                delay = backoff_delay(failures, ERROR_BACKOFF)
                log.warning("%s: %s; listing again in %.1fs", self.name, error, delay)
                need_list = True
                self._pause(delay)
            except KubeError as error:
                self._failing()
                self.last_error = error
                failures += 1
                delay = backoff_delay(failures, ERROR_BACKOFF, error)
                log.warning("%s: %s; retrying in %.1fs", self.name, error, delay)
                self._pause(delay)
            except Exception:  # a bug must not silently kill a daemon's cache
                self._failing()
                failures += 1
                log.exception("%s: unexpected error; listing again", self.name)
                need_list = True
                self._pause(backoff_delay(failures, ERROR_BACKOFF))

    def _failing(self) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()

    def _log_undecodable(self, item: Undecodable) -> None:
        log.warning("%s: %s %s (resourceVersion %s) does not decode; keeping its last good copy: %s",
                    self.name, item.kind, item.key or "?", item.resource_version or "?", item.error)

    def _report(self, item: Undecodable) -> None:
        """Pass an undecodable object on once per key and version (a watch resumed past it repeats it)."""
        seen = (item.key, item.resource_version)
        if seen in self._reported:
            return
        if len(self._reported) >= _REPORTED_LIMIT:
            self._reported.clear()
        self._reported.add(seen)
        self.undecodable += 1
        self._emit(self.on_undecodable, item)

    def _pause(self, seconds: float) -> None:
        """Back off, but wake at once for `stop` or `relist`."""
        self._wake.wait(seconds)
        if not self._stop.is_set():
            self._wake.clear()

    def _list(self) -> None:
        # The waiters are answered only once this list is delivered; if it fails they stay queued
        # (and the request stays set) for the next attempt.
        with self._lock:
            self._relist_requested.clear()
            if not self._stop.is_set():
                self._wake.clear()
            waiters = list(self._relist_waiters)
        bad: list[Undecodable] = []
        try:
            items, version = self.client.list_all(
                self.kind,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                page_size=self.page_size,
                on_skip=_ignore,  # reported once per version by `_report` instead
                on_undecodable=bad.append,
            )
        except BaseException:
            if waiters:
                self._relist_requested.set()
            raise
        if self._stop.is_set():
            return
        self.lists += 1
        fresh: dict[str, ItemT] = {object_key(item): item for item in items}
        with self._lock:
            for undecodable in bad:  # keep the last copy that decoded, if any
                key = undecodable.key
                if key and key not in fresh and key in self._store:
                    fresh[key] = self._store[key]
            old, self._store = self._store, fresh
            self._relist_waiters = [w for w in self._relist_waiters if w not in waiters]
        self._failing_since = None
        for undecodable in bad:
            self._report(undecodable)
        self._resource_version = version
        for key, item in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._emit(self.on_add, item)
            elif previous.metadata.resource_version != item.metadata.resource_version:
                self._emit(self.on_update, previous, item)
        for key, gone in old.items():
            if key not in fresh:
                self._emit(self.on_delete, gone)
        self.synced.set()
        for waiter in waiters:
            waiter.set()

    def _watch_once(self) -> int:
        """Watch until the stream ends; returns how many events arrived."""
        timeout = int(self.watch_timeout * (1 + random.random() / 2))
        watch = self.client.watch(
            self.kind,
            self._resource_version,
            namespace=self.namespace,
            field_selector=self.field_selector,
            label_selector=self.label_selector,
            timeout_seconds=timeout,
        )
        self._watch = watch
        self._failing_since = None
        count = 0
        try:
            # Checked after publishing the watch, so a concurrent stop() or relist() either sees it
            # (and closes it) or is seen here.
            if self._stop.is_set() or self._relist_requested.is_set():
                return count
            for event in watch:
                count += 1
                self._apply(event)
                if self._stop.is_set() or self._relist_requested.is_set():
                    break
            return count
        finally:
            self._watch = None
            watch.close()

    def _apply(self, event: types.WatchEvent[ItemT] | types.WatchEvent[Undecodable]) -> None:
        obj = event.object
        if isinstance(obj, Undecodable):
            self._apply_undecodable(event.type, obj)
            return
        version = obj.metadata.resource_version
        if event.type == "BOOKMARK":
            if version:
                self._resource_version = version
            return
        key = object_key(obj)
        if event.type in ("ADDED", "MODIFIED"):
            with self._lock:
                previous = self._store.get(key)
                self._store[key] = obj
            if previous is None:
                self._emit(self.on_add, obj)
            elif previous.metadata.resource_version != version:
                self._emit(self.on_update, previous, obj)
        elif event.type == "DELETED":
            with self._lock:
                previous = self._store.pop(key, None)
            if previous is not None:
                self._emit(self.on_delete, obj)
        if version:
            self._resource_version = version

    def _apply_undecodable(self, event_type: str, item: Undecodable) -> None:
        """Keep the last good copy of an object that no longer decodes; honour its deletion."""
        if event_type == "DELETED" and item.key:
            with self._lock:
                previous = self._store.pop(item.key, None)
            if previous is not None:
                self._emit(self.on_delete, previous)
        elif event_type != "BOOKMARK":
            self._report(item)
        if item.resource_version:
            self._resource_version = item.resource_version

    def _emit(self, callback: Callable[..., object] | None, *args: object) -> None:
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            log.exception("%s: callback %s failed", self.name, getattr(callback, "__name__", callback))


def node_pods(
    client: Client,
    node: str,
    *,
    on_add: Callable[[types.Pod], object] | None = None,
    on_update: Callable[[types.Pod, types.Pod], object] | None = None,
    on_delete: Callable[[types.Pod], object] | None = None,
    name: str | None = None,
) -> Informer[types.Pod]:
    """The pods bound to one node (``fieldSelector=spec.nodeName=<node>``), as a node agent watches them.

    Every phase is included (a caller that wants only active pods filters them): an informer whose
    selector also named the phase would see a pod that finishes as deleted. The API server indexes
    pods by ``spec.nodeName`` in its watch cache (``pkg/registry/core/pod/strategy.go``,
    ``NodeNameTriggerFunc``), so a node's watch costs it the node's pods, not the cluster's: kubelet
    watches its pods the same way. Not started: call `Informer.start`.
    """
    return Informer(client, types.PODS, field_selector=f"spec.nodeName={node}", on_add=on_add,
                    on_update=on_update, on_delete=on_delete, name=name or f"pods-{node}")


__all__ = ["ERROR_BACKOFF", "Informer", "node_pods", "object_key"]
