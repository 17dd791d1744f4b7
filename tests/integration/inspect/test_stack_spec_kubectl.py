"""A mixed cluster declared in a sandbox spec (``stack:`` nodes and pods), read through the real kubectl.

The spec builds what each stack's components would write; inspect must read every stack in its
own unit, live from the API exactly as offline from ``kubectl get -o json``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import SpecError, parse_spec

pytestmark = pytest.mark.integration

SPEC = """
nodes:
  - {name: share-1, gpus: 2, gpuMemory: 16}
  - {name: hami-1, stack: hami, gpus: 2, gpuMemory: 32768, registerFormat: colon}
  - {name: hami-2, stack: hami, gpus: 1, gpuMemory: 81920}
  - {name: ts-1, stack: nvidia, gpus: 2, replicas: 4}
  - {name: mig-1, stack: nvidia, mig: {1g.10gb: 7}}
  - {name: nano-1, stack: nano-gpu, gpus: 2}
  - {name: egpu-1, stack: elastic-gpu, gpus: 2, gpuMemory: 16000}
pods:
  - {name: a, node: share-1, gpu: 1, memory: 4}
  - {name: vgpu, node: hami-1, gpu: 0, memory: 3000, cores: 30}
  - {name: vgpu2, node: hami-2, gpu: 0, containers: [0, 5000]}
  - {name: done, node: hami-1, gpu: 1, memory: 3000, phase: Succeeded}
  - {name: ts, node: ts-1, memory: 3}
  - {name: small, node: mig-1, memory: 2, resource: nvidia.com/mig-1g.10gb}
  - {name: q, node: nano-1, gpu: 1, memory: 25}
  - {name: e, node: egpu-1, gpu: 0, memory: 60}
"""


def run(kubectl: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl, *args], env=env, capture_output=True, text=True, timeout=60)


def test_mixed_spec_cluster_through_kubectl_online_equals_offline(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    sandbox.load(parse_spec(SPEC))
    kubectl = kubectl_binaries[0]
    online = run(kubectl, ["inspect", "gpushare", "-o", "json"], kube_env)
    assert online.returncode == 0, online.stderr
    assert online.stderr == ""
    report = json.loads(online.stdout)
    assert report["cluster"]["total"] == 32 and report["cluster"]["used"] == 4
    used = {
        (node["name"], gpu["index"]): (gpu["used"], gpu["total"], gpu["unit"])
        for node in report["stackNodes"] for gpu in node["gpus"]
    }
    assert used == {
        ("egpu-1", 0): (60, 100, "%"), ("egpu-1", 1): (0, 100, "%"),
        ("hami-1", 0): (3000, 32768, "MiB"), ("hami-1", 1): (0, 32768, "MiB"),  # the Succeeded pod is not counted
        ("hami-2", 0): (5000, 81920, "MiB"),
        ("mig-1", 0): (2, 7, "slots"),
        ("nano-1", 0): (0, 100, "%"), ("nano-1", 1): (25, 100, "%"),
        ("ts-1", 0): (3, 8, "slots"),
    }
    dump = run(kubectl, ["get", "nodes,pods", "-A", "-o", "json"], kube_env)
    (tmp_path / "c.json").write_text(dump.stdout)
    for flags in (["-o", "json"], ["-d"], []):
        live = run(kubectl, ["inspect", "gpushare", *flags], kube_env)
        offline = run(kubectl, ["inspect", "gpushare", *flags, "--from-file", str(tmp_path / "c.json")], kube_env)
        assert live.returncode == offline.returncode == 0
        assert live.stdout == offline.stdout


@pytest.mark.parametrize(
    "spec",
    ["nodes: [{name: x, stack: slurm, gpus: 1}]", "nodes: [{name: x, stack: hami, gpus: 1, registerFormat: xml}]",
     "nodes: [{name: x, stack: nvidia, gpus: 1, replicas: 0}]"],
)
def test_bad_stack_spec_is_a_spec_error(spec: str) -> None:
    with pytest.raises(SpecError, match="stack must be one of"):
        parse_spec(spec)


SCHEDULERS_SPEC = """
nodes:
  - {name: share-1, gpus: 2, gpuMemory: 16}
  - {name: hami-1, stack: hami, gpus: 1, gpuMemory: 32768}
  - {name: ts-1, stack: nvidia, gpus: 2, replicas: 4}
  - {name: kai-1, stack: kai, gpus: 3, gpuMemory: 40960}
  - {name: vc-1, stack: volcano, gpus: 2, gpuMemory: 16384}
  - {name: koord-1, stack: koordinator, gpus: 2, gpuMemory: 16384}
