"""The driver's life on a node: health changes re-publish the slice, stale slices go, a deleted slice or
socket comes back, kubelet retries a registration that failed, and a node the device plugin serves is refused."""

from __future__ import annotations

import logging
import os
import threading
from contextlib import ExitStack

import grpc
import pytest
from dra_helpers import NODE, Dirs, NotServedYet, served_grpc
from waiting import holds_for, wait_for

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2 as reg
from kubectl_gpushare.dra.daemon import DaemonError
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.dra.servicer import RegistrationServicer
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.sandbox.builders import namespace_object, node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def _slices(api: Client) -> list[dra_objects.WireResourceSlice]:
    found: list[dra_objects.WireResourceSlice] = api.list(types.DRA_SLICES, field_selector=f"spec.nodeName={NODE}")
    return found


def _devices(api: Client) -> list[str]:
    found = _slices(api)
    return [d.name for d in found[0].spec.devices] if len(found) == 1 else []


def test_an_unhealthy_gpu_leaves_the_slice_and_comes_back(start_driver, api: Client) -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed=NODE)
    running = start_driver("2x16GiB", backend=backend)
    wait_for(lambda: _devices(api) == ["gpu-0", "gpu-1"], what="both GPUs published")
    name = _slices(api)[0].metadata.name
    backend.inject_xid(1, 79)
    wait_for(lambda: _devices(api) == ["gpu-0"], what="gpu-1 unpublished")
    assert "gpu-1" not in running.driver.published()
    backend.set_health(1, True, "recovered")
    wait_for(lambda: _devices(api) == ["gpu-0", "gpu-1"], what="gpu-1 back")
    assert _slices(api)[0].metadata.name == name, "updated in place, not re-created"
    assert _slices(api)[0].spec.pool.generation == 1


def test_an_application_xid_changes_nothing(start_driver, api: Client) -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed=NODE)
    running = start_driver("2x16GiB", backend=backend)
    wait_for(lambda: _devices(api) == ["gpu-0", "gpu-1"], what="both GPUs published")
    assert not backend.inject_xid(1, 43)
    backend.set_health(0, True, "already healthy")  # an event after it, to know the first was handled
    assert running.driver.health.version == 0 and _devices(api) == ["gpu-0", "gpu-1"]


def test_taint_mode_keeps_an_unhealthy_gpu_with_a_noschedule_taint(start_driver, api: Client) -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed=NODE)
    start_driver("2x16GiB", backend=backend, unhealthy="taint")
    wait_for(lambda: _devices(api) == ["gpu-0", "gpu-1"], what="both GPUs published")
    backend.set_health(0, False, "Xid 79")
    tainted = wait_for(lambda: _slices(api)[0].spec.devices[0].taints, what="the taint")
    assert [(t.key, t.effect) for t in tainted] == [("gpu-mem.kubectl-gpushare.io/unhealthy", "NoSchedule")]
    assert _devices(api) == ["gpu-0", "gpu-1"]


def test_a_removed_gpu_leaves_the_slice(start_driver, api: Client) -> None:
    backend = FakeBackend.from_spec("3x16GiB", seed=NODE)
    start_driver("3x16GiB", backend=backend)
    wait_for(lambda: _devices(api) == ["gpu-0", "gpu-1", "gpu-2"], what="three GPUs")
    backend.remove_gpu(1)
    wait_for(lambda: _devices(api) == ["gpu-0", "gpu-2"], what="gpu-1 gone")


def test_stale_slices_of_this_node_are_deleted_at_start_and_others_kept(
    start_driver, api: Client, sandbox: Sandbox
) -> None:
    def stale(name: str, node: str, driver: str = protocol.DRA_DRIVER, generation: int = 7) -> dict[str, object]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": driver, "nodeName": node,
                         "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-9"}]}}

    sandbox.load([stale("old-a", NODE), stale("00000-gpu-mem.kubectl-gpushare.io-x", NODE, generation=3),
                  stale("theirs", NODE, driver="gpu.nvidia.com"), stale("elsewhere", "gpu-node-2")])
    start_driver("1x16GiB")
    mine = wait_for(lambda: [s for s in _slices(api) if s.spec.driver == protocol.DRA_DRIVER
                             and [d.name for d in s.spec.devices] == ["gpu-0"]], what="our slice")
    assert len(mine) == 1 and mine[0].spec.pool.generation == 8, "a new generation above the stale ones"
    left = sorted(s.metadata.name for s in api.list(types.DRA_SLICES))
    assert "old-a" not in left and "00000-gpu-mem.kubectl-gpushare.io-x" not in left
    assert {"theirs", "elsewhere"} <= set(left)


