"""What tutorials send, through the real kubectl, stored as kube-apiserver stores it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

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
