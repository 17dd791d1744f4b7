"""``kubectl gpushare top`` on the whole stack: each node's in-process device plugin serves its usage
port, and the sandbox relays the node's device-plugin pod's ``usage`` port to it (``pods/proxy``)."""

from __future__ import annotations

import json

import pytest

from .conftest import StackCluster

pytestmark = pytest.mark.integration

TWO_GPUS = "nodes: [{name: gpu-node, gpus: 2, gpuMemory: 16, gpushare: false}]"


def test_top_reads_each_plugin_through_the_pod_proxy(stack_cluster: object) -> None:
    cluster: StackCluster = stack_cluster(TWO_GPUS)  # type: ignore[operator]
    cluster.label("gpu-node")
    cluster.wait(lambda: (cluster.sandbox.get("pods", "kube-system", "gpushare-device-plugin-gpu-node") or {})
                 .get("status", {}).get("phase") == "Running", "the device-plugin pod Running")  # fmt: skip
    cluster.create_pods(["worker"], 4)
    cluster.wait_running(["worker"])
    result = cluster.kubectl("gpushare", "top", "-A", "-o", "json", "--request-timeout", "10s")
    document = json.loads(result.stdout)
    assert document["unknownNodes"] == [], result.stderr
    assert [(g["node"], g["index"], g["totalBytes"]) for g in document["gpus"]] == [
        ("gpu-node", 0, 16 << 30), ("gpu-node", 1, 16 << 30)
    ]
    assert all(g["usedBytes"] is not None and g["enforced"] is not None for g in document["gpus"])
    assert [(p["name"], p["allocatedBytes"]) for p in document["pods"]] == [("worker", 4 << 30)]
