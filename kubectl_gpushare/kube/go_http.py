"""Go's net/http server rules for an HTTP/1.x request's head and framing, and for the reply's.

One copy for both servers that must answer as Go does, the sandbox API server (`sandbox.server`) and the
extender (`extender.httpd`), which read a head through `go_handler.GoHeadHandler`: the request line
(`read_request_line`), the header lines (`read_header_block`, `header_fields`) and what Go refuses in them
(`fields_refused`, `version_or_host_refused`), ``Connection`` and ``Expect`` (`reply_connection`,
`expectation`) and a reply's ``Connection`` (`connection_header`; `reply_framing` frames the extender's
one-write bodies). Values are text, a character per byte (Latin-1, as ``http.client`` decodes header
values). No I/O of its own: `read_header_block` reads the stream it is given.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal, NamedTuple, Protocol

from kubectl_gpushare.kube.go_format import trim_string
from kubectl_gpushare.kube.go_query import GoUrl, parse_url

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
MAX_REQUEST_HEAD: Final = (1 << 20) + 4096
"""Longest request head Go's server reads: ``DefaultMaxHeaderBytes`` (1 << 20; kube-apiserver's ``MaxHeaderBytes``
too, k8s.io/apiserver/pkg/server/secure_serving.go) plus the 4096 bytes of "bufio slop" that
``initialReadLimitSize`` (src/net/http/server.go) adds. The request line and the header lines count against
it alike (`read_header_block`)."""
HEADER_TOO_LARGE_REPLY: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\n\r\n431 Request Header Fields Too Large"
)  # fmt: skip
"""What Go's server writes, then closes, for a request head past its read limit (``conn.serve``'s ``errTooLarge``
case, src/net/http/server.go), where ``http.server`` answers a request line over 64 KiB with its HTML 414
and a header line over 64 KiB, or a 101st header, with its HTML 431."""
_VERSION: Final = re.compile(r"HTTP/([0-9])\.([0-9])")
_DIGITS: Final = re.compile(r"[0-9]+")
_MAX_CONTENT_LENGTH: Final = (1 << 63) - 1
"""The largest Content-Length Go reads: ``strconv.ParseUint(cl, 10, 63)`` in ``parseContentLength``."""
TCHAR = rb"!#$%&'*+\-.^_`|~0-9A-Za-z"
"""An RFC 7230 tchar, as a regular-expression class's inside: Go's ``isTokenRune`` (src/net/http/http.go) and
``validHeaderFieldByte`` (src/net/textproto/reader.go)."""
_METHOD = re.compile("[" + TCHAR.decode() + "]+")
"""An RFC 7230 token: Go's ``validMethod`` (src/net/http/http.go ``isNotToken``)."""


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


def parsed_target(target: str) -> GoUrl | None:
    """A request target (as `RequestLine` cuts it) as Go splits it; None where Go refuses it (`BAD_REQUEST_REPLY`).

    src/net/http/request.go ``readRequest``: ``parseRequestLine`` cuts the line at its first two
    spaces (a tab stays in the target), then ``url.ParseRequestURI`` (src/net/url/url.go ``parse``,
    `go_query.parse_url`) fails on a byte below a space or DEL anywhere ("net/url: invalid control
    character in URL", ``stringContainsCTLByte``), in the path and the query alike; on a target that
    is not ``*``, an absolute path or a URL with a scheme ("invalid URI for request": ``api/v1/pods``,
    ``:x``); on an authority after ``scheme://`` with a bad port or host; and on a ``%`` not followed
    by two hex digits in the path, before the first ``?`` (``setPath`` unescapes it: ``EscapeError``;
    the query is kept raw, so a bad escape there is no error).
    """
    try:
        return parse_url(target)
    except ValueError:
        return None


