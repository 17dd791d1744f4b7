"""What tutorials send, through the real kubectl, stored as kube-apiserver stores it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration
Kubectl = Callable[..., subprocess.CompletedProcess[str]]

TUTORIAL_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: binpack-1}
spec:
  containers:
  - name: binpack-1
    image: cheyang/gpu-player:v2
    resources:
      limits:
        aliyun.com/gpu-mem: 1
        cpu: 0.5
        memory: 2048Mi
"""


def test_numeric_quantities_are_stored_as_canonical_strings(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=TUTORIAL_POD)
    pod = json.loads(kubectl("get", "pod", "binpack-1", "-o", "json").stdout)
    resources = pod["spec"]["containers"][0]["resources"]
    expected = {"aliyun.com/gpu-mem": "1", "cpu": "500m", "memory": "2Gi"}
    assert resources == {"limits": expected, "requests": expected}


def test_node_capacity_patches_are_normalised_and_garbage_is_a_400(sandbox: Sandbox, kubectl: Kubectl) -> None:
    sandbox.load(generate_cluster(nodes=1, gpus_per_node=1, pods=0, gpu_memory=14, namespaces=1))
    node = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"][0]["metadata"]["name"]
    patch = json.dumps({"status": {"capacity": {"aliyun.com/gpu-mem": 28}, "allocatable": {"aliyun.com/gpu-mem": 28}}})
    kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", patch)
    status = json.loads(kubectl("get", "node", node, "-o", "json").stdout)["status"]
    assert status["capacity"]["aliyun.com/gpu-mem"] == "28" and status["allocatable"]["aliyun.com/gpu-mem"] == "28"
    bad = kubectl("apply", "-f", "-", input=TUTORIAL_POD.replace("gpu-mem: 1", "gpu-mem: lots"), check=False)
    assert bad.returncode == 1 and "quantities must match the regular expression" in bad.stderr


def test_a_list_dump_is_recreated_with_default_validation(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    sandbox.load(generate_cluster(nodes=2, gpus_per_node=2, pods=3, gpu_memory=16, namespaces=1))
    for number, binary in enumerate(kubectl_binaries):
        env = {**kube_env, "KUBECACHEDIR": str(tmp_path / f"cache-{number}")}
        dump = json.loads(_run(binary, env, "get", "nodes,pods", "-A", "-o", "json").stdout)
        assert dump["kind"] == "List" and len(dump["items"]) == 5
        with Sandbox() as fresh:
            env["KUBECONFIG"] = str(fresh.write_kubeconfig(tmp_path / f"fresh-{number}"))
            created = _run(binary, env, "create", "-f", "-", input=json.dumps(dump)).stdout
            assert created.count(" created") == 5
            assert len(fresh.objects("pods")) == 3 and len(fresh.objects("nodes")) == 2
            dump["items"].append({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
            unknown = subprocess.run(
                [binary, "create", "-f", "-"], env=env, input=json.dumps(dump), capture_output=True, text=True
            )
            assert unknown.returncode == 1 and 'no matches for kind "Widget"' in unknown.stderr


def _run(binary: str, env: dict[str, str], *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([binary, *args], env=env, input=input, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result


@pytest.mark.parametrize("tree", ["manifests", "manifests/managed", "manifests/dra-only"])
def test_our_manifests_apply_for_real_with_both_kubectls(
    kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path, tree: str
) -> None:
    root = Path(__file__).resolve().parents[3]
    for number, binary in enumerate(kubectl_binaries):
        built = _run(binary, kube_env, "kustomize", str(root / tree)).stdout
        docs = [doc for doc in yaml.safe_load_all(built) if doc and doc["apiVersion"] != "cert-manager.io/v1"]
        text = yaml.safe_dump_all(docs)
        with Sandbox() as fresh:
            env = {**kube_env, "KUBECONFIG": str(fresh.write_kubeconfig(tmp_path / f"kc-{number}"))}
            assert _run(binary, env, "apply", "-f", "-", input=text).stdout.count(" created") == len(docs)
            assert _run(binary, env, "apply", "-f", "-", input=text).stdout.count(" unchanged") == len(docs)
            assert fresh.objects("daemonsets") and fresh.objects("clusterroles") and fresh.objects("serviceaccounts")


def test_typed_creates_sent_as_protobuf_work_with_both_kubectls(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    for number, binary in enumerate(kubectl_binaries):
        env = {**kube_env, "KUBECACHEDIR": str(tmp_path / f"cache-{number}")}
        _run(binary, env, "create", "namespace", f"team-{number}")
        _run(binary, env, "create", "configmap", "cfg", f"--namespace=team-{number}", "--from-literal=k=v")
        _run(binary, env, "create", "serviceaccount", "sa", f"--namespace=team-{number}")
        assert (sandbox.get("configmaps", f"team-{number}", "cfg") or {}).get("data") == {"k": "v"}
        assert sandbox.get("namespaces", None, f"team-{number}") is not None
        assert sandbox.get("serviceaccounts", f"team-{number}", "sa") is not None
