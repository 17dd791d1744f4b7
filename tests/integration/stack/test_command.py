"""``kubectl gpushare sandbox --stack`` as a user runs it: a child process stopped by SIGTERM or Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubectl_steps import create_gpu_pod, interruptible, reaped

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).parent / "kubectl-gpushare"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short TMPDIR for the child (unix socket paths are limited to 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="gst") as path:
        yield Path(path)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stack_schedules_and_stops_without_leftovers(
    tmp_path: Path, short_tmp: Path, kubectl_binaries: list[str], signum: signal.Signals
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes: [{name: gpu-node, gpus: 2, gpuMemory: 16}]\n")
    kubeconfig = tmp_path / "kc"
    process = interruptible(
        [str(SCRIPT), "sandbox", "--stack", "--spec", str(spec), "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(short_tmp)),
    )
    with reaped(process):
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("Sandbox API server listening on"), banner
        assert process.stdout.readline().startswith("Stack: extender on http://127.0.0.1:")
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(tmp_path / "cache"))
        assert create_gpu_pod(kubectl_binaries[0], env, "p", 4) == "Running"
        assert list(short_tmp.iterdir()), "the stack's socket directory should exist while it runs"
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Sandbox stopped." in err
    assert list(short_tmp.iterdir()) == []


def test_dra_stack_runs_the_driver_on_the_gpu_nodes_and_stops_clean(tmp_path: Path, short_tmp: Path,
                                                                      kubectl_binaries: list[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes: [{name: gpu-node, gpus: 2, gpuMemory: 16}]\n")
    kubeconfig = tmp_path / "kc"
    process = interruptible(
        [str(SCRIPT), "sandbox", "--stack", "--dra", "--spec", str(spec), "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(short_tmp)),
    )
    with reaped(process):
        assert process.stdout is not None
        assert process.stdout.readline().startswith("Sandbox API server listening on")
        assert "DRA drivers on labelled nodes" in process.stdout.readline()
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(tmp_path / "cache"))

        def get(*args: str) -> str:
            return subprocess.run([kubectl_binaries[0], *args], env=env, capture_output=True, text=True,
                                  timeout=60).stdout

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "gpu-node" not in get("get", "resourceslices"):
            time.sleep(0.2)
        node = json.loads(get("get", "node", "gpu-node", "-o", "json"))
        assert node["metadata"]["labels"].get("gpushare.kubectl-gpushare.io/dra") == "true"
        assert "gpushare" not in node["metadata"]["labels"]
        assert "aliyun.com/gpu-mem" not in node["status"]["allocatable"]
        devices = json.loads(get("get", "resourceslices", "-o", "json"))["items"][0]["spec"]["devices"]
        assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
        assert get("get", "deviceclasses", "-o", "name").strip() == \
            "deviceclass.resource.k8s.io/gpu-mem.kubectl-gpushare.io"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert list(short_tmp.iterdir()) == []


def test_dra_needs_the_stack(tmp_path: Path) -> None:
    result = subprocess.run([str(SCRIPT), "sandbox", "--dra", "--kubeconfig", str(tmp_path / "kc")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--dra needs --stack" in result.stderr
