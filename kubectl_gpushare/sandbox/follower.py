"""The loop the sandbox's controllers share: follow the store's change history on a thread.

A controller is level-triggered: it resyncs from what is stored when it starts and whenever its
cursor falls out of the history (``ExpiredError``), and otherwise handles each batch of changes it
cares about. Subclasses say which batches (`_wants`), and what a resync and a batch do.
"""

from __future__ import annotations

import threading

from kubectl_gpushare.sandbox.store import Change, ExpiredError, Store


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
                self._handle(changes)

    def _wants(self, changes: list[Change]) -> bool:
        """Whether this batch can concern the controller (a cheap check before `_handle`)."""
        return True

    def _resync(self) -> None:
        """Reconcile everything stored."""
        raise NotImplementedError

    def _handle(self, changes: list[Change]) -> None:
        """Reconcile what a batch of changes touched."""
        raise NotImplementedError
