"""Keep this node's ResourceSlice equal to its GPUs: create it, update it on change, delete strays.

The node's pool is one slice (`slices.spec`), named and versioned as k8s.io/dynamic-resource-allocation's
resourceslice controller does: ``generateName`` ``00000-<driver>-<node>-``, owned by the Node (so it
goes with the node), the pool generation kept across an update of the one slice and bumped when a
slice is created anew. Every `sync` reads this Node, lists the slices of this node and driver (field
selectors ``spec.nodeName`` and ``spec.driver``), keeps one whose name carries index 0 (of the highest
generation, the oldest: `_longest_published_first`, the same for every instance of the driver),
deletes the rest (with the UID and resourceVersion listed as preconditions, as the resourceslice
controller's ``removeSlices`` sends them: a slice re-created or changed since is not deleted blindly;
the 409 Conflict leaves it, and the sync is repeated soon, with backoff, reading it again, as the
controller requeues a failed sync rate-limited; an item listed with neither a UID nor a
resourceVersion is left alone, with one warning), and writes only if the devices or the owner
differ. Each listed item is ours only if its own driver and node say so (`dra_objects.slice_identity`,
read even from a slice that does not decode as a whole):
the selector is the API server's to honour, and a reply that ignored it must not make us delete
another driver's or node's slice. One that does not decode but is ours is deleted (it is never kept,
and each sync would otherwise publish another beside it); one whose driver, node or name cannot be
read at all is left alone, with one warning.

The owner is the Node's UID as read at that sync, not at start-up (the resourceslice controller looks
it up once): a Node deleted and registered again under its name has a new UID, and the garbage
collector deletes a dependent whose every owner is gone, an owner of another UID under the same name
included (kube-controller-manager ``garbagecollector.go``, ``isDangling``), so a slice naming the old
UID would be deleted again after each write. While the Node does not exist nothing is written
(`NodeGoneError`, retried as any error): a slice owned by no Node, or by a UID that is gone, would
not stay. The Node may also be registered again between the sync's read and its write: a sync that
wrote reads the Node again and updates the slice's owner while its UID changed, so the slice names
the Node that exists once the sync is done, not after the garbage collector and another sync.

Each sync's read of the Node serves two more ends. A ``refuse`` check the publisher is built with
sees every Node read: a reason from it ends publishing as `withdraw` does, in that sync (before it
writes anything, or, from the read after a write, deleting what it wrote; `refusal` tells why; the
DRA driver refuses a node where the device plugin advertises ``aliyun.com/gpu-mem``). And a Node
read just before by someone else (the driver's check at start) can be `offer`ed: the next sync
within `OFFER_SECONDS` uses it instead of reading again.

kubelet wipes a driver's slices 30 s after none of its instances is connected (1.34's
``DRAPluginManager``), and anyone may delete one, so `run` syncs on every change and every `resync`
seconds, backing off on errors. A create whose outcome is
unknown (a timeout, a 5xx; not one refused or never sent: `errors.did_not_happen`) may still land
after the next sync created the slice again: two slices for a pool published as one leave it
incomplete and invalid (a device name twice) to the scheduler (k8s.io/dynamic-resource-allocation
structured ``GatherPools``: ``IsIncomplete`` when the pool's slices are not ``resourceSliceCount``),
so no claim is allocated on the node. While
such a create can still land (`errors.API_REQUEST_TIMEOUT`), `run` syncs every `SETTLE_SECONDS`, and
the sync that sees the second slice deletes one (the one kept gets the current owner if it landed with
an older one). `withdraw` ends publishing for good: it and `sync` take one lock, so a sync in flight
finishes before withdraw lists (and its slice is deleted with the rest) and none writes after; while a
create of unknown outcome may still land, `run` deletes again every `SETTLE_SECONDS` before it returns.

A pool at generation 2^63-1, the int64 limit (someone else wrote it: we count from 1), cannot be
bumped: the resourceslice controller's ``generation++`` (``syncPool``) wraps to -2^63 in Go, which
the API server refuses (``pkg/apis/resource/validation``: ``pool.generation`` must not be
negative), so its sync fails once and the next one, its obsolete slices deleted, starts from 0. The
API lets a driver reset the generation "assuming that all ResourceSlices in a pool are updated to
match or deleted" (``ResourcePool.generation``), so the sync that deleted them all starts again at
1 itself, with one warning; while one of them is still there (a 409 on its delete) it creates
nothing, as a slice at generation 1 would be obsolete beside it and the scheduler would allocate
from the one left.

A slice the API server stored without ``allowMultipleAllocations`` or without device taints means
the DRAConsumableCapacity or DRADeviceTaints feature gate is off there: logged once, as an error
(without consumable capacity each claim gets a whole GPU), and with taints off unhealthy GPUs are
removed instead.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable

import msgspec

from kubectl_gpushare import dra_objects as wire
from kubectl_gpushare import protocol
from kubectl_gpushare.dra import slices
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import API_REQUEST_TIMEOUT, Conflict, KubeError, NotFound, did_not_happen
from kubectl_gpushare.kube.informer import Informer
from kubectl_gpushare.kube.lenient import Undecodable, key_of, object_meta

log = logging.getLogger(__name__)

RESYNC_SECONDS = 60.0
MAX_BACKOFF = 30.0
SETTLE_SECONDS = 1.0
"""Seconds between syncs while a create of unknown outcome may still land (see the module docstring)."""
OFFER_SECONDS = 1.0
"""How long a Node given to `SlicePublisher.offer` may serve a sync instead of a read of its own."""
OWNER_RECHECKS = 3
"""Reads of the Node after a write, each followed by an update while its UID changed (`SlicePublisher.sync`)."""
WITHDRAW_ROUNDS = 3
"""Lists and deletes `SlicePublisher.withdraw` makes while a slice changed between its list and its delete (409)."""
WATCH_DEBOUNCE_SECONDS = 1.0
"""Seconds from someone else's change to a slice of ours to the sync it wakes (`SliceWatch`; doubled in a fight)."""
WATCH_SYNC_SECONDS = 10.0
"""How long `SlicePublisher.run` waits for the watch's first list before its first sync (then syncs regardless)."""
MAX_OWN_WRITES = 64
"""Writes of ours remembered so that the watch does not take their events for someone else's."""
MAX_PENDING_CHANGES = 64
"""Changes one delay collects before the last stands for the rest (a flood: a sync is due whoever made it)."""
MAX_WARNED = 1024
"""Unreadable slices remembered as warned of; past that it starts over (a warning again, not unbounded growth)."""