class RequestLine(NamedTuple):
    """A request line Go's server reads, cut once as ``parseRequestLine`` cuts it: at its first two spaces."""

    method: bytes
    target: bytes
    """Between the first two spaces, a tab or a byte Python calls whitespace included."""
    proto: bytes
    version: tuple[int, int]
    """``proto`` as `parse_http_version` read it: (major, minor); one other than 1.x (or the ``PRI * HTTP/2.0``
    preface's 2.0) is refused once the head is read (`version_or_host_refused`)."""
    url: GoUrl
    """``target`` as ``url.ParseRequestURI`` splits it (`parsed_target`)."""

    @property
    def path(self) -> str:
        """The target, a character per byte, as the handler's ``path``.

        Not ``http.server``'s ``path``, which turns a leading ``//`` into ``/`` (CPython gh-87389): Go
        keeps it, and ``//api/v1/pods`` is a path no route serves.
        """
        return self.target.decode("latin-1")

    @property
    def handler_version(self) -> str:
        """The version as ``http.server``'s ``request_version``: ``proto``, but ``HTTP/1.1`` for the HTTP/2 preface.

        Go hands ``PRI * HTTP/2.0`` to its handlers as it hands HTTP/1.1 (``http1ServerSupportsRequest`` in
        src/net/http/server.go; ``shouldClose`` reads ``Connection`` alike); ``http.server`` would answer 2.0
        with its HTML 505.
        """
        return "HTTP/1.1" if self.proto == b"HTTP/2.0" else self.proto.decode("latin-1")


def read_request_line(request_line: bytes) -> RequestLine | bytes:
    """The request line as Go's server cuts and reads it, or the reply it writes (then closes) for a line it refuses.

    src/net/http/request.go ``readRequest``, in its order: ``parseRequestLine`` needs two spaces
    ("malformed HTTP request": ``GET /``, the HTTP/0.9 form Python's ``http.server`` still serves
    with no status line), ``validMethod`` a token, ``ParseHTTPVersion`` ``HTTP/`` and one digit, a dot
    and one digit, and ``url.ParseRequestURI`` the target (`parsed_target`; a ``CONNECT`` target that is not a
    path as an authority, ``host:port``): each `BAD_REQUEST_REPLY`.
    A version other than 1.x is read here and refused later, as Go refuses it once the head and its framing
    are read (`version_or_host_refused`).
    """
    line = request_line.removesuffix(b"\n").removesuffix(b"\r")  # bufio.Reader.ReadLine's ending
    cut = cut_request_line(line.decode("latin-1"))
    if cut is None:
        return BAD_REQUEST_REPLY
    method, target, proto = cut  # text, a character per byte: encoded back only for a line Go serves
    version = parse_http_version(proto)
    if not _METHOD.fullmatch(method) or version is None:
        return BAD_REQUEST_REPLY
    # readRequest's justAuthority: a CONNECT target that is no path is an authority (``CONNECT host:443``, the
    # proxy tunnel form), read as "http://" + target, its scheme then dropped (the target stays as written).
    just_authority = method == "CONNECT" and not target.startswith("/")
    url = parsed_target("http://" + target if just_authority else target)  # the costly check last, as Go orders them
    if url is None:
        return BAD_REQUEST_REPLY
    if just_authority:
        url = dataclasses.replace(url, scheme="")
    return RequestLine(method.encode("latin-1"), target.encode("latin-1"), proto.encode("latin-1"), version, url)


def at_least_1_1(version: tuple[int, int]) -> bool:
    """Go's ``ProtoAtLeast(1, 1)`` (src/net/http/request.go) of a parsed version."""
    return version >= (1, 1)


