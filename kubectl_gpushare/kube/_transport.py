"""HTTP/1.1 to one API server: a keep-alive connection pool, TLS, auth headers, error mapping.

`Transport.request` sends one logical request: it re-reads credentials once after a 401 (a rotated
token file, an expired exec credential), and sends a read (GET, HEAD, OPTIONS, TRACE) once more on
a fresh connection when a pooled one turns out to have been closed by the server. Error replies
become `kube.errors` classes built from the ``Status`` body; socket, TLS and timeout failures
become `Unreachable` naming the server.

Whether a request can have reached the server is tracked, so a write that cannot have landed is
told apart from one of unknown outcome (`Unreachable.sent`). ``sent`` is False only where no byte
of it left: a fresh connection is opened (TCP connect, then the TLS handshake) before anything is
written to it, and a failure there, or a deadline passed before asking, means nothing was sent. A
failure once writing has begun, or on a pooled connection, is ``sent`` True: the server may have
read part or all of the request. Go's ``net/http`` draws the same line
(``transport.go``, ``persistConn.shouldRetryRequest``): a request on a reused connection is sent
again only if nothing of it was written (``nothingWrittenError``) or it is replayable (GET, HEAD,
OPTIONS, TRACE: ``Request.isReplayable``); never a write that may have been delivered. A pooled
connection the server has closed is found before it is used (`_still_open`, as Go's read loop
notices an idle connection's EOF and drops it, ``errServerClosedIdle``), so a write is put on a
connection that is known open, or on a new one.

A reply with ``Content-Encoding: gzip`` is decompressed here, streaming, to at most
`MAX_DECOMPRESSED_BYTES` (`decoded_body`): a small hostile body (a "gzip bomb" from a proxy) is
refused before it expands. A 2xx whose body does not decompress is `UndecodableReply` (a write it
answers has landed); an error reply whose body does not decompress is still its status's error.

Private to `kube`: `kube.client.Client` is the public face. No retries by policy (the client
applies `kube.retry` to reads), no decoding of successful replies beyond their content coding.
"""

from __future__ import annotations

import http.client
import math
import select
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.config import ClientConfig
from kubectl_gpushare.kube.deadlines import MAX_DURATION, MILLISECOND, format_duration, long_running
from kubectl_gpushare.kube.errors import (
    ApiError,
    ConfigError,
    Expired,
    ReplyTooLarge,
    Unauthorized,
    UndecodableReply,
    Unreachable,
    api_error,
)

MAX_IDLE_CONNECTIONS: Final = 16
"""Idle keep-alive connections kept for reuse; more concurrent requests open (and then close) extra ones."""
_STALE_CONNECTION: Final = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
_REPLAYABLE: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
"""Methods sent once more after a pooled connection fails under them (Go's ``Request.isReplayable``)."""
MAX_DECOMPRESSED_BYTES: Final = 256 * 1024 * 1024
"""The most a compressed reply may expand to (256 MiB). Plain replies have no bound of their own (their
sender pays for every byte); a compressed one could expand a thousandfold. A page of `Client.list`
(500 objects) is a few MiB; kube-apiserver compresses only replies past 128 KiB
(``responsewriters/writers.go``, ``defaultGzipThresholdBytes``), so the bound is far above any it sends."""
_GZIP_CODINGS: Final = ("gzip", "x-gzip")  # RFC 9110 8.4.1.3: x-gzip is gzip; codings are case-insensitive


class BodyEncodingError(ValueError):
    """A reply body that does not decode from its ``Content-Encoding``; the message says why, in one line."""


def _content_coding(header: str | None) -> str:
    """A ``Content-Encoding`` as compared: trimmed, lower case (RFC 9110 8.4.1), ``identity`` when absent or empty."""
    return (header or "").strip().lower() or "identity"


