"""``explain`` against the API: a pod reply the sandbox never serves is one error line, or one warning."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from api_relay import relay

from kubectl_gpushare.kube.errors import EXIT_API
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

POD_PATH = "/api/v1/namespaces/ml/pods/wants"


def _explain(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path, body: bytes
) -> subprocess.CompletedProcess[str]:
    """``kubectl gpushare explain wants -n ml`` through a relay that answers the pod's GET with ``body``."""
    sandbox.load([node_object("n", [16], ip="10.0.0.1"), pod_object("wants", "ml", [4])])

    def rewrite(method: str, path: str, request: bytes) -> bytes | None:
        return body if method == "GET" and path.partition("?")[0] == POD_PATH else None

    with relay(sandbox, rewrite) as port:
        kubeconfig = tmp_path / "relayed"
        kubeconfig.write_text(Path(kube_env["KUBECONFIG"]).read_text().replace(f":{sandbox.port}", f":{port}"))
        return subprocess.run(["kubectl-gpushare", "explain", "wants", "-n", "ml"],
                              env={**kube_env, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True,
                              timeout=60)


def test_a_pod_reply_that_is_no_pod_is_one_error_line(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    result = _explain(sandbox, kube_env, tmp_path, b"<html>\xff proxy login</html>")
    assert result.returncode == EXIT_API, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("Failed due to pod ml/wants does not decode as a v1.Pod ("), line


def test_a_mistyped_affinity_from_the_api_is_one_warning_as_from_a_file(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    wants = pod_object("wants", "ml", [4])
    wants["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}}
    result = _explain(sandbox, kube_env, tmp_path, json.dumps(wants).encode())
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("warning: pod ml/wants: its affinity cannot be decoded (Expected `")
    assert result.stderr.endswith("); explained without it\n") and result.stderr.count("\n") == 1
    assert result.stdout.startswith("Pod ml/wants asks for 4 GiB on one GPU and fits on n now"), result.stdout