def transfer_encoding_refused(values: Sequence[str], version: tuple[int, int]) -> bool:
    """Whether Go's ``readTransfer`` refuses a request's ``Transfer-Encoding`` values (a 501 before any handler).

    src/net/http/transfer.go ``parseTransferEncoding``: ignored below HTTP/1.1 (go.dev/issue/12785);
    otherwise one field only ("too many transfer encodings", an empty second one included), and its
    value ``chunked`` in any ASCII case, ``ascii.EqualFold`` ("unsupported transfer encoding":
    ``gzip``, ``gzip, chunked``, ``chunked, chunked``, an empty value, a no-break space after it).
    ``values`` are as textproto keeps them (leading spaces and tabs cut, `field_values`); both refusals are an
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


class LineReader(Protocol):
    """A buffered binary reader's ``readline`` (a handler's ``rfile``, or ``io.BytesIO`` in tests)."""

    def readline(self, size: int | None = -1, /) -> bytes:
        """One line, at most ``size`` bytes."""
        ...


def read_header_block(stream: LineReader, budget: int, lead: bytes = b"") -> bytes | None:
    """The header lines after a request line, up to the blank line that ends them, in one bytes; None past ``budget``.

    Go's server counts the whole request head against one read limit (``initialReadLimitSize``:
    `MAX_REQUEST_HEAD`, src/net/http/server.go ``connReader``) and ``textproto.Reader.ReadMIMEHeader``
    bounds neither a line's length nor the number of lines (``readMIMEHeader(r, math.MaxInt64,
    math.MaxInt64)``, src/net/textproto/reader.go): a head that reaches its end within the limit is
    read, one that does not is `HEADER_TOO_LARGE_REPLY`. ``budget`` is what the request line left of
    the limit; the blank line counts too. The stream ending early ends the headers, as it does for
    ``http.server``. ``lead`` is the head's first byte, where the caller read it already (`go_handler` peeks
    at it as ``readMIMEHeader`` does). One object, not one per line: a head of 3-byte lines is ~350,000
    lines, some 50 MB once parsed, so a server can bound how many it parses at once (`header_fields`)
    while it holds only the bytes of the rest.
    """
    block = bytearray()
    while True:
        line = lead if lead == b"\n" else lead + stream.readline(budget + 1 - len(lead))  # at EOF, b"" again
        lead = b""
        budget -= len(line)
        if budget < 0:
            return None
        if line in (b"\r\n", b"\n", b""):
            return bytes(block)
        block += line


def header_fields(block: bytes) -> list[bytes]:
    """A `read_header_block`'s lines as textproto reads its fields: a continuation joined to the field before it.

    ``readContinuedLineSlice`` (src/net/textproto/reader.go) trims each line of spaces and tabs and
    joins a continuation (a line that starts with a space or tab) to the field before it with one
    space. A first line that is a continuation keeps its leading space (Go refuses it: `go_handler`).
    Each field is joined once: a join per continuation line is quadratic.
    """
    lines = block.split(b"\n")  # ReadLine ends a line at LF only; a CR elsewhere is a value byte
    if lines[-1] == b"":  # the LF that ended the last line (a last line the stream cut short has none)
        lines.pop()
    folded: list[list[bytes]] = []
    for line in lines:
        text = line.removesuffix(b"\r")  # ReadLine's CRLF ending
        if folded and text[:1] in (b" ", b"\t"):
            folded[-1].append(text.strip(b" \t"))
        else:
            folded.append([text.rstrip(b" \t")])
    return [b" ".join(parts) for parts in folded]


def header_pairs(fields: list[bytes]) -> list[tuple[str, str]]:
    """`header_fields` as names and values, a character per byte, as ``readMIMEHeader`` keeps them.

    src/net/textproto/reader.go: the name ends at the first colon and the value's leading spaces and
    tabs are cut. ``fields`` are ones `fields_refused` passed (`go_handler.GoHeadHandler.read_head`), so
    each has a colon and a name: a field with an empty name, which older Go skipped, current Go refuses.
    """
    pairs: list[tuple[str, str]] = []
    for field in fields:
        name, _, value = field.decode("latin-1").partition(":")
        pairs.append((name, value.lstrip(" \t")))
    return pairs


_FIELD_NAME: Final = re.compile(rb"[ " + TCHAR + rb"]+")
"""What textproto keeps as a name (src/net/textproto/reader.go ``canonicalMIMEHeaderKey``): tchars, and spaces
(go.dev/issue/34540); not an empty one (``len(a) == 0`` is not ``ok``; older Go skipped the field)."""
_FIELD_VALUE: Final = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
"""``validHeaderValueByte`` (src/net/textproto/reader.go): HTAB, SP, VCHAR and obs-text; no other control byte."""
_HOST: Final = re.compile(rb"[!$%&'()*+,\-.:;=\[\]_~0-9A-Za-z]*")
"""``validHostByte`` (golang.org/x/net/http/httpguts/httplex.go ``ValidHostHeader``)."""


def bad_request_because(why: str) -> bytes:
    """Go's reply to a ``badRequestError``: ``conn.serve`` appends its text to ``400 Bad Request`` (server.go)."""
    public = b"400 Bad Request: " + why.encode()
    return b"HTTP/1.1 " + public + b"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" + public


