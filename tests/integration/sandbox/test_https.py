"""``Sandbox(https=True)``: the real kubectl sends its token over TLS, trusting the CA in the kubeconfig."""

from __future__ import annotations

import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytest.importorskip("cryptography")
pytestmark = pytest.mark.integration


def test_auth_over_https_works_with_both_kubectls_and_refuses_the_wrong_token(
    kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    with Sandbox(auth=True, https=True) as sb:
        sb.load(generate_cluster(nodes=1, gpus_per_node=1, pods=0, gpu_memory=14, namespaces=1))
        assert sb.url.startswith("https://127.0.0.1:")
        good = sb.write_kubeconfig(tmp_path / "admin")
        bad = sb.write_kubeconfig(tmp_path / "bad", token="not-a-token")
        for number, binary in enumerate(kubectl_binaries):
            env = {**kube_env, "KUBECONFIG": str(good), "KUBECACHEDIR": str(tmp_path / f"cache-{number}")}
            nodes = subprocess.run([binary, "get", "nodes", "-o", "name"], env=env, capture_output=True, text=True)
            assert nodes.returncode == 0, nodes.stderr
            assert nodes.stdout.strip() == "node/gpu-node-000"
            created = subprocess.run(
                [binary, "create", "namespace", f"n{number}"], env=env, capture_output=True, text=True
            )
            assert created.returncode == 0, created.stderr
            env["KUBECONFIG"] = str(bad)
            refused = subprocess.run([binary, "get", "nodes"], env=env, capture_output=True, text=True)
            assert refused.returncode == 1 and "Unauthorized" in refused.stderr
        assert any(r.user == Sandbox.ADMIN_USER for r in sb.requests)
        with pytest.raises(urllib.error.URLError) as untrusted:  # the CA is the sandbox's own
            urllib.request.urlopen(sb.url + "/version", timeout=10)
        assert isinstance(untrusted.value.reason, ssl.SSLCertVerificationError)
        trusting = ssl.create_default_context(cadata=(sb.ca_pem or b"").decode())
        with urllib.request.urlopen(sb.url + "/healthz", timeout=10, context=trusting) as reply:
            assert reply.read() == b"ok"


def test_a_plain_http_client_on_the_https_port_does_not_stop_the_server(tmp_path: Path) -> None:
    with Sandbox(https=True) as sb:
        plain = sb.url.replace("https://", "http://")
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(plain + "/version", timeout=10)
        trusting = ssl.create_default_context(cadata=(sb.ca_pem or b"").decode())
        with urllib.request.urlopen(sb.url + "/version", timeout=10, context=trusting) as reply:
            assert b'"major"' in reply.read()
