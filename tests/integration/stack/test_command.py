"""``kubectl gpushare sandbox --stack`` as a user runs it: a child process stopped by SIGTERM or Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubectl_steps import create_gpu_pod, default_signals, reaped

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
    process = subprocess.Popen(
        [str(SCRIPT), "sandbox", "--stack", "--spec", str(spec), "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(short_tmp)),
        preexec_fn=default_signals,
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
