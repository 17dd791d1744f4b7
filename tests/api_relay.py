"""A loopback relay in front of a sandbox that rewrites chosen replies: bodies the sandbox never serves.

The relay passes every request on to the sandbox (so each write really lands there) and hands the
sandbox's reply back, except those ``rewrite`` replaces.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loopback_kubeconfig import serving

from kubectl_gpushare.sandbox.server import Sandbox


@dataclass(frozen=True)
class Reply:
    """A replacement reply: its body (None: the sandbox's), and headers besides (or instead of) its Content-Type."""

    body: bytes | None
    headers: Mapping[str, str] = field(default_factory=dict)


Rewrite = Callable[[str, str, bytes], bytes | Reply | None]
"""(method, path, request body) -> the reply body (or `Reply`) to send instead of the sandbox's, or None."""


@contextmanager
def relay(sandbox: Sandbox | int, rewrite: Rewrite) -> Iterator[int]:
    """A loopback HTTP server passing requests on to ``sandbox`` (or another loopback port); yields its port."""
    upstream_port = sandbox if isinstance(sandbox, int) else sandbox.port

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
            upstream.close()
            replaced = rewrite(self.command, self.path, body)
            if isinstance(replaced, bytes):
                replaced = Reply(replaced)
            data = data if replaced is None or replaced.body is None else replaced.body
            headers = {"Content-Type": reply.getheader("Content-Type") or "application/json",
                       **(replaced.headers if replaced is not None else {})}
            self.send_response(reply.status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = relay  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    with serving(server) as port:
        yield port
