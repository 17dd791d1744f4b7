"""A loopback relay in front of a sandbox that rewrites chosen replies: bodies the sandbox never serves.

The relay passes every request on to the sandbox (so each write really lands there) and hands the
sandbox's reply back, except those ``rewrite`` replaces.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubectl_gpushare.sandbox.server import Sandbox

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
