"""HTTP/1.1 request framing, strictly: the request target, Content-Length, chunked encoding, read deadlines.

Owns how many bytes belong to a request and how long a client may take to send them. Chunk sizes
are 1 to 16 hex digits on a CRLF-terminated line (no sign, no ``0x``, no underscores: Python's
``int(x, 16)`` accepts all three), each chunk ends with CRLF, the running total counts against the
body limit, and trailers are bounded. Anything else is a `FramingError`; the server answers 400
and closes, since the connection's framing can no longer be trusted. `DeadlineReader` bounds the
time between requests (idle) and the time to read one request (head and body), so a silent or
trickling client cannot hold a connection thread for ever. No HTTP semantics beyond framing.
"""

from __future__ import annotations

import io
import re
import socket
import time
from typing import TYPE_CHECKING, Protocol

from kubectl_gpushare.kube import go_http
from kubectl_gpushare.kube.go_http import BAD_REQUEST_REPLY, RequestLine

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MAX_LINE = 4096
"""Longest chunk-size or trailer line accepted."""
MAX_TRAILERS = 32
"""Most trailer lines accepted after the last chunk."""

UNSUPPORTED_TRANSFER_ENCODING_REPLY = (b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                       b"Connection: close\r\n\r\nUnsupported transfer encoding")  # fmt: skip
"""What Go's server writes, then closes, for a request whose ``Transfer-Encoding`` it does not read (``conn.serve``'s
``isUnsupportedTEError`` case, src/net/http/server.go: RFC 7230's 501, the encoding not echoed back)."""
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r\n")


class Stream(Protocol):
    """A buffered binary reader (the handler's ``rfile``, or ``io.BytesIO`` in tests)."""

    def read(self, size: int | None = -1, /) -> bytes:
        """Up to ``size`` bytes (fewer only at the end of the stream)."""
        ...

    def readline(self, size: int | None = -1, /) -> bytes:
        """One line, at most ``size`` bytes."""
        ...


class FramingError(ValueError):
    """The body's framing is broken (400, and the connection is closed)."""


class BodyTooLargeError(ValueError):
    """The body is larger than the limit (413)."""


def header_fields_refused(fields: list[bytes], request_line: RequestLine) -> bytes | None:
    """The reply Go's server writes, then closes, for `go_http.header_fields` it refuses; None where it reads them.

    In Go's order, once ``GoHeadHandler.read_head`` refused the fields textproto and ``readRequest`` cannot read
    (`go_http.fields_refused`, the plain `BAD_REQUEST_REPLY`): ``readTransfer`` (src/net/http/transfer.go)
    refuses a ``Transfer-Encoding`` it does not read (`go_http.transfer_encoding_refused`; ignored on HTTP/1.0)
    with `UNSUPPORTED_TRANSFER_ENCODING_REPLY` and a Content-Length `content_length` refuses with the plain
    `BAD_REQUEST_REPLY`; then server.go's ``readRequest`` checks the version (its 505), Host and the names (its
    400 with the reason: `go_http.version_or_host_refused`). The extender applies the same `go_http` rules
    around its own framing replies.
    """
    if go_http.transfer_encoding_refused(_codings(fields), request_line.version):
        return UNSUPPORTED_TRANSFER_ENCODING_REPLY
    try:  # readTransfer's fixLength, right after: a chunked request's Content-Length too
        go_http.content_length([value.decode("latin-1") for value in go_http.field_values(fields, b"content-length")])
    except ValueError:
        return BAD_REQUEST_REPLY
    return go_http.version_or_host_refused(fields, request_line)


def _codings(fields: list[bytes]) -> list[str]:
    """The ``Transfer-Encoding`` values of a request's `header_fields`, for `go_http`."""
    return [value.decode("latin-1") for value in go_http.field_values(fields, b"transfer-encoding")]


def chunked(fields: list[bytes], version: tuple[int, int]) -> bool:
    """Whether the body is chunked: a ``Transfer-Encoding`` `header_fields_refused` passed (not on HTTP/1.0)."""
    return go_http.chunked(_codings(fields), version)


