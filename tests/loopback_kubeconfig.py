"""A kubeconfig, and a client, for a test's own loopback HTTP server (a server that is not the sandbox)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config


def write_kubeconfig(path: Path, port: int, token: str = "t") -> Path:
    """Write a one-context kubeconfig for ``http://127.0.0.1:<port>`` with a bearer ``token`` at ``path``."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@contextmanager
def loopback_client(tmp_path: Path, handler: type[BaseHTTPRequestHandler], **options: Any) -> Iterator[Client]:
    """A `Client` (``retry=None`` and ``options``) of a loopback server answering with ``handler``, for the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = write_kubeconfig(tmp_path / "kubeconfig", server.server_port)
    try:
        with Client(load_config(str(config)), retry=None, **options) as client:
            yield client
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
