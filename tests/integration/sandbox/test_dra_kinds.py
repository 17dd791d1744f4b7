"""resource.k8s.io/v1 in the sandbox through kubectl: tables, validation, the status split, the claim controller."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import cel
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
Kubectl = Callable[..., subprocess.CompletedProcess[str]]
DRIVER = protocol.DRA_DRIVER

CLASS = f"""\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: {DRIVER}}}
spec:
  selectors:
  - cel: {{expression: '{protocol.DRA_DEVICE_CLASS_SELECTOR}'}}
"""

SLICE = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: n1-{DRIVER}}}
spec:
  driver: {DRIVER}
  nodeName: n1
  pool: {{name: n1, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    allowMultipleAllocations: true
    attributes: {{index: {{int: 0}}}}
    capacity:
      memory:
        value: 16Gi
        requestPolicy: {{default: 1Gi, validRange: {{min: 1Gi, step: 1Gi}}}}
"""

TEMPLATE = f"""\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: gpu-4gi}}
spec:
  metadata: {{labels: {{team: a}}}}
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: {DRIVER}
          capacity: {{requests: {{memory: 4096Mi}}}}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  schedulerName: nobody
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-4gi}]
"""


def claims_of(sandbox: Sandbox) -> list[dict[str, Any]]:
    return sandbox.objects("resourceclaims")


def test_a_template_claim_is_created_for_its_pod_and_recorded_in_its_status(sandbox: Sandbox,
                                                                            kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=CLASS + "---\n" + TEMPLATE)
    kubectl("apply", "-f", "-", input=POD.replace("NAME", "binpack-1"))
    claim = wait_for(lambda: next(iter(claims_of(sandbox)), None), what="the claim")
    meta = claim["metadata"]
    pod = sandbox.get("pods", "default", "binpack-1")
    assert pod is not None
    assert re.fullmatch(r"binpack-1-gpu-[bcdfghjklmnpqrstvwxz2456789]{5}", meta["name"])
    assert meta["generateName"] == "binpack-1-gpu-"
    assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert meta["labels"] == {"team": "a"}
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "binpack-1",
                                        "uid": pod["metadata"]["uid"], "controller": True,
                                        "blockOwnerDeletion": True}]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"] == {"requests": {"memory": "4Gi"}}
    assert "status" not in claim
    statuses = wait_for(lambda: (sandbox.get("pods", "default", "binpack-1") or {}).get("status", {}).get(
        "resourceClaimStatuses"), what="the pod's resourceClaimStatuses")
    assert statuses == [{"name": "gpu", "resourceClaimName": meta["name"]}]
    table = kubectl("get", "resourceclaims").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "AGE"] and table[1].split()[:2] == [meta["name"], "pending"]
    time.sleep(0.3)  # the controller keeps the one claim: nothing more is created
    assert len(claims_of(sandbox)) == 1


def test_the_claim_status_subresource_and_its_rules(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=CLASS + "---\n" + TEMPLATE + "---\n" + POD.replace("NAME", "p"))
    claim = wait_for(lambda: next(iter(claims_of(sandbox)), None), what="the claim")
    name, pod = claim["metadata"]["name"], sandbox.get("pods", "default", "p")
    assert pod is not None
    reserved = {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}]}}
    refused = kubectl("patch", "resourceclaim", name, "--subresource=status", "--type=merge", "-p",
                      json.dumps(reserved), check=False)
    assert refused.returncode == 1
    assert "status.reservedFor: Forbidden: may not be specified when `allocated` is not set" in refused.stderr
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
                                           "shareID": "00000000-0000-0000-0000-000000000001",
                                           "consumedCapacity": {"memory": "4096Mi"}}]}}
    body = {"status": {**reserved["status"], "allocation": allocation}}
    kubectl("patch", "resourceclaim", name, "--subresource=status", "--type=merge", "-p", json.dumps(body))
    stored = sandbox.get("resourceclaims", "default", name)
    assert stored is not None
    assert stored["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] == {"memory": "4Gi"}
    assert kubectl("get", "resourceclaim", name, "--no-headers").stdout.split()[1] == "allocated,reserved"
    changed = json.loads(json.dumps(body))
    changed["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1"
    refused = kubectl("patch", "resourceclaim", name, "--subresource=status", "--type=merge", "-p",
                      json.dumps(changed), check=False)
    assert "status.allocation: Invalid value" in refused.stderr and "field is immutable" in refused.stderr
    spec = {"spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": DRIVER}}]}}}
    refused = kubectl("patch", "resourceclaim", name, "--type=merge", "-p", json.dumps(spec), check=False)
    assert "spec: Invalid value" in refused.stderr and "field is immutable" in refused.stderr
    # A main-resource update cannot touch the status.
    kubectl("label", "resourceclaim", name, "x=y")
    stored = sandbox.get("resourceclaims", "default", name)
    assert stored is not None and stored["status"]["reservedFor"][0]["name"] == "p"


