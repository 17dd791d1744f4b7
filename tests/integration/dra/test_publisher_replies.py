"""The slice publisher (and the driver's start-up check) against Node replies the sandbox does not serve
(a relay rewrites them), and a create of unknown outcome that lands with the Node's old UID as owner."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
from api_relay import Reply, relay
from dra_helpers import NODE, Dirs, node_devices
from tcp_gate import TcpGate
from waiting import wait_for

from kubectl_gpushare import dra_objects as wire
from kubectl_gpushare import protocol
from kubectl_gpushare.dra import slices
from kubectl_gpushare.dra.daemon import Config, DaemonError, device_plugin_refusal, serve
from kubectl_gpushare.dra.publisher import OFFER_SECONDS, NodeGoneError, SlicePublisher
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.errors import EXIT_API, UndecodableReply, Unreachable
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NODE_PATH = f"/api/v1/nodes/{NODE}"


def _node(**meta: object) -> bytes:
    return msgspec.json.encode({"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE, **meta}})


@pytest.fixture
def node_reply(sandbox: Sandbox, kubeconfig: Path) -> Iterator[tuple[Client, list[bytes]]]:
    """A client whose GETs of NODE are answered with the last body in the list (the sandbox's while it is empty)."""
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    bodies: list[bytes] = []

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        return bodies[-1] if bodies and method == "GET" and path.split("?")[0] == NODE_PATH else None

    with relay(sandbox, rewrite) as port:
        client = Client(dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}"),
                        component="test-publisher", retry=None)
        try:
            yield client, bodies
        finally:
            client.close()


@pytest.mark.parametrize("body", [
    _node(uid=5), _node(uid={"a": 1}), b"<html>", b'{"kind":"Node","metadata":{"name":"n","uid":"\xff\xfe"}}',
], ids=["uid-int", "uid-object", "not-json", "not-utf8"])
def test_a_node_that_does_not_decode_is_a_one_line_error_and_nothing_is_written(
    node_reply: tuple[Client, list[bytes]], sandbox: Sandbox, body: bytes, caplog: pytest.LogCaptureFixture,
) -> None:
    client, bodies = node_reply
    bodies.append(body)
    publisher = SlicePublisher(client, NODE)
    with pytest.raises(UndecodableReply, match=f"node {NODE} does not decode as a v1.Node"):
        publisher.sync(node_devices())
    # run retries it as any API error: a warning a try, no traceback.
    stop, wake = threading.Event(), threading.Event()
    runner = threading.Thread(target=publisher.run, args=(stop, wake, node_devices, 0.1), kwargs={"watch": False})
    with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
        runner.start()
        try:
            wait_for(lambda: len(caplog.records) >= 2, 20, what="two tries")
        finally:
            stop.set()
            wake.set()
            runner.join(20)
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in caplog.records), caplog.text
    assert sandbox.objects("resourceslices") == [] and publisher.writes == 0


def test_a_node_without_a_uid_is_not_owned(node_reply: tuple[Client, list[bytes]], sandbox: Sandbox) -> None:
    client, bodies = node_reply
    bodies.append(_node())
    with pytest.raises(NodeGoneError):
        SlicePublisher(client, NODE).sync(node_devices())
    assert sandbox.objects("resourceslices") == []


