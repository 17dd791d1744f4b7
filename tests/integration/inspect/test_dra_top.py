"""``top`` shows the pods of our DRA driver's claims beside their usage, asked of the DRA driver's pod."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from golden.inspect import build_dra_clusters as dra
from usage_standin import GIB, StandIn, plugin_pod, report

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def driver_pod(node: str) -> dict[str, Any]:
    """The DRA driver's pod on ``node`` (manifests/dra/dra-driver.yaml's label), with a usage port."""
    pod = plugin_pod(node, "10.7.2.1")
    pod["metadata"]["name"] = f"gpushare-dra-driver-{node}"
    pod["metadata"]["labels"] = {"component": "gpushare-dra-driver"}
    return pod


def test_dra_pods_have_usage_rows_from_the_dra_driver(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load([
        node_object("dra-a", [], ip="10.7.0.9"),
        dra.resource_slice("dra-a", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-a")], "aaaaa"),
        dra.dra_pod("infer", "dra-a", "infer-gpu"),
        dra.claim("infer-gpu", "dra-a", "gpu-0", "4Gi", ["infer"], owner="infer"),
        dra.shared_pod("reader", "dra-a", "cache"),
        dra.shared_pod("other-reader", "dra-a", "cache"),
        dra.claim("cache", "dra-a", "gpu-0", "2Gi", ["reader", "other-reader"]),
        driver_pod("dra-a"),
    ])
    standin = StandIn()
    try:
        sandbox.register_proxy_target("kube-system", "gpushare-dra-driver-dra-a", protocol.USAGE_PORT_NAME,
                                      "127.0.0.1", standin.port)
        standin.body = report("dra-a", [protocol.UsageGpu(0, "GPU-dra-a-0", 16 * GIB, 6 * GIB, 5 * GIB,
                                                          protocol.ENFORCE_HARD)],
                              [protocol.UsagePod("default", "infer", "uid-default-infer", 0, 4 * GIB, 5 * GIB)])
        result = kubectl("gpushare", "top", "-A", "-o", "json")
    finally:
        standin.close()
    document = json.loads(result.stdout)
    assert result.stderr == "" and document["unknownNodes"] == []
    assert [(g["node"], g["allocatedBytes"], g["usedBytes"], g["totalBytes"]) for g in document["gpus"]] == [
        ("dra-a", 6 * GIB, 5 * GIB, 16 * GIB)]
    assert [(p["name"], p["allocatedBytes"], p["usedBytes"], p["over"]) for p in document["pods"]] == [
        ("cache", 2 * GIB, None, None), ("infer", 4 * GIB, 5 * GIB, True)]
