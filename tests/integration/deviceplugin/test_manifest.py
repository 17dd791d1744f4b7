from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.allocator import Choice, assignment_annotations
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.ledger import PodRecord
from kubectl_gpushare.sandbox.server import Sandbox

NODE = "gpu-node-1"
MANIFEST = Path(__file__).parents[3] / "manifests" / "base" / "device-plugin.yaml"


def documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def granted() -> set[tuple[str, str]]:
    return {
        (resource, verb)
        for rule in documents()["ClusterRole"]["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_daemonset_runs_the_command_on_gpushare_nodes_with_the_node_name() -> None:
    docs = documents()
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"] == ["serve-device-plugin", "--enforce-memory=hard"]
    assert pod["nodeSelector"] == {"gpushare": "true"}
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    env = {entry["name"]: entry for entry in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert pod["volumes"][0]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"
    assert container["volumeMounts"][0]["mountPath"] == "/var/lib/kubelet/device-plugins"
    assert any(t.get("key") == "nvidia.com/gpu" for t in pod["tolerations"])
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert not pod.get("hostPID"), "limits report usage without the host's PID namespace"
    binding = docs["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == docs["ClusterRole"]["metadata"]["name"]


def test_daemonset_has_what_enforcement_touches() -> None:
    from kubectl_gpushare import protocol

    pod = documents()["DaemonSet"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": protocol.USAGE_PORT_NAME, "containerPort": protocol.USAGE_PORT, "protocol": "TCP"} in container[
        "ports"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # NVML is given host paths: the host's tree sits at the same path, writable
    assert mounts["cgroup"]["mountPath"] == volumes["cgroup"]["hostPath"]["path"] == "/sys/fs/cgroup"
    assert not mounts["cgroup"].get("readOnly")


@pytest.mark.integration
def test_rbac_grants_exactly_what_the_plugin_calls(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox, api: Client
) -> None:
    start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    kubelet.allocate_pod(pods.create("rbac", [2], gpu=0, assume_time=1))
    with pytest.raises(Exception, match="no pending pod"):
        kubelet.allocate_pod(pods.create("stray", [3], gpu=None))  # forces the direct-list fallback
    # The node loses its gpu-count: the plugin reads the node to confirm (as after a stale watch event) and
    # publishes it again. That read once was a GET, which the role does not grant.
    gone = {protocol.RESOURCE_COUNT: None}
    api.patch_node_status(NODE, {"status": {"capacity": gone, "allocatable": gone}})

    def count() -> object:
        node = sandbox.get("nodes", None, NODE)
        return node and node["status"]["capacity"].get(protocol.RESOURCE_COUNT)

    wait_for(lambda: count() == "2", 20, what="gpu-count published again")
    used = {
        (f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb)
        for r in sandbox.requests
        if "(device-plugin)" in r.user_agent
    }
    assert used == granted()


# --- The node-confinement policy: derived from what the plugin writes ------------------------------


def _quoted(expression: str) -> set[str]:
    return set(re.findall(r"'([^']*)'", expression))


def _policy_variables() -> dict[str, str]:
    policy = documents()["ValidatingAdmissionPolicy"]
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_confinement_allows_exactly_the_keys_the_plugin_writes() -> None:
    variables = _policy_variables()
    assert _quoted(variables["podAnnotationKeys"]) == set(protocol.DEVICE_PLUGIN_POD_ANNOTATIONS)
    assert _quoted(variables["nodeAnnotationKeys"]) == set(protocol.DEVICE_PLUGIN_NODE_ANNOTATIONS)
    assert _quoted(variables["nodeStatusResources"]) == set(protocol.DEVICE_PLUGIN_NODE_STATUS_RESOURCES)
    for adopt in (False, True):  # what Allocate writes, adopting a pod the extender did not annotate or not
        choice = Choice(PodRecord("uid", "ns", "p", request=2), gpu=1, container=0, first=True, last=True, adopt=adopt)
        written = assignment_annotations(choice, now_ns=1, gpu_units=16)
        assert set(written) <= set(protocol.DEVICE_PLUGIN_POD_ANNOTATIONS)
    assert variables["nodeName"].count(protocol.NODE_NAME_EXTRA) == 3


def test_confinement_covers_every_write_the_cluster_role_grants_and_only_its_user() -> None:
    docs = documents()
    policy, binding = docs["ValidatingAdmissionPolicy"], docs["ValidatingAdmissionPolicyBinding"]
    writes = {resource for resource, verb in granted() if verb in ("create", "update", "patch", "delete")}
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert set(rule["resources"]) == writes == {"pods", "nodes", "nodes/status"}
    assert rule["operations"] == ["UPDATE"] and {verb for _, verb in granted()} == {"list", "watch", "patch"}
    account = docs["ServiceAccount"]["metadata"]
    assert (account["namespace"], account["name"]) == protocol.DEVICE_PLUGIN_SERVICE_ACCOUNT
    (condition,) = policy["spec"]["matchConditions"]
    assert _quoted(condition["expression"]) == {f"system:serviceaccount:{account['namespace']}:{account['name']}"}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    rules = [re.search(r"rule ([a-z-]+):", v.get("message") or v["messageExpression"]) for v in
             policy["spec"]["validations"]]
    assert [m.group(1) for m in rules if m] == ["node-claim", "own-node-pods", "own-node", "pod-annotations-only",
                                                "pod-annotation-keys", "node-annotations", "node-status"]


def test_confinement_expressions_compile_in_kubernetes_cel() -> None:
    cel = pytest.importorskip("kubectl_gpushare.kube.cel")
    if not cel.available():
        pytest.skip(cel.INSTALL_HINT)
    names = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
    spec = documents()["ValidatingAdmissionPolicy"]["spec"]
    sources = [v["expression"] for v in spec["variables"] + spec["matchConditions"] + spec["validations"]]
    sources += [v["messageExpression"] for v in spec["validations"] if "messageExpression" in v]
    for source in sources:
        cel.compile_expression(source, names)
