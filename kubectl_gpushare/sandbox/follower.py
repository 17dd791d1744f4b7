"""The loop the sandbox's controllers share: follow the store's change history on a thread.

A controller is level-triggered: it resyncs from what is stored when it starts and whenever its
cursor falls out of the history (``ExpiredError``), and otherwise handles each batch of changes it
cares about. Subclasses say which batches (`_wants`), and what a resync and a batch do.
"""

from __future__ import annotations

import logging
import threading

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.store import Change, ExpiredError, Store

log = logging.getLogger(__name__)


class StoreFollower:
    """Follows the store's changes on a thread named ``thread_name`` until `stop`."""

    thread_name = "sandbox-follower"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()

    def start(self) -> None:
        """Start following the store."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (wakes it through the store's condition)."""
        self._stop.set()
        with self.store.lock:
            self.store.changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        cursor = self.store.cursor_after(self.store.resource_version)
        self._resync()
        while not self._stop.is_set() and not self.store.closed:
            try:
                changes, cursor = self.store.changes_since(cursor, 1.0, self._stop)
            except ExpiredError:
                with self.store.lock:
                    cursor = self.store.cursor_after(self.store.resource_version)
                self._resync()
                continue
            if changes and self._wants(changes):
                try:
                    self._handle(changes)
                except Exception as exc:  # noqa: BLE001 - one object must not stop the controller for all
                    # As kube-controller-manager's controllers: a failed reconcile is logged and the
                    # loop goes on (client-go's runtime.HandleError; the workqueue retries the key).
                    # The batch's objects are reconciled again by the next change or resync.
                    self._warn_once(f"{type(exc).__name__}", f"{self.thread_name}: a batch of changes failed: "
                                    f"{protocol.error_reason(exc)}; "
                                    "going on")

    def _warn_once(self, key: str, message: str, logger: logging.Logger = log) -> None:
        """Log ``message`` the first time ``key`` is seen (one bad object warns once, not per batch)."""
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("%s", message)

    def _wants(self, changes: list[Change]) -> bool:
        """Whether this batch can concern the controller (a cheap check before `_handle`)."""
        return True

    def _resync(self) -> None:
        """Reconcile everything stored."""
        raise NotImplementedError

    def _handle(self, changes: list[Change]) -> None:
        """Reconcile what a batch of changes touched."""
        raise NotImplementedError
