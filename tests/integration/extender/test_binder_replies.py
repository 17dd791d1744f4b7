"""The binder against replies the sandbox does not serve: a loopback relay in front of it alters one.

The relay passes every request on to the sandbox (so each write really lands there) and hands
the sandbox's reply back, except the one this test rewrites. The binder runs with the real
`KubeApi` and client; only its ledger is filled by hand (no informer, no watch to relay).
"""

from __future__ import annotations

import dataclasses
import http.client
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.extender import wire
from kubectl_gpushare.extender.binder import Binder
from kubectl_gpushare.extender.kubeapi import KubeApi
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.ledger import NodeRecord
from kubectl_gpushare.sandbox.builders import pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

Rewrite = Callable[[str, str, bytes], bytes | None]
"""(method, path, request body) -> the reply body to send instead of the sandbox's, or None."""


@contextmanager
def relay(sandbox: Sandbox, rewrite: Rewrite) -> Iterator[int]:
    """A loopback HTTP server passing requests on to ``sandbox``; yields its port."""

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            upstream = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
            upstream.close()
            replaced = rewrite(self.command, self.path, body)
            data = data if replaced is None else replaced
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.getheader("Content-Type") or "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = relay  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_roll_back_patch_that_landed_with_an_undecodable_reply_releases_the_gpu(
    sandbox: Sandbox, kubeconfig: Path
) -> None:
    # The Binding is refused (422: it did not happen), so the binder removes its annotations; that
    # patch lands, but its reply does not decode as a Pod (errors.UndecodableReply). The annotations
    # are gone: the GPU is free at once, not kept as if the removal had failed.
    sandbox.load([pod_object("a", "default", [10])])
    refused = sandbox.inject("POST", r"/pods/a/binding", status=422, times=1)
    removals: list[str] = []

    def garble_the_removal(method: str, path: str, body: bytes) -> bytes | None:
        if method == "PATCH" and path.startswith("/api/v1/namespaces/default/pods/a?") and b"null" in body:
            removals.append(path)
            return b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":["not","a","name"]}}'
        return None

    state = ExtenderState()
    state.set_node(NodeRecord(name="gpu-1", cap_mem=16, cap_count=1))
    uid = sandbox.get("pods", "default", "a")["metadata"]["uid"]  # type: ignore[index]
    with relay(sandbox, garble_the_removal) as port:
        config = dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}")
        client = Client(config, component="test-binder", retry=None)
        binder = Binder(KubeApi(client), state, request_timeout=2.0)
        outcome = binder.bind(wire.BindingArgs(pod_name="a", pod_namespace="default", pod_uid=uid, node="gpu-1"))
        binder.close()
        client.close()
    assert refused.hits == 1 and len(removals) == 1
    assert outcome.reason == "binding_failed" and "injected fault" in outcome.error, outcome
    annotations = (sandbox.get("pods", "default", "a") or {})["metadata"].get("annotations") or {}
    assert protocol.ANN_ASSUMED_NODE not in annotations and protocol.ANN_IDX not in annotations  # the removal landed
    assert not state.reserved(uid) and not state.unsettled(uid)  # released, not kept as "not removed yet"
    assert "nodeName" not in (sandbox.get("pods", "default", "a") or {})["spec"]