pods:
  - {name: a, node: share-1, gpu: 1, memory: 4}
  - {name: vgpu, node: hami-1, gpu: 0, memory: 3000}
  - {name: ts, node: ts-1, memory: 3}
  - {name: half, node: kai-1, gpu: 0, fraction: 0.5}
  - {name: mem, namespace: ml, node: kai-1, gpu: 0, memory: 2000}
  - {name: quarter, node: kai-1, gpu: 2, fraction: 0.25}
  - {name: v, node: vc-1, gpu: 1, memory: 1024}
  - {name: k, node: koord-1, gpu: 0, memory: 8192, cores: 50}
"""


def test_kai_volcano_koordinator_spec_through_kubectl_online_equals_offline(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    sandbox.load(parse_spec(SCHEDULERS_SPEC))
    kubectl = kubectl_binaries[0]
    online = run(kubectl, ["inspect", "gpushare", "-o", "json"], kube_env)
    assert online.returncode == 0 and online.stderr == "", online.stderr
    report = json.loads(online.stdout)
    used = {
        (node["name"], gpu["id"] or str(gpu["index"])): (gpu["used"], gpu["total"], gpu["unit"], node["stack"])
        for node in report["stackNodes"] for gpu in node["gpus"]
    }
    assert used == {
        ("hami-1", "GPU-hami-1-0"): (3000, 32768, "MiB", "hami"),
        ("ts-1", "nvidia.com/gpu"): (3, 8, "slots", "nvidia"),
        # Two reservation pods hold GPUs 0 and 2; the third GPU stays in the whole-GPU pool.
        ("kai-1", "nvidia.com/gpu"): (0, 1, "GPUs", "kai"),
        ("kai-1", "GPU-kai-1-0"): (20480 + 2000, 40960, "MiB", "kai"),
        ("kai-1", "GPU-kai-1-2"): (10240, 40960, "MiB", "kai"),
        ("vc-1", "0"): (0, 16384, "MiB", "volcano"), ("vc-1", "1"): (1024, 16384, "MiB", "volcano"),
        ("koord-1", "0"): (8192, 16384, "MiB", "koordinator"), ("koord-1", "1"): (0, 16384, "MiB", "koordinator"),
    }
    for stack in ("kai", "volcano", "koordinator"):
        only = run(kubectl, ["inspect", "gpushare", "--stack", stack, "-o", "json"], kube_env)
        assert only.returncode == 0, only.stderr
        assert {node["stack"] for node in json.loads(only.stdout)["stackNodes"]} == {stack}
    dump = run(kubectl, ["get", "nodes,pods", "-A", "-o", "json"], kube_env)
    (tmp_path / "c.json").write_text(dump.stdout)
    for flags in (["-o", "json"], ["-o", "wide"], ["-o", "csv"], ["-d"], []):
        live = run(kubectl, ["inspect", "gpushare", *flags], kube_env)
        offline = run(kubectl, ["inspect", "gpushare", *flags, "--from-file", str(tmp_path / "c.json")], kube_env)
        assert live.returncode == offline.returncode == 0
        assert live.stdout == offline.stdout
    explained = run(kubectl, ["gpushare", "explain", "half", "-o", "json"], kube_env)
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["stackGpus"][0]["id"] == "GPU-kai-1-0"
    doctor = run(kubectl, ["gpushare", "doctor", "-o", "json"], kube_env)
    checks = {finding["check"] for finding in json.loads(doctor.stdout)["findings"]}
    assert not checks & {"invalid-value", "stack-gpu-overcommitted", "gpu-claimed-by-two-stacks"}
