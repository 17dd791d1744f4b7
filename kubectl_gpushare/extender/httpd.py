"""The socket side of the extender: a threading HTTP/1.1 server around `ExtenderApp`.

Owns bytes on the wire only: reading a request with its Content-Length (refusing oversized bodies
before reading them), writing the app's `Response` framed as Go frames it (`_Handler._send`), keep-alive,
and optional TLS for kube-scheduler's ``enableHTTPS`` and the admission webhook (the key pair is reloaded when its files
change: `certs`). Routing, replies and metrics are the app's.

Every resource a client can hold is bounded (`Limits`): open connections (one thread each; past the
cap a new connection gets 503 and is closed), request bodies being read or handled at once (a body
that does not fit waits briefly, then gets 503 unread), request heads over 16 KiB parsed at once (a
head's fields cost ~50 times its bytes: one more waits briefly, then gets 503), the time a
keep-alive connection may sit idle, and the time one request may take to arrive once it has started
(a client trickling bytes is cut off). Body framing follows Go's net/http (`kube.go_http`): repeated
``Content-Length`` headers are one if they are equal once trimmed, and refused with 400 if they
differ, as the body could be framed two ways; a ``Transfer-Encoding`` on HTTP/1.1 is refused with
411 (chunked, which Go reads and the extender does not) or 501 (any other), and on HTTP/1.0 ignored,
as Go ignores it. A request head is read as Go reads it (`kube.go_handler`): a line Go cannot cut, a
method that is no token, anything but ``HTTP/X.Y`` after the second space or a target Go's URL
parser refuses gets Go's plain 400, a version other than 1.x Go's 505, a head past Go's 1 MiB + 4096
bytes Go's 431 and a first header line that starts with a blank Go's 400, and header fields Go refuses
(a line without a colon, a bad name or value byte, two ``Host``; an HTTP/1.1 request without ``Host``, a
malformed one, a name with a space) Go's 400s (`_Handler.parse_request`).
"""

from __future__ import annotations

import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING

from kubectl_gpushare.extender.app import ExtenderApp, Response
from kubectl_gpushare.extender.certs import ReloadingKeyPair
from kubectl_gpushare.kube import go_http
from kubectl_gpushare.kube.go_handler import GoHeadHandler

log = logging.getLogger("kubectl_gpushare.extender.httpd")


def _busy(error: bytes) -> bytes:
    """A 503 written before any request is read or parsed, then the connection closed."""
    body = b'{"Error":"%s; try again later"}' % error
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


_BUSY = _busy(b"too many connections")
_HEADS_BUSY = _busy(b"too many large request heads")
LARGE_HEAD = 16 * 1024
"""Head bytes (request line and header lines) a connection parses without a large-head slot (`Limits`).

Go's server parses any head within 1 MiB + 4096 bytes, but in Python a head of 3-byte header lines
costs ~50 times its bytes once parsed (a line, a field, a name and a value, an ``email`` header each:
~70 MB at the limit), so 128 connections could hold gigabytes. kube-scheduler's requests to an extender
have heads of a few hundred bytes (Host, User-Agent, Content-Length, Content-Type, Accept-Encoding)."""


@dataclass(frozen=True)
class Limits:
    """What one client, or all of them together, may hold of the server.

    Attributes:
        max_connections: open connections (each has a thread); more are answered 503 and closed.
        max_inflight_bytes: request body bytes being read or handled at once, over all connections.
        max_large_heads: request heads over `LARGE_HEAD` bytes parsed and served at once, over all
            connections; one more waits ``inflight_wait`` for a slot, then gets 503.
        inflight_wait: seconds a body waits for room under ``max_inflight_bytes`` before a 503.
        idle_timeout: seconds a connection may wait for the next request to start.
        request_timeout: seconds a request may take to arrive in full once its first byte has.
        (Defaults suit one kube-scheduler: it keeps a few keep-alive connections and sends one
        filter or prioritize at a time, plus binds in parallel.)
    """

    max_connections: int = 128
    max_large_heads: int = 2
    max_inflight_bytes: int = 64 * 1024 * 1024
    inflight_wait: float = 5.0
    idle_timeout: float = 60.0
    request_timeout: float = 30.0


class _Budget:
    """A pool of bytes that request bodies borrow while they are read and handled."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._used = 0
        self._cond = threading.Condition()

    def acquire(self, amount: int, timeout: float) -> bool:
        """Borrow ``amount`` bytes, waiting up to ``timeout`` seconds for room; False if none came."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._used + amount > self.capacity:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or amount > self.capacity:
                    return False
                self._cond.wait(remaining)
            self._used += amount
            return True

    def release(self, amount: int) -> None:
        """Give back what `acquire` lent."""
        with self._cond:
            self._used -= amount
            self._cond.notify_all()