def test_a_late_create_with_the_old_owner_leaves_one_slice_owned_by_the_node_now(
    sandbox: Sandbox, api: Client, caplog: pytest.LogCaptureFixture,
) -> None:
    # The Node is registered again (a new UID) while a create sent before, naming the old UID, is
    # still in flight; it lands beside the slice the next sync made. The sync after keeps one, owned
    # by the current UID (a slice naming the gone UID would be the garbage collector's).
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    publisher = SlicePublisher(api, NODE)
    publisher.sync(node_devices())
    (first,) = api.list(types.DRA_SLICES)
    api.delete(types.NODES, NODE)
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    uid = api.get_node(NODE).metadata.uid
    assert uid != first.metadata.owner_references[0].uid
    late = wire.WireResourceSlice(
        metadata=wire.WireMeta(generate_name=protocol.dra_slice_generate_name(NODE),
                               owner_references=first.metadata.owner_references),
        spec=first.spec,
    )
    api.create(types.DRA_SLICES, late)
    assert len(api.list(types.DRA_SLICES)) == 2
    with caplog.at_level(logging.INFO, logger="kubectl_gpushare.dra.publisher"):
        publisher.sync(node_devices())
    found: list[wire.WireResourceSlice] = api.list(types.DRA_SLICES)
    assert [[ref.uid for ref in s.metadata.owner_references] for s in found] == [[uid]]
    assert [d.name for d in found[0].spec.devices] == ["gpu-0"]
    assert f"updated ResourceSlice {found[0].metadata.name}: 1 device(s), its owner now node {NODE} of UID {uid}" \
        in caplog.text


def test_a_node_that_does_not_decode_at_start_is_a_one_line_daemon_error(
    node_reply: tuple[Client, list[bytes]], dirs: Dirs,
) -> None:
    client, bodies = node_reply
    bodies.append(_node(uid=5))
    cfg = Config(node_name=NODE, registration_dir=dirs.registration, plugin_dir=dirs.plugin, cdi_root=dirs.cdi,
                 fake_gpus="1x16GiB")
    with pytest.raises(DaemonError) as refused:
        serve(cfg, client=client)
    assert refused.value.exit_code == EXIT_API
    assert refused.value.message.startswith(f"cannot read node {NODE!r}: node {NODE} does not decode as a v1.Node (")
    assert "\n" not in refused.value.message


def _with_uid(node: types.Node, uid: str, name: str = NODE) -> types.Node:
    return msgspec.structs.replace(node, metadata=msgspec.structs.replace(node.metadata, uid=uid, name=name))


def test_an_offered_node_serves_only_a_sync_within_offer_seconds_of_its_read(sandbox: Sandbox, api: Client) -> None:
    # The offer's age counts from its read, not from the call: a Node read earlier than OFFER_SECONDS
    # ago (deleted and registered again since, say) must not name the slice's owner; nor one of another name.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    node = api.get_node(NODE)
    for offered, read_at in [(_with_uid(node, "stale"), time.monotonic() - 2 * OFFER_SECONDS),
                             (_with_uid(node, "other", name="other-node"), time.monotonic())]:  # fmt: skip
        publisher = SlicePublisher(api, NODE)
        publisher.offer(offered, read_at)
        publisher.sync(node_devices())
        assert _owner_uids(api) == [node.metadata.uid]
    fresh = SlicePublisher(api, NODE)
    fresh.offer(_with_uid(node, "fresh"), time.monotonic())
    fresh.sync(node_devices())
    # Used, with no read of its own: the slice was updated to name "fresh"; the read after that write
    # (`SlicePublisher._owned_by_the_node_now`) found the Node's real UID and updated it back.
    assert fresh.writes == 2 and _owner_uids(api) == [node.metadata.uid]