def field_values(fields: list[bytes], name: bytes) -> list[bytes]:
    """The values of the `header_fields` named ``name`` (lower case), as textproto keeps them (`header_pairs`).

    ``readMIMEHeader`` (src/net/textproto/reader.go) cuts a value's leading spaces and tabs only: an empty
    continuation line leaves a trailing space (``readContinuedLineSlice`` joins with one), which Go's rules
    then see (``parseTransferEncoding``'s ``ascii.EqualFold``, ``ValidHostHeader``).
    """
    found: list[bytes] = []
    for field in fields:
        key, _, value = field.partition(b":")
        if key.lower() == name:
            found.append(value.lstrip(b" \t"))
    return found


def fields_refused(fields: list[bytes]) -> bytes | None:
    """The reply Go's server writes, then closes, for `header_fields` ``readRequest`` cannot read; None where it can.

    Asked by ``GoHeadHandler.read_head``, after it refused a first line that starts with a space or tab, in Go's order:
    ``textproto.Reader.readMIMEHeader`` (src/net/textproto/reader.go) refuses a field without a colon
    (``mustHaveFieldNameColon``), an empty name or one with a byte that is neither a tchar nor a space
    (``canonicalMIMEHeaderKey``), and a value with a control byte other than a tab (``validHeaderValueByte``),
    each as a ``ProtocolError``; then ``readRequest`` (src/net/http/request.go) refuses a second ``Host`` ("too
    many Host headers"). Neither is a ``badRequestError``, so ``conn.serve`` answers each with the plain
    `BAD_REQUEST_REPLY`. Next Go reads the framing (``readTransfer``: `transfer_encoding_refused`,
    `content_length`), then checks what `version_or_host_refused` checks.
    """
    for field in fields:
        name, colon, value = field.partition(b":")
        if not colon or not _FIELD_NAME.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            return BAD_REQUEST_REPLY
    return BAD_REQUEST_REPLY if len(field_values(fields, b"host")) > 1 else None


def version_or_host_refused(fields: list[bytes], request_line: RequestLine) -> bytes | None:
    """The reply Go's server writes, then closes, for a head `fields_refused` passed that it refuses; else None.

    src/net/http/server.go ``conn.readRequest``, once ``readRequest`` read the head and its framing, in its
    order: a version other than 1.x (``http1ServerSupportsRequest``, `http1_server_supports`; ``PRI * HTTP/2.0``
    is let through) gets `VERSION_NOT_SUPPORTED_REPLY`, so a header line Go cannot read or a framing it refuses
    in such a request gets that reply, not the 505. Then each a ``badRequestError`` whose words go into the
    status line and the body (`bad_request_because`): an HTTP/1.1 or later request without ``Host`` ("missing
    required Host header"; ``CONNECT`` and the HTTP/2 preface, `is_h2_preface`, aside), a ``Host`` with a byte
    ``httpguts.ValidHostHeader`` refuses ("malformed Host header"), and a name with a space, which textproto
    keeps (go.dev/issue/34540) and ``httpguts.ValidHeaderFieldName`` refuses ("invalid header name"). An
    HTTP/1.0 request needs no Host.
    """
    line = request_line
    if not http1_server_supports(line.version, line.method.decode("latin-1"), line.target.decode("latin-1")):
        return VERSION_NOT_SUPPORTED_REPLY
    hosts = field_values(fields, b"host")
    exempt = request_line.method == b"CONNECT" or is_h2_preface(request_line, fields)
    if not hosts and at_least_1_1(request_line.version) and not exempt:
        return bad_request_because("missing required Host header")
    if hosts and not _HOST.fullmatch(hosts[0]):
        return bad_request_because("malformed Host header")
    if any(b" " in field.partition(b":")[0] for field in fields):
        return bad_request_because("invalid header name")
    return None