class _Server(ThreadingHTTPServer):
    # Handler threads must not keep the process alive or pile up references after shutdown.
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    app: ExtenderApp
    limits: Limits
    budget: _Budget
    connections: threading.BoundedSemaphore
    large_heads: threading.BoundedSemaphore
    tls: bool = False
    key_pair: ReloadingKeyPair | None = None

    def handle_error(self, request: object, client_address: object) -> None:
        """Log a broken connection (TLS handshake failure, reset) in one line instead of a traceback."""
        log.debug("connection from %s failed: %s", client_address, sys.exc_info()[1])

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        """Start a handler thread, or answer 503 and close when every connection slot is taken."""
        if not self.connections.acquire(blocking=False):
            log.warning("refused a connection from %s: %d connections open", client_address,
                        self.limits.max_connections)
            if not self.tls:  # TLS has not shaken hands yet: there is no channel to answer on
                try:
                    request.setblocking(False)
                    request.send(_BUSY)
                except OSError:
                    pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.connections.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        """Handle one connection and give its slot back, however it ends."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class _DeadlineReader(io.RawIOBase):
    """The connection's read side, with the idle timeout between requests and a deadline within one.

    Socket timeouts bound each read only; a client sending a byte every few seconds would hold its
    thread forever. Here the first bytes of a request start a clock (`start_request` resets it).
    """

    def __init__(self, sock: socket.socket, limits: Limits) -> None:
        super().__init__()
        self._sock = sock
        self._limits = limits
        self._deadline: float | None = None

    def readable(self) -> bool:
        return True

    def start_request(self) -> None:
        """Forget the previous request's deadline: the next bytes start a new one."""
        self._deadline = None

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._deadline is None:
            self._sock.settimeout(self._limits.idle_timeout)
        else:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("request took too long to arrive")
            self._sock.settimeout(min(remaining, self._limits.idle_timeout))
        count = self._sock.recv_into(buffer)
        if count and self._deadline is None:
            self._deadline = time.monotonic() + self._limits.request_timeout
        return count