@contextmanager
def _publisher_listing(
    sandbox: Sandbox, kubeconfig: Path, items: Callable[[], list[dict[str, Any]]]
) -> Iterator[SlicePublisher]:
    """A publisher for NODE whose lists of ResourceSlices a relay answers with ``items()``, selector or not."""

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method != "GET" or not path.startswith("/apis/resource.k8s.io/v1/resourceslices?"):
            return None
        return msgspec.json.encode({"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                                    "metadata": {"resourceVersion": "1"}, "items": items()})

    with _relayed(sandbox, kubeconfig, rewrite) as client:
        yield SlicePublisher(client, NODE)


@contextmanager
def _relayed(
    sandbox: Sandbox, kubeconfig: Path, rewrite: Callable[[str, str, bytes], bytes | None]
) -> Iterator[Client]:
    """A client that talks to the sandbox through a relay calling ``rewrite`` on each reply (`api_relay`)."""
    with relay(sandbox, rewrite) as port:
        client = Client(dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}"),
                        component="test-publisher", retry=None)
        try:
            yield client
        finally:
            client.close()


def _published(sandbox: Sandbox, api: Client) -> str:
    """The Node, and the one slice a publisher published for it: that slice's name."""
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    SlicePublisher(api, NODE).sync(node_devices())
    (name,) = [s.metadata.name for s in api.list(types.DRA_SLICES)]
    return name


def _stray(api: Client) -> wire.WireResourceSlice:
    """A second slice of this node and driver beside the published one, not named as ours: the next sync deletes it."""
    return api.create(types.DRA_SLICES, wire.WireResourceSlice(
        metadata=wire.WireMeta(generate_name="stray-"), spec=slices.spec(NODE, node_devices(), 1)))


def _garbling(sandbox: Sandbox, name: str, **spec: object) -> Callable[[], list[dict[str, Any]]]:
    """The sandbox's slices as a list would give them, slice ``name`` garbled (`_garbled` with ``spec``)."""
    def items() -> list[dict[str, Any]]:
        return [_garbled(s, **spec) if s["metadata"]["name"] == name else s for s in sandbox.objects("resourceslices")]
    return items


def _owner_uids(api: Client) -> list[str]:
    return [ref.uid for s in api.list(types.DRA_SLICES) for ref in s.metadata.owner_references]


def test_a_slice_of_ours_that_does_not_decode_is_deleted_not_left_beside_a_new_one(
    sandbox: Sandbox, api: Client, kubeconfig: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # A list item that does not decode as a whole is never kept, so the publisher would publish another
    # slice beside it at each sync that finds none readable. Its own spec.driver and spec.nodeName say
    # it is ours (dra_objects.slice_identity): it is deleted by name, UID and resourceVersion.
    garbled = _published(sandbox, api)

    with _publisher_listing(sandbox, kubeconfig, _garbling(sandbox, garbled)) as publisher:
        with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
            assert publisher.sync(node_devices())
        assert not publisher.sync(node_devices()), "the new slice reads: nothing more to write"
    (kept,) = [s["metadata"]["name"] for s in sandbox.objects("resourceslices")]
    assert kept != garbled
    assert f"deleted ResourceSlice {garbled}: it does not decode as a ResourceSlice" in caplog.text


def _unreadable_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cannot be read: left alone" in r.getMessage()]


def test_an_item_that_cannot_say_whose_it_is_is_left_warned_of_once_and_publishing_goes_on(
    sandbox: Sandbox, kubeconfig: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # A list item claiming a namespace (a ResourceSlice is cluster-scoped) cannot be named in a delete
    # (its key "a/x" is no path segment, types.path_segment): its identity is unreadable
    # (dra_objects.slice_identity), so it is left alone, warned of once across syncs and the
    # withdrawal, and never fails either for the slice the publisher owns.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    hostile = {"metadata": {"name": "x", "namespace": "a"},
               "spec": {"driver": protocol.DRA_DRIVER, "nodeName": NODE, "devices": "garbage"}}

    with _publisher_listing(sandbox, kubeconfig, lambda: [*sandbox.objects("resourceslices"), hostile]) as publisher:
        with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
            assert publisher.sync(node_devices())
            assert not publisher.sync(node_devices())
            assert len(sandbox.objects("resourceslices")) == 1
            assert publisher.withdraw() == 1
    assert sandbox.objects("resourceslices") == []
    assert _unreadable_warnings(caplog) == [
        "ResourceSlice a/x is listed under this node's and driver's selector, but its name, namespace, driver or "
        "node cannot be read: left alone"]


def _garbled(body: dict[str, Any], **spec: object) -> dict[str, Any]:
    return {**body, "spec": {**body["spec"], "devices": "garbage", **spec}}


def _other_drivers_slice(api: Client, node: str) -> str:
    spec = msgspec.structs.replace(slices.spec(node, node_devices(), 1), driver="other.example.com")
    created = api.create(types.DRA_SLICES, wire.WireResourceSlice(metadata=wire.WireMeta(name="other-driver"),
                                                                  spec=spec))
    return created.metadata.name


def test_a_reply_that_ignores_the_selector_never_makes_another_drivers_or_nodes_slice_ours(
    sandbox: Sandbox, api: Client, kubeconfig: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # A proxy or stand-in that ignores the field selector lists every slice, here none of them
    # decodable. Only the one whose own spec.driver and spec.nodeName are ours is deleted
    # (dra_objects.SliceIdentity.published_by); the other node's and the other driver's stay.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False),
                  node_object("other", [], ip="10.0.0.2", gpushare=False)])
    SlicePublisher(api, NODE).sync(node_devices())
    (ours,) = [s.metadata.name for s in api.list(types.DRA_SLICES)]
    SlicePublisher(api, "other").sync(node_devices())
    others = {s.metadata.name for s in api.list(types.DRA_SLICES)} - {ours}
    others.add(_other_drivers_slice(api, NODE))
    assert len(others) == 2

    with _publisher_listing(sandbox, kubeconfig, lambda: [_garbled(s) for s in sandbox.objects("resourceslices")]) \
            as publisher:
        with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
            assert publisher.sync(node_devices())
    left = {s["metadata"]["name"] for s in sandbox.objects("resourceslices")}
    assert ours not in left and others < left and len(left) == 3, left
    assert f"deleted ResourceSlice {ours}: it does not decode as a ResourceSlice" in caplog.text
    assert _unreadable_warnings(caplog) == []


def test_a_slice_of_ours_whose_driver_cannot_be_read_is_left_and_warned_of_once(
    sandbox: Sandbox, api: Client, kubeconfig: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # Whose it is cannot be confirmed from the object itself (spec.driver is a number): left alone,
    # never deleted on the selector's word; the publisher publishes its own slice beside it once.
    garbled = _published(sandbox, api)

    with _publisher_listing(sandbox, kubeconfig, _garbling(sandbox, garbled, driver=5)) as publisher:
        with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
            assert publisher.sync(node_devices())
            assert not publisher.sync(node_devices())
    assert garbled in [s["metadata"]["name"] for s in sandbox.objects("resourceslices")]
    assert len(sandbox.objects("resourceslices")) == 2
    assert _unreadable_warnings(caplog) == [
        f"ResourceSlice {garbled} is listed under this node's and driver's selector, but its name, namespace, "
        "driver or node cannot be read: left alone"]


def test_an_undecodable_item_is_deleted_only_at_the_resource_version_listed(
    sandbox: Sandbox, api: Client, kubeconfig: Path
) -> None:
    # Deleted by name with the listed resourceVersion as precondition: an item naming a slice that
    # holds another version now (changed or re-created since; here another node's, in a reply that
    # did not honour the selector and says it is ours) is a Conflict, and that slice stays.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False),
                  node_object("other", [], ip="10.0.0.2", gpushare=False)])
    SlicePublisher(api, "other").sync(node_devices())
    (victim,) = [s.metadata.name for s in api.list(types.DRA_SLICES)]
    claimed = {"metadata": {"name": victim, "resourceVersion": "999999"},
               "spec": {"driver": protocol.DRA_DRIVER, "nodeName": NODE, "devices": "garbage"}}
    with _publisher_listing(sandbox, kubeconfig, lambda: [claimed]) as publisher:
        assert publisher.sync(node_devices())
    assert victim in [s["metadata"]["name"] for s in sandbox.objects("resourceslices")]


