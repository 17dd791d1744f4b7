from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubectl_steps import reaped

from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

VENV_BIN = Path(sys.executable).parent


@pytest.mark.integration
def test_sigterm_stops_the_plugin_cleanly_and_removes_its_socket(
    sandbox: Sandbox, kubeconfig: Path, plugin_dir: str
) -> None:
    sandbox.load([node_object("gpu-node-1", [], ip="10.0.0.1")])
    with KubeletSim(plugin_dir) as kubelet:
        env = dict(os.environ, NODE_NAME="gpu-node-1", GPUSHARE_LOG_FORMAT="json")
        process = subprocess.Popen(
            [
                str(VENV_BIN / "kubectl-gpushare"),
                "serve-device-plugin",
                "--fake-gpus",
                "2x16GiB",
                "--device-plugin-path",
                plugin_dir,
                "--kubeconfig",
                str(kubeconfig),
                "--usage-port",
                "0",  # parallel-safe: never the fixed default port
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        with reaped(process):
            assert kubelet.wait_registered(1, timeout=20)
            assert kubelet.wait_devices(lambda d: len(d) == 32)
            socket = Path(plugin_dir, "aliyungpushare.sock")
            assert socket.exists()
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=15)
        assert process.returncode == 0, stderr
        assert time.monotonic() - started < 10
        assert not socket.exists()
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    config = next(line["msg"] for line in lines if line["msg"].startswith("device plugin configuration: "))
    effective = json.loads(config.split(": ", 1)[1])
    assert effective["node_name"] == "gpu-node-1" and effective["fake_gpus"] == "2x16GiB"
    assert any(line["msg"] == "device plugin stopped" for line in lines)


@pytest.mark.integration
def test_unusable_plugin_directory_exits_2_with_one_line_before_any_api_write(
    sandbox: Sandbox, kubeconfig: Path, plugin_dir: str
) -> None:
    sandbox.load([node_object("gpu-node-1", [], ip="10.0.0.1")])
    blocker = Path(plugin_dir, "file")
    blocker.write_text("a regular file")  # a directory below a file cannot be created, not even by root
    result = subprocess.run(
        [
            str(VENV_BIN / "kubectl-gpushare"),
            "serve-device-plugin",
            "--node-name",
            "gpu-node-1",
            "--fake-gpus",
            "2x16GiB",
            "--device-plugin-path",
            str(blocker / "dp"),
            "--kubeconfig",
            str(kubeconfig),
        ],
        env=dict(os.environ, GPUSHARE_LOG_LEVEL="error"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: cannot use the device-plugin directory ")
    assert "Not a directory" in lines[0]
    assert not [r for r in sandbox.requests if r.method in ("PATCH", "POST", "PUT", "DELETE")]
    node = sandbox.get("nodes", None, "gpu-node-1")
    assert "aliyun.com/gpu-count" not in node["status"].get("capacity", {})
