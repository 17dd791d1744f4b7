"""``sandbox --stack`` with DRA nodes, through the real kubectl: the tutorial's binpack-1 shares a GPU by claims."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import cel

from .conftest import StackCluster

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not cel.available(), reason=cel.INSTALL_HINT)]

SPEC = """\
nodes:
  - {name: dra-1, dra: true, gpus: 1, gpuMemory: 16}
"""

TEMPLATE = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: gpu-mem-4gi}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: {protocol.DRA_DEVICE_CLASS}
          capacity: {{requests: {{memory: 4Gi}}}}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: binpack-1, labels: {app: binpack-1}}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: binpack-1}}
  template:
    metadata: {labels: {app: binpack-1}}
    spec:
      resourceClaims: [{name: gpu-mem, resourceClaimTemplateName: gpu-mem-4gi}]
      containers:
      - name: binpack-1
        image: cheyang/gpu-player:v2
        resources: {claims: [{name: gpu-mem}]}
"""


def _binpack_pods(cluster: StackCluster) -> list[dict[str, Any]]:
    return [p for p in cluster.sandbox.objects("pods") if (p["metadata"].get("labels") or {}).get("app") == "binpack-1"]


def _condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})


@pytest.mark.slow
def test_binpack_pods_share_one_gpu_by_claims_and_the_fifth_waits_with_the_reason(stack_cluster: Any) -> None:
    cluster: StackCluster = stack_cluster(SPEC)
    kubectl = cluster.kubectl
    cluster.wait(lambda: bool(cluster.sandbox.objects("resourceslices")), "the DRA driver's ResourceSlice", 60)
    assert kubectl("get", "deviceclass", protocol.DRA_DEVICE_CLASS, "-o", "name").stdout.strip() == \
        f"deviceclass.resource.k8s.io/{protocol.DRA_DEVICE_CLASS}"
    rows = [line.split() for line in kubectl("get", "resourceslices").stdout.splitlines()]
    assert rows[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"] and rows[1][1:4] == ["dra-1", protocol.DRA_DRIVER,
                                                                                     "dra-1"]
    kubectl("create", "-f", "-", input=TEMPLATE + "---\n" + DEPLOYMENT.replace("REPLICAS", "5"))

    def settled() -> bool:
        pods = _binpack_pods(cluster)
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        waiting = [p for p in pods if _condition(p).get("status") == "False"]
        return len(pods) == 5 and len(running) == 4 and len(waiting) == 1

    cluster.wait(settled, "4 binpack-1 pods Running and 1 unschedulable", 90)
    claims = {c["metadata"]["name"]: c for c in cluster.sandbox.objects("resourceclaims")}
    allocated = [c for c in claims.values() if (c.get("status") or {}).get("allocation")]
    assert len(claims) == 5 and len(allocated) == 4
    results = [c["status"]["allocation"]["devices"]["results"][0] for c in allocated]
    assert {(r["pool"], r["device"]) for r in results} == {("dra-1", "gpu-0")}
    assert all(r["consumedCapacity"] == {"memory": "4Gi"} and r["shareID"] for r in results)
    assert len({r["shareID"] for r in results}) == 4
    for claim in allocated:
        owner = claim["metadata"]["ownerReferences"][0]["name"]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [owner]
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    waiting = next(p for p in _binpack_pods(cluster) if _condition(p).get("status") == "False")
    assert _condition(waiting)["reason"] == "Unschedulable"
    assert _condition(waiting)["message"] == "0/1 nodes are available: 1 cannot allocate all claims."
    states = sorted(line.split()[1] for line in kubectl("get", "resourceclaims", "--no-headers").stdout.splitlines())
    assert states == ["allocated,reserved"] * 4 + ["pending"]
    events = json.loads(kubectl("get", "events", "--field-selector", "reason=FailedScheduling", "-o", "json").stdout)
    assert any(e["involvedObject"]["name"] == waiting["metadata"]["name"] for e in events["items"])

    # One running pod goes: its claim is deallocated and deleted, and a pending pod takes its share: the
    # waiting one or the victim's replacement, whichever the scheduler tries first (kube-scheduler's
    # queue may also put the new pod ahead of one moved back from the unschedulable pods).
    before = {p["metadata"]["name"] for p in _binpack_pods(cluster)
              if (p.get("status") or {}).get("phase") == "Running"}
    victim = sorted(before)[0]
    kubectl("delete", "pod", victim, "--wait=false")

    def share_taken() -> bool:
        pods = [p for p in _binpack_pods(cluster) if p["metadata"]["name"] != victim]
        running = {p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Running"}
        return len(pods) == 5 and len(running) == 4 and bool(running - before)

    cluster.wait(share_taken, "a pending pod Running on the freed share", 60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        allocated = [c for c in cluster.sandbox.objects("resourceclaims") if (c.get("status") or {}).get("allocation")]
        total = sum(int(c["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"][:-2])
                    for c in allocated)
        if total <= 16:
            break
        time.sleep(0.1)
    assert total <= 16, "the GPU's 16Gi was over-committed"