def decoded_body(data: bytes, content_encoding: str | None, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """A reply body undone from its content coding (none or gzip), expanding to at most ``limit`` bytes.

    Decompresses a chunk at a time (`zlib.decompressobj` with ``max_length``), so a "gzip bomb" is
    refused once its output passes ``limit``, never expanded in full. Where the gzip trailer (ISIZE,
    RFC 1952 2.3.1: the size modulo 2**32, so never above the size) already declares more, the output
    is counted and dropped, not kept: a bomb is refused in a chunk's memory. Concatenated gzip members
    are read one after another, as Go's ``gzip.Reader`` (client-go's transport) does by default.

    Raises:
        BodyEncodingError: not gzip, truncated, a coding other than gzip, or longer than ``limit``.
    """
    coding = _content_coding(content_encoding)
    if coding == "identity":
        return data
    if coding not in _GZIP_CODINGS:
        raise BodyEncodingError(f"the reply is encoded as {protocol.printable(coding, 40)!r}, which was not asked for")
    declared = int.from_bytes(data[-4:], "little") if len(data) >= 4 else 0
    if declared > limit:
        _inflate(data, limit, None)  # raises unless the trailer lied (a body within the limit after all)
    parts: list[bytes] = []
    _inflate(data, limit, parts)
    return b"".join(parts)


def _inflate(data: bytes, limit: int, parts: list[bytes] | None) -> None:
    """Decompress the gzip members of ``data`` into ``parts`` (None: count the output only, keep none).

    Raises:
        BodyEncodingError: not gzip, truncated, or more than ``limit`` bytes of output.
    """
    size = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer around deflate (zlib manual)
        pending = rest
        try:
            while pending and not inflater.eof:
                chunk = inflater.decompress(pending, min(_READ_CHUNK, limit - size + 1))
                size += len(chunk)
                if size > limit:
                    raise BodyEncodingError(f"the reply expands past {limit} bytes once decompressed (gzip)")
                if parts is not None:
                    parts.append(chunk)
                pending = inflater.unconsumed_tail
        except zlib.error as exc:
            raise BodyEncodingError(f"the reply's gzip body does not decompress ({exc})") from None
        if not inflater.eof:
            raise BodyEncodingError("the reply's gzip body is truncated")
        rest = inflater.unused_data
        if not rest:
            return


def retry_after_seconds(value: str | None) -> float | None:
    """Read a ``Retry-After`` header: delta seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def error_from_reply(status: int, body: bytes, headers: Mapping[str, str] | http.client.HTTPMessage) -> ApiError:
    """Map an error reply to a `kube.errors` class, preferring the ``Status`` body's words.

    ``body`` as received: undone here from its ``Content-Encoding`` (`decoded_body`); one that does not
    decode is still its status's error, saying why in place of the body's words.
    """
    reason, message = "", ""
    try:
        body = decoded_body(body, headers.get("Content-Encoding"))
    except BodyEncodingError as exc:
        body, message = b"", f"the server answered HTTP {status}, but {exc}"
    retry_after = retry_after_seconds(headers.get("Retry-After"))
    parsed = None
    try:
        parsed = types.STATUS_DECODER.decode(body) if body else None
    except types.DECODE_ERRORS:  # any body, even deep or not UTF-8, is an error
        message = protocol.first_line(body.decode("utf-8", errors="replace"), 300)
    if parsed is not None:
        reason, message = parsed.reason, parsed.message
        if retry_after is None and parsed.details is not None and parsed.details.retry_after_seconds is not None:
            retry_after = float(parsed.details.retry_after_seconds)
    error = api_error(status, reason, message, retry_after)
    if isinstance(error, Expired) and parsed is not None and parsed.metadata is not None:
        error.continue_token = parsed.metadata.continue_
    return error


class Transport:
    """Requests to the server a `ClientConfig` names; thread-safe.

    Args:
        config: server, credentials, TLS settings and timeout.
        user_agent: the ``User-Agent`` header.
        gzip: ask for gzip-compressed replies.
    """

    def __init__(self, config: ClientConfig, user_agent: str, *, gzip: bool = False) -> None:
        self.config = config
        self.user_agent = user_agent
        self.gzip = gzip
        invalid = ConfigError(f"invalid server URL {config.server[:200]!r}")  # exit 2: no usable kubeconfig
        try:  # urlsplit refuses an unclosed "[", .port a port that is no number or past 65535
            parts = urlsplit(config.server)
            port = parts.port
            # The socket layer encodes the host as IDNA (UnicodeError, a ValueError, for a label past 63
            # characters or an empty one), http.client the path as ASCII: both only once a request is sent.
            (parts.hostname or "").encode("idna")
            parts.path.encode("ascii")
        except ValueError:
            raise invalid from None
        # http.client would refuse a host with a space or a control character only when it connects,
        # and a path with either (`http.client._contains_disallowed_url_pchar_re`) only when it sends.
        if parts.scheme not in ("http", "https") or not parts.hostname or not parts.hostname.isprintable() or (
                " " in parts.hostname) or not parts.path.isprintable() or " " in parts.path:
            raise invalid
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._ssl: ssl.SSLContext | None = None
        self._ssl_ready = False

    # --- connections ---------------------------------------------------------------------------------

    def _ssl_context(self, refresh: bool = False) -> ssl.SSLContext | None:
        with self._lock:
            if refresh or not self._ssl_ready:
                self._ssl = self.config.ssl_context()
                self._ssl_ready = True
            return self._ssl

    def _connect(self) -> http.client.HTTPConnection:
        timeout = self.config.timeout
        if self._https:
            return _TLSConnection(
                self._host,
                self._port,
                timeout=timeout,
                context=self._ssl_context(),
                server_hostname=self.config.tls_server_name,
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _acquire(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle kept-alive connection still open (most recently used first) or a new one, and whether reused.

        A new one is not connected yet: `request` opens it apart from sending, so a failure to
        connect is known to have sent nothing.
        """
        while True:
            with self._lock:
                if not self._idle:
                    break
                connection = self._idle.pop()
            if _still_open(connection):
                return connection, True
            connection.close()  # closed by the server while idle (its keep-alive timeout): never written to
        return self._connect(), False

    def _release(self, connection: http.client.HTTPConnection) -> None:
        """Return a connection whose reply was read in full to the idle pool (or close it)."""
        with self._lock:
            if len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection; the transport stays usable."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # --- requests --------------------------------------------------------------------------------------

    def url(self, path: str, query: Mapping[str, object] | None = None) -> str:
        """The full URL of an API path (for messages and logs), with the caller's query (not `server_timeout`'s)."""
        return f"{self.config.server.rstrip('/')}{path}" + _query_string(query)

    def _target(self, path: str, query: Mapping[str, object] | None) -> str:
        return self._prefix + quote(path, safe="/:@") + _query_string(query)

    def server_timeout(self, path: str, bound: float | None) -> str | None:
        """The ``timeout`` query parameter of a request: its budget, so the server stops when the client does.

        client-go sends ``timeout=<Go duration>`` on every request that has a timeout (the
        config's, from ``--request-timeout``, or ``Request.Timeout``: ``rest/request.go``,
        ``Request.URL``), and kube-apiserver answers 504 ``Timeout`` once it passes (capped at its
        own ``--request-timeout``, ``filters/request_deadline.go``); a write it abandons that way
        may still land. The budget here is ``bound`` (what is left of the caller's deadline, within
        the client's timeout) or else the client's timeout, rounded up to whole milliseconds (a
        budget under 1 ms must not read as ``0s``, which the server takes for "none given").

        Never on long-running requests (`kube.deadlines.long_running`: ``pods/proxy``, ``log``,
        ``exec``, ...): the server ignores it there, and a proxy would hand it on to the pod. Never
        on watches either (`stream` does not call this): kube-apiserver's watch handler ignores
        ``timeout`` and ends a watch at ``timeoutSeconds``, which `Client.watch` sends.
        """
        budget = bound if bound is not None else self.config.timeout
        if not budget or budget <= 0 or long_running(path):
            return None
        return format_duration(min(math.ceil(budget * 1000) * MILLISECOND, MAX_DURATION))

    def _send(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        content_type: str | None,
        refresh: bool,
        *,
        compressed: bool = True,
    ) -> http.client.HTTPResponse:
        """Send a request; ``compressed`` False asks for no gzip even where the transport does."""
        connection.putrequest(method, target, skip_accept_encoding=True)
        connection.putheader("User-Agent", self.user_agent)
        connection.putheader("Accept", "application/json")
        if self.gzip and compressed:
            connection.putheader("Accept-Encoding", "gzip")
        for name, value in self.config.auth_headers(refresh).items():
            connection.putheader(name, value)
        for name, value in self.config.impersonation_group_headers():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Type", content_type or "application/json")
            connection.putheader("Content-Length", str(len(body)))
        elif method in ("POST", "PUT", "PATCH"):
            connection.putheader("Content-Length", "0")
        connection.endheaders(body)
        return connection.getresponse()

    def _refreshed_after(self, error: ApiError, refreshed: bool) -> bool:
        """Whether to send once more after ``error``: re-read credentials on a first 401, where they can be.

        A token file may have rotated, an exec credential expired; a second 401 is the caller's to raise.
        """
        if refreshed or not isinstance(error, Unauthorized):
            return False
        if self.config.exec_provider is None and self.config.token_file is None:
            return False
        self._ssl_context(refresh=True)
        self.close()  # pooled TLS connections carry the old client certificate
        return True

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, object] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        *,
        max_bytes: int | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """Send one request and return the body of a 2xx reply.

        ``max_bytes`` bounds the reply body, for replies that come from somewhere less trusted than
        the API server itself (a pod behind ``pods/proxy``). ``deadline`` (a `time.monotonic`
        instant) bounds the whole exchange, connecting and waiting for the headers included (each
        socket wait gets what is left of it, never more than the client's timeout), for callers
        that owe an answer by then (a gRPC call's deadline). The connection is dropped when either
        is passed. Each try tells the server its budget (what is left of ``deadline``, or else the
        client's timeout: `server_timeout`), so the server gives up when the client does (504
        ``Timeout``; a write abandoned so may still land).

        Raises:
            ApiError: the server answered with an error status (subclass by status).
            Unreachable: refused, reset, TLS failure, no answer within the timeout, or none before
                ``deadline`` (``timeout`` True).
            ReplyTooLarge: the body was longer than ``max_bytes`` or not in by ``deadline``.
            UndecodableReply: a 2xx whose body does not decode from its ``Content-Encoding`` (not gzip,
                truncated, or past `MAX_DECOMPRESSED_BYTES`); a write it answers has landed.
            ConfigError: credentials could not be obtained.
        """
        refresh = False
        attempts = 0
        delivered = False  # whether an earlier try may have reached the server (then no failure is "not sent")
        while True:
            attempts += 1
            bound = self._bound(deadline, path, query, sent=delivered)
            timeout = self.server_timeout(path, bound)
            target = self._target(path, dict(query or {}, timeout=timeout) if timeout else query)
            connection, reused = self._acquire()
            try:
                if bound is not None:
                    _set_timeout(connection, bound)
                if connection.sock is None:
                    connection.connect()  # TCP and TLS first, apart: a failure here has sent nothing
            except (OSError, http.client.HTTPException) as exc:  # refused, DNS, TLS handshake, connect timeout
                connection.close()
                raise self.unreachable(path, query, exc, bound, sent=delivered) from None
            except BaseException:
                connection.close()
                raise
            try:
                response = self._send(connection, method, target, body, content_type, refresh)
                data = response.read() if max_bytes is None and deadline is None else _read_bounded(
                    response, max_bytes, deadline, connection
                )
            except ReplyTooLarge:
                connection.close()
                raise
            except _STALE_CONNECTION as exc:
                connection.close()
                delivered = True
                if reused and attempts == 1 and method in _REPLAYABLE:
                    continue  # the server had closed the idle connection: a read once more, on a fresh one
                raise self.unreachable(path, query, exc) from None
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                raise self.unreachable(path, query, exc, bound) from None
            except BaseException:
                connection.close()
                raise
            if response.will_close:
                connection.close()
            else:
                if bound is not None:
                    _set_timeout(connection, self.config.timeout)  # pooled connections wait as the client does
                self._release(connection)
            if 200 <= response.status < 300:
                try:
                    return decoded_body(data, response.getheader("Content-Encoding"))
                except BodyEncodingError as exc:  # the server answered 2xx: a write has landed, its reply unreadable
                    raise UndecodableReply(f"{exc} ({method} {self.url(path, query)})") from None
            error = error_from_reply(response.status, data, response.headers)
            if self._refreshed_after(error, refresh):
                refresh = True
                continue
            raise error

    def stream(
        self, path: str, query: Mapping[str, object], read_timeout: float | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Open a streaming GET (a watch) on a connection of its own, which the caller closes.

        Asks for no compression: kube-apiserver writes a watch's frames straight to the connection,
        never gzip-compressed (``handlers/watch.go``, ``WatchServer.HandleHTTP``), and the stream
        is read line by line as it comes.

        Raises:
            ApiError: the server refused the stream (410 Expired for a too-old resourceVersion).
            UndecodableReply: the stream came compressed all the same (a proxy); nothing is read of it.
            Unreachable: as for `request`.
        """
        target = self._target(path, query)
        refresh = False
        while True:
            connection = self._connect()
            try:
                response = self._send(connection, "GET", target, None, None, refresh, compressed=False)
                coding = _content_coding(response.getheader("Content-Encoding"))
                if 200 <= response.status < 300 and coding == "identity":
                    if connection.sock is not None:
                        connection.sock.settimeout(read_timeout)
                    return connection, response
                data = b"" if 200 <= response.status < 300 else response.read()
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                raise self.unreachable(path, query, exc) from None
            except BaseException:
                connection.close()
                raise
            connection.close()
            if 200 <= response.status < 300:  # a proxy's doing: the stream was asked for uncompressed
                raise UndecodableReply(
                    f"the watch stream is encoded as {protocol.printable(coding, 40)!r}, which was not asked for "
                    f"({self.url(path, query)})"
                )
            error = error_from_reply(response.status, data, response.headers)
            if self._refreshed_after(error, refresh):
                refresh = True
                continue
            raise error

    def _bound(
        self, deadline: float | None, path: str, query: Mapping[str, object] | None, *, sent: bool = False
    ) -> float | None:
        """Seconds each socket wait may take before ``deadline`` (None: the client's timeout applies).

        Raises:
            Unreachable: the deadline has passed already: nothing is sent (``sent``: an earlier try may have been).
        """
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if not left > 0:  # NaN too: a deadline that is no instant leaves no time
            url = self.url(path, query)
            raise Unreachable(f"no time left to ask the API server at {self.config.server} ({url})", url, True,
                              sent=sent)
        return _socket_wait(left, self.config.timeout)

    def unreachable(
        self, path: str, query: Mapping[str, object] | None, exc: BaseException, bound: float | None = None,
        *, sent: bool = True,
    ) -> Unreachable:
        """The `Unreachable` error for a failed request, worded for a user (``bound``: the seconds it was given).

        ``sent`` False only where the request is known not to have left (see the module docstring).
        """
        server = self.config.server
        url = self.url(path, query)
        if isinstance(exc, (TimeoutError, socket.timeout)):
            waited = bound if bound is not None else self.config.timeout
            after = f" after {waited:.3g}s" if waited else ""
            what = "did not answer" if sent else "did not complete a connection (TCP or TLS handshake)"
            return Unreachable(f"the API server at {server} {what}{after} ({url})", url, True, sent=sent)
        if isinstance(exc, ssl.SSLCertVerificationError):
            detail = exc.verify_message or exc.reason or "certificate verify failed"
            return Unreachable(
                f"the TLS certificate of {server} is not trusted ({detail}); "
                "check the cluster's certificate-authority and tls-server-name",
                url,
                sent=sent,
            )
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        if isinstance(exc, ssl.SSLError):
            reason = f"TLS error: {exc.reason or exc}"
        elif isinstance(exc, http.client.RemoteDisconnected):
            reason = "the server closed the connection without replying"
        elif isinstance(exc, ConnectionRefusedError):
            # nothing listens there: a stopped cluster (a sandbox or demo ends with its command) or
            # the wrong context; kubectl's own hint is "did you specify the right host or port?"
            reason += " (is it running, and is the kubeconfig's current context the one you meant?)"
        return Unreachable(f"cannot reach the API server at {server}: {reason}", url, sent=sent)


class _TLSConnection(http.client.HTTPSConnection):
    """HTTPS that can verify a name other than the host (the kubeconfig's ``tls-server-name``)."""

    def __init__(
        self, host: str, port: int, *, timeout: float | None, context: Any, server_hostname: str | None
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_hostname = server_hostname

    def connect(self) -> None:
        """Connect, then wrap the socket with TLS verifying ``tls-server-name`` when set."""
        if not self._server_hostname:
            super().connect()
            return
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_hostname)  # type: ignore[attr-defined]


_READ_CHUNK: Final = 64 * 1024
_LONGEST_WAIT: Final = 86400.0
"""The longest socket wait a far deadline gives where the client sets no timeout: a gRPC call
without a deadline reports ~9e18 s left, which no socket accepts as a timeout (OverflowError)."""


def _still_open(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection may carry a request: nothing to read on it, as on any idle one.

    A server that closed it (its idle timeout) has left an EOF (or a reset) to read; bytes it sent
    unasked (a TLS 1.3 session ticket, a late reply) make it readable too, and it is dropped all the
    same: a new connection costs a handshake, a request on a dead one an unknown outcome.
    """
    sock = connection.sock
    if sock is None or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
        return False
    try:
        if hasattr(select, "poll"):  # any descriptor number (select() stops at FD_SETSIZE)
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return not poller.poll(0)
        return not select.select([sock], [], [], 0)[0]
    except (OSError, ValueError):  # closed meanwhile: not known open
        return False


def _socket_wait(left: float, timeout: float | None) -> float:
    """Seconds one socket wait may take: what is left before a deadline, within ``timeout`` (or `_LONGEST_WAIT`)."""
    return min(left, timeout or _LONGEST_WAIT)


def _set_timeout(connection: http.client.HTTPConnection, seconds: float | None) -> None:
    """The timeout of the connection's socket waits: for its next connect, and for the open socket."""
    connection.timeout = seconds
    if connection.sock is not None:
        connection.sock.settimeout(seconds)


def _read_bounded(response: http.client.HTTPResponse, max_bytes: int | None, deadline: float | None,
                  connection: http.client.HTTPConnection | None = None) -> bytes:
    """The body, a chunk at a time, refusing more than ``max_bytes`` or reading past ``deadline``.

    With ``connection``, each wait for a chunk is cut to what is left before ``deadline``. A
    compressed reply is refused where the size is bounded (its expanded size is not).
    """
    encoding = _content_coding(response.getheader("Content-Encoding"))
    if max_bytes is not None and encoding != "identity":
        raise ReplyTooLarge("the reply is compressed, which was not asked for (its size is unbounded)")
    # parse_int_strict: a 5,000-digit Content-Length (which http.client ignores) is no ValueError from int()
    declared = protocol.parse_int_strict(response.getheader("Content-Length"))
    if max_bytes is not None and declared is not None and declared > max_bytes:
        raise ReplyTooLarge(f"the reply declares {declared} bytes, more than {max_bytes}")
    parts: list[bytes] = []
    size = 0
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise ReplyTooLarge("the reply did not arrive in time")
        if left is not None and connection is not None and connection.sock is not None:
            connection.sock.settimeout(_socket_wait(left, connection.timeout))
        chunk = response.read1(_READ_CHUNK)  # one recv at most: a slow drip cannot outlast the deadline
        if not chunk:
            response.read()  # read1 leaves a finished body open; this marks it done, so the connection is reusable
            return b"".join(parts)
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise ReplyTooLarge(f"the reply is longer than {max_bytes} bytes")
        parts.append(chunk)


def _query_string(query: Mapping[str, object] | None) -> str:
    """``?k=v&...`` for the parameters that are set (None and "" are left out), or ""."""
    clean = {key: value for key, value in (query or {}).items() if value is not None and value != ""}
    return f"?{urlencode(clean)}" if clean else ""