def _recreate_node(api: Client, sandbox: Sandbox) -> str:
    """Delete the Node and register it again under its name, as kubelet does: its new UID."""
    api.delete(types.NODES, NODE)
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    return api.get_node(NODE).metadata.uid


@pytest.mark.parametrize("write", ["create", "update"])
def test_a_node_registered_again_between_the_read_and_the_write_owns_the_slice_once_the_sync_is_done(
    sandbox: Sandbox, api: Client, kubeconfig: Path, write: str, caplog: pytest.LogCaptureFixture,
) -> None:
    # The Node is deleted and registered again (a new UID) just after the sync read it: the write
    # names the old UID, which the garbage collector would delete the slice for. The sync reads the
    # Node again after writing and leaves the slice owned by the Node that exists.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    before = api.get_node(NODE).metadata.uid
    if write == "update":
        SlicePublisher(api, NODE).sync(node_devices())
    recreated: list[str] = []

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method == "GET" and path.split("?")[0] == NODE_PATH and not recreated:  # after the sandbox replied
            recreated.append(_recreate_node(api, sandbox))
        return None

    with _relayed(sandbox, kubeconfig, rewrite) as client:
        publisher = SlicePublisher(client, NODE)
        with caplog.at_level(logging.INFO, logger="kubectl_gpushare.dra.publisher"):
            assert publisher.sync(node_devices("2x16GiB"))
    assert recreated and recreated[0] != before
    (found,) = api.list(types.DRA_SLICES)
    assert f"updated ResourceSlice {found.metadata.name}: node {NODE} was registered again (UID {recreated[0]}) " \
        "while it was written" in caplog.text
    assert [ref.uid for ref in found.metadata.owner_references] == recreated
    assert [d.name for d in found.spec.devices] == ["gpu-0", "gpu-1"]
    assert publisher.current is not None and publisher.current.metadata.owner_references[0].uid == recreated[0]