def header_tokens(values: Iterable[str]) -> frozenset[str]:
    """The comma-separated tokens of a header's values, trimmed and in lower case (``Connection``, ``Expect``).

    As Go reads them: ``httpguts.HeaderValuesContainsToken`` (``tokenEqual``: any ASCII case) and
    ``removeHopByHopHeaders``' ``textproto.TrimString`` (src/net/http/httputil/reverseproxy.go), which
    trims ASCII whitespace, a line break that ``http.client`` kept in a folded value included.
    """
    return frozenset(trim_string(part).lower() for value in values for part in value.split(","))


def has_token(value: str, token: str) -> bool:
    """Go's ``hasToken`` (src/net/http/server.go): ``token`` in ``value``, any ASCII case, between spaces, commas, tabs.

    Looser than `header_tokens`: ``foo close`` holds ``close`` here (a space is a boundary), where
    ``httpguts.HeaderValuesContainsToken`` reads one element, ``foo close``.
    """
    return re.search(rf"(?<![^ ,\t]){re.escape(token)}(?![^ ,\t])", value, re.IGNORECASE | re.ASCII) is not None


class ReplyConnection(NamedTuple):
    """What Go's server does with a connection after a handler's reply (`reply_connection`)."""

    close: bool
    """Whether it closes the connection once the reply is written."""
    header: str | None
    """The ``Connection`` value it adds to the reply, if any."""


def is_h2_preface(request_line: RequestLine, fields: list[bytes]) -> bool:
    """Whether the request is the HTTP/2 preface's head, ``PRI * HTTP/2.0`` with no header field.

    src/net/http/request.go ``isH2Upgrade`` (``len(r.Header) == 0``; a field with an empty name, which
    older textproto skipped, is refused before: `fields_refused`); `read_request_line` lets 2.0 through for
    ``PRI *`` only.
    """
    return request_line.method == b"PRI" and request_line.version == (2, 0) and not fields


def reply_connection(version: tuple[int, int], connection: Sequence[str], h2_preface: bool = False) -> ReplyConnection:
    """Whether Go's server keeps a connection after a handler's reply with a Content-Length, and what it says so with.

    ``connection`` is the request's ``Connection`` values. src/net/http/server.go ``chunkWriter.writeHeader``: an
    HTTP/1.0 request whose first value has the ``keep-alive`` token (``wantsHttp10KeepAlive``, `has_token`) keeps
    the connection and its reply says ``Connection: keep-alive``; any other HTTP/1.0 request closes it, and its
    reply says nothing (``Connection: close`` is added on ``ProtoAtLeast(1, 1)`` only). A later version closes it
    where the request ``wantsClose`` (src/net/http/request.go): ``req.Close``, which ``readRequest`` sets from
    ``shouldClose`` (src/net/http/transfer.go: a ``close`` token in any value, `header_tokens`), or the ``close``
    token in the first value (`has_token`); its reply then says ``Connection: close``. So does the HTTP/2
    preface's (`is_h2_preface`), which ``readRequest`` marks ``req.Close`` (and server.go's ``closeAfterReply``)
    so that a handler may take the connection over, else it is closed.
    """
    first = connection[0] if connection else ""  # Header.get: the first value only
    if not at_least_1_1(version):
        keep = has_token(first, "keep-alive")
        return ReplyConnection(close=not keep, header="keep-alive" if keep else None)
    if h2_preface or "close" in header_tokens(connection) or has_token(first, "close"):
        return ReplyConnection(close=True, header="close")
    return ReplyConnection(close=False, header=None)


