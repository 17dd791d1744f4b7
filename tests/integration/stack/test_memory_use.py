"""`uses:` in a spec: stand-in containers allocate through the fake driver; enforcement holds them to their share."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpushare import protocol

pytestmark = pytest.mark.integration

GIB = 1 << 30
SPEC = """
nodes: [{name: gpu-a, gpus: 1, gpuMemory: 16}]
pods:
  - {name: greedy, memory: 2, uses: 6GiB}
  - {name: modest, memory: 4, uses: 3GiB}
"""


def usage(cluster: Any, node: str) -> protocol.UsageReport:
    agent = cluster.stack.nodes.agents[node]
    cluster.wait(lambda: agent.usage_port is not None, "the usage port")
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.usage_port}{protocol.USAGE_PATH}", timeout=10) as resp:
        return protocol.decode_usage_report(resp.read())


def pods_used(cluster: Any) -> dict[str, tuple[int | None, int | None]]:
    return {p.name: (p.used_bytes, p.limit_bytes) for p in usage(cluster, "gpu-a").pods}


def container_state(cluster: Any, name: str) -> dict[str, Any]:
    pod = cluster.sandbox.get("pods", "default", name) or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state") or {})


def test_without_enforcement_a_pod_uses_more_than_its_share(stack_cluster: Callable[..., Any]) -> None:
    cluster = stack_cluster(SPEC)
    cluster.wait_running(["greedy", "modest"])
    cluster.wait(lambda: pods_used(cluster) == {"greedy": (6 * GIB, None), "modest": (3 * GIB, None)},
                 "usage from the NVML-process fallback or limits")
    gpu = usage(cluster, "gpu-a").gpus[0]
    assert (gpu.enforcement, gpu.used_bytes, gpu.allocated_bytes) == ("off", 9 * GIB, 6 * GIB)


def test_hard_enforcement_holds_the_pod_to_its_share(stack_cluster: Callable[..., Any]) -> None:
    cluster = stack_cluster(SPEC, enforce="hard")
    cluster.wait(lambda: "waiting" in container_state(cluster, "greedy"), "greedy to crash on out-of-memory")
    assert container_state(cluster, "greedy")["waiting"]["reason"] == "CrashLoopBackOff"
    assert "out of memory" in container_state(cluster, "greedy")["waiting"]["message"]
    events = [e for e in cluster.sandbox.objects("events") if e["involvedObject"].get("name") == "greedy"]
    assert ("BackOff", "Warning", "kubelet") in [(e["reason"], e["type"], e["source"]["component"]) for e in events]
    cluster.wait_running(["modest"])
    cluster.wait(lambda: pods_used(cluster).get("modest") == (3 * GIB, 4 * GIB), "modest's use within its limit")
    assert pods_used(cluster)["greedy"] == (0, 2 * GIB)
    gpu = usage(cluster, "gpu-a").gpus[0]
    assert (gpu.enforcement, gpu.reason) == ("hard", "")
