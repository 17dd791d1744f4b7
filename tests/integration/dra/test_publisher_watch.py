"""The publisher's watch of its own ResourceSlices (`dra.publisher.SliceWatch`): a slice of ours that
someone else deletes or edits is repaired at once, not at the next periodic resync (here an hour away),
through dropped watches, 410 Gone and slices that do not decode; two publishers of one node (a
DaemonSet rolling update with maxSurge) end with one slice and stop writing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from dra_helpers import NODE, node_devices
from waiting import holds_for, wait_for

from kubectl_gpushare import dra_objects as wire
from kubectl_gpushare import protocol
from kubectl_gpushare.dra import slices
from kubectl_gpushare.dra.publisher import SlicePublisher, SliceWatch
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.faults import Fault
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NEVER = 3600.0
"""The periodic resync, out of every test's reach: only the watch can wake a sync in time."""
DEBOUNCE = 0.05


@dataclass
class Running:
    publisher: SlicePublisher
    devices: list[slices.Devices]
    wake: threading.Event

    @property
    def watch(self) -> SliceWatch:
        assert self.publisher.watch is not None
        return self.publisher.watch


@contextmanager
def _running(client: Client, spec: str = "1x16GiB") -> Iterator[Running]:
    """A publisher of NODE's slice running with its watch, resync an hour away; stopped after."""
    publisher = SlicePublisher(client, NODE)
    running = Running(publisher, [node_devices(spec)], threading.Event())
    stop = threading.Event()
    thread = threading.Thread(target=publisher.run, args=(stop, running.wake, lambda: running.devices[0]),
                              kwargs={"resync": NEVER, "debounce": DEBOUNCE}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: publisher.watch is not None and publisher.watch.informer.synced.is_set()
                 and publisher.current is not None, what="the first sync and the watch's first list")
        yield running
    finally:
        stop.set()
        running.wake.set()
        thread.join(10)
        assert not thread.is_alive()


def _ours(api: Client) -> list[wire.WireResourceSlice]:
    return [s for s in api.list(types.DRA_SLICES) if s.spec.node_name == NODE]


def _one_slice_with(api: Client, devices: slices.Devices) -> Callable[[], str | None]:
    def check() -> str | None:
        found = _ours(api)
        if len(found) == 1 and slices.comparable(found[0].spec.devices) == slices.comparable(devices):
            return found[0].metadata.name
        return None
    return check


def _republished(api: Client, running: Running, gone: str) -> Callable[[], bool]:
    """Whether one slice with the running publisher's devices is there again, another than ``gone``."""
    return lambda: _one_slice_with(api, running.devices[0])() not in (None, gone)


@pytest.fixture
def node(sandbox: Sandbox) -> None:
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])


@pytest.mark.usefixtures("node")
def test_a_slice_deleted_by_someone_else_is_published_again_at_once(api: Client) -> None:
    with _running(api) as running:
        (first,) = _ours(api)
        api.delete(types.DRA_SLICES, first.metadata.name)
        again = wait_for(_one_slice_with(api, running.devices[0]), timeout=30, what="the slice published again")
        assert again != first.metadata.name
        # Events of our own writes are not someone else's: the delete was one change, the create none.
        wait_for(lambda: running.watch.informer.get(again) is not None, what="the watch to see the new slice")
        assert running.watch.seen == 1


@pytest.mark.usefixtures("node")
def test_a_slice_edited_by_someone_else_is_written_back_at_once(api: Client) -> None:
    with _running(api, "2x16GiB") as running:
        (first,) = _ours(api)
        edited = msgspec.structs.replace(first, spec=msgspec.structs.replace(first.spec, devices=[]))
        api.replace(types.DRA_SLICES, first.metadata.name, edited)
        assert wait_for(_one_slice_with(api, running.devices[0]), timeout=30,
                        what="the devices written back") == first.metadata.name


@pytest.mark.usefixtures("node")
def test_the_watch_survives_dropped_connections(sandbox: Sandbox, api: Client) -> None:
    with _running(api) as running:
        for _ in range(2):
            wait_for(sandbox.open_watches, what="the watch to reach the server")
            sandbox.drop_watches()
            (current,) = _ours(api)
            api.delete(types.DRA_SLICES, current.metadata.name)
            wait_for(_republished(api, running, current.metadata.name), timeout=30,
                     what="the slice published again after the watch broke")


