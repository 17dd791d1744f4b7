"""The socket side of the extender: a threading HTTP/1.1 server around `ExtenderApp`.

Owns bytes on the wire only: reading a request with its Content-Length (refusing oversized bodies
before reading them), writing the app's `Response`, keep-alive, and optional TLS for
kube-scheduler's ``enableHTTPS``. Routing, replies and metrics are the app's.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubectl_gpushare.extender.app import ExtenderApp, Response

log = logging.getLogger("kubectl_gpushare.extender.httpd")


class _Server(ThreadingHTTPServer):
    # Handler threads must not keep the process alive or pile up references after shutdown.
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    app: ExtenderApp

    def handle_error(self, request: object, client_address: object) -> None:
        """Log a broken connection (TLS handshake failure, reset) in one line instead of a traceback."""
        log.debug("connection from %s failed: %s", client_address, sys.exc_info()[1])


class _Server6(_Server):
    address_family = socket.AF_INET6


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "kubectl-gpushare-extender"
    sys_version = ""
    timeout = 60  # an idle keep-alive connection is closed after this many seconds
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus the client's delayed
    # ACK adds ~40 ms to every keep-alive reply.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - signature of the base class
        """Silence the per-request access log; the app logs what matters."""

    def _serve(self) -> None:
        app = self.server.app
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self._send(Response(411, b'{"Error":"chunked request bodies are not supported; send Content-Length"}'),
                       close=True)
            return
        try:
            length = int(length_header) if length_header else 0
            if length < 0:
                raise ValueError
        except ValueError:
            self._send(Response(400, b'{"Error":"invalid Content-Length"}'), close=True)
            return
        if length > app.max_request_bytes:
            self._send(app.too_large(self.path, length), close=True)
            return
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            self.close_connection = True
            return
        self._send(app.handle(self.command, self.path, body))

    def _send(self, response: Response, close: bool = False) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815 - http.server names


def start_http_server(
    app: ExtenderApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    tls_cert_file: str | None = None,
    tls_key_file: str | None = None,
) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Serve ``app`` on ``host:port`` in a daemon thread; the caller owns the shutdown.

    Args:
        app: the application.
        host: address to bind (``127.0.0.1`` by default; ``0.0.0.0`` in a pod).
        port: TCP port, 0 for any free port (read it back from ``server.server_address``).
        tls_cert_file: PEM certificate (chain) for HTTPS; both TLS files or neither.
        tls_key_file: PEM private key for HTTPS.

    Returns:
        The server and its thread; stop with ``shutdown()``, ``server_close()``, ``join()``.

    Raises:
        OSError: the address cannot be bound.
        ssl.SSLError: the certificate or key cannot be loaded.
    """
    server_class = _Server6 if _family(host) == socket.AF_INET6 else _Server
    httpd = server_class((host, port), _Handler)
    httpd.app = app
    if tls_cert_file and tls_key_file:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(tls_cert_file, tls_key_file)
        except (OSError, ssl.SSLError):
            httpd.server_close()
            raise
        # The handshake runs in the handler thread on first read, so a slow client cannot stall accept().
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                              name="extender-http", daemon=True)
    thread.start()
    return httpd, thread
