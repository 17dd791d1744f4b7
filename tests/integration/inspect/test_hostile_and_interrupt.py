"""Live inspect against hostile objects served by the sandbox, and Ctrl-C while the server is silent."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubectl_steps import interruptible
from unit.inspect import hostile

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import command
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("view", [[], ["-d"], ["-o", "json"], ["-o", "wide"]], ids=["summary", "d", "json", "wide"])
def test_live_inspect_survives_hostile_pods_and_nodes(
    sandbox: Sandbox, kube_env: dict[str, str], view: list[str]
) -> None:
    sandbox.load(hostile.hostile_cluster())
    result = subprocess.run(
        ["kubectl-inspect-gpushare", *view], env=kube_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert all(line.startswith("warning: ") and len(line) < 300 for line in result.stderr.splitlines())
    assert "-400" not in result.stdout
    if view == ["-o", "json"]:
        nodes = {node["name"]: node for node in json.loads(result.stdout)["nodes"]}
        used = {gpu["index"]: gpu["used"] for gpu in nodes["n1"]["gpus"]}
        assert used == {0: 2, 1: hostile.GOOD_POD_MEM + 1}


def test_a_node_annotation_from_a_newer_version_is_one_warning_and_no_free_memory(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    gpus = [{"index": i, "memory": 16, "version": protocol.NODE_GPUS_VERSION + 1} for i in range(2)]
    sandbox.load([node_object("n1", [16, 16], ip="10.0.0.1", annotations={protocol.ANN_NODE_GPUS: json.dumps(gpus)})])
    result = subprocess.run(
        ["kubectl-inspect-gpushare", "-o", "json"], env=kube_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"warning: node n1: annotation {protocol.ANN_NODE_GPUS} is version 2, newer than version 1 that this "
        "kubectl-gpushare reads; its GPUs count with no free memory until kubectl-gpushare is upgraded"
    ]
    (node,) = json.loads(result.stdout)["nodes"]
    assert [gpu["total"] for gpu in node["gpus"]] == [0, 0]


@pytest.mark.parametrize("request_timeout", ["30s", "0"])
def test_ctrl_c_exits_130_at_once_while_the_server_never_answers(
    kube_env: dict[str, str], tmp_path: Path, request_timeout: str
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel accepts connections; nothing ever answers
    port = listener.getsockname()[1]
    config = yaml.safe_load(Path(kube_env["KUBECONFIG"]).read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{port}"
    path = tmp_path / "silent"
    path.write_text(yaml.safe_dump(config))
    process = interruptible(
        ["kubectl-inspect-gpushare", "--request-timeout", request_timeout],
        env=dict(kube_env, KUBECONFIG=str(path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with listener:
            deadline = time.monotonic() + 30
            conn = None
            listener.settimeout(1)
            while conn is None and time.monotonic() < deadline and process.poll() is None:
                try:
                    conn, _ = listener.accept()  # inspect is now blocked reading the reply
                except TimeoutError:
                    continue
            assert conn is not None, "inspect never connected"
            with conn:
                conn.settimeout(5)
                assert conn.recv(1024).startswith(b"GET "), "the request was sent"
                process.send_signal(signal.SIGINT)
                start = time.monotonic()
                _, stderr = process.communicate(timeout=15)
                elapsed = time.monotonic() - start
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == command.EXIT_INTERRUPTED, stderr
    assert stderr.strip() == "interrupted"
    assert elapsed < 5, f"exited {elapsed:.1f}s after Ctrl-C"