def test_a_deleted_slice_is_published_again(start_driver, api: Client) -> None:
    running = start_driver("1x16GiB")
    first = wait_for(lambda: _slices(api), what="the slice")[0]
    api.delete(types.DRA_SLICES, first.metadata.name)  # kubelet wipes a deregistered driver's slices
    running.driver.republish()
    again = wait_for(lambda: _slices(api), what="the slice again")[0]
    assert again.metadata.name != first.metadata.name
    assert again.spec.pool.generation == 1


def test_a_deleted_socket_is_served_again_and_kubelet_registers_it_again(
    start_driver, api: Client, dirs: Dirs
) -> None:
    start_driver()
    with KubeletSim(dirs.registration, api) as kubelet:
        assert kubelet.wait_registered() is not None
        os.unlink(os.path.join(dirs.registration, protocol.DRA_REGISTRATION_SOCKET))
        wait_for(lambda: kubelet.plugin() is None, what="deregistration")
        assert kubelet.wait_registered(timeout=10) is not None


def test_kubelet_retries_a_registration_socket_that_did_not_answer_at_first(
    start_driver, api: Client, dirs: Dirs
) -> None:
    # kubelet's reconciler tries a socket again until it registers (pluginmanager/reconciler): a driver
    # whose socket kubelet dialled before the driver served it still registers, through the same file.
    with KubeletSim(dirs.registration, api) as kubelet:
        early = NotServedYet(os.path.join(dirs.registration, protocol.DRA_REGISTRATION_SOCKET))
        try:
            wait_for(lambda: early.closed_unserved >= 1, what="kubelet dialling the socket before it is served")
            running = start_driver(registration_dir=str(dirs.root / "served"))
            early.serve_from(running.cfg.registration_socket)
            plugin = kubelet.wait_registered(timeout=30)
            assert plugin is not None and plugin.registration_socket == early.path
            assert plugin.endpoint == os.path.join(dirs.plugin, protocol.DRA_PLUGIN_SOCKET)
        finally:
            early.close()


def test_kubelet_backs_off_between_attempts_and_stops_when_the_socket_goes(api: Client, dirs: Dirs) -> None:
    with KubeletSim(dirs.registration, api, dial_timeout=0.2) as kubelet:
        early = NotServedYet(os.path.join(dirs.registration, protocol.DRA_REGISTRATION_SOCKET))
        try:
            wait_for(lambda: kubelet.attempts.get(early.path, 0) >= 3, what="three registration attempts")
            assert kubelet.refused[early.path].startswith("dial failed at socket")
        finally:
            early.close()
        os.unlink(early.path)
        tried = kubelet.attempts[early.path]
        # the next attempt would be due 2 s after the third failure (0.5 s, 1 s, 2 s): none comes
        holds_for(lambda: kubelet.attempts[early.path] == tried, 3.0, "no attempt once the socket is gone")
        assert kubelet.plugin() is None