def test_a_device_plugin_that_starts_between_the_read_and_the_write_withdraws_the_slice_in_that_sync(
    sandbox: Sandbox, api: Client, kubeconfig: Path,
) -> None:
    # The read after the write is put to the refuse check as every Node read is: the device plugin
    # advertising aliyun.com/gpu-mem just after the sync's first read withdraws the slice it wrote,
    # not a resync later.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    advertised: list[bool] = []

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method == "GET" and path.split("?")[0] == NODE_PATH and not advertised:  # after the sandbox replied
            api.patch(types.NODES, NODE, {"status": {"capacity": {protocol.RESOURCE_MEM: "16"}}}, subresource="status")
            advertised.append(True)
        return None

    with _relayed(sandbox, kubeconfig, rewrite) as client:
        publisher = SlicePublisher(client, NODE, refuse=device_plugin_refusal)
        assert publisher.sync(node_devices())
    assert advertised and publisher.withdrawn
    assert publisher.refusal is not None and protocol.RESOURCE_MEM in publisher.refusal
    assert sandbox.objects("resourceslices") == []


@pytest.mark.parametrize("decodes", [True, False])
def test_an_item_with_neither_uid_nor_resource_version_is_never_deleted(
    sandbox: Sandbox, api: Client, kubeconfig: Path, caplog: pytest.LogCaptureFixture, decodes: bool,
) -> None:
    # A reply (a proxy, a stand-in) lists an item that says it is ours but names another node's slice
    # and carries no UID or resourceVersion: a delete of it could have no precondition, and would
    # remove whatever holds that name now. Nothing ties it to the object listed: it is left alone.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False),
                  node_object("other", [], ip="10.0.0.2", gpushare=False)])
    SlicePublisher(api, "other").sync(node_devices())
    (victim,) = [s.metadata.name for s in api.list(types.DRA_SLICES)]
    (listed,) = sandbox.objects("resourceslices")
    spec = {**listed["spec"], "nodeName": NODE, "pool": {**listed["spec"]["pool"], "name": "x"}}
    claimed = {"metadata": {"name": victim}, "spec": spec if decodes else {**spec, "devices": "garbage"}}
    with _publisher_listing(sandbox, kubeconfig, lambda: [claimed]) as publisher:
        with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
            assert publisher.sync(node_devices())
    assert victim in [s["metadata"]["name"] for s in sandbox.objects("resourceslices")]
    assert f"ResourceSlice {victim} is listed under this node's and driver's selector, but it has neither a UID " \
        "nor a resourceVersion to delete it by: left alone" in caplog.text


