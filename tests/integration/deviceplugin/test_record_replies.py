"""The device plugin's writes against a reply the sandbox never serves (a relay rewrites it): a patch
that lands but answers with an object that does not decode has happened (recorded, published), not failed."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest
from api_relay import Rewrite, relay

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.cluster import NodeCluster
from kubectl_gpushare.deviceplugin.devices import GpuDevice, Inventory, MemoryUnit
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.records import pod_record
from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NODE = "gpu-node-1"


@contextmanager
def _cluster_behind_relay(sandbox: Sandbox, kubeconfig: Path, rewrite: Rewrite) -> Iterator[NodeCluster]:
    """A device plugin's cluster view (not started: only its writes are used) talking through `relay`."""
    with relay(sandbox, rewrite) as port:
        client = Client(dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}"),
                        component="test-device-plugin", retry=None)
        cluster = NodeCluster(client, NODE)
        try:
            yield cluster
        finally:
            cluster.urgent.close()
            client.close()


def test_a_patch_that_lands_with_an_unreadable_reply_is_recorded(
    sandbox: Sandbox, kubeconfig: Path, api: Client, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [16], ip="10.0.0.1")])
    api.create(types.PODS, pod_object("lucky", "default", [2], node=NODE, gpu=0, phase="Pending", assigned=False),
               "default")
    record = pod_record(api.get(types.PODS, "lucky", "default"))
    unreadable = msgspec.json.encode({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "lucky", "uid": 5}})

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        return unreadable if method == "PATCH" and path.startswith("/api/v1/namespaces/default/pods/lucky") else None

    with _cluster_behind_relay(sandbox, kubeconfig, rewrite) as cluster, caplog.at_level(
            logging.WARNING, logger="kubectl_gpushare.deviceplugin.cluster"):
        cluster.record(record, {protocol.ANN_ASSIGNED: "true"})  # before: UndecodableReply, and Allocate failed
    stored = sandbox.get("pods", "default", "lucky")
    assert stored is not None and stored["metadata"]["annotations"][protocol.ANN_ASSIGNED] == "true"
    assert [r.getMessage() for r in caplog.records] == [
        "the assignment of pod default/lucky was recorded; the reply to it is unreadable: pod default/lucky does not "
        "decode as a v1.Pod (Expected `str`, got `int` - at `$.metadata.uid`)"
    ]


def test_a_gpu_publish_that_lands_with_an_unreadable_reply_is_published_not_retried(
    sandbox: Sandbox, kubeconfig: Path, api: Client, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox.load([node_object(NODE, [16], ip="10.0.0.1")])
    unreadable = msgspec.json.encode({"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE, "uid": 5}})
    patches: list[str] = []

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method != "PATCH":
            return None
        patches.append(path.partition("?")[0])
        return unreadable

    gpu = GpuDevice(index=0, uuid="GPU-0", name="NVIDIA T4", memory=16 << 30, minor=0)
    with _cluster_behind_relay(sandbox, kubeconfig, rewrite) as cluster, caplog.at_level(
            logging.WARNING, logger="kubectl_gpushare.deviceplugin.cluster"):
        cluster.publish(Inventory.of([gpu], MemoryUnit()))  # before: retried in the background for ever
    stored = api.get_node(NODE)
    assert stored.status.capacity[protocol.RESOURCE_COUNT] == "1"
    assert protocol.ANN_NODE_GPUS in stored.metadata.annotations
    assert patches == [f"/api/v1/nodes/{NODE}/status", f"/api/v1/nodes/{NODE}"]  # each write once
    expected = (f"node {NODE} was written; the reply to it is unreadable: node {NODE} does not decode as a v1.Node "
                "(Expected `str`, got `int` - at `$.metadata.uid`)")
    assert [r.getMessage() for r in caplog.records] == [expected, expected]


def test_a_lost_gpu_count_is_confirmed_on_this_node_not_on_another_the_list_reply_holds(
    sandbox: Sandbox, kubeconfig: Path
) -> None:
    # _lost reads the node with a list under metadata.name=<node>; a reply that does not honour the
    # selector and holds another node with our gpu-count must not make ours look published.
    sandbox.load([node_object(NODE, [], ip="10.0.0.1"), node_object("other", [16], ip="10.0.0.2")])

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method != "GET" or not path.startswith("/api/v1/nodes?"):
            return None
        return msgspec.json.encode({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                    "items": sandbox.objects("nodes")})

    gpu = GpuDevice(index=0, uuid="GPU-0", name="NVIDIA T4", memory=16 << 30, minor=0)
    with _cluster_behind_relay(sandbox, kubeconfig, rewrite) as cluster:
        assert cluster._lost(Inventory.of([gpu], MemoryUnit()))


def test_a_megabyte_status_message_is_logged_as_bounded_as_the_cli_writes_it(
    sandbox: Sandbox, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox.load([node_object(NODE, [16], ip="10.0.0.1")])
    sandbox.inject("PATCH", rf"/api/v1/nodes/{NODE}/status", status=422)
    message = "admission webhook denied the request:\n" + "x" * (1 << 20)
    huge = msgspec.json.encode({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid",
                                "code": 422, "message": message})

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        return huge if method == "PATCH" else None

    gpu = GpuDevice(index=0, uuid="GPU-0", name="NVIDIA T4", memory=16 << 30, minor=0)
    with _cluster_behind_relay(sandbox, kubeconfig, rewrite) as cluster, caplog.at_level(
            logging.WARNING, logger="kubectl_gpushare.deviceplugin.cluster"):
        cluster.publish(Inventory.of([gpu], MemoryUnit()))  # refused: logged once, retried in the background
    [line] = [r.getMessage() for r in caplog.records]
    quoted = protocol.one_line(message)  # what `kubectl gpushare` writes after "error: " for this reply
    assert quoted.endswith("…") and len(quoted) < 5000
    assert line == f"cannot publish GPUs on node {NODE} yet ({quoted}); retrying in the background"
