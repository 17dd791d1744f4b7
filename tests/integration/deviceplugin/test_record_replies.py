"""The device plugin's assignment write against a reply the sandbox never serves (a relay rewrites it):
a patch that lands but answers with a pod that does not decode is recorded, not failed."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import msgspec
import pytest
from api_relay import relay

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.cluster import NodeCluster
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.records import pod_record
from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NODE = "gpu-node-1"


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

    with relay(sandbox, rewrite) as port:
        client = Client(dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}"),
                        component="test-device-plugin", retry=None)
        cluster = NodeCluster(client, NODE)  # not started: only its write is used
        try:
            with caplog.at_level(logging.WARNING, logger="kubectl_gpushare.deviceplugin.cluster"):
                cluster.record(record, {protocol.ANN_ASSIGNED: "true"})  # before: UndecodableReply, and Allocate failed
        finally:
            cluster.urgent.close()
            client.close()
    stored = sandbox.get("pods", "default", "lucky")
    assert stored is not None and stored["metadata"]["annotations"][protocol.ANN_ASSIGNED] == "true"
    assert [r.getMessage() for r in caplog.records] == [
        "the assignment of pod default/lucky was recorded; the reply to it is unreadable: pod default/lucky does not "
        "decode as a v1.Pod (Expected `str`, got `int` - at `$.metadata.uid`)"
    ]