class _HeldNotification(RegistrationServicer):
    """The driver's registration service, whose first status notification waits until the other's arrives.

    So both attempts have been judged before either gets its answer: kubelet must have decided each
    one's fate before notifying it (``GenerateRegisterPluginFunc``: ``RegisterPlugin``, then notify).
    """

    def __init__(self, endpoint: str, both: threading.Barrier) -> None:
        super().__init__(endpoint)
        self.both = both

    def NotifyRegistrationStatus(  # noqa: N802
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        if not self.notifications:
            self.both.wait()
        return super().NotifyRegistrationStatus(request, context)


def test_two_sockets_registering_one_endpoint_at_once_leave_one_instance(api: Client, dirs: Dirs) -> None:
    # DRAPluginManager.add checks the endpoint and appends under one mutex (pkg/kubelet/cm/dra/plugin):
    # "One plugin instance cannot hijack the endpoint of another instance", even at the same moment.
    endpoint = os.path.join(dirs.plugin, protocol.DRA_PLUGIN_SOCKET)
    both = threading.Barrier(2, timeout=15)
    servicers = [_HeldNotification(endpoint, both) for _ in range(2)]
    with ExitStack() as servers:
        for i, servicer in enumerate(servicers):
            path = os.path.join(dirs.registration, f"{protocol.DRA_DRIVER}-{i}-reg.sock")
            servers.enter_context(served_grpc(path, servicer, None))
        with KubeletSim(dirs.registration, api) as kubelet:
            wait_for(lambda: len(kubelet.plugins()) + len(kubelet.refused) >= 2, what="both attempts decided")
            assert [p.endpoint for p in kubelet.plugins()] == [endpoint]
            (why,) = kubelet.refused.values()
            assert why == f"endpoint {endpoint} already registered for DRA driver plugin {protocol.DRA_DRIVER}"
            assert sorted(s.registered.is_set() for s in servicers) == [False, True]  # each told its fate


def test_a_node_the_device_plugin_serves_is_refused(start_driver, sandbox: Sandbox) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [16, 16], ip="10.0.0.1")])
    with pytest.raises(DaemonError) as refused:
        start_driver()
    assert refused.value.exit_code == 2
    assert refused.value.message == (
        f"refusing to start: node {NODE} advertises aliyun.com/gpu-mem=32 (the gpushare device plugin runs "
        "there); the device plugin and the DRA driver must not sell the same GPUs")


def test_a_node_that_does_not_exist_is_refused(start_driver, sandbox: Sandbox, kubeconfig, dirs: Dirs) -> None:
    from kubectl_gpushare.dra.daemon import Config, serve

    cfg = Config(node_name="nowhere", registration_dir=dirs.registration, plugin_dir=dirs.plugin,
                 cdi_root=dirs.cdi, fake_gpus="1x16GiB", kube={"kubeconfig": str(kubeconfig)})
    with pytest.raises(DaemonError, match="node 'nowhere' does not exist") as refused:
        serve(cfg)
    assert refused.value.exit_code == 1
    assert not os.path.exists(os.path.join(dirs.registration, protocol.DRA_REGISTRATION_SOCKET))


def test_a_device_plugin_starting_later_makes_the_driver_withdraw_and_stop(
    start_driver, api: Client, sandbox: Sandbox
) -> None:
    running = start_driver("1x16GiB", resync=1.0)
    wait_for(lambda: _devices(api) == ["gpu-0"], what="the slice")
    api.patch(types.NODES, NODE, {"status": {"capacity": {"aliyun.com/gpu-mem": "16"}}}, subresource="status")
    running.thread.join(15)
    assert not running.thread.is_alive()
    assert isinstance(running.error, DaemonError) and running.error.exit_code == 2
    assert running.error.message.startswith(f"stopping: node {NODE} now advertises aliyun.com/gpu-mem=16")
    assert _slices(api) == []


def test_a_device_plugin_seen_by_any_sync_makes_the_driver_withdraw_at_once(
    start_driver, api: Client, sandbox: Sandbox
) -> None:
    """Every sync's read of the Node is checked: a sync woken by a change acts, not the next resync (a minute)."""
    running = start_driver("1x16GiB")
    wait_for(lambda: _devices(api) == ["gpu-0"], what="the slice")
    api.patch(types.NODES, NODE, {"status": {"capacity": {"aliyun.com/gpu-mem": "16"}}}, subresource="status")
    running.driver.republish()
    running.thread.join(15)
    assert not running.thread.is_alive()
    assert isinstance(running.error, DaemonError) and running.error.exit_code == 2
    assert _slices(api) == [] and running.driver.publisher.refusal == running.error.message