def test_a_create_never_sent_is_not_waited_for(sandbox: Sandbox, kubeconfig: Path) -> None:
    # The relay answers the list of slices with "Connection: close" and stops the gate in front of it:
    # the create is refused at connect. It cannot land beside the one a later sync creates, so the
    # publisher does not settle it (syncing every SETTLE_SECONDS for the request timeout).
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    listed: list[str] = []
    with relay(sandbox, lambda method, path, body: shut_after_list(method, path)) as relay_port, \
            TcpGate(relay_port) as gate:

        def shut_after_list(method: str, path: str) -> Reply | None:
            if method == "GET" and path.startswith("/apis/resource.k8s.io/v1/resourceslices") and not listed:
                listed.append(path)
                gate.stop_listening()
                return Reply(None, {"Connection": "close"})
            return None

        client = Client(dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{gate.port}"),
                        component="test-publisher", retry=None)
        publisher = SlicePublisher(client, NODE)
        try:
            with pytest.raises(Unreachable, match="Connection refused") as raised:
                publisher.sync(node_devices())
            assert listed and raised.value.sent is False
            assert publisher.landing_until <= time.monotonic()  # nothing may still land
            gate.open()
            publisher.sync(node_devices())
        finally:
            client.close()
    assert len(sandbox.objects("resourceslices")) == 1 and publisher.writes == 1


