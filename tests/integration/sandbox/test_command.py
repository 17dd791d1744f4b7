"""`kubectl gpushare sandbox` as a user runs it: foreground process, kubeconfig, SIGTERM, --state."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kubectl_steps import interruptible

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).parent / "kubectl-gpushare"


def start(*args: str) -> tuple[subprocess.Popen[str], int]:
    process = interruptible(
        [str(SCRIPT), "sandbox", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()
    assert banner.startswith("Sandbox API server listening on http://127.0.0.1:"), banner + process.stderr.read()
    port = int(banner.split("127.0.0.1:")[1].split()[0])
    return process, port


def call(port: int, method: str, path: str, body: object = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=None if body is None else json.dumps(body))
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return err


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    kubeconfig = tmp_path / "kc"
    process, port = start("--nodes", "2", "--pods", "3", "--kubeconfig", str(kubeconfig), "--state", str(state))
    try:
        assert f"http://127.0.0.1:{port}" in kubeconfig.read_text()
        _, nodes = call(port, "GET", "/api/v1/nodes")
        assert len(nodes["items"]) == 2
        status, created = call(
            port,
            "POST",
            "/api/v1/namespaces/kube-system/configmaps",
            {"metadata": {"name": "unhealthy-gpu-gpu-node-000"}, "data": {"gpus": "1"}},
        )
        assert status == 201
    finally:
        err = stop(process)
    assert "State saved" in err and state.exists()
    process, port = start("--nodes", "5", "--kubeconfig", str(kubeconfig), "--state", str(state))
    try:
        _, nodes = call(port, "GET", "/api/v1/nodes")
        assert len(nodes["items"]) == 2, "the saved state wins over the seed options"
        _, cm = call(port, "GET", "/api/v1/namespaces/kube-system/configmaps/unhealthy-gpu-gpu-node-000")
        assert cm["data"] == {"gpus": "1"} and cm["metadata"]["uid"] == created["metadata"]["uid"]
        _, again = call(port, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "later"}})
        assert int(again["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    finally:
        stop(process)


def test_empty_cluster_and_ctrl_c(tmp_path: Path) -> None:
    process, port = start("--nodes", "0", "--kubeconfig", str(tmp_path / "kc"))
    _, nodes = call(port, "GET", "/api/v1/nodes")
    _, pods = call(port, "GET", "/api/v1/pods")
    assert nodes["items"] == [] and pods["items"] == []
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 0


def test_bad_spec_and_busy_port_exit_with_documented_codes(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("nodes: [{name: a, colour: red}]\n")
    result = subprocess.run([str(SCRIPT), "sandbox", "--spec", str(spec)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "colour" in result.stderr and "Traceback" not in result.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [str(SCRIPT), "sandbox", "--port", str(port), "--kubeconfig", str(tmp_path / "kc")],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 5 and "cannot start the sandbox" in result.stderr
    # one line that names the busy port and what to pass instead (not Python's "[Errno 98] ...")
    assert result.stderr.count("\n") == 1 and f"port {port} " in result.stderr and "--port 0" in result.stderr
    spec.write_text("objects: [{kind: Widget, metadata: {name: w}}]\n")
    result = subprocess.run(
        [str(SCRIPT), "sandbox", "--spec", str(spec), "--kubeconfig", str(tmp_path / "kc")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "Widget" in result.stderr and "Traceback" not in result.stderr
    blocked = tmp_path / "file"
    blocked.write_text("")
    result = subprocess.run(
        [str(SCRIPT), "sandbox", "--nodes", "0", "--kubeconfig", str(blocked / "kc")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    corrupt = tmp_path / "state.json"
    corrupt.write_text("{not json")
    result = subprocess.run(
        [str(SCRIPT), "sandbox", "--state", str(corrupt), "--kubeconfig", str(tmp_path / "kc")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "not a sandbox state file" in result.stderr
    assert corrupt.read_text() == "{not json", "a bad state file is never overwritten"


def test_spec_file_is_served(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text("nodes: [{name: solo, gpus: 2, gpuMemory: 24}]\npods: [{name: p, node: solo, gpu: 1, memory: 6}]\n")
    process, port = start("--spec", str(spec), "--kubeconfig", str(tmp_path / "kc"))
    try:
        _, pod = call(port, "GET", "/api/v1/namespaces/default/pods/p")
        assert pod["spec"]["nodeName"] == "solo" and pod["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
    finally:
        stop(process)


@pytest.mark.parametrize(
    "content",
    ['{"colour": "red"}', "{}", '{"kind": "Config", "version": 1, "resourceVersion": 1, "items": []}', "[]", ""],
    ids=["any-object", "empty-object", "other-kind", "array", "empty-file"],
)
def test_state_that_is_not_a_sandbox_state_is_refused_and_kept(tmp_path: Path, content: str) -> None:
    other = tmp_path / "settings.json"
    other.write_text(content)
    result = subprocess.run(
        [str(SCRIPT), "sandbox", "--state", str(other), "--kubeconfig", str(tmp_path / "kc")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert other.read_text() == content, "never overwritten"


def test_state_replaced_while_running_is_not_overwritten_on_stop(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    process, _ = start("--nodes", "1", "--kubeconfig", str(tmp_path / "kc"), "--state", str(state))
    state.write_text('{"precious": true}')
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 5 and "refusing to overwrite" in err and "Traceback" not in err, err
    assert state.read_text() == '{"precious": true}'


def test_saved_state_is_marked_and_reloads(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    process, _ = start("--nodes", "1", "--kubeconfig", str(tmp_path / "kc"), "--state", str(state))
    stop(process)
    saved = json.loads(state.read_text())
    assert (saved["kind"], saved["version"]) == ("GpushareSandboxState", 1)
    process, port = start("--kubeconfig", str(tmp_path / "kc"), "--state", str(state))
    try:
        assert len(call(port, "GET", "/api/v1/nodes")[1]["items"]) == 1
    finally:
        stop(process)


def test_faults_injected_over_http_into_a_running_sandbox(tmp_path: Path) -> None:
    process, port = start("--nodes", "1", "--kubeconfig", str(tmp_path / "kc"))
    try:
        status, fault = call(port, "POST", "/_sandbox/faults", {"path": "/nodes", "status": 503, "times": 1})
        assert status == 201 and fault["times"] == 1
        assert call(port, "GET", "/api/v1/nodes")[0] == 503
        assert call(port, "GET", "/api/v1/nodes")[0] == 200
        assert call(port, "DELETE", "/_sandbox/faults")[0] == 200
    finally:
        stop(process)