def test_one_read_of_the_node_serves_each_sync_and_its_check(start_driver, sandbox: Sandbox) -> None:
    """The check at start serves the first sync; then each sync reads the Node once, for its owner and the check.

    A sync that writes reads it once more, after the write (`SlicePublisher._owned_by_the_node_now`).
    """
    start = len(sandbox.log.snapshot())
    start_driver("1x16GiB", resync=0.2)

    def driver_calls(verb: str, resource: str) -> int:
        return sum(1 for r in sandbox.log.snapshot()[start:]
                   if r.verb == verb and r.resource == resource and "(dra-driver)" in r.user_agent)

    wait_for(lambda: driver_calls("list", "resourceslices") >= 8, what="eight syncs")
    log = [r for r in sandbox.log.snapshot()[start:] if "(dra-driver)" in r.user_agent]
    first_create = next(i for i, r in enumerate(log) if r.verb == "create" and r.resource == "resourceslices")
    assert [r.verb for r in log[:first_create] if r.resource == "nodes"] == ["get"]  # check_node's, and no other
    lists, gets = driver_calls("list", "resourceslices"), driver_calls("get", "nodes")
    writes = driver_calls("create", "resourceslices") + driver_calls("update", "resourceslices")
    # One GET a sync, one after each write (+1: a sync between its GET and its list).
    assert lists <= gets <= lists + writes + 1, (lists, gets, writes)


def test_withdrawing_waits_for_a_publish_in_flight_and_leaves_no_slice(
    start_driver, api: Client, sandbox: Sandbox
) -> None:
    running = start_driver("1x16GiB", resync=0.2)
    first = wait_for(lambda: _slices(api), what="the slice")[0]
    slow = sandbox.inject("POST", r"/resourceslices", latency=2.0, times=1)
    api.delete(types.DRA_SLICES, first.metadata.name)  # as kubelet wipes it: the publisher creates it again
    running.driver.republish()
    wait_for(lambda: slow.hits == 1, what="the publisher's create on its way (slowly)")
    api.patch(types.NODES, NODE, {"status": {"capacity": {"aliyun.com/gpu-mem": "16"}}}, subresource="status")
    running.thread.join(20)
    assert not running.thread.is_alive()
    assert isinstance(running.error, DaemonError) and running.error.exit_code == 2
    assert _slices(api) == [], "the slice created while withdrawing was deleted too"
    assert running.driver.publisher.withdrawn


def test_a_node_with_a_long_name_gets_its_slice(start_driver, api: Client) -> None:
    """kube-apiserver cuts a generateName to 58 characters: the slice of a 223-character node is created."""
    node = ("a" * 60 + ".") * 3 + "b" * 40
    start_driver("1x16GiB", node=node)
    found = wait_for(lambda: api.list(types.DRA_SLICES, field_selector=f"spec.nodeName={node}"), what="the slice")
    assert len(found) == 1 and len(found[0].metadata.name) == 63
    assert found[0].metadata.name.startswith(protocol.dra_slice_generate_name(node)[:58])


def test_a_create_that_lands_after_its_timeout_leaves_one_slice(
    start_driver, api: Client, sandbox: Sandbox
) -> None:
    """A slow commit: the 504 comes at the client's deadline, the create lands later, beside the next one.

    Two slices of a pool published as one make it incomplete to the scheduler: the publisher syncs
    often while the first create can still land, so one of the two goes within seconds, not at the
    next resync (a minute).
    """
    running = start_driver("1x16GiB", kube={"request_timeout": "1s"})
    first = wait_for(lambda: _slices(api), what="the slice")[0]
    slow = sandbox.inject("POST", r"/resourceslices(\?|$)", latency=5.0, after=True, times=1)
    api.delete(types.DRA_SLICES, first.metadata.name)  # as kubelet wipes it: the publisher creates it again
    publisher = running.driver.publisher
    writes = publisher.writes
    running.driver.republish()
    wait_for(lambda: slow.hits == 1, what="the publisher's create on its way (slowly)")
    # The retry creates the slice again (a write), the slow create lands, a sync deletes one of the two (a write).
    wait_for(lambda: publisher.writes >= writes + 2 and len(_slices(api)) == 1, timeout=30,
             what=lambda: f"one slice again after the late create; writes {publisher.writes - writes}, "
                          f"slices {[s.metadata.name for s in _slices(api)]}")
    holds_for(lambda: len(_slices(api)) == 1, 1.5, what="one slice")


def _owner_uids(api: Client) -> list[str]:
    found = _slices(api)
    return [ref.uid for ref in found[0].metadata.owner_references] if len(found) == 1 else []


