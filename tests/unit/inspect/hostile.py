"""A cluster where every pod but one, and one node, carries a hostile value (shared by unit and integration tests)."""

from __future__ import annotations

from typing import Any

from kubectl_gpushare import protocol

GOOD_POD_MEM = 3
"""The only valid claim in `hostile_cluster`: 3 GiB on GPU 1 of node ``n1`` (2 GPUs of 8 GiB)."""


def node(name: str, count: str, mem: str = "16") -> dict[str, Any]:
    resources = {protocol.RESOURCE_MEM: mem, protocol.RESOURCE_COUNT: count}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpushare": "true"}},
        "status": {"allocatable": resources, "capacity": resources},
    }


def pod(name: str, node_name: str, limits: list[str], annotations: dict[str, str]) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": "cuda", "resources": {"limits": {protocol.RESOURCE_MEM: mem}}}
        for i, mem in enumerate(limits)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"nodeName": node_name, "containers": containers},
        "status": {"phase": "Running"},
    }


def hostile_cluster() -> list[dict[str, Any]]:
    """Node n1 (2 x 8 GiB), node n-huge (gpu-count 1e8), one good pod and one pod per hostile value."""
    idx0 = {protocol.ANN_IDX: "0"}
    return [
        node("n1", "2"),
        node("n-huge", "1e8"),
        node("n-1e7", "1e7"),
        pod("good", "n1", [str(GOOD_POD_MEM)], {protocol.ANN_IDX: "1"}),
        pod("negative-allocation", "n1", ["1"], {**idx0, protocol.ANN_ALLOCATION: '{"0":{"0":-400}}'}),
        pod("deep-allocation", "n1", ["1"], {**idx0, protocol.ANN_ALLOCATION: '{"0":' * 100_000 + "1" + "}" * 100_000}),
        pod("huge-index", "n1", ["1"], {protocol.ANN_IDX: "9" * 5000}),
        pod("huge-limit", "n1", ["9" * 5000], idx0),
        pod("exp-limit", "n1", ["1e999999"], idx0),
        pod("exp-limit-2", "n1", ["1e9999999"], idx0),
        pod("tiny-limit", "n1", ["1e-9999999"], {protocol.ANN_IDX: "1"}),
        pod("negative-limit", "n1", ["-40"], idx0),
        pod("on-huge-node", "n-huge", ["2"], idx0),
    ]
