from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.sandbox.server import Sandbox

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
def test_rbac_grants_exactly_what_the_plugin_calls(kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox) -> None:
    start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    kubelet.allocate_pod(pods.create("rbac", [2], gpu=0, assume_time=1))
    with pytest.raises(Exception, match="no pending pod"):
        kubelet.allocate_pod(pods.create("stray", [3], gpu=None))  # forces the direct-list fallback
    used = {
        (f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb)
        for r in sandbox.requests
        if "(device-plugin)" in r.user_agent
    }
    assert used == granted()
