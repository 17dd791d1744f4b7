"""ValidatingAdmissionPolicies in the sandbox, over HTTP: the shipped node-confinement policy with
pod-bound service-account tokens, the API server's denial wording, and bad policies that follow
their failurePolicy (never a 500)."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.server import Sandbox

pytest.importorskip("cel_expr_python")
pytestmark = pytest.mark.integration

MANIFEST = Path(__file__).parents[3] / "manifests" / "base" / "device-plugin.yaml"
POLICY = "gpushare-device-plugin-confinement"
SA = protocol.DEVICE_PLUGIN_SERVICE_ACCOUNT[1]
VAPS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def call(sb: Sandbox, method: str, path: str, body: Any = None, token: str | None = None,
         content_type: str = "application/json") -> tuple[int, Any, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=10)
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=None if body is None else json.dumps(body).encode(), headers=headers)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, json.loads(raw) if raw else None, response


def created(sb: Sandbox, path: str, body: Any, token: str | None = None) -> Any:
    status, answer, _ = call(sb, "POST", path, body, token)
    assert status == 201, answer
    return answer


def denial(pod_or_node: str, name: str, message: str) -> dict[str, Any]:
    """The Status kube-apiserver answers when a Deny binding's policy refuses a write."""
    full = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {message}"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{pod_or_node} "{name}" is forbidden: {full}', "reason": "Invalid", "code": 422,
            "details": {"name": name, "kind": pod_or_node, "causes": [{"message": full}]}}


def install_confinement(sb: Sandbox) -> None:
    """The ServiceAccount, the policy and its binding, as ``kubectl apply`` of the manifest creates them."""
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if doc["kind"] == "ServiceAccount":
            created(sb, "/api/v1/namespaces/kube-system/serviceaccounts", doc)
        elif doc["kind"] == "ValidatingAdmissionPolicy":
            created(sb, VAPS, doc)
        elif doc["kind"] == "ValidatingAdmissionPolicyBinding":
            created(sb, BINDINGS, doc)


