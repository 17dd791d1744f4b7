"""resource.k8s.io/v1 in the sandbox through kubectl: tables, validation, the status split, the claim controller."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from costly_cel import NESTED_BIND, REPLACE_CHAIN
from sandbox_http import send
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


def test_an_entry_whose_status_names_no_claim_gets_none(sandbox: Sandbox, kubectl: Kubectl) -> None:
    # handleClaim (controller.go): resourceclaim.Name gives no name for a status entry without
    # resourceClaimName (absent or null): "no claim needed", nothing is made for it. Before, the
    # sandbox's controller made one for each such entry and recorded it over the status entry.
    kubectl("apply", "-f", "-", input=CLASS + "---\n" + TEMPLATE)
    entries = [{"name": name, "resourceClaimTemplateName": "gpu-4gi"} for name in ("a", "b", "gpu")]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lean", "namespace": "default"},
           "spec": {"schedulerName": "nobody", "resourceClaims": entries,
                    "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]},
           "status": {"resourceClaimStatuses": [{"name": "a"}, {"name": "b", "resourceClaimName": None}]}}
    sandbox.load([pod])

    def recorded() -> list[dict[str, Any]] | None:
        found = ((sandbox.get("pods", "default", "lean") or {}).get("status") or {}).get("resourceClaimStatuses")
        return found if any(s.get("name") == "gpu" for s in found or []) else None

    statuses = wait_for(recorded, what="the gpu entry's claim recorded")
    claims = [c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] for c in claims_of(sandbox)]
    assert claims == ["gpu"]
    assert statuses[:2] == [{"name": "a"}, {"name": "b", "resourceClaimName": None}]


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
    (SLICE.replace("nodeName: n1", "nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, "
                   "operator: In, values: [n1]}]}, {matchFields: []}]}"),
     "spec.nodeSelector: Invalid value: 2 terms: must have exactly one node selector term"),
    (SLICE.replace("nodeName: n1", "nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: rack, "
                   "operator: Gt, values: [a]}]}]}"),
     "spec.nodeSelector: Invalid value: term 0: rack: Gt needs one integer value"),
    (CLASS.replace(protocol.DRA_DEVICE_CLASS_SELECTOR, "device.driver =="), "compilation failed"),
])
def test_invalid_dra_objects_are_refused_with_the_field(kubectl: Kubectl, sandbox: Sandbox, document: str,
                                                        message: str) -> None:
    if "compilation" in message and not cel.available():
        pytest.skip(cel.INSTALL_HINT)
    result = kubectl("apply", "-f", "-", input=document, check=False)
    assert result.returncode == 1 and message in result.stderr and "is invalid" in result.stderr
    assert not any(sandbox.objects(kind) for kind in ("resourceclaimtemplates", "resourceslices", "deviceclasses"))


def test_a_slice_with_a_node_selector_is_accepted(kubectl: Kubectl, sandbox: Sandbox) -> None:
    # resource/v1 ResourceSliceSpec.NodeSelector is a v1.NodeSelector, not a pod's map[string]string.
    kubectl("apply", "-f", "-", input=SLICE.replace("nodeName: n1", "nodeSelector: {nodeSelectorTerms: [{"
                                                    "matchExpressions: [{key: rack, operator: In, values: [a]}]}]}"))
    stored = sandbox.get("resourceslices", "", f"n1-{DRIVER}")
    assert stored is not None and stored["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0][
        "values"] == ["a"]


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


CLAIMS_PATH = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
TEMPLATES_PATH = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
INT64_MAX = 2**63 - 1


def claim_body(**exactly: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, **exactly}}]}}}


def slice_body(pool: dict[str, Any] | None = None, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": DRIVER, "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1, **(pool or {})},
                     "devices": [{"name": "gpu-0", "attributes": attributes or {"index": {"int": 0}}}]}}


def template_body(meta: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
            "spec": {"metadata": meta, "spec": claim_body()["spec"]}}


OVERFLOWS = [
    (CLAIMS_PATH, claim_body(count=INT64_MAX + 1),
     "ExactDeviceRequest.spec.devices.requests.exactly.count", f"number {INT64_MAX + 1}"),
    (CLAIMS_PATH, claim_body(count=-INT64_MAX - 2),
     "ExactDeviceRequest.spec.devices.requests.exactly.count", f"number {-INT64_MAX - 2}"),
    (CLAIMS_PATH, claim_body(count=2.5), "ExactDeviceRequest.spec.devices.requests.exactly.count", "number 2.5"),
    (CLAIMS_PATH, claim_body(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                           "tolerationSeconds": 10**30}]),
     "DeviceToleration.spec.devices.requests.exactly.tolerations.tolerationSeconds", f"number {10**30}"),
    (CLAIMS_PATH, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                       {"name": "a", "deviceClassName": DRIVER, "count": "3"}]}]}}},
     "DeviceSubRequest.spec.devices.requests.firstAvailable.count", "string"),
    (SLICES_PATH, slice_body({"generation": INT64_MAX + 1}), "ResourcePool.spec.pool.generation",
     f"number {INT64_MAX + 1}"),
    (SLICES_PATH, slice_body({"resourceSliceCount": 2**64}), "ResourcePool.spec.pool.resourceSliceCount",
     f"number {2**64}"),
    (SLICES_PATH, slice_body(attributes={"index": {"int": INT64_MAX + 1}}),
     "DeviceAttribute.spec.devices.attributes.int", f"number {INT64_MAX + 1}"),
    (SLICES_PATH, {**slice_body(), "metadata": {"name": "s", "generation": 10**19}},
     "ObjectMeta.metadata.generation", f"number {10**19}"),
    (TEMPLATES_PATH, template_body({"deletionGracePeriodSeconds": 2**63}),
     "ObjectMeta.spec.metadata.deletionGracePeriodSeconds", f"number {2**63}"),
]


@pytest.mark.parametrize(("path", "body", "field", "value"), OVERFLOWS,
                         ids=[f"{o[2].rsplit('.', 1)[-1]}-{i}" for i, o in enumerate(OVERFLOWS)])
def test_an_int64_field_outside_int64_is_a_one_line_400_and_nothing_is_stored(
        sandbox: Sandbox, path: str, body: dict[str, Any], field: str, value: str) -> None:
    status, answer = send(sandbox, "POST", path, body)
    kind = body["kind"]
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"] == (f'{kind} in version "v1" cannot be handled as a {kind}: json: cannot unmarshal '
                                 f"{value} into Go struct field {field} of type int64")
    assert not any(sandbox.objects(k) for k in ("resourceclaims", "resourceslices", "resourceclaimtemplates"))


def test_int64_bounds_are_accepted_and_a_status_write_past_them_is_refused(sandbox: Sandbox) -> None:
    status, stored = send(sandbox, "POST", SLICES_PATH, slice_body(
        {"generation": INT64_MAX, "resourceSliceCount": INT64_MAX}, {"index": {"int": -INT64_MAX - 1}}))
    assert status == 201, stored
    assert stored["spec"]["pool"]["generation"] == INT64_MAX
    status, claim = send(sandbox, "POST", CLAIMS_PATH, claim_body(count=INT64_MAX))
    assert status == 201 and claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == INT64_MAX, claim
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}}
    condition = {"type": "Ready", "status": "True", "reason": "R", "message": "", "observedGeneration": 2**63,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    patch = {"status": {"allocation": allocation, "devices": [
        {"driver": DRIVER, "pool": "n1", "device": "gpu-0", "conditions": [condition]}]}}
    status, answer = send(sandbox, "PATCH", f"{CLAIMS_PATH}/c/status", patch, "application/merge-patch+json")
    assert status == 400 and answer["message"].endswith(
        f"cannot unmarshal number {2**63} into Go struct field "
        "Condition.status.devices.conditions.observedGeneration of type int64"), answer
    assert "\n" not in answer["message"]
    assert not (sandbox.get("resourceclaims", "default", "c") or {}).get("status")
    assert not [r for r in sandbox.requests if r.status >= 500]


CLASSES_PATH = "/apis/resource.k8s.io/v1/deviceclasses"


@pytest.mark.parametrize("selector", [NESTED_BIND, REPLACE_CHAIN], ids=["nested-bind", "replace-chain"])
def test_a_selector_over_the_cost_limit_is_refused_with_422_as_upstream(sandbox: Sandbox, selector: str) -> None:
    if not cel.available():
        pytest.skip(cel.INSTALL_HINT)
    cel_selector = [{"cel": {"expression": selector}}, {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "costly"},
                    "spec": {"selectors": cel_selector}}
    for path, body, field in (
            (CLAIMS_PATH, claim_body(selectors=cel_selector), "spec.devices.requests[0].exactly.selectors[0]"),
            (CLASSES_PATH, device_class, "spec.selectors[0]")):
        status, answer = send(sandbox, "POST", path, body)
        kind = body["kind"]
        assert (status, answer["reason"]) == (422, "Invalid"), answer
        name = body["metadata"]["name"]
        assert answer["message"] == (  # apimachinery's NewInvalid: the kind qualified by its group
            f'{kind}.resource.k8s.io "{name}" is invalid: {field}.cel.expression: Forbidden: too complex, '
            'exceeds cost limit')
        assert answer["details"]["causes"] == [{"reason": "FieldValueForbidden", "field": f"{field}.cel.expression",
                                                "message": "Forbidden: too complex, exceeds cost limit"}]
    assert not sandbox.objects("resourceclaims") and not sandbox.objects("deviceclasses")
    # The second selector alone is ordinary and admitted.
    status, _ = send(sandbox, "POST", CLASSES_PATH, {**device_class, "spec": {"selectors": cel_selector[1:]}})
    assert status == 201