def content_length(values: list[str]) -> int:
    """The Content-Length of a request from its header values (none means 0): `go_http.content_length`.

    Go's ``readTransfer`` (src/net/http/transfer.go ``fixLength``); its error is no ``statusError``, so
    Go's server answers the plain `BAD_REQUEST_REPLY` before any handler (`header_fields_refused`).

    Raises:
        FramingError: the value is not such a number, or repeated values disagree.
    """
    try:
        return go_http.content_length(values)
    except ValueError as exc:
        raise FramingError(str(exc)) from None


def read_chunked(stream: Stream, limit: int) -> bytes:
    """Read a chunked body from ``stream`` (just after the request head).

    Raises:
        FramingError: a malformed chunk-size line, chunk terminator or trailer, or the stream ends early.
        BodyTooLargeError: the chunks add up to more than ``limit`` bytes.
    """
    parts: list[bytes] = []
    total = 0
    while True:
        line = stream.readline(MAX_LINE)
        match = _CHUNK_SIZE.fullmatch(line)
        if match is None:
            raise FramingError(f"invalid chunk size line {line[:40]!r}" if line else "the body ends before its end")
        size = int(match.group(1), 16)
        if size == 0:
            break
        total += size
        if total > limit:
            raise BodyTooLargeError(f"chunked body over {limit} bytes")
        data = stream.read(size)
        if len(data) != size:
            raise FramingError("the body ends inside a chunk")
        if stream.read(2) != b"\r\n":
            raise FramingError("a chunk is not followed by CRLF")
        parts.append(data)
    for _ in range(MAX_TRAILERS + 1):
        line = stream.readline(MAX_LINE)
        if line == b"\r\n":
            return b"".join(parts)
        if not line.endswith(b"\r\n"):
            raise FramingError("a trailer line is too long or the body ends inside the trailers")
    raise FramingError(f"more than {MAX_TRAILERS} trailer lines")


def drain(stream: Stream, length: int) -> None:
    """Read and drop ``length`` bytes (an oversized body), so the connection stays usable."""
    while length > 0:
        data = stream.read(min(length, 1 << 20))
        if not data:
            return
        length -= len(data)


class DeadlineReader(io.RawIOBase):
    """A socket reader with an idle timeout between requests and a deadline for reading one.

    `start_request` arms it: the first byte of the next request starts a ``read_timeout`` clock
    that bounds every later read until `end_request`. Between requests each read may wait
    ``idle_timeout``. Reads past either raise `TimeoutError`, which the server turns into a closed
    connection. Writes share the socket's timeout (``idle_timeout`` outside reads).
    """

    def __init__(self, sock: socket.socket, idle_timeout: float, read_timeout: float) -> None:
        super().__init__()
        self._sock = sock
        self.idle_timeout = idle_timeout
        self.read_timeout = read_timeout
        self._deadline: float | None = None
        self._armed = False
        sock.settimeout(idle_timeout)

    def readable(self) -> bool:
        """Always: this is a reader."""
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        """Receive into ``buffer`` within the current deadline.

        Raises:
            TimeoutError: the idle time or the request's read deadline ran out.
        """
        if self._deadline is None:
            self._sock.settimeout(self.idle_timeout)
        else:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request was not received in time")
            self._sock.settimeout(min(left, self.idle_timeout))
        count = self._sock.recv_into(memoryview(buffer).cast("B"))
        if count and self._armed and self._deadline is None:
            self._deadline = time.monotonic() + self.read_timeout
        return count

    def start_request(self) -> None:
        """Wait (idle) for the next request; its first byte starts the read deadline."""
        self._deadline = None
        self._armed = True

    def end_request(self) -> None:
        """The request is read: no deadline until the next one (writes get the idle timeout)."""
        self._deadline = None
        self._armed = False
        self._sock.settimeout(self.idle_timeout)
