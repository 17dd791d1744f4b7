"""The README's main command: the demo runs the whole stack and prints both inspect views."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kubectl_steps import create_gpu_pod, interruptible, reaped

pytestmark = pytest.mark.integration


def test_demo_places_pods_through_the_stack_and_shows_both_views() -> None:
    script = Path(sys.executable).parent / "kubectl-gpushare"
    result = subprocess.run([str(script), "demo"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "$ kubectl inspect gpushare\n" in out and "$ kubectl inspect gpushare -d\n" in out
    # Every placeable pod was bound by the extender and admitted by the device plugin on the GPU it chose.
    assert out.count(" -> gpu-node-") == 9
    assert "default/too-big (100 GiB): stays Pending" in out
    # The heterogeneous node shows its two GPU sizes, published by the device plugin.
    assert "gpu-node-3  192.168.1.13  79/80                  0/40" in out
    assert "Allocated/Total GPU Memory In Cluster:\n135/248 (54%)  \n" in out
    assert "Allocated/Total GPU Memory In Cluster:  135/248 (54%)  \n" in out
    # top: the pod that allocates 6 GiB of its 2 GiB share is OVER; with enforcement on it is held to 2 GiB.
    over, held = out.split("$ kubectl gpushare top -n ml\n")[1:]
    greedy = [line.split()[3:] for part in (over, held) for line in part.splitlines() if line.startswith("greedy ")]
    assert greedy == [["2048Mi", "6144Mi", "<none>", "OVER"], ["2048Mi", "0Mi", "2048Mi", "ok"]]
    assert " no\n" in over and " no\n" not in held.split("\n\n")[0]  # ENFORCED no, then yes on every GPU
    assert "CUDA error: out of memory" in out


def demo_keep(short_tmp: str, *, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """``demo --keep`` started with its temporary files under ``short_tmp`` (unix socket paths stay short)."""
    script = Path(sys.executable).parent / "kubectl-gpushare"
    return interruptible([str(script), "demo", "--keep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, TMPDIR=short_tmp), sigint_ignored=sigint_ignored)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_demo_keep_schedules_new_pods_and_stops_cleanly(
    tmp_path: Path, kubectl_binaries: list[str], signum: signal.Signals
) -> None:
    """``demo --keep`` leaves a live cluster: a pod created afterwards runs; SIGTERM or Ctrl-C leaves nothing behind."""
    script = Path(sys.executable).parent / "kubectl-gpushare"
    with tempfile.TemporaryDirectory(prefix="gdk") as short_tmp:
        process = demo_keep(short_tmp)
        with reaped(process):
            assert process.stdout is not None
            kubeconfig = ""
            for line in process.stdout:
                if line.strip().startswith("export KUBECONFIG="):
                    kubeconfig = line.strip().split("=", 1)[1]
                if line.startswith("Press Ctrl-C"):
                    break
            assert kubeconfig, process.stderr.read() if process.stderr else ""
            env = dict(os.environ, KUBECONFIG=kubeconfig, KUBECACHEDIR=str(tmp_path / "cache"))
            assert create_gpu_pod(kubectl_binaries[0], env, "late", 3) == "Running"
            doctor = subprocess.run([str(script), "doctor", "-o", "json"], env=env,
                                    capture_output=True, text=True, timeout=60, check=False)
            assert json.loads(doctor.stdout)["findings"] == [], doctor.stdout  # the stack shows as installed
            process.send_signal(signum)
            _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "Demo stopped." in err
        assert os.listdir(short_tmp) == []


def test_demo_keep_started_in_the_background_still_stops_on_sigint() -> None:
    """An inherited ignored SIGINT (a script's ``demo --keep &``) still stops the demo, as it stops ``sandbox``."""
    with tempfile.TemporaryDirectory(prefix="gdi") as short_tmp:
        process = demo_keep(short_tmp, sigint_ignored=True)
        with reaped(process):
            assert process.stdout is not None
            assert any(line.startswith("Press Ctrl-C") for line in process.stdout)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "Demo stopped." in err
        assert os.listdir(short_tmp) == []
