"""The client over TLS: CA file and data, client certificates, tls-server-name, insecure mode.

A throw-away CA and certificates are made in tmp_path (`certificates`, by the ``openssl`` command), and a tiny
HTTPS server on 127.0.0.1 answers like the API server's node list.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from certificates import certificate_authority, signed_pair

from kubectl_gpushare.kube import errors
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config

pytestmark = pytest.mark.integration


def make_pki(directory: Path) -> Path:
    """A CA, a server certificate for 127.0.0.1 and kubernetes.default, and a client certificate for jane."""
    ca = certificate_authority(directory)
    signed_pair(ca, "server", "127.0.0.1", {"subjectAltName": "IP:127.0.0.1,DNS:kubernetes.default",
                                            "extendedKeyUsage": "serverAuth"})
    signed_pair(ca, "client", "jane", {"extendedKeyUsage": "clientAuth"})
    return directory


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        subject = dict(item[0] for item in peer["subject"]) if peer else {}
        user = subject.get("commonName") or (self.headers.get("Authorization") or "anonymous")
        body = json.dumps(
            {"kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": [{"metadata": {"name": user}}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def https_server(pki: Path) -> Iterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    context.load_verify_locations(pki / "ca.crt")
    context.verify_mode = ssl.CERT_OPTIONAL
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def kubeconfig(tmp_path: Path, server: str, cluster: dict[str, Any], user: dict[str, Any]) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def first_node(path: str) -> str:
    with Client(load_config(path, request_timeout="5s"), retry=None) as client:
        return client.list_nodes()[0].metadata.name


def test_ca_file_and_bearer_token(tmp_path: Path, pki: Path, https_server: str) -> None:
    path = kubeconfig(tmp_path, https_server, {"certificate-authority": str(pki / "ca.crt")}, {"token": "tok"})
    assert first_node(path) == "Bearer tok"


def test_ca_data_and_client_certificate_data(tmp_path: Path, pki: Path, https_server: str) -> None:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    path = kubeconfig(
        tmp_path,
        https_server,
        {"certificate-authority-data": b64("ca.crt")},
        {"client-certificate-data": b64("client.crt"), "client-key-data": b64("client.key")},
    )
    assert first_node(path) == "jane"


def test_client_certificate_files(tmp_path: Path, pki: Path, https_server: str) -> None:
    path = kubeconfig(
        tmp_path,
        https_server,
        {"certificate-authority": str(pki / "ca.crt")},
        {"client-certificate": str(pki / "client.crt"), "client-key": str(pki / "client.key")},
    )
    assert first_node(path) == "jane"


def test_unknown_ca_is_refused_with_a_clear_error(tmp_path: Path, https_server: str) -> None:
    path = kubeconfig(tmp_path, https_server, {}, {"token": "tok"})
    with pytest.raises(errors.Unreachable, match="certificate"):
        first_node(path)


def test_insecure_skip_tls_verify(tmp_path: Path, https_server: str) -> None:
    path = kubeconfig(tmp_path, https_server, {"insecure-skip-tls-verify": True}, {"token": "tok"})
    assert first_node(path) == "Bearer tok"


def test_tls_server_name_is_verified_instead_of_the_host(tmp_path: Path, pki: Path, https_server: str) -> None:
    localhost = https_server.replace("127.0.0.1", "localhost")
    ca = {"certificate-authority": str(pki / "ca.crt")}
    with pytest.raises(errors.Unreachable):
        first_node(kubeconfig(tmp_path, localhost, ca, {"token": "t"}))
    path = kubeconfig(tmp_path, localhost, {**ca, "tls-server-name": "kubernetes.default"}, {"token": "t"})
    assert first_node(path) == "Bearer t"