class Cluster:
    """Two nodes, each with a device-plugin pod (running as the plugin's ServiceAccount) and a GPU pod."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb
        install_confinement(sb)
        for node in ("node-a", "node-b"):
            created(sb, "/api/v1/nodes", {"metadata": {"name": node, "labels": {"gpushare": "true"}},
                                          "status": {"capacity": {"cpu": "8"}}})
            created(sb, "/api/v1/namespaces/kube-system/pods", {
                "metadata": {"name": f"plugin-{node}"},
                "spec": {"nodeName": node, "serviceAccountName": SA, "containers": [{"name": "p", "image": "dp"}]}})
            created(sb, "/api/v1/namespaces/default/pods", {
                "metadata": {"name": f"gpu-{node}", "labels": {"app": "train"}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "cuda"}]}})

    def token(self, node: str | None) -> str:
        """A TokenRequest over HTTP: bound to the node's plugin pod, or to nothing (no node claim)."""
        spec = {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": f"plugin-{node}"}} if node else {}
        answer = created(self.sb, f"/api/v1/namespaces/kube-system/serviceaccounts/{SA}/token",
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        return str(answer["status"]["token"])

    def patch(self, path: str, body: Any, token: str, content_type: str = STRATEGIC) -> tuple[int, Any]:
        status, answer, _ = call(self.sb, "PATCH", path, body, token, content_type)
        return status, answer


@pytest.fixture
def cluster(sandbox: Sandbox) -> Cluster:
    return Cluster(sandbox)


def annotate(key: str, value: str = "true") -> dict[str, Any]:
    return {"metadata": {"annotations": {key: value}}}


def test_a_node_a_token_is_refused_on_node_b_pods_with_the_upstream_status(cluster: Cluster) -> None:
    token = cluster.token("node-a")
    status, answer = cluster.patch("/api/v1/namespaces/default/pods/gpu-node-b", annotate(protocol.ANN_ASSIGNED),
                                   token)
    assert status == 422
    assert answer == denial("pods", "gpu-node-b", "rule own-node-pods: the device plugin of node node-a may not "
                                                  "change pod default/gpu-node-b, which is bound to node node-b")
    pod = cluster.sb.get("pods", "default", "gpu-node-b") or {}
    assert protocol.ANN_ASSIGNED not in (pod["metadata"].get("annotations") or {})
    record = cluster.sb.requests[-1]
    assert (record.user, record.status) == (f"system:serviceaccount:kube-system:{SA}", 422)


def test_the_plugin_writes_its_own_pods_annotations_node_annotation_and_gpu_count(cluster: Cluster) -> None:
    token = cluster.token("node-a")
    written = {key: "1" for key in protocol.DEVICE_PLUGIN_POD_ANNOTATIONS}
    status, pod = cluster.patch("/api/v1/namespaces/default/pods/gpu-node-a",
                                {"metadata": {"uid": cluster.sb.get("pods", "default", "gpu-node-a")["metadata"]["uid"],
                                              "annotations": written}}, token)
    assert status == 200, pod
    assert written.items() <= pod["metadata"]["annotations"].items()
    status, node = cluster.patch("/api/v1/nodes/node-a", annotate(protocol.ANN_NODE_GPUS, "[]"), token)
    assert status == 200, node
    count = {protocol.RESOURCE_COUNT: "2"}
    status, node = cluster.patch("/api/v1/nodes/node-a/status",
                                 {"status": {"capacity": count, "allocatable": count}}, token)
    assert status == 200 and node["status"]["capacity"] == {"cpu": "8", **count}, node


@pytest.mark.parametrize(("path", "body", "kind", "name", "rule"), [
    ("/api/v1/namespaces/default/pods/gpu-node-a", annotate("example.com/owner", "me"), "pods", "gpu-node-a",
     "pod-annotation-keys"),
    ("/api/v1/namespaces/default/pods/gpu-node-a", {"spec": {"activeDeadlineSeconds": 5}}, "pods", "gpu-node-a",
     "pod-annotations-only"),
    ("/api/v1/namespaces/default/pods/gpu-node-a", {"metadata": {"labels": {"app": "other"}}}, "pods", "gpu-node-a",
     "pod-annotations-only"),
    ("/api/v1/nodes/node-b", annotate(protocol.ANN_NODE_GPUS, "[]"), "nodes", "node-b", "own-node"),
    ("/api/v1/nodes/node-b/status", {"status": {"capacity": {protocol.RESOURCE_COUNT: "8"}}}, "nodes", "node-b",
     "own-node"),
    ("/api/v1/nodes/node-a", {"metadata": {"labels": {"gpushare": "false"}}}, "nodes", "node-a", "node-annotations"),
    ("/api/v1/nodes/node-a", {"spec": {"unschedulable": True}}, "nodes", "node-a", "node-annotations"),
    ("/api/v1/nodes/node-a/status", {"status": {"capacity": {protocol.RESOURCE_MEM: "999"}}}, "nodes", "node-a",
     "node-status"),
], ids=["other-annotation", "pod-spec", "pod-labels", "other-node", "other-node-status", "node-labels", "node-spec",
        "gpu-mem"])
def test_every_other_write_of_the_plugin_is_refused_naming_its_rule(
    cluster: Cluster, path: str, body: Any, kind: str, name: str, rule: str
) -> None:
    before = cluster.sb.objects(kind)
    status, answer = cluster.patch(path, body, cluster.token("node-a"), MERGE)
    assert status == 422 and answer["reason"] == "Invalid", answer
    assert answer["message"].startswith(f'{kind} "{name}" is forbidden: ValidatingAdmissionPolicy ')
    assert f"denied request: rule {rule}:" in answer["message"]
    assert cluster.sb.objects(kind) == before


def test_a_token_without_the_node_claim_is_refused_and_other_users_are_not_judged(cluster: Cluster) -> None:
    status, answer = cluster.patch("/api/v1/namespaces/default/pods/gpu-node-a", annotate(protocol.ANN_ASSIGNED),
                                   cluster.token(None))
    assert status == 422 and "rule node-claim: the request's token names no node" in answer["message"]
    admin = call(cluster.sb, "PATCH", "/api/v1/nodes/node-b", {"metadata": {"labels": {"x": "y"}}},
                 content_type=MERGE)
    assert admin[0] == 200


def test_the_real_kubectl_mints_a_node_a_token_and_is_refused_on_node_b(
    kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    pytest.importorskip("cryptography")
    with Sandbox(auth=True, https=True) as sb:
        admin = {**kube_env, "KUBECONFIG": str(sb.write_kubeconfig(tmp_path / "admin"))}
        wanted = ("ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        objects = [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc["kind"] in wanted]
        for node in ("node-a", "node-b"):
            objects += [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"plugin-{node}", "namespace": "kube-system"},
                 "spec": {"nodeName": node, "serviceAccountName": SA, "containers": [{"name": "p", "image": "dp"}]}},
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gpu-{node}", "namespace": "default"},
                 "spec": {"nodeName": node, "containers": [{"name": "c", "image": "cuda"}]}}]
        binary = kubectl_binaries[0]
        applied = subprocess.run([binary, "apply", "-f", "-"], input=yaml.safe_dump_all(objects), env=admin,
                                 capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr
        minted = subprocess.run([binary, "create", "token", SA, "-n", "kube-system", "--bound-object-kind", "Pod",
                                 "--bound-object-name", "plugin-node-a"], env=admin, capture_output=True, text=True,
                                timeout=60)
        assert minted.returncode == 0, minted.stderr
        plugin = {**admin, "KUBECONFIG": str(sb.write_kubeconfig(tmp_path / "plugin", token=minted.stdout.strip()))}
        refused = subprocess.run([binary, "annotate", "pod", "gpu-node-b", f"{protocol.ANN_ASSIGNED}=true"],
                                 env=plugin, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert (f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: rule own-node-pods: "
                "the device plugin of node node-a may not change pod default/gpu-node-b") in refused.stderr
        allowed = subprocess.run([binary, "annotate", "pod", "gpu-node-a", f"{protocol.ANN_ASSIGNED}=true"],
                                 env=plugin, capture_output=True, text=True, timeout=60)
        assert allowed.returncode == 0, allowed.stderr
        assert {r.user for r in sb.requests if r.verb == "patch"} == {f"system:serviceaccount:kube-system:{SA}"}


# --- Tokens ---------------------------------------------------------------------------------------


def test_token_requests_are_checked_as_the_api_server_checks_them(cluster: Cluster) -> None:
    base = f"/api/v1/namespaces/kube-system/serviceaccounts/{SA}/token"
    sb = cluster.sb
    created(sb, "/api/v1/namespaces/kube-system/pods", {
        "metadata": {"name": "other"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})

    def refused(path: str, spec: dict[str, Any]) -> tuple[int, str]:
        status, answer, _ = call(sb, "POST", path, {"spec": spec})
        return status, answer["message"]

    assert refused("/api/v1/namespaces/kube-system/serviceaccounts/nobody/token", {}) == (
        404, 'serviceaccounts "nobody" not found')
    assert refused(base, {"expirationSeconds": 10}) == (
        422, 'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 10: '
        'may not specify a duration less than 10 minutes')
    assert refused(base, {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "other"}}) == (
        400, f'cannot bind token for serviceaccount "{SA}" to pod running with different serviceaccount name.')
    assert refused(base, {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "plugin-node-a",
                                             "uid": "not-its-uid"}})[0] == 409
    assert refused(base, {"boundObjectRef": {"kind": "Deployment", "apiVersion": "apps/v1", "name": "x"}}) == (
        400, "cannot bind token to object of type apps/v1, Kind=Deployment")
    assert refused(base, {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": ["other"]}}) == (
        400, "json: cannot unmarshal into Go struct field BoundObjectReference.spec.boundObjectRef.name of type "
             "string")
    assert refused(base, {"expirationSeconds": -1})[0] == 422


def test_a_pod_bound_token_dies_with_its_pod() -> None:
    with Sandbox(auth=True) as sb:
        admin = Sandbox.ADMIN_TOKEN
        created(sb, "/api/v1/namespaces/kube-system/serviceaccounts", {"metadata": {"name": SA}}, admin)
        created(sb, "/api/v1/nodes", {"metadata": {"name": "node-a"}}, admin)
        created(sb, "/api/v1/namespaces/kube-system/pods", {"metadata": {"name": "p"}, "spec": {
            "nodeName": "node-a", "serviceAccountName": SA, "containers": [{"name": "c", "image": "i"}]}}, admin)
        token = sb.request_token("kube-system", SA, pod="p")
        assert call(sb, "GET", "/api/v1/nodes", token=token)[0] == 200
        assert call(sb, "DELETE", "/api/v1/namespaces/kube-system/pods/p", token=admin)[0] == 200
        assert call(sb, "GET", "/api/v1/nodes", token=token)[0] == 401


# --- Bad policies follow their failurePolicy -----------------------------------------------------


def policy(name: str, expression: str, failure: str = "Fail", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": failure, "validations": [{"expression": expression, **extra}],
                     "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                             "operations": ["CREATE"], "resources": ["configmaps"]}]}}}


def binding(name: str, actions: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": actions or ["Deny"], **spec}}


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


@pytest.fixture
def seeded(sandbox: Sandbox) -> Iterator[Sandbox]:
    """Policies stored without the API's checks (as a policy written by an older server can be)."""
    sandbox.load([
        policy("broken-fail", "object.data.k ==", "Fail"),
        policy("broken-ignore", "object.data.k ==", "Ignore"),
        policy("runtime-fail", "object.data.missing == 'x'", "Fail"),
        policy("runtime-ignore", "object.data.missing == 'x'", "Ignore"),
    ])
    yield sandbox


@pytest.mark.parametrize(("name", "allowed", "message"), [
    ("broken-fail", False, "compilation error: "),
    ("broken-ignore", True, ""),
    ("runtime-fail", False, "expression 'object.data.missing == 'x'' resulted in error: "),
    ("runtime-ignore", True, ""),
], ids=["uncompilable-fail", "uncompilable-ignore", "runtime-error-fail", "runtime-error-ignore"])
def test_a_policy_that_cannot_be_evaluated_follows_its_failure_policy(
    seeded: Sandbox, name: str, allowed: bool, message: str
) -> None:
    created(seeded, BINDINGS, binding(name))
    status, answer, _ = call(seeded, "POST", "/api/v1/namespaces/default/configmaps", configmap("c"))
    if allowed:
        assert status == 201, answer
        return
    assert status == 422 and answer["reason"] == "Invalid"
    assert answer["message"].startswith(f"configmaps \"c\" is forbidden: ValidatingAdmissionPolicy '{name}' with "
                                        f"binding '{name}' denied request: {message}")
    assert "\n" not in answer["message"]
    assert seeded.get("configmaps", "default", "c") is None


def test_a_policy_that_does_not_compile_is_refused_when_created(sandbox: Sandbox) -> None:
    status, answer, _ = call(sandbox, "POST", VAPS, policy("bad", "object.data.k =="))
    assert status == 422 and answer["reason"] == "Invalid"
    assert answer["details"]["causes"][0]["field"] == "spec.validations[0].expression"
    assert "compilation failed: " in answer["message"]
    status, answer, _ = call(sandbox, "POST", BINDINGS, binding("bad", ["Deny", "Warn"]))
    assert status == 422 and "must not contain both Deny and Warn" in answer["message"]


def test_messages_selectors_reasons_and_warnings(sandbox: Sandbox) -> None:
    created(sandbox, "/api/v1/namespaces", {"metadata": {"name": "guarded", "labels": {"team": "gpu"}}})
    created(sandbox, VAPS, policy("named", "object.data.k == 'ok'", messageExpression="'k is ' + object.data.k",
                                  reason="Forbidden"))
    created(sandbox, BINDINGS, binding("named", matchResources={
        "namespaceSelector": {"matchLabels": {"team": "gpu"}},
        "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["free"]}]}}))
    path = "/api/v1/namespaces/{}/configmaps"
    status, answer, _ = call(sandbox, "POST", path.format("guarded"), configmap("a"))
    assert (status, answer["reason"]) == (403, "Forbidden")
    assert answer["message"].endswith("denied request: k is v")
    assert call(sandbox, "POST", path.format("guarded"), configmap("b", tier="free"))[0] == 201  # objectSelector
    assert call(sandbox, "POST", path.format("elsewhere"), configmap("c"))[0] == 201  # namespaceSelector
    created(sandbox, VAPS, policy("warned", "false", messageExpression="object.nope", message="static words"))
    created(sandbox, BINDINGS, binding("warned", ["Warn"]))
    status, answer, response = call(sandbox, "POST", path.format("elsewhere"), configmap("d"))
    assert status == 201, answer  # Warn lets the write through, with the failed messageExpression's fallback
    assert response.getheader("Warning") == (
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'warned' with binding 'warned': static words\"")


@pytest.mark.parametrize(("message", "shown"), [
    ("line one\nline two", "line one line two"),
    ("a\r\nX-Injected: yes", "a  X-Injected: yes"),
    ("naïve ✓ 警告", "naïve ✓ 警告"),
], ids=["line-break", "header-injection", "not-latin-1"])
def test_a_warning_from_a_stored_message_stays_one_utf8_header(sandbox: Sandbox, message: str, shown: str) -> None:
    """A policy stored as it may be (loaded, or written by an older server) warns on one line, in UTF-8,
    and the write's answer still arrives (Go's net/http turns CR/LF into spaces)."""
    sandbox.load([policy("w", "false", message=message)])
    created(sandbox, BINDINGS, binding("w", ["Warn"]))
    status, answer, response = call(sandbox, "POST", "/api/v1/namespaces/default/configmaps", configmap("d"))
    assert status == 201, answer
    assert response.getheader("X-Injected") is None
    warning = (response.getheader("Warning") or "").encode("latin-1").decode("utf-8")  # read as Latin-1
    assert warning == f"299 - \"Validation failed for ValidatingAdmissionPolicy 'w' with binding 'w': {shown}\""


def test_a_policy_message_with_a_line_break_is_refused_when_created(sandbox: Sandbox) -> None:
    status, answer, _ = call(sandbox, "POST", VAPS, policy("lines", "false", message="one\ntwo"))
    assert status == 422 and answer["reason"] == "Invalid", answer
    assert "spec.validations[0].message" in answer["message"]
    assert "message must not contain line breaks" in answer["message"]
    assert call(sandbox, "POST", VAPS, policy("trailing", "false", message="one line\n"))[0] == 201
