"""Go's net/http server rules for an HTTP/1.x request's version and body framing, on values already cut out.

One copy for both servers that must frame a request as Go does: the sandbox API server (raw bytes,
`sandbox.framing`) and the extender (``http.server``'s parsed headers, `extender.httpd`). Each cuts
the request line and header values its own way and asks here what Go decides; values are text, a
character per byte (Latin-1, as ``http.client`` decodes header values). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from kubectl_gpushare.kube.go_format import trim_string

BAD_REQUEST_REPLY: Final = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                            b"Connection: close\r\n\r\n400 Bad Request")  # fmt: skip
"""What Go's net/http server writes, then closes, for a request it cannot read (``conn.serve``'s
``publicErr``, src/net/http/server.go): no handler, and so no Status body, runs."""
VERSION_NOT_SUPPORTED_REPLY: Final = (
    b"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"505 HTTP Version Not Supported: unsupported protocol version"
)  # fmt: skip
"""What Go's server writes, then closes, for a request in a version `http1_server_supports` refuses
(``conn.serve``'s ``statusError`` reply, src/net/http/server.go)."""
_VERSION: Final = re.compile(r"HTTP/([0-9])\.([0-9])")
_DIGITS: Final = re.compile(r"[0-9]+")
_MAX_CONTENT_LENGTH: Final = (1 << 63) - 1
"""The largest Content-Length Go reads: ``strconv.ParseUint(cl, 10, 63)`` in ``parseContentLength``."""


def cut_request_line(line: str) -> tuple[str, str, str] | None:
    """A request line (its CRLF or LF cut off) as Go cuts it: method, target, version; None where Go cannot.

    src/net/http/request.go ``parseRequestLine``: at its first two spaces only (``strings.Cut``), so a
    tab stays in a part, a second space in a row leaves an empty target, and a space after the version
    stays in the version; a line without two spaces (``GET /``, the HTTP/0.9 form) is "malformed HTTP
    request", a 400.
    """
    method, first, rest = line.partition(" ")
    target, second, proto = rest.partition(" ")
    return (method, target, proto) if first and second else None


def parse_http_version(proto: str) -> tuple[int, int] | None:
    """The (major, minor) of a request line's version as Go's ``ParseHTTPVersion`` reads it; None where it fails.

    src/net/http/request.go ``ParseHTTPVersion``: ``HTTP/1.1``, ``HTTP/1.0``, or exactly ``HTTP/X.Y``
    with one ASCII digit each (``strconv.ParseUint`` of one byte). ``HTTP/1.10``, ``HTTP/01.1``,
    ``HTTP/2``, ``HTTP/1.1 `` and ``http/1.1`` fail: ``readRequest``'s "malformed HTTP version", a 400.
    """
    if proto == "HTTP/1.1":  # Go's two literal cases first, as it checks them
        return 1, 1
    if proto == "HTTP/1.0":
        return 1, 0
    version = _VERSION.fullmatch(proto)
    return None if version is None else (int(version[1]), int(version[2]))


def http1_server_supports(version: tuple[int, int], method: str, target: str) -> bool:
    """Whether Go's HTTP/1.x server serves a request of this parsed version (else its 505).

    src/net/http/server.go ``http1ServerSupportsRequest``: any 1.x, and ``PRI * HTTP/2.0`` (the HTTP/2
    preface, so handlers may take it over); ``conn.readRequest`` answers any other version with
    ``statusError{StatusHTTPVersionNotSupported, "unsupported protocol version"}``.
    """
    return version[0] == 1 or (version, method, target) == ((2, 0), "PRI", "*")


def at_least_1_1(version: tuple[int, int]) -> bool:
    """Go's ``ProtoAtLeast(1, 1)`` (src/net/http/request.go) of a parsed version."""
    return version >= (1, 1)


def transfer_encoding_refused(values: Sequence[str], version: tuple[int, int]) -> bool:
    """Whether Go's ``readTransfer`` refuses a request's ``Transfer-Encoding`` values (a 501 before any handler).

    src/net/http/transfer.go ``parseTransferEncoding``: ignored below HTTP/1.1 (go.dev/issue/12785);
    otherwise one field only ("too many transfer encodings", an empty second one included), and its
    value ``chunked`` in any ASCII case, ``ascii.EqualFold`` ("unsupported transfer encoding":
    ``gzip``, ``gzip, chunked``, ``chunked, chunked``, an empty value, a no-break space after it).
    ``values`` are as textproto keeps them (trimmed of spaces and tabs); both refusals are an
    ``unsupportedTEError``.
    """
    if not values or not at_least_1_1(version):
        return False
    return len(values) != 1 or not (values[0].isascii() and values[0].lower() == "chunked")


def chunked(values: Sequence[str], version: tuple[int, int]) -> bool:
    """Whether the body is chunked: ``Transfer-Encoding`` values `transfer_encoding_refused` passed, on HTTP/1.1+."""
    return bool(values) and at_least_1_1(version)


def content_length(values: Sequence[str]) -> int:
    """The Content-Length of a request from its header values (none means 0), as Go's ``readTransfer`` reads it.

    src/net/http/transfer.go ``fixLength``: every value, trimmed of ASCII whitespace
    (`trim_string`), must equal the first (``05`` and ``5`` differ; equal ones are one, go.dev/issue/16490),
    and ``parseContentLength`` reads that one with ``strconv.ParseUint(cl, 10, 63)``: ASCII digits only
    (no sign), leading zeros of any number, at most 2^63-1; an empty value is ``invalid empty
    Content-Length``. Go checks it even beside ``Transfer-Encoding: chunked`` (then drops it). Its error
    is no ``statusError``, so Go's server answers a plain 400 before any handler.

    Raises:
        ValueError: the value is not such a number, or repeated values disagree.
    """
    if not values:
        return 0
    first = trim_string(values[0])
    if any(trim_string(value) != first for value in values[1:]):
        raise ValueError("message cannot contain multiple Content-Length headers")
    if not _DIGITS.fullmatch(first):
        raise ValueError(f"bad Content-Length {first[:40]!r}")
    digits = first.lstrip("0")
    if len(digits) > 19 or (digits and int(digits) > _MAX_CONTENT_LENGTH):  # 19 digits before int(): bounded
        raise ValueError(f"bad Content-Length {first[:40]!r}")
    return int(digits or "0")