def test_the_watch_survives_410_gone_and_sees_what_changed_meanwhile(tmp_path: Path) -> None:
    with Sandbox(port=0, history=2) as sandbox:
        sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
        api = Client(load_config(str(sandbox.write_kubeconfig(tmp_path / "cfg"))), component="test")
        try:
            with _running(api) as running:
                wait_for(sandbox.open_watches, what="the watch to reach the server")
                blocker = sandbox.inject(method="GET", path=r"resourceslices.*watch=true", status=500)
                sandbox.drop_watches()
                wait_for(lambda: blocker.hits >= 1, what="the watch to be tried again")
                (current,) = _ours(api)
                api.delete(types.DRA_SLICES, current.metadata.name)
                for _ in range(4):  # push the watch's resourceVersion out of the short history
                    api.create("configmaps", {"metadata": {"generateName": "churn-"}}, "default")
                sandbox.clear_faults()
                wait_for(_republished(api, running, current.metadata.name), timeout=30,
                         what="the slice published again once the watch listed again")
                assert running.watch.informer.lists >= 2
        finally:
            api.close()


@pytest.mark.usefixtures("node")
def test_a_slice_that_does_not_decode_never_stops_the_watch(sandbox: Sandbox, api: Client) -> None:
    with _running(api) as running:
        (good,) = _ours(api)
        sandbox.load([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "garbled"},
                       "spec": {"driver": protocol.DRA_DRIVER, "nodeName": NODE, "devices": "garbage",
                                "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}}])
        # One event: the sync it wakes deletes the slice of ours that does not decode (never kept).
        wait_for(lambda: "garbled" not in [s["metadata"]["name"] for s in sandbox.objects("resourceslices")],
                 timeout=30, what="the undecodable slice deleted")
        assert running.watch.informer.undecodable >= 1
        api.delete(types.DRA_SLICES, good.metadata.name)
        wait_for(_republished(api, running, good.metadata.name), timeout=30,
                 what="the watch still working: the slice published again")


def _slice_body(api: Client, name: str, created: str, devices: slices.Devices) -> dict[str, object]:
    """A slice of ours as a publisher writes it, with ``name`` and ``creationTimestamp``."""
    owner = wire.WireOwnerReference(api_version="v1", kind="Node", name=NODE, uid=api.get_node(NODE).metadata.uid,
                                    controller=True)
    meta = wire.WireMeta(name=name, creation_timestamp=created, owner_references=[owner])
    body = msgspec.to_builtins(wire.WireResourceSlice(metadata=meta, spec=slices.spec(NODE, devices, 1)))
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **body}


@contextmanager
def _two(api: Client, spec_a: str, spec_b: str) -> Iterator[tuple[Running, Running]]:
    with _running(api, spec_a) as first, _running(api, spec_b) as second:
        yield first, second


@pytest.mark.usefixtures("node")
def test_two_publishers_of_one_node_keep_the_same_slice_and_stop_writing(sandbox: Sandbox, api: Client) -> None:
    # A rolling update with maxSurge: each instance may have created a slice before it saw the other's.
    # Both keep the same one, the one published longest (an update changes its resourceVersion,
    # which is opaque anyway, never its creationTimestamp or name), so neither deletes what the
    # other keeps; the other slice goes, and then nothing is written any more.
    prefix = protocol.dra_slice_generate_name(NODE)
    older, newer = f"{prefix}zzzzz", f"{prefix}aaaaa"
    sandbox.load([_slice_body(api, older, "2026-01-01T00:00:00Z", node_devices()),
                  _slice_body(api, newer, "2026-01-02T00:00:00Z", node_devices())])
    with _two(api, "1x16GiB", "1x16GiB") as (first, second):
        wait_for(lambda: [s.metadata.name for s in _ours(api)] == [older], timeout=30, what="one slice left")
        writes = first.publisher.writes + second.publisher.writes
        assert writes == 1, "one delete of the newer slice; the older one needed no write"
        holds_for(lambda: [s.metadata.name for s in _ours(api)] == [older]
                  and first.publisher.writes + second.publisher.writes == writes, 1.0, what="no more writes")


@pytest.mark.usefixtures("node")
def test_two_publishers_that_disagree_write_ever_more_slowly(api: Client) -> None:
    # Two instances with different devices rewrite each other's slice after each event; each sync
    # the watch woke that had to write doubles the next delay (debounce 0.05 s here). Without it
    # they would write about 40 times in two seconds.
    with _two(api, "1x16GiB", "2x16GiB") as (first, second):
        start = first.publisher.writes + second.publisher.writes
        holds_for(lambda: first.publisher.writes + second.publisher.writes - start <= 16, 2.0,
                  what="at most 16 writes in 2 s")
        assert max(first.watch.fights, second.watch.fights) >= 2
        assert len(_ours(api)) == 1


@pytest.mark.usefixtures("node")
def test_two_publishers_started_together_end_with_one_slice(api: Client) -> None:
    # Started at once, both may create a slice, each before it sees the other's: the watch sees the
    # other's create (made after its first list, or listed by the first sync), and one slice is left.
    stop, wakes = threading.Event(), [threading.Event(), threading.Event()]
    publishers = [SlicePublisher(api, NODE), SlicePublisher(api, NODE)]
    options = {"resync": NEVER, "debounce": DEBOUNCE}
    threads = [threading.Thread(target=p.run, args=(stop, wake, node_devices), kwargs=options, daemon=True)
               for p, wake in zip(publishers, wakes, strict=True)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: all(p.current is not None for p in publishers) and len(_ours(api)) == 1, timeout=30,
                 what="one slice, both publishers having synced")
        (kept,) = _ours(api)
        writes = sum(p.writes for p in publishers)
        holds_for(lambda: [s.metadata.uid for s in _ours(api)] == [kept.metadata.uid]
                  and sum(p.writes for p in publishers) == writes, 1.0, what="the one slice stays, no more writes")
    finally:
        stop.set()
        for wake in wakes:
            wake.set()
        for thread in threads:
            thread.join(10)


HANG = 4.0
"""Seconds the API server holds each write of a slice in the hang tests: longer than the event storm."""
STORM = 40 * DEBOUNCE
"""How long the storm of someone else's edits goes on while a sync hangs: 40 delays' worth."""


def _delay_threads(watch: SliceWatch) -> list[threading.Thread]:
    """Live threads that wait to wake a sync for ``watch``: a timer of its own per delay, or its one delay thread."""
    return [t for t in threading.enumerate() if t.is_alive() and (
        t.name == watch.thread_name
        or (isinstance(t, threading.Timer) and getattr(t.function, "__self__", None) is watch))]


def _edited(api: Client, sandbox: Sandbox, n: int) -> str:
    """Someone else empties our slice's devices and labels it ``n`` (straight into the store: no HTTP to hang)."""
    (current,) = _ours(api)
    body = msgspec.to_builtins(current)
    body["metadata"] = {**body["metadata"], "labels": {"edit": str(n)}}
    body["spec"]["devices"] = []
    sandbox.load([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **body}])
    stored = sandbox.get(types.DRA_SLICES.plural, None, current.metadata.name)
    assert stored is not None
    return str(stored["metadata"]["resourceVersion"])


