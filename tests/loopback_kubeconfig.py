"""A kubeconfig for a test's own loopback HTTP server (a server that is not the sandbox)."""

from __future__ import annotations

import json
from pathlib import Path


def write_kubeconfig(path: Path, port: int, token: str = "t") -> Path:
    """Write a one-context kubeconfig for ``http://127.0.0.1:<port>`` with a bearer ``token`` at ``path``."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path