def test_a_stale_slice_changed_since_it_was_listed_is_not_deleted_until_read_again(
    sandbox: Sandbox, api: Client, kubeconfig: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    # resourceslicecontroller.go removeSlices: the delete carries the UID and the resourceVersion
    # listed; a slice changed between the list and the delete is a 409 Conflict and stays. The sync
    # asks for another soon (`changed_under_us`), which reads it again and decides again.
    kept, extra = _published(sandbox, api), _stray(api)
    rewrite, changed = _changing_once(api, extra.metadata.name)
    with _relayed(sandbox, kubeconfig, rewrite) as client:
        publisher = SlicePublisher(client, NODE)
        with caplog.at_level(logging.INFO, logger="kubectl_gpushare.dra.publisher"):
            assert not publisher.sync(node_devices())
        assert changed and changed[0] != extra.metadata.resource_version
        assert publisher.changed_under_us, "the next sync is asked for soon"
        assert sorted(s.metadata.name for s in api.list(types.DRA_SLICES)) == sorted([kept, extra.metadata.name])
        assert f"ResourceSlice {extra.metadata.name} changed since it was listed: not deleted" in caplog.text
        assert publisher.sync(node_devices()), "read again: still not ours to keep, deleted at its new version"
        assert not publisher.changed_under_us
    assert [s.metadata.name for s in api.list(types.DRA_SLICES)] == [kept]


def _changing_once(api: Client, name: str) -> tuple[Callable[[str, str, bytes], bytes | None], list[str]]:
    """A relay rewrite that changes slice ``name`` (a label) once the first list of slices is read: it is stale."""
    changed: list[str] = []

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method == "GET" and path.startswith("/apis/resource.k8s.io/v1/resourceslices?") and not changed:
            now: wire.WireResourceSlice = api.get(types.DRA_SLICES, name)
            touched = msgspec.structs.replace(now, metadata=msgspec.structs.replace(now.metadata, labels={"x": "y"}))
            changed.append(api.replace(types.DRA_SLICES, name, touched).metadata.resource_version)
        return None
    return rewrite, changed


def test_a_conflict_wakes_the_next_sync_soon_not_at_the_resync(
    sandbox: Sandbox, api: Client, kubeconfig: Path,
) -> None:
    # The resourceslice controller requeues a failed sync rate-limited; here `run` syncs again after
    # the error backoff (0.5 s first), with the periodic resync an hour away.
    kept, extra = _published(sandbox, api), _stray(api)
    rewrite, changed = _changing_once(api, extra.metadata.name)
    with _relayed(sandbox, kubeconfig, rewrite) as client:
        publisher = SlicePublisher(client, NODE)
        stop, wake = threading.Event(), threading.Event()
        runner = threading.Thread(target=publisher.run, args=(stop, wake, node_devices, 3600.0),
                                  kwargs={"watch": False})
        runner.start()
        try:
            wait_for(lambda: [s.metadata.name for s in api.list(types.DRA_SLICES)] == [kept], timeout=30,
                     what="the changed slice deleted by the sync after the conflict")
        finally:
            stop.set()
            wake.set()
            runner.join(20)
    assert changed


def test_withdraw_deletes_a_slice_that_changed_between_its_list_and_its_delete(
    sandbox: Sandbox, api: Client, kubeconfig: Path,
) -> None:
    name = _published(sandbox, api)
    rewrite, changed = _changing_once(api, name)
    with _relayed(sandbox, kubeconfig, rewrite) as client:
        assert SlicePublisher(client, NODE).withdraw() == 1
    assert changed and api.list(types.DRA_SLICES) == []


def _at_the_int64_limit(api: Client) -> wire.WireResourceSlice:
    """A slice of this node and driver at pool generation 2^63-1, written by someone else, not named as ours."""
    spec = msgspec.structs.replace(slices.spec(NODE, node_devices("2x16GiB"), 1),
                                   pool=wire.WirePool(name=NODE, generation=protocol.MAX_INT64, resource_slice_count=1))
    return api.create(types.DRA_SLICES, wire.WireResourceSlice(metadata=wire.WireMeta(generate_name="legacy-"),
                                                                spec=spec))


def test_a_pool_at_the_int64_generation_limit_starts_again_at_1_in_the_first_sync(
    sandbox: Sandbox, api: Client, caplog: pytest.LogCaptureFixture,
) -> None:
    # The next generation does not fit the API's int64 (a 400, and upstream's wraps to a negative one, a
    # 422): one sync failed before the next, the old slice deleted, started from 0. The API lets a driver
    # reset a pool's generation once its slices are deleted: this sync does it, with one warning.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    legacy = _at_the_int64_limit(api)
    publisher = SlicePublisher(api, NODE)
    with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.dra.publisher"):
        assert publisher.sync(node_devices())
    (published,) = api.list(types.DRA_SLICES)
    assert published.metadata.name != legacy.metadata.name and published.spec.pool.generation == 1
    assert slices.comparable(published.spec.devices) == slices.comparable(node_devices())
    assert publisher.writes == 2, "one delete, one create: no write refused"
    assert [r.getMessage() for r in caplog.records] == [
        f"ResourceSlice pool {NODE} was at generation 9223372036854775807, the int64 limit (written by someone "
        "else): its slices are deleted and it starts again at generation 1"]


def test_a_pool_at_the_int64_limit_whose_slice_stays_gets_no_slice_it_would_outrank(
    sandbox: Sandbox, api: Client, kubeconfig: Path,
) -> None:
    # The slice at the limit changed between the list and its delete (a 409): it stays, and a slice at
    # generation 1 beside it would be obsolete, the scheduler allocating from the one at the limit (two
    # GPUs this node does not have). Nothing is created until a sync has deleted it.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    legacy = _at_the_int64_limit(api)
    rewrite, changed = _changing_once(api, legacy.metadata.name)
    with _relayed(sandbox, kubeconfig, rewrite) as client:
        publisher = SlicePublisher(client, NODE)
        assert not publisher.sync(node_devices())
        assert changed and publisher.changed_under_us
        assert [s.metadata.name for s in api.list(types.DRA_SLICES)] == [legacy.metadata.name]
        assert publisher.sync(node_devices()), "read again: deleted, and the pool starts again at 1"
    (published,) = api.list(types.DRA_SLICES)
    assert published.spec.pool.generation == 1
