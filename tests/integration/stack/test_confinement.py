"""``sandbox --stack`` with node confinement on: each device plugin writes through the shipped policy."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.cli import stack_components

from .conftest import StackCluster

pytest.importorskip("cel_expr_python")
pytestmark = pytest.mark.integration

SPEC = ("nodes: [{name: node-a, gpus: 1, gpuMemory: 8, gpushare: false}, "
        "{name: node-b, gpus: 1, gpuMemory: 8, gpushare: false}]")
PLUGIN_USER = "system:serviceaccount:kube-system:" + stack_components.DEVICE_PLUGIN_ACCOUNT


def test_gpu_pods_run_with_every_plugin_write_judged_by_the_confinement_policy(
    stack_cluster: Callable[[str], StackCluster],
) -> None:
    cluster = stack_cluster(SPEC)
    sb = cluster.sandbox
    assert sb.get("validatingadmissionpolicies", None, "gpushare-device-plugin-confinement") is not None
    assert sb.get("validatingadmissionpolicybindings", None, "gpushare-device-plugin-confinement") is not None
    cluster.label("node-a")
    cluster.label("node-b")
    cluster.create_pods(["small", "large"], 8)  # one fills a node: one pod on each
    cluster.wait_running(["small", "large"])
    plugin_writes = [r for r in sb.requests if r.verb == "patch" and "(device-plugin)" in r.user_agent]
    assert {(r.resource, r.subresource) for r in plugin_writes} >= {("pods", ""), ("nodes", ""), ("nodes", "status")}
    assert {r.user for r in plugin_writes} == {PLUGIN_USER}
    assert all(r.status == 200 for r in plugin_writes), [(r.path, r.status) for r in plugin_writes]
    for name in ("small", "large"):
        pod = sb.get("pods", "default", name) or {}
        assert pod["metadata"]["annotations"][protocol.ANN_ASSIGNED] == protocol.ASSIGNED_TRUE

    # The same kind of token the node-a plugin holds is refused on node-b's pod.
    token = sb.request_token("kube-system", stack_components.DEVICE_PLUGIN_ACCOUNT,
                             pod=stack_components.device_plugin_pod_name("node-a"))
    on_b = next(name for name in ("small", "large") if (sb.get("pods", "default", name) or {})["spec"]["nodeName"]
                == "node-b")
    conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=10)
    conn.request("PATCH", f"/api/v1/namespaces/default/pods/{on_b}",
                 body=json.dumps({"metadata": {"annotations": {protocol.ANN_ASSIGNED: "false"}}}).encode(),
                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    assert response.status == 422 and "rule own-node-pods" in answer["message"]