def connection_header(version: tuple[int, int], reply: ReplyConnection, close: bool) -> str | None:
    """The ``Connection`` value Go's server adds to a reply with a length whose handler set none, if any.

    src/net/http/server.go ``chunkWriter.writeHeader``: a reply after which the connection closes (``close``:
    as the request asked, `reply_connection`, or as the server decided, a body left unread or refused) says
    ``Connection: close`` on ``ProtoAtLeast(1, 1)`` only, so a closing reply to an HTTP/1.0 request says
    nothing; one that keeps an HTTP/1.0 connection says ``keep-alive`` (``reply.header``). Both servers' rule.
    """
    if close:
        return "close" if at_least_1_1(version) else None
    return reply.header


Expectation = Literal["continue", "none", "fail"]
"""What Go's server does with a request's ``Expect`` (`expectation`)."""


def expectation(version: tuple[int, int], expect: Sequence[str], announces_body: bool) -> Expectation:
    """What Go's server does with a request's ``Expect`` values before its handler runs.

    src/net/http/server.go ``conn.serve``: ``expectsContinue`` (src/net/http/request.go: `has_token` in the
    first value) on HTTP/1.1 or later with a body (``req.ContentLength != 0``: ``announces_body``) wraps the
    body in an ``expectContinueReader``, which sends ``100 Continue`` on the handler's first read
    (``"continue"``); without a version or body nothing is sent (``"none"``); any other non-empty first
    value is ``sendExpectationFailed``'s ``417`` with ``Connection: close``, before any handler (``"fail"``).
    """
    first = expect[0] if expect else ""  # Header.get: the first value only
    if has_token(first, "100-continue"):
        return "continue" if at_least_1_1(version) and announces_body else "none"
    return "fail" if first else "none"


BUFFER_BEFORE_CHUNKING: Final = 2048
"""Bytes of a handler's body Go's server holds before it writes the reply's head: ``bufferBeforeChunkingSize``
(src/net/http/server.go), the size of the ``bufio.Writer`` between ``response.Write`` and ``chunkWriter``."""
ReplyFraming = Literal["length", "chunked", "close", "none"]
"""How Go's server frames a handler's body (`reply_framing`): ``Content-Length``, chunked, ended by the
connection's close, or neither (a reply to ``HEAD`` whose head went out before the handler was done)."""


def reply_framing(size: int, version: tuple[int, int], head: bool) -> ReplyFraming:
    """How Go's server frames a body of ``size`` bytes that a handler wrote in one ``Write`` after ``WriteHeader``.

    src/net/http/server.go: ``response.Write`` goes through a ``bufio.Writer`` of `BUFFER_BEFORE_CHUNKING`
    bytes into ``chunkWriter``. A body that fits (``len(p) > b.Available()`` is false, src/bufio/bufio.go
    ``Writer.Write``) is still buffered when the handler returns, so ``finishRequest`` flushes it with
    ``handlerDone`` set and ``chunkWriter.writeHeader`` adds ``Content-Length`` (not for an empty body to
    ``HEAD``: ``!isHEAD || len(p) > 0``). A larger one goes straight through (the buffer is empty: "Large
    write, empty buffer") while the handler runs: no ``Content-Length``, so ``Transfer-Encoding: chunked`` on
    ``ProtoAtLeast(1, 1)`` (``chunkWriter.Write`` writes it as one chunk), and on HTTP/1.0 ``closeAfterReply``,
    the body ended by the close. ``HEAD`` gets neither (its writes are eaten), and its connection is kept as
    `reply_connection` says (``wants10KeepAlive && isHEAD`` keeps an HTTP/1.0 one).
    """
    if size <= BUFFER_BEFORE_CHUNKING:
        return "length" if size or not head else "none"
    if head:
        return "none"
    return "chunked" if at_least_1_1(version) else "close"


def chunked_body(body: bytes) -> bytes:
    """``body`` on the wire as Go's ``chunkWriter`` writes one ``Write`` of it, then ``close`` (src/net/http/server.go).

    ``chunkWriter.Write``: a size line in lowercase hex (``%x``), the bytes, CRLF; ``chunkWriter.close``: the last
    chunk ``0``, no trailer, CRLF.
    """
    return b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