class _Handler(GoHeadHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _reply_connection: go_http.ReplyConnection
    """What Go's server does with the connection after the app's reply (`parse_request`)."""
    _refused_after_framing: bytes | None = None
    """Go's reply to a head whose version, Host or names it refuses once the framing is read (`parse_request`)."""
    _large_head = False
    """Whether this request holds one of the server's large-head slots (`head_refused`)."""
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus the client's delayed
    # ACK adds ~40 ms to every keep-alive reply.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # only drops the makefile's reference; the socket stays open
        self._reader = _DeadlineReader(self.connection, self.server.limits)
        self.rfile = io.BufferedReader(self._reader, 64 * 1024)

    def start_request(self) -> None:
        """The next request's first bytes start its deadline (`_DeadlineReader`)."""
        self._reader.start_request()

    def head_refused(self, size: int) -> bytes | None:
        """A head past `LARGE_HEAD` is parsed with one of ``Limits.max_large_heads`` slots, else gets 503 and closes.

        Until then the connection holds the head's bytes only (`go_http.read_header_block`), about what Go's
        server holds; the slot is held until the request is served and its head dropped (`handle_one_request`).
        """
        if size <= LARGE_HEAD or self._large_head:
            return None
        if not self.server.large_heads.acquire(timeout=self.server.limits.inflight_wait):
            log.warning("refused a request head of %d+ bytes: %d large heads being served", size,
                        self.server.limits.max_large_heads)
            return _HEADS_BUSY
        self._large_head = True
        return None

    def handle_one_request(self) -> None:
        """Serve one request; a large head's slot goes back once what was parsed from it is dropped."""
        try:
            super().handle_one_request()
        finally:
            if self._large_head:
                for name in ("headers", "requestline", "raw_requestline", "request_line", "path"):
                    vars(self).pop(name, None)
                self._large_head = False
                self.server.large_heads.release()

    def parse_request(self) -> bool:
        """Read the head as Go's server reads it (`GoHeadHandler`), then Go's keep-alive.

        ``http.server`` would split the line on any whitespace, serve ``GET /`` as HTTP/0.9 and
        ``HTTP/1.10``, and bound the head by lines (a request line over 64 KiB its HTML 414, a header
        line over 64 KiB or a 101st its HTML 431). Go's server (src/net/http/request.go ``readRequest``,
        `go_http.read_request_line`) refuses a line it cannot read with its plain 400, and bounds
        the whole head by bytes only (`go_http.MAX_REQUEST_HEAD`, then its plain 431), before any
        handler, and closes. Whether the connection outlives the reply, and the ``Connection`` header
        that says so, are Go's (`go_http.reply_connection`), not ``http.server``'s, which compares the first
        ``Connection`` value whole with ``close`` (any case) and adds no header; a reply's status line says
        ``HTTP/1.0`` to an HTTP/1.0 request, as Go's does, not ``HTTP/1.1`` (`GoHeadHandler.take_head`); the
        HTTP/2 preface's head (``PRI * HTTP/2.0``, no header) is answered by the app, then the connection
        closes, as Go's server closes it after its handler. ``Expect`` is read in `_serve`, after the framing,
        as Go reads it. Header fields Go's textproto cannot read, and a second ``Host``, get Go's plain 400 in
        `GoHeadHandler.read_head` (`go_http.fields_refused`); a version other than 1.x gets Go's 505, and a
        missing or malformed ``Host`` and a name with a space Go's 400 with its reason, once `_serve` read the
        framing (`go_http.version_or_host_refused`), as Go checks them after ``readTransfer``: the sandbox's rule
        (`sandbox.framing.header_fields_refused`) too.
        """
        fields = self.read_head()
        if fields is None:
            return False
        self._refused_after_framing = go_http.version_or_host_refused(fields, self.request_line)  # `_serve` answers it
        self.take_head(fields)
        version = self.request_line.version
        self._reply_connection = go_http.reply_connection(version, self.headers.get_all("Connection") or [],
                                                          go_http.is_h2_preface(self.request_line, fields))
        self.close_connection = self._reply_connection.close
        return True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - signature of the base class
        """Silence the per-request access log; the app logs what matters."""

    def _serve(self) -> None:
        app = self.server.app
        version = self.request_line.version
        # Go's rules (`go_http`, src/net/http/transfer.go parseTransferEncoding): an HTTP/1.0 request's
        # Transfer-Encoding is dropped unread and Content-Length frames its body (go.dev/issue/12785);
        # on HTTP/1.1 and later one `chunked` field is read, anything else is Go's 501, never a body
        # left unread. Values as textproto keeps them (`go_http.header_pairs`), compared untrimmed as Go compares
        # them (ascii.EqualFold): an empty continuation line's trailing space is Go's 501.
        codings = self.headers.get_all("Transfer-Encoding") or []
        if go_http.transfer_encoding_refused(codings, version):
            self._send(app.refuse(501, self.path, "unsupported transfer encoding"), close=True)
            return
        # Go's fixLength (`go_http.content_length`, src/net/http/transfer.go) reads Content-Length before it
        # looks at a chunked body: a bad or repeated-and-differing value is its 400 even beside `chunked`.
        try:
            length = go_http.content_length(self.headers.get_all("Content-Length") or [])
        except ValueError as exc:
            self._send(app.refuse(400, self.path, str(exc)), close=True)
            return
        # src/net/http/server.go readRequest checks the version, Host and the names once the framing is read: its
        # 505, or its 400 with the reason (`go_http.version_or_host_refused`), before any handler.
        if self._refused_after_framing is not None:
            self.refuse(self._refused_after_framing)
            return
        chunked = go_http.chunked(codings, version)
        # src/net/http/server.go conn.serve, once readRequest read the framing (`go_http.expectation`): a body
        # refused below was never read, so its client gets no 100 Continue.
        expect = go_http.expectation(version, self.headers.get_all("Expect") or [], chunked or length > 0)
        if expect == "fail":
            self.expectation_failed()
            return
        if chunked:  # Go reads it; the extender does not (docs/extender.md)
            self._send(Response(411, b'{"Error":"chunked request bodies are not supported; send Content-Length"}'),
                       close=True)
            return
        if length > app.max_request_bytes:
            self._send(app.too_large(self.path, length), close=True)
            return
        budget = self.server.budget
        if length and not budget.acquire(length, self.server.limits.inflight_wait):
            self._send(app.refuse(503, self.path, "too many request bytes in flight; try again later",
                                  reason="busy"), close=True)
            return
        try:
            if expect == "continue":  # expectContinueReader.Read: on the handler's first read of the body
                self.handle_expect_100()
            body = self.rfile.read(length) if length else b""
            if len(body) < length:
                self.close_connection = True
                return
            response = app.handle(self.command, self.path, body)
            del body
        finally:
            if length:
                budget.release(length)
        self._send(response)

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line only: `_send` writes the headers in Go's order, and Go writes no ``Server`` header.

        ``http.server``'s own adds ``Server: kubectl-gpushare-extender`` and ``Date`` right after the
        status line; the original extender's replies (Go's net/http) carry no ``Server`` header.
        """
        self.send_response_only(code, message)

    def _send(self, response: Response, close: bool = False) -> None:
        """Write the reply's head in Go's order, then its body as Go frames it; ``close`` (a refusal unread) closes.

        src/net/http/server.go ``chunkWriter.writeHeader``: the handler's headers sorted by name
        (``Header.WriteSubset``; the original extender's handlers set ``Content-Type`` only), then the
        ones the server adds (``extraHeader.Write``): ``Date``, ``Content-Length``, ``Connection``,
        ``Transfer-Encoding``. The original's handlers call ``WriteHeader`` and then ``Write`` the body once
        (pkg/routes/routes.go), so a body of up to 2048 bytes gets a ``Content-Length`` and a larger one is
        chunked, or on HTTP/1.0 ended by the close (`go_http.reply_framing`); every app reply is framed so, as
        any handler's in a Go server (kube-scheduler's, Prometheus's and kube-apiserver's clients read both).
        A refusal before the app keeps its ``Content-Length``: Go's server writes those itself, in its own words
        (docs/extender.md). Without ``close`` the connection is kept or closed as Go's server decides
        (`go_http.reply_connection`); ``Connection`` says so as Go's does, the sandbox's rule
        (`go_http.connection_header`: a closing reply to HTTP/1.0 says nothing).
        """
        self.connection.settimeout(self.server.limits.idle_timeout)  # a client that does not read
        version = self.request_line.version
        body = response.body
        framing: go_http.ReplyFraming = (
            "length" if close else go_http.reply_framing(len(body), version, self.command == "HEAD"))
        self.send_response(response.status)
        for name, value in sorted((("Content-Type", response.content_type), *response.headers), key=lambda h: h[0]):
            self.send_header(name, value)
        self.send_header("Date", self.date_time_string())
        if framing == "length":
            self.send_header("Content-Length", str(len(body)))
        if close or framing == "close":
            self.close_connection = True
        connection = go_http.connection_header(version, self._reply_connection, self.close_connection)
        if connection is not None:
            self.send_header("Connection", connection)
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return
        # One write: with Nagle off, a chunk's size line, body and end as separate writes would be separate packets.
        self.wfile.write(go_http.chunked_body(body) if framing == "chunked" else body)

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815 - http.server names

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise type every unknown handler attribute

        def __getattr__(self, name: str) -> Callable[[], None]:
            """``do_<METHOD>`` for every method, so ``http.server`` never answers its own HTML 501.

            Go's ``readRequest`` (src/net/http/request.go) takes any token as the method (``validMethod``;
            `go_http.read_request_line` refused the rest) and hands it to the handler: here the app,
            whose reply to a method a route does not take is its JSON 405 (the sandbox's handler does
            the same, `sandbox.server`).
            """
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)


def start_http_server(
    app: ExtenderApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    tls_cert_file: str | None = None,
    tls_key_file: str | None = None,
    limits: Limits | None = None,
) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Serve ``app`` on ``host:port`` in a daemon thread; the caller owns the shutdown.

    Args:
        app: the application.
        host: address to bind (``127.0.0.1`` by default; ``0.0.0.0`` in a pod).
        port: TCP port, 0 for any free port (read it back from ``server.server_address``).
        tls_cert_file: PEM certificate (chain) for HTTPS; both TLS files or neither.
        tls_key_file: PEM private key for HTTPS.
        limits: connection, body-bytes and time bounds; `Limits` defaults when None.

    Returns:
        The server and its thread; stop with ``shutdown()``, ``server_close()``, ``join()``.

    Raises:
        OSError: the address cannot be bound.
        ssl.SSLError: the certificate or key cannot be loaded.
    """
    server_class = _Server6 if _family(host) == socket.AF_INET6 else _Server
    httpd = server_class((host, port), _Handler)
    httpd.app = app
    httpd.limits = limits or Limits()
    httpd.budget = _Budget(httpd.limits.max_inflight_bytes)
    httpd.connections = threading.BoundedSemaphore(httpd.limits.max_connections)
    httpd.large_heads = threading.BoundedSemaphore(httpd.limits.max_large_heads)
    if tls_cert_file and tls_key_file:
        try:
            httpd.key_pair = ReloadingKeyPair(tls_cert_file, tls_key_file)
        except (OSError, ssl.SSLError):
            httpd.server_close()
            raise
        # The handshake runs in the handler thread on first read, so a slow client cannot stall accept().
        httpd.socket = httpd.key_pair.dispatch.wrap_socket(httpd.socket, server_side=True,
                                                           do_handshake_on_connect=False)
        httpd.tls = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                              name="extender-http", daemon=True)
    thread.start()
    return httpd, thread
