"""A kubeconfig, a client and a scripted listener, for a test's own loopback server (not the sandbox)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
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
def serving(server: ThreadingHTTPServer) -> Iterator[int]:
    """Serve ``server`` on a thread for the block, yielding its port; shut down and closed after."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def loopback_client(tmp_path: Path, handler: type[BaseHTTPRequestHandler], **options: Any) -> Iterator[Client]:
    """A `Client` (``retry=None`` and ``options``) of a loopback server answering with ``handler``, for the block."""
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        config = write_kubeconfig(tmp_path / "kubeconfig", port)
        with Client(load_config(str(config)), retry=None, **options) as client:
            yield client


@contextmanager
def scripted(serve: Callable[[int, socket.socket], None]) -> Iterator[int]:
    """A loopback listener handing its n-th accepted connection to ``serve(n, sock)``; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    done = threading.Event()
    threads: list[threading.Thread] = []

    def accept() -> None:
        count = 0
        while not done.is_set():
            try:
                sock, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            thread = threading.Thread(target=serve, args=(count, sock), daemon=True)
            thread.start()
            threads.append(thread)
            count += 1

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        done.set()
        acceptor.join()
        listener.close()
        for thread in threads:
            thread.join(10)