def _longest_published_first(item: wire.WireResourceSlice) -> tuple[int, str, str]:
    """Which slice of index 0 a sync keeps: the highest generation, then the oldest, then the first by name.

    Every instance of the driver on a node (two during a rolling update with ``maxSurge``) must keep
    the same one at every sync, or each deletes what the other keeps: so the order uses only what a
    write never changes (creationTimestamp, name; RFC 3339 in UTC sorts as text), never the
    resourceVersion, which each update changes and which clients must not compare (API conventions:
    resourceVersion is opaque). The oldest is the one the scheduler has been allocating from.
    """
    return -item.spec.pool.generation, item.metadata.creation_timestamp or "~", item.metadata.name


class NodeGoneError(KubeError):
    """This node's Node object does not exist (deleted, not registered again yet): no slice is written."""


class SlicePublisher:
    """Publishes one node's slice through the API server."""

    def __init__(self, client: Client, node: str, refuse: Callable[[types.Node], str | None] | None = None) -> None:
        self.client = client
        self.node = node
        self.refuse = refuse
        """Judges each Node read: a reason ends publishing (see the module docstring)."""
        self.refusal: str | None = None
        """The reason ``refuse`` gave, once it gave one (`withdrawn` is set with it)."""
        self._offered: tuple[types.Node, float] | None = None
        self.current: wire.WireResourceSlice | None = None
        self.writes = 0
        self.dropped: set[str] = set()
        """Feature gates the API server showed it lacks (see the module docstring)."""
        self.withdrawn = False
        """Set by `withdraw`: nothing is published any more."""
        self.landing_until = 0.0
        """`time.monotonic` instant until which a create of unknown outcome may still land."""
        self.changed_under_us = False
        """Set by a sync whose delete met a 409 Conflict (the slice changed since listed): `run` syncs again soon."""
        self._unreadable_warned: set[str] = set()
        self._own: deque[tuple[str, str]] = deque(maxlen=MAX_OWN_WRITES)
        """(UID, resourceVersion) of each slice we wrote, (UID, "") of each we deleted: the watch skips their events."""
        self.watch: SliceWatch | None = None
        """The watch of our slices `run` keeps open (None before `run`, or when run without one)."""
        self._lock = threading.Lock()

    @property
    def selector(self) -> str:
        """The field selector of this node's and driver's slices (the list's and the watch's)."""
        return f"spec.nodeName={self.node},spec.driver={protocol.DRA_DRIVER}"

    def offer(self, node: types.Node, read_at: float) -> None:
        """A Node read elsewhere (before `run` starts), sent at `time.monotonic` ``read_at``.

        The next sync uses it if it comes within `OFFER_SECONDS` of that read, not of this call (work
        between the two must not make it older); a Node of another name is never used.
        """
        if node.metadata.name == self.node:
            self._offered = (node, read_at)

    def _read_node(self) -> types.Node | None:
        """This Node as it is now, None if it does not exist.

        Raises:
            UndecodableReply: the reply does not decode as a Node (one line, retried as any error, no traceback).
            KubeError: it could not be read.
        """
        offered, self._offered = self._offered, None
        if offered is not None and time.monotonic() - offered[1] <= OFFER_SECONDS:
            return offered[0]
        try:
            return self.client.get_node(self.node)
        except NotFound:
            return None

    def _owner(self, node: types.Node | None) -> wire.WireOwnerReference:
        """The Node, as read at this sync, as the slice's controlling owner (the resourceslice controller's reference).

        Raises:
            NodeGoneError: the Node does not exist, or has no UID to be owned by.
        """
        uid = node.metadata.uid if node is not None else ""
        if not uid:
            raise NodeGoneError(f"node {self.node} does not exist (deleted, not registered again yet) or has no "
                                "UID: no ResourceSlice is published until it does")
        return wire.WireOwnerReference(api_version="v1", kind="Node", name=self.node, uid=uid, controller=True)

    def _listed(self) -> tuple[list[wire.WireResourceSlice], list[wire.SliceIdentity]]:
        """Our slices on this node, and those of ours that do not decode (by `dra_objects.SliceIdentity`).

        Each item listed is ours only if its own ``spec.driver`` and ``spec.nodeName`` say so
        (`dra_objects.SliceIdentity.published_by`), read before the whole slice is decoded: the field
        selector is the API server's to honour, and a reply that ignored it must not make us keep,
        replace or delete another driver's or node's slice. An item whose identity cannot be read is
        left alone, with one warning per item; so is one with neither a UID nor a resourceVersion (no
        API server lists one): no precondition could tie a delete to it, which would remove whatever
        holds its name by then.
        """
        ours: list[wire.WireResourceSlice] = []
        undecodable: list[wire.SliceIdentity] = []
        for raw in self.client.list_raw(types.DRA_SLICES, field_selector=self.selector):
            who = wire.slice_identity(raw)
            if who is None:
                self._warn_unreadable(raw, "its name, namespace, driver or node cannot be read")
            elif not (who.uid or who.resource_version):
                self._warn_unreadable(raw, "it has neither a UID nor a resourceVersion to delete it by")
            elif who.published_by(protocol.DRA_DRIVER, self.node):
                try:
                    ours.append(wire.decode_wire(bytes(raw), wire.WireResourceSlice, "ResourceSlice"))
                except wire.InvalidObjectError:
                    undecodable.append(who)
        return ours, undecodable

    def _warn_unreadable(self, raw: msgspec.Raw, why: str) -> None:
        """Warn, once per item (by name and resourceVersion as far as readable), of a slice left alone."""
        namespace, name, version = object_meta(raw)
        key = f"{key_of(namespace, name)[:253]}@{version[:64]}"
        if key in self._unreadable_warned:
            return
        if len(self._unreadable_warned) >= MAX_WARNED:  # bounded: a hostile list may name a new item each time
            self._unreadable_warned.clear()
        self._unreadable_warned.add(key)
        what = f"ResourceSlice {protocol.printable(key_of(namespace, name), 253)}" if name else \
            "a ResourceSlice with unreadable metadata"
        log.warning("%s is listed under this node's and driver's selector, but %s: left alone", what, why)

    def sync(self, devices: slices.Devices) -> bool:
        """Make the API hold exactly one slice with ``devices``; True if anything was written.

        Once `withdraw` has run, nothing: False. A Node that ``refuse`` rejects withdraws here instead of writing.

        Raises:
            NodeGoneError: the Node does not exist: nothing was written (the caller retries).
            KubeError: the API server refused or could not be reached (the caller retries).
        """
        with self._lock:
            if self.withdrawn:
                return False
            self.changed_under_us = False
            return self._sync(devices)

    def _withdrawn_for(self, node: types.Node | None) -> int | None:
        """Put a Node just read to the ``refuse`` check: None if it passes, else withdraw; how many slices went."""
        refusal = self.refuse(node) if node is not None and self.refuse is not None else None
        if refusal is None:
            return None
        self.refusal = refusal
        try:
            return self._withdraw()
        except KubeError as exc:  # publishing has ended all the same; kubelet wipes what is left
            log.warning("cannot delete our ResourceSlice: %s", exc)
            return 0

    def _sync(self, devices: slices.Devices) -> bool:
        node = self._read_node()
        withdrawn = self._withdrawn_for(node)
        if withdrawn is not None:
            return withdrawn > 0
        owners = [self._owner(node)]
        existing, undecodable = self._listed()
        wrote = False
        for bad in undecodable:  # never compared, never kept: without this, each sync would add a slice beside it
            wrote |= self._delete_undecodable(bad)
        prefix = protocol.DRA_SLICE_INDEX + "-"
        generation = max((s.spec.pool.generation for s in existing), default=0)
        candidates = [s for s in existing if s.metadata.name.startswith(prefix) and s.spec.pool.name == self.node]
        keep = min(candidates, key=_longest_published_first, default=None)
        if keep is not None and keep.spec.pool.generation < generation:
            keep = None  # an older generation is obsolete, as the resourceslice controller has it
        for stale in existing:
            if keep is None or stale.metadata.uid != keep.metadata.uid:
                wrote |= self._delete(stale)
        if keep is None:
            if generation >= protocol.MAX_INT64:
                if self.changed_under_us:  # one of them is still there: a slice at generation 1 would be obsolete
                    return wrote
                log.warning("ResourceSlice pool %s was at generation %d, the int64 limit (written by someone else): "
                            "its slices are deleted and it starts again at generation 1", self.node, generation)
                generation = 0
            created = self._create(devices, generation + 1, owners)
            self._store(created, devices)
            self._owned_by_the_node_now(created, devices)
            return True
        current_pool = keep.spec.pool
        same_pool = (current_pool.name, current_pool.resource_slice_count) == (self.node, 1)
        same_owner = keep.metadata.owner_references == owners
        if same_pool and same_owner and slices.comparable(keep.spec.devices) == slices.comparable(devices):
            self.current = keep
            return wrote
        owner_now = "" if same_owner else f", its owner now node {self.node} of UID {owners[0].uid}"
        stored = self._update(keep, owners, slices.spec(self.node, devices, max(current_pool.generation, 1)), devices,
                              f"{len(devices)} device(s){owner_now}")
        self._owned_by_the_node_now(stored, devices)
        return True

    def _update(self, listed: wire.WireResourceSlice, owners: list[wire.WireOwnerReference], spec: wire.WireSliceSpec,
                devices: slices.Devices, why: str) -> wire.WireResourceSlice:
        """Write ``listed`` back with ``owners`` and ``spec`` (at its resourceVersion); log ``why``; `_store` it."""
        body = wire.WireResourceSlice(metadata=msgspec.structs.replace(listed.metadata, owner_references=owners),
                                      spec=spec)
        stored: wire.WireResourceSlice = self.client.replace(types.DRA_SLICES, listed.metadata.name, body)
        self.writes += 1
        log.info("updated ResourceSlice %s: %s", stored.metadata.name, why)
        self._store(stored, devices)
        return stored

    def _owned_by_the_node_now(self, written: wire.WireResourceSlice, devices: slices.Devices) -> None:
        """After a write naming the owner, read the Node again and give the slice its UID while it changed.

        The write named the Node as read before it; deleted and registered again in between (a new
        UID), it would leave a slice owned by a UID that is gone until the garbage collector deletes
        it and a later sync writes it again. The resourceslice controller looks the UID up once and
        never again (``resourceslicecontroller.go`` ``syncPool``); this reads it after each write, so
        the slice names the Node that exists once the write is done. Up to `OWNER_RECHECKS` times,
        then the next sync goes on; a Node gone now is left to that sync (nothing is written while
        it is gone, and the garbage collector deletes the slice). Each read is put to the ``refuse``
        check, as every Node read is: a device plugin that started meanwhile withdraws the slice now.

        Raises:
            KubeError: the Node could not be read, or the slice not updated (the caller retries).
        """
        for _ in range(OWNER_RECHECKS):
            try:
                node = self.client.get_node(self.node)
            except NotFound:
                return
            if self._withdrawn_for(node) is not None or not node.metadata.uid:
                return
            owners = [self._owner(node)]
            if written.metadata.owner_references == owners:
                return
            written = self._update(written, owners, written.spec, devices,
                                   f"node {self.node} was registered again (UID {owners[0].uid}) while it was written")

    def _create(self, devices: slices.Devices, generation: int,
                owners: list[wire.WireOwnerReference]) -> wire.WireResourceSlice:
        body = wire.WireResourceSlice(
            metadata=wire.WireMeta(generate_name=protocol.dra_slice_generate_name(self.node), owner_references=owners),
            spec=slices.spec(self.node, devices, generation),
        )
        try:
            stored: wire.WireResourceSlice = self.client.create(types.DRA_SLICES, body)
        except KubeError as exc:
            if not did_not_happen(exc):  # it may still land, beside the one the next sync creates
                self.landing_until = time.monotonic() + API_REQUEST_TIMEOUT
            raise
        self.writes += 1
        log.info("created ResourceSlice %s: %d device(s), pool generation %d", stored.metadata.name, len(devices),
                 generation)
        return stored

    def _delete(self, stale: wire.WireResourceSlice) -> bool:
        meta = stale.metadata
        if not self._delete_as_listed(meta.name, meta.uid, meta.resource_version):
            return False
        log.info("deleted stale ResourceSlice %s", meta.name)
        return True

    def _delete_undecodable(self, who: wire.SliceIdentity) -> bool:
        """Delete a slice of ours that does not decode as a whole (never compared, never kept)."""
        if not self._delete_as_listed(who.name, who.uid, who.resource_version):
            return False
        log.warning("deleted ResourceSlice %s: it does not decode as a ResourceSlice", who.name)
        return True

    def _delete_as_listed(self, name: str, uid: str, resource_version: str) -> bool:
        """Delete a slice `_listed` as ours, as it was listed: False if it is gone or no longer that object.

        The preconditions (UID and resourceVersion, those given; `_listed` leaves alone an item with
        neither) delete the object the list showed, not one that took its name or changed since (the
        resourceslice controller's ``removeSlices`` sends both). A 409 Conflict leaves it and sets
        `changed_under_us`: `run` syncs again soon, which reads it again and decides anew.
        """
        try:
            self._own.append((uid, ""))
            self.client.delete(types.DRA_SLICES, name, uid=uid or None, resource_version=resource_version or None)
        except NotFound:  # gone meanwhile: nothing to decide
            return False
        except Conflict:  # re-created or changed since it was listed: not deleted blindly, read again soon
            self.changed_under_us = True
            log.info("ResourceSlice %s changed since it was listed: not deleted; reading it again",
                     protocol.printable(name, 253))
            return False
        self.writes += 1
        return True

    def others(self, changes: list[tuple[str, str, str]]) -> list[str]:
        """The names of the changes (name, UID, resourceVersion; "" for a deletion) this publisher did not write.

        Waits for a sync in flight: its writes are recorded once it is done (a watch event of a
        create can arrive before the create's reply).
        """
        with self._lock:
            return [name for name, uid, version in changes if not uid or (uid, version) not in self._own]

    def _store(self, stored: wire.WireResourceSlice, desired: slices.Devices) -> None:
        self.current = stored
        self._own.append((stored.metadata.uid, stored.metadata.resource_version))
        for gate in slices.dropped_features(desired, stored.spec.devices):
            if gate not in self.dropped:
                self.dropped.add(gate)
                log.error("the API server dropped fields of our ResourceSlice: enable the %s feature gate%s", gate,
                          " (until then each claim gets a whole GPU)" if gate == "DRAConsumableCapacity" else
                          "; unhealthy GPUs are removed from the slice instead")

    def run(self, stop: threading.Event, wake: threading.Event, devices: Callable[[], slices.Devices],
            resync: float = RESYNC_SECONDS, *, watch: bool = True, debounce: float = WATCH_DEBOUNCE_SECONDS) -> None:
        """Sync now, on every ``wake`` and every ``resync`` seconds, until ``stop`` (set ``wake`` too) or `withdraw`.

        With ``watch``, a `SliceWatch` of our slices also wakes it, ``debounce`` seconds after someone
        else changed one (see `SliceWatch`).

        Withdrawn by a refusal while a create of unknown outcome may still land, it returns only once
        that create cannot land any more (or at ``stop``), deleting it if it does.

        An error is retried with backoff, never later than ``resync``: each sync's read of the Node is
        also the ``refuse`` check, which must come at least that often.
        """
        if watch:
            self.watch = SliceWatch(self, wake, debounce=debounce, longest=resync)
            self.watch.informer.start()
            # As the resourceslice controller waits for its informer: a slice created after the watch's
            # first list is an event, one created before it is in what the first sync lists.
            deadline = time.monotonic() + WATCH_SYNC_SECONDS
            while not self.watch.informer.wait_synced(0.1) and not stop.is_set() and time.monotonic() < deadline:
                pass
        try:
            self._run(stop, wake, devices, resync)
        finally:
            if self.watch is not None:
                self.watch.stop()

    def _run(self, stop: threading.Event, wake: threading.Event, devices: Callable[[], slices.Devices],
             resync: float) -> None:
        backoff = 0.5
        while not stop.is_set() and not self.withdrawn:
            wake.clear()
            by_watch = self.watch is not None and self.watch.take()
            retry = True  # an error, or a 409: as the resourceslice controller requeues a failed sync, rate-limited
            try:
                wrote = self.sync(devices())
                if self.watch is not None:
                    self.watch.settled(by_watch, wrote)
                retry = self.changed_under_us
            except KubeError as exc:
                log.warning("publishing the ResourceSlice failed, retrying in %.1fs: %s", min(backoff, resync), exc)
            except Exception:  # a bug must not end publishing for good
                log.exception("publishing the ResourceSlice failed unexpectedly")
            if retry:
                wait, backoff = min(backoff, resync), min(backoff * 2, MAX_BACKOFF)
            else:
                backoff = 0.5
                wait = resync if time.monotonic() >= self.landing_until else min(resync, SETTLE_SECONDS)
            if not self.withdrawn:  # refused in this sync: done now, not after the wait
                wake.wait(wait)
        self._sweep_late_creates(stop)

    def _sweep_late_creates(self, stop: threading.Event) -> None:
        """Once withdrawn, delete again every `SETTLE_SECONDS` while a create of unknown outcome may still land.

        The withdrawal deleted what it listed; a create sent before it, whose reply was lost, can land
        later (until `landing_until`) and would sell the GPUs the driver gave up. ``stop`` ends it early.
        """
        while self.withdrawn and time.monotonic() < self.landing_until and not stop.wait(SETTLE_SECONDS):
            try:
                if self.withdraw():
                    log.info("deleted a ResourceSlice whose create landed after publishing was withdrawn")
            except KubeError as exc:
                log.warning("cannot delete our ResourceSlice: %s", exc)

    def withdraw(self) -> int:
        """Stop publishing for good and delete every slice of this node and driver; how many were deleted.

        For a node that turned out to be the device plugin's. A `sync` in flight finishes first, and
        none writes afterwards, so no slice of ours is left when this returns (a create whose reply was
        lost earlier could still land: `run` deletes again until it cannot).

        Raises:
            KubeError: the slices could not be listed or deleted (publishing stays stopped).
        """
        with self._lock:
            return self._withdraw()

    def _withdraw(self) -> int:
        """Delete every slice listed; one that changed since it was listed (409) is listed and deleted again."""
        self.withdrawn = True
        deleted = 0
        for _ in range(WITHDRAW_ROUNDS):
            self.changed_under_us = False
            readable, undecodable = self._listed()
            deleted += sum(self._delete(s) for s in readable) + sum(self._delete_undecodable(b) for b in undecodable)
            if not self.changed_under_us:
                break
        return deleted


