"""The sandbox's object store: every object, the global resourceVersion and the watch history.

Owns concurrency and ordering: one re-entrant lock guards all state, every write bumps one global
resourceVersion, and a bounded history of change events feeds watches (a Condition wakes them).
Objects are kept as their encoded JSON bytes plus the few fields selectors read, so a list is a
join of cached bytes and 100,000 pods fit in a few hundred MB. Keys are kept sorted in etcd key
order (``namespace/name``, bytewise), as kube-apiserver lists them.

It knows nothing of HTTP, validation or the semantics of a verb: ``routes.py`` decides what to
write; the store records it.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from kubectl_gpushare.sandbox.resources import BY_KIND, BY_PLURAL, STORED, Resource
from kubectl_gpushare.sandbox.selectors import FieldSelector, LabelSelector, fields_match, labels_match

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


INDEXED_FIELDS: dict[str, tuple[str, ...]] = {"pods": ("spec.nodeName",)}
"""Field selectors answered from an index (a node's pods), as kube-apiserver's watch cache indexes them."""


class Entry:
    """One stored object: its JSON bytes and what selectors need, decoded once at write time."""

    __slots__ = ("raw", "labels", "fields")

    def __init__(self, raw: bytes, labels: dict[str, str], fields: dict[str, str]) -> None:
        self.raw = raw
        self.labels = labels
        self.fields = fields

    def object(self) -> dict[str, Any]:
        """A fresh, mutable copy of the object."""
        decoded: dict[str, Any] = _decode(self.raw)
        return decoded


@dataclass(frozen=True)
class Change:
    """One entry of the watch history."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    plural: str
    namespace: str
    entry: Entry
    previous: Entry | None = None
    """The object before a MODIFIED, so selector watches can turn it into ADDED or DELETED."""


class ExpiredError(Exception):
    """A resourceVersion older than the kept history was asked for (HTTP 410)."""


def object_key(namespace: str, name: str) -> str:
    """The store key: ``namespace/name`` for namespaced objects, ``name`` otherwise."""
    return f"{namespace}/{name}" if namespace else name


def make_entry(resource: Resource, obj: dict[str, Any]) -> Entry:
    """Encode ``obj`` and extract what selectors read."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return Entry(_encode(obj), dict(labels), resource.field_values(obj))


class Store:
    """Thread-safe, in-memory objects keyed by resource and ``namespace/name``.

    Args:
        history: how many change events to keep for watches; a watch or continue token from before
            the kept window gets 410 Expired, as after an etcd compaction.
    """

    def __init__(self, history: int = 10_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.history = max(history, 1)
        self._rv = 0
        self._objects: dict[str, dict[str, Entry]] = {r.plural: {} for r in STORED}
        self._keys: dict[str, list[str]] = {r.plural: [] for r in STORED}
        self._index: dict[str, dict[str, dict[str, set[str]]]] = {
            plural: {label: {} for label in labels} for plural, labels in INDEXED_FIELDS.items()
        }
        self._changes: list[Change] = []
        self._first_seq = 0
        self._compacted_rv = 0
        self.closed = False

    # --- reads -------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        return self._rv

    @property
    def compacted_rv(self) -> int:
        """Watches must start at or after this resourceVersion."""
        return self._compacted_rv

    def get(self, plural: str, key: str) -> Entry | None:
        """The entry at ``key``, or None."""
        return self._objects[plural].get(key)

    def count(self, plural: str) -> int:
        """How many objects of a resource are stored."""
        return len(self._objects[plural])

    def select(
        self,
        plural: str,
        namespace: str = "",
        labels: LabelSelector = (),
        fields: FieldSelector = (),
        limit: int = 0,
        after: str = "",
    ) -> tuple[list[Entry], int, str, int]:
        """List matching entries in key order.

        Args:
            plural: the resource.
            namespace: restrict to one namespace ("" for all).
            labels: label selector.
            fields: field selector.
            limit: at most this many (0 = all).
            after: start after this key (from a continue token).

        Returns:
            (entries, resourceVersion, last key returned if more remain else "", how many remain:
            -1 when unknown because a selector is set, as kube-apiserver leaves it out then).
        """
        with self.lock:
            objects = self._objects[plural]
            keys = self._keys[plural]
            if namespace:
                lo = bisect.bisect_left(keys, namespace + "/")
                hi = bisect.bisect_left(keys, namespace + "0")  # "0" sorts right after "/"
            else:
                lo, hi = 0, len(keys)
            if after:
                lo = max(lo, bisect.bisect_right(keys, after))
            indexed = self._indexed_keys(plural, fields)
            if indexed is not None:
                low_key = keys[lo] if lo < len(keys) else None
                high_key = keys[hi] if hi < len(keys) else None
                keys = sorted(
                    k for k in indexed if (low_key is None or k >= low_key) and (high_key is None or k < high_key)
                )
                lo, hi = 0, len(keys)
            found: list[Entry] = []
            last = ""
            index = lo
            for index in range(lo, hi):
                entry = objects[keys[index]]
                if labels and not labels_match(labels, entry.labels):
                    continue
                if fields and not fields_match(fields, entry.fields):
                    continue
                if limit and len(found) == limit:
                    remaining = -1 if (labels or fields) else hi - index
                    return found, self._rv, last, remaining
                found.append(entry)
                last = keys[index]
            return found, self._rv, "", 0

    def _indexed_keys(self, plural: str, fields: FieldSelector) -> set[str] | None:
        index = self._index.get(plural)
        if not index:
            return None
        for label, equal, value in fields:
            if equal and label in index:
                return index[label].get(value, set())
        return None

    def _reindex(self, plural: str, key: str, old: Entry | None, new: Entry | None) -> None:
        index = self._index.get(plural)
        if not index:
            return
        for label, by_value in index.items():
            if old is not None:
                bucket = by_value.get(old.fields.get(label, ""))
                if bucket is not None:
                    bucket.discard(key)
            if new is not None:
                by_value.setdefault(new.fields.get(label, ""), set()).add(key)

    def entries(self, plural: str) -> list[Entry]:
        """Every entry of a resource, in key order."""
        with self.lock:
            objects = self._objects[plural]
            return [objects[key] for key in self._keys[plural]]

    # --- writes ------------------------------------------------------------------------------
    def next_rv(self) -> int:
        """Reserve the next resourceVersion (call with the lock held, then `put` or `remove`)."""
        self._rv += 1
        return self._rv

    def put(self, plural: str, key: str, obj: dict[str, Any]) -> Entry:
        """Store ``obj`` at ``key`` with a new resourceVersion and record ADDED or MODIFIED.

        Stamps ``metadata.resourceVersion`` in ``obj`` itself.
        """
        resource = BY_PLURAL[plural]
        with self.lock:
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            entry = make_entry(resource, obj)
            objects = self._objects[plural]
            previous = objects.get(key)
            objects[key] = entry
            self._reindex(plural, key, previous, entry)
            if previous is None:
                bisect.insort(self._keys[plural], key)
            namespace = obj["metadata"].get("namespace", "")
            self._record(Change(rv, "ADDED" if previous is None else "MODIFIED", plural, namespace, entry, previous))
            return entry

    def remove(self, plural: str, key: str) -> Entry | None:
        """Delete the object at ``key``, recording DELETED with a fresh resourceVersion."""
        resource = BY_PLURAL[plural]
        with self.lock:
            previous = self._objects[plural].pop(key, None)
            if previous is None:
                return None
            keys = self._keys[plural]
            del keys[bisect.bisect_left(keys, key)]
            self._reindex(plural, key, previous, None)
            obj = previous.object()
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            entry = make_entry(resource, obj)
            self._record(Change(rv, "DELETED", plural, obj["metadata"].get("namespace", ""), entry))
            return entry

    def load(self, objects: Iterable[dict[str, Any]], *, keep_versions: bool = False) -> int:
        """Insert objects directly, bypassing HTTP and validation (seeding and restoring state).

        Objects replace any stored at the same key. A small load (at most half the watch history)
        is recorded like ordinary writes, so running watches see ADDED/MODIFIED events. A large
        one (or a restore) is bulk-inserted without events, like an etcd restore: the history is
        compacted, so running watches, watches from older resourceVersions and older continue
        tokens get 410 Expired and informers re-list. Every object is checked before any is
        stored, so a bad object loads nothing.

        Args:
            objects: dicts with ``kind`` and ``metadata.name``.
            keep_versions: keep each object's resourceVersion (restoring saved state); the global
                counter then continues after the highest one.

        Returns:
            How many objects were loaded.

        Raises:
            ValueError: an object has an unknown kind or no name (nothing is loaded).
        """
        from kubectl_gpushare.sandbox.objects import prepare_loaded

        prepared: list[tuple[Resource, dict[str, Any]]] = []
        for obj in objects:
            resource = BY_KIND.get(str(obj.get("kind", "")))
            if resource is None:
                raise ValueError(f"cannot load an object of kind {obj.get('kind')!r}")
            prepare_loaded(resource, obj)
            prepared.append((resource, obj))
        with self.lock:
            if not keep_versions and len(prepared) <= self.history // 2:
                for resource, obj in prepared:
                    meta = obj["metadata"]
                    self.put(resource.plural, object_key(meta.get("namespace", ""), meta["name"]), obj)
                return len(prepared)
            touched: set[str] = set()
            for resource, obj in prepared:
                meta = obj["metadata"]
                if keep_versions and str(meta.get("resourceVersion", "")).isdigit():
                    self._rv = max(self._rv, int(meta["resourceVersion"]))
                else:
                    meta["resourceVersion"] = str(self.next_rv())
                key = object_key(meta.get("namespace", ""), meta["name"])
                objects_of = self._objects[resource.plural]
                previous = objects_of.get(key)
                if previous is None:
                    self._keys[resource.plural].append(key)
                    touched.add(resource.plural)
                entry = make_entry(resource, obj)
                objects_of[key] = entry
                self._reindex(resource.plural, key, previous, entry)
            for plural in touched:
                self._keys[plural].sort()
            if prepared:
                self._compact_all()
        return len(prepared)

    def _compact_all(self) -> None:
        """Forget the whole history: every open watch and every older resourceVersion expires."""
        self._compacted_rv = self._rv
        self._first_seq += len(self._changes) + 1  # skip a position, so current cursors fall behind
        self._changes.clear()
        self.changed.notify_all()

    def set_resource_version(self, rv: int) -> None:
        """Continue counting from ``rv`` (restoring saved state)."""
        with self.lock:
            self._rv = max(self._rv, rv)
            self._compact_all()

    def _record(self, change: Change) -> None:
        self._changes.append(change)
        if len(self._changes) >= 2 * self.history:
            drop = len(self._changes) - self.history
            self._compacted_rv = self._changes[drop - 1].rv
            del self._changes[:drop]
            self._first_seq += drop
        self.changed.notify_all()

    # --- watch -------------------------------------------------------------------------------
    def caught_up(self, cursor: int) -> int | None:
        """The latest resourceVersion when a watcher at history position ``cursor`` has every change; else None.

        Read under the lock with the history's end, so a write that lands after the watcher's last wait
        is never announced (by a bookmark) before its event reaches that watcher.
        """
        with self.lock:
            return self._rv if cursor >= self._first_seq + len(self._changes) else None

    def wait_for(self, rv: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the store to reach resourceVersion ``rv``; whether it has.

        The watch cache's ``waitUntilFreshAndBlock`` (k8s.io/apiserver/pkg/storage/cacher/watch_cache.go):
        a write that lands during the wait ends it at once.
        """
        deadline = time.monotonic() + timeout
        with self.lock:
            while self._rv < rv and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            return self._rv >= rv

    def cursor_after(self, rv: int) -> int:
        """The history position of the first change after ``rv``.

        Raises:
            ExpiredError: ``rv`` is older than the kept history.
        """
        with self.lock:
            if rv < self._compacted_rv:
                raise ExpiredError(f"too old resource version: {rv} ({self._compacted_rv})")
            return self._first_seq + bisect.bisect_right(self._changes, rv, key=_change_rv)

    def changes_since(
        self, cursor: int, timeout: float, stop: threading.Event | None = None
    ) -> tuple[list[Change], int]:
        """Wait up to ``timeout`` s for changes at or after history position ``cursor``.

        Returns:
            (changes, next cursor); no changes when the wait timed out or the store closed.

        Raises:
            ExpiredError: the watcher fell so far behind that its changes left the history.
        """
        with self.lock:
            if cursor < self._first_seq:
                raise ExpiredError("the watch fell behind the kept history")
            end = self._first_seq + len(self._changes)
            if cursor >= end and not self.closed and not (stop and stop.is_set()):
                self.changed.wait(timeout)
                end = self._first_seq + len(self._changes)
                if cursor < self._first_seq:
                    raise ExpiredError("the watch fell behind the kept history")
            start = cursor - self._first_seq
            return self._changes[start : end - self._first_seq], end

    def close(self) -> None:
        """Wake every watcher so it can end (server shutdown)."""
        with self.lock:
            self.closed = True
            self.changed.notify_all()

    def iter_all(self) -> Iterator[tuple[Resource, Entry]]:
        """Every stored object (a consistent snapshot), for saving state."""
        with self.lock:
            snapshot = [(BY_PLURAL[p], self.entries(p)) for p in self._objects]
        for resource, entries in snapshot:
            for entry in entries:
                yield resource, entry


def _change_rv(change: Change) -> int:
    return change.rv
