from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.resources import BY_PLURAL
from kubectl_gpushare.sandbox.tables import human_duration, table


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (10 * 3600, "10h"),
        (3 * 86400 + 3600, "3d1h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
        (-5, "0s"),
    ],
)
def test_human_duration_matches_kubectl(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_pod_and_node_rows() -> None:
    pod = pod_object("p", "ns", [4], node="n1", gpu=0, gpu_memory=80, ip="10.1.2.3")
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    result = table(BY_PLURAL["pods"], [pod], {"resourceVersion": "9"})
    assert [c["name"] for c in result["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    cells = result["rows"][0]["cells"]
    assert cells[:4] == ["p", "1/1", "Running", 0] and cells[5:7] == ["10.1.2.3", "n1"]
    assert result["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    node = node_object("n1", [80, 80], ip="10.0.0.9")
    node["metadata"]["labels"]["node-role.kubernetes.io/gpu"] = ""
    node["spec"]["unschedulable"] = True
    cells = table(BY_PLURAL["nodes"], [node], {}, "None", headers=False)["rows"][0]
    assert "object" not in cells
    assert cells["cells"][:3] == ["n1", "Ready,SchedulingDisabled", "gpu"] and cells["cells"][5] == "10.0.0.9"


def test_event_configmap_and_lease_rows() -> None:
    event = {
        "metadata": {"name": "e1", "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "involvedObject": {"kind": "Pod", "name": "job"},
        "reason": "GPUShareAllocated",
        "message": "GPU 1 ",
        "type": "Normal",
    }
    cells = table(BY_PLURAL["events"], [event], {})["rows"][0]["cells"]
    assert cells[1:] == ["Normal", "GPUShareAllocated", "pod/job", "GPU 1", "e1"]
    cm = {"metadata": {"name": "unhealthy-gpu-n1"}, "data": {"gpus": "0,1"}}
    assert table(BY_PLURAL["configmaps"], [cm], {})["rows"][0]["cells"][:2] == ["unhealthy-gpu-n1", 1]
    lease = {"metadata": {"name": "gpushare-extender"}, "spec": {"holderIdentity": "pod-a"}}
    assert table(BY_PLURAL["leases"], [lease], {})["rows"][0]["cells"][:2] == ["gpushare-extender", "pod-a"]