def _recreate_node(api: Client, sandbox: Sandbox) -> str:
    """Delete the Node and register it again under its name, as kubelet does: a new UID."""
    old = sandbox.get("nodes", None, NODE)
    assert old is not None
    api.delete(types.NODES, NODE)
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    new = sandbox.get("nodes", None, NODE)
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    return str(new["metadata"]["uid"])


def test_a_node_registered_again_owns_the_slice_again(start_driver, api: Client, sandbox: Sandbox) -> None:
    """The garbage collector deletes a slice whose owner UID no longer exists: the owner follows the Node.

    The sandbox runs no garbage collector for slices, so the owner reference the slice carries is checked.
    """
    start_driver("1x16GiB", resync=0.2)
    first = wait_for(lambda: _slices(api), what="the slice")[0]
    assert _owner_uids(api) == [sandbox.get("nodes", None, NODE)["metadata"]["uid"]]  # type: ignore[index]
    uid = _recreate_node(api, sandbox)
    wait_for(lambda: _owner_uids(api) == [uid], what=lambda: f"the new Node's UID as owner: {_owner_uids(api)}")
    holds_for(lambda: _owner_uids(api) == [uid], 1.0, what="the new owner kept")
    again = _slices(api)[0]
    assert again.metadata.name == first.metadata.name, "updated in place, not re-created"
    assert again.spec.pool.generation == 1 and [d.name for d in again.spec.devices] == ["gpu-0"]
    ref = again.metadata.owner_references[0]
    assert (ref.api_version, ref.kind, ref.name, ref.controller) == ("v1", "Node", NODE, True)


def test_no_slice_is_published_while_the_node_is_gone(start_driver, api: Client, sandbox: Sandbox) -> None:
    """A slice owned by a Node UID that no longer exists would be collected at once: none is written until the
    Node is back, and then it is owned by the new UID.

    Syncs come only when woken here (the resync is a minute): one in flight when the Node goes may have
    read it just before, and create the slice with the UID that is gone (the garbage collector's to delete).
    """
    running = start_driver("1x16GiB")
    first = wait_for(lambda: _slices(api), what="the slice")[0]  # the first sync's last call was its create
    api.delete(types.NODES, NODE)
    api.delete(types.DRA_SLICES, first.metadata.name)  # the garbage collector's part: its owner is gone
    writes = running.driver.publisher.writes
    running.driver.republish()  # then retried with backoff while the Node is gone
    holds_for(lambda: _slices(api) == [], 1.5, what="no slice while the Node is gone")
    assert running.driver.publisher.writes == writes
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    uid = sandbox.get("nodes", None, NODE)["metadata"]["uid"]  # type: ignore[index]
    wait_for(lambda: _owner_uids(api) == [uid], timeout=30, what="the slice, owned by the new Node")
    assert _slices(api)[0].spec.pool.generation == 1


def test_a_create_that_lands_after_a_refusal_is_deleted_too(
    start_driver, api: Client, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    """A create whose reply was lost can land after the refusal's withdrawal: it must not stay and sell the GPUs."""
    running = start_driver("1x16GiB", kube={"request_timeout": "1s"})
    first = wait_for(lambda: _slices(api), what="the slice")[0]
    slow = sandbox.inject("POST", r"/resourceslices(\?|$)", latency=8.0, after=True, times=1)
    api.delete(types.DRA_SLICES, first.metadata.name)  # as kubelet wipes it: the publisher creates it again
    publisher = running.driver.publisher
    with caplog.at_level(logging.INFO, logger="kubectl_gpushare.dra.publisher"):
        running.driver.republish()
        wait_for(lambda: slow.hits == 1, what="the publisher's create on its way (slowly)")
        api.patch(types.NODES, NODE, {"status": {"capacity": {"aliyun.com/gpu-mem": "16"}}}, subresource="status")
        wait_for(lambda: publisher.refusal is not None, what="the refusal")
        assert running.thread.is_alive()  # the create may still land: not gone yet
        wait_for(lambda: "create landed after publishing was withdrawn" in caplog.text and _slices(api) == [],
                 timeout=30, what=lambda: f"the late slice deleted; slices {[s.metadata.name for s in _slices(api)]}")
    holds_for(lambda: _slices(api) == [], 1.5, what="no slice")