def test_a_deleted_pod_leaves_its_claims_reservation_and_its_generated_claim_goes(sandbox: Sandbox,
                                                                                   kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=CLASS + "---\n" + TEMPLATE + "---\n" + POD.replace("NAME", "p"))
    claim = wait_for(lambda: next(iter(claims_of(sandbox)), None), what="the claim")
    pod = sandbox.get("pods", "default", "p")
    assert pod is not None
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "shared", "namespace": "default", "finalizers": [
                  "resource.kubernetes.io/delete-protection"]},
              "spec": claim["spec"],
              "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1",
                                                                 "device": "gpu-0"}]}},
                         "reservedFor": [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]},
                                         {"resource": "pods", "name": "gone", "uid": "u-gone"}]}}
    sandbox.load([shared])
    kept = wait_for(lambda: (sandbox.get("resourceclaims", "default", "shared") or {}).get("status", {}).get(
        "reservedFor") == [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}],
        what="the gone pod dropped")
    assert kept
    kubectl("delete", "pod", "p", "--wait=false")
    wait_for(lambda: not (sandbox.get("resourceclaims", "default", "shared") or {}).get("status"),
             what="the shared claim deallocated")
    stored = sandbox.get("resourceclaims", "default", "shared")
    assert stored is not None and "finalizers" not in stored["metadata"]
    wait_for(lambda: sandbox.get("resourceclaims", "default", claim["metadata"]["name"]) is None,
             what="the generated claim deleted")


def test_resourceslices_print_as_kubectl_prints_them(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=CLASS + "---\n" + SLICE)
    rows = [line.split() for line in kubectl("get", "resourceslices").stdout.splitlines()]
    assert rows[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert rows[1][:4] == [f"n1-{DRIVER}", "n1", DRIVER, "n1"]
    nodes = kubectl("get", "resourceslices", "--field-selector", "spec.nodeName=n2", "-o", "name").stdout
    assert nodes.strip() == ""
    assert kubectl("get", "deviceclasses").stdout.split()[:3] == ["NAME", "AGE", DRIVER]


@pytest.mark.parametrize(("document", "message"), [
    (TEMPLATE.replace("4096Mi", "-4Gi"), "capacity.requests[memory]: Invalid value: '-4Gi': must be greater than "
                                         "or equal to zero"),
    (TEMPLATE.replace("capacity: {requests: {memory: 4096Mi}}", "count: -2"), "count: Invalid value: -2: must be "
                                                                              "greater than zero"),
    (TEMPLATE.replace("capacity: {requests: {memory: 4096Mi}}", "selectors: [{cel: {expression: 'device.'}}]"),
     "selectors[0].cel.expression: Invalid value: 'device.': compilation failed"),
    (SLICE.replace("value: 16Gi", "value: -16Gi"), "spec.devices[0]: Invalid value: 'gpu-0': quantity '-16Gi' is "
                                                   "negative"),
    (SLICE.replace("step: 1Gi", "step: 0"), "validRange.step must be at least 1"),
    (CLASS.replace(protocol.DRA_DEVICE_CLASS_SELECTOR, "device.driver =="), "compilation failed"),
])
def test_invalid_dra_objects_are_refused_with_the_field(kubectl: Kubectl, sandbox: Sandbox, document: str,
                                                        message: str) -> None:
    if "compilation" in message and not cel.available():
        pytest.skip(cel.INSTALL_HINT)
    result = kubectl("apply", "-f", "-", input=document, check=False)
    assert result.returncode == 1 and message in result.stderr and "is invalid" in result.stderr
    assert not any(sandbox.objects(kind) for kind in ("resourceclaimtemplates", "resourceslices", "deviceclasses"))


def test_an_absurd_request_is_accepted_by_the_api_as_upstream_does(kubectl: Kubectl, sandbox: Sandbox) -> None:
    kubectl("apply", "-f", "-", input=TEMPLATE.replace("4096Mi", "64Ei"))
    assert sandbox.get("resourceclaimtemplates", "default", "gpu-4gi") is not None


def test_an_absurd_request_does_not_hide_a_later_invalid_one(kubectl: Kubectl, sandbox: Sandbox) -> None:
    # The absurd first request is accepted (as above); the second one's count is still checked.
    document = TEMPLATE.replace("4096Mi", "64Ei") + (
        "      - name: gpu2\n"
        "        exactly: {deviceClassName: " + DRIVER + ", count: -2}\n")
    result = kubectl("apply", "-f", "-", input=document, check=False)
    assert result.returncode == 1 and "requests[1].exactly.count: Invalid value: -2" in result.stderr
    assert sandbox.get("resourceclaimtemplates", "default", "gpu-4gi") is None