def _seen_by(watch: SliceWatch, name: str, version: str) -> Callable[[], bool]:
    """Whether the watch has seen slice ``name`` at resourceVersion ``version``."""
    def check() -> bool:
        seen = watch.informer.get(name)
        return seen is not None and seen.metadata.resource_version == version
    return check


@contextmanager
def _hanging_slice_writes(sandbox: Sandbox) -> Iterator[list[Fault]]:
    """Every write of a ResourceSlice (create, update, delete) held `HANG` seconds by the API server."""
    faults = [sandbox.inject(method=verb, path=r"/resourceslices", latency=HANG) for verb in ("POST", "PUT", "DELETE")]
    try:
        yield faults
    finally:
        sandbox.clear_faults()


@pytest.mark.usefixtures("node")
def test_a_storm_of_events_while_a_sync_hangs_keeps_one_delay_thread_and_the_slice_is_repaired(
        sandbox: Sandbox, api: Client) -> None:
    # A sync in flight holds the publisher; each delay's end waits for it. One timer per delay left a
    # thread per delay (here up to 40) waiting for the one sync; now one delay thread waits, events
    # meanwhile only add to what it judges next, and no second write is sent while the first hangs.
    with _running(api) as running:
        with _hanging_slice_writes(sandbox) as faults:
            _edited(api, sandbox, 0)
            wait_for(lambda: sum(f.hits for f in faults) >= 1, timeout=30, what="the sync's write to hang")
            (name,) = [s.metadata.name for s in _ours(api)]
            most, n, start = 0, 0, time.monotonic()
            while time.monotonic() - start < STORM:  # the storm's length, not a wait: each edit waits on the watch
                n += 1
                wait_for(_seen_by(running.watch, name, _edited(api, sandbox, n)), what="the watch to see the edit")
                most = max(most, len(_delay_threads(running.watch)))
            assert most <= 1, f"{most} threads waiting to wake a sync"
            assert sum(f.hits for f in faults) == 1, "a second write while the first hangs"
        # Once the API answers, the slice holds our devices again.
        wait_for(_one_slice_with(api, running.devices[0]), timeout=60, what="the slice repaired")
        assert len(_delay_threads(running.watch)) <= 1


@pytest.mark.usefixtures("node")
def test_stop_while_a_sync_hangs_leaves_no_delay_thread_behind(sandbox: Sandbox, api: Client) -> None:
    with _running(api) as running, _hanging_slice_writes(sandbox) as faults:
        _edited(api, sandbox, 0)
        wait_for(lambda: sum(f.hits for f in faults) >= 1, timeout=30, what="the sync's write to hang")
        _edited(api, sandbox, 1)  # a change pending while the sync hangs
        watch = running.watch
    # `_running` stopped the publisher (its sync ended when the write's hold did).
    wait_for(lambda: not _delay_threads(watch), timeout=30, what="the delay thread to end")
    holds_for(lambda: not _delay_threads(watch), 5 * DEBOUNCE, what="no delay thread started after stop")