class SliceWatch:
    """Wakes the publisher soon after someone else adds, changes or deletes a slice of this node and driver.

    Without it, a slice of ours deleted or edited by someone else (an operator, another instance of
    the driver during a rolling update, kubelet wiping a deregistered driver's slices) is repaired at
    the next periodic sync only. The resourceslice controller watches the same slices (field
    selectors ``spec.nodeName`` and ``spec.driver``, its ``initInformer``) and syncs the pool again
    after each event, delayed (its ``SyncDelay``, 30 s by default, so that its informer cache has
    caught up). Here each sync lists afresh, so no cache must catch up: the delay is `debounce`
    (events in it coalesce into one sync, scheduled by the first: a stream of events cannot
    postpone it for ever). One thread of the watch's own (`thread_name`) waits out the delays, one
    at a time, whatever the API does: a delay's end waits for a sync in flight
    (`SlicePublisher.others`), which a slow or hanging API server holds up to its request timeout,
    and events meanwhile only add to the changes judged at the end of the next delay; a timer per
    delay would leave one thread per delay waiting for that sync.

    The watch is `kube.informer.Informer`: it resumes a dropped stream, lists again after 410 Gone
    (a change missed meanwhile arrives as the reconciling add, update or delete), backs off on errors,
    and a slice that does not decode is one event (wakes a sync, which deletes it if it is ours),
    never the end of the watch. Events of the first list are not changes: `SlicePublisher.run` waits
    for that list (up to `WATCH_SYNC_SECONDS`) before its first sync, which reads at least as much;
    events of this publisher's own writes (`SlicePublisher.others`) wake nothing.

    Two writers that disagree (two instances of the driver with different devices during a rolling
    update) would rewrite each other's slice after every event: each sync woken by the watch that
    had to write doubles the next delay (`fights`), up to the periodic resync; a sync with nothing to
    write sets it back. So a disagreement costs a write per instance per ``longest`` seconds at most,
    as it did without the watch.
    """

    def __init__(self, publisher: SlicePublisher, wake: threading.Event, *, debounce: float = WATCH_DEBOUNCE_SECONDS,
                 longest: float = RESYNC_SECONDS) -> None:
        self.publisher = publisher
        self.wake = wake
        self.debounce = debounce
        self.longest = longest
        self.fights = 0
        """Syncs in a row that the watch woke and that had to write (see the class docstring)."""
        self.seen = 0
        """Changes by someone else seen (tests wait on it)."""
        self.informer: Informer[wire.WireResourceSlice] = Informer(
            publisher.client, types.DRA_SLICES, field_selector=publisher.selector, on_add=self._changed,
            on_update=self._updated, on_delete=self._deleted, on_undecodable=self._undecodable,
            name=f"resourceslices-{publisher.node}"[:96],
        )
        self._fired = threading.Event()
        self._pending: list[tuple[str, str, str]] = []
        """Changes seen since the delay started: name, UID ("" where unknown), resourceVersion ("": deleted)."""
        self._lock = threading.Lock()
        self._changes = threading.Condition(self._lock)
        """Notified when a change is pending or the watch stops (`_delays` waits on it)."""
        self._stopping = threading.Event()
        self._delayer: threading.Thread | None = None
        """The one thread that waits out the delays (`_delays`), started at the first change."""

    @property
    def thread_name(self) -> str:
        """The name of the one thread that waits out the delays and wakes the publisher."""
        return f"{self.informer.name}-delay"

    @property
    def delay(self) -> float:
        """Seconds from a change seen to the sync it wakes."""
        return min(math.ldexp(self.debounce, min(self.fights, 32)), self.longest)

    def take(self) -> bool:
        """Whether the watch woke the sync about to run (and forget it)."""
        fired = self._fired.is_set()
        self._fired.clear()
        return fired

    def settled(self, by_watch: bool, wrote: bool) -> None:
        """A sync is done: count a write the watch woke it for, start over after one with nothing to write."""
        if not wrote:
            self.fights = 0
        elif by_watch:
            self.fights += 1

    def stop(self) -> None:
        """Close the watch and drop a pending wake (the delay thread ends, once a sync it waits for is done)."""
        self.informer.stop()
        self._stopping.set()
        with self._changes:
            self._changes.notify()

    def _mine(self, item: wire.WireResourceSlice) -> bool:
        spec = item.spec
        return spec.driver == protocol.DRA_DRIVER and spec.node_name == self.publisher.node

    def _changed(self, item: wire.WireResourceSlice) -> None:
        if self._mine(item):
            self._schedule(item.metadata.name, item.metadata.uid, item.metadata.resource_version)

    def _updated(self, old: wire.WireResourceSlice, new: wire.WireResourceSlice) -> None:
        if self._mine(old) and not self._mine(new):  # moved away from us: a change to our pool all the same
            self._schedule(new.metadata.name, "", new.metadata.resource_version)
        else:
            self._changed(new)

    def _deleted(self, item: wire.WireResourceSlice) -> None:
        if self._mine(item):
            self._schedule(item.metadata.name, item.metadata.uid, "")

    def _undecodable(self, item: Undecodable) -> None:
        self._schedule(item.key or "?", "", item.resource_version)

    def _schedule(self, name: str, uid: str, version: str) -> None:
        """Note a change; the first one pending starts the delay, at whose end `_fire` judges them all."""
        if not self.informer.synced.is_set():  # the first list: the state the first sync read, not a change
            return
        with self._changes:
            if len(self._pending) < MAX_PENDING_CHANGES:
                self._pending.append((name, uid, version))
            else:  # a flood within one delay: a sync is due whoever made it (no UID: never taken for ours)
                self._pending[-1] = (name, "", version)
            if self._stopping.is_set():
                return
            if self._delayer is None:
                self._delayer = threading.Thread(target=self._delays, name=self.thread_name, daemon=True)
                self._delayer.start()
            self._changes.notify()

    def _delays(self) -> None:
        """The delay thread: for each change pending, wait `delay`, then judge every change pending (`_fire`)."""
        while True:
            with self._changes:
                while not self._pending and not self._stopping.is_set():
                    self._changes.wait()
            if self._stopping.wait(self.delay):  # stopped: no wake is due any more
                return
            try:
                self._fire()
            except Exception:  # a bug must not end the watch's wakes for good
                log.exception("judging changes to our ResourceSlices failed unexpectedly")

    def _fire(self) -> None:
        """The delay is over: wake the publisher if someone else made any of the changes pending.

        Waits for a sync in flight (`SlicePublisher.others`); changes seen meanwhile are judged at
        the end of the next delay.
        """
        with self._lock:
            pending, self._pending = self._pending, []
        others = self.publisher.others(pending)
        if not others:
            return
        self.seen += len(others)
        log.info("ResourceSlice %s%s changed by someone else: syncing now", protocol.printable(others[0], 253),
                 f" (and {len(others) - 1} more)" if len(others) > 1 else "")
        self._fired.set()
        self.wake.set()
