"""A request target's query and path read as Go's ``net/url`` reads them (``src/net/url/url.go``).

A URL or request target is split as ``url.Parse`` / ``url.ParseRequestURI`` split it (`parse_url`,
shared by the CEL ``url`` library and the sandbox's request line).

The query as ``url.ParseQuery`` (``parseQuery``) reads it, the path as ``url.ParseRequestURI`` sets
``URL.Path`` (`unescape_path`) and as ``URL.EscapedPath`` writes it back (`escape_path`). The query is
shared by the CEL ``url`` library (``URL.Query()``) and the sandbox, which reads each request's query
once, as kube-apiserver does (`GoQuery`); the path only by the sandbox. Go splits a query on ``&``
only and skips, without failing the rest, an empty pair, a pair holding ``;`` anywhere ("invalid
semicolon separator in query") and a pair with a ``%`` not followed by two hex digits; Python's
``parse_qsl`` keeps those. A query of more than `MAX_PARAMS` pairs is refused whole (Go 1.24+, the
``urlmaxqueryparams`` GODEBUG default): no values at all. Pure: no I/O.
"""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from kubectl_gpushare.kube.go_format import go_quote

BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
"""A ``%`` that ``url.QueryUnescape`` refuses (``EscapeError``)."""
MAX_PARAMS: Final = 10_000
"""``defaultMaxParams``: a query with more ``&``-separated pairs than this parses to nothing."""


def parse_query(query: str, *, errors: str = "replace") -> dict[str, list[str]]:
    """Each key's values in order, as ``url.ParseQuery`` keeps them (``Values.Get`` is the first).

    ``errors`` decodes escaped bytes that are not UTF-8: ``"replace"`` for text, ``"surrogateescape"``
    to keep the bytes themselves (Go strings are bytes).
    """
    result: dict[str, list[str]] = {}
    if query.count("&") + 1 > MAX_PARAMS:  # urlParamsWithinMax, before any pair is read
        return result
    for pair in query.split("&"):
        key, _, item = pair.partition("=")
        if not pair or ";" in pair or BAD_ESCAPE.search(key) or BAD_ESCAPE.search(item):
            continue
        result.setdefault(urllib.parse.unquote_plus(key, errors=errors), []).append(
            urllib.parse.unquote_plus(item, errors=errors))
    return result


def go_bool(value: str | None) -> bool:
    """A boolean option as kube-apiserver reads its first value (None: absent).

    ``runtime.Convert_Slice_string_To_bool`` (k8s.io/apimachinery/pkg/runtime/conversion.go): absent,
    ``0`` or ``false`` in any case is false (``strings.EqualFold``: Unicode folding, so ``FALſE`` too,
    which ``str.lower`` misses and ``str.casefold`` catches); anything else is true, an empty value included.
    """
    return value is not None and value != "0" and value.casefold() != "false"


def _go_string(raw: str) -> str:
    """Request-line text (a character per byte) as Go holds it: UTF-8 as text, other bytes as surrogate escapes.

    Go reads a raw byte in the request target as that byte (``url.QueryUnescape`` passes it through),
    so raw UTF-8 is the character it encodes, not its Latin-1 reading.
    """
    if raw.isascii():
        return raw
    return raw.encode("latin-1", "replace").decode("utf-8", "surrogateescape")


def go_text(value: str) -> str:
    """A Go string (bytes as surrogate escapes) as text: bytes that are not UTF-8 become U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def unescape_path(raw: str) -> str:
    """A request target's path as Go's ``URL.Path`` holds it: every ``%XX`` decoded, bytes as surrogate escapes.

    ``url.ParseRequestURI`` runs ``setPath``, which unescapes in ``encodePath`` mode (``unescape`` in
    src/net/url/url.go): each ``%`` followed by two hex digits becomes its byte, ``%2F`` a ``/`` like
    any other (``URL.Path`` cannot tell them apart), and ``+`` stays ``+``. ``raw`` is request-line text
    (a character per byte); `go_text` makes the result text.

    Raises:
        ValueError: a ``%`` not followed by two hex digits (Go's ``EscapeError``): the request target
            does not parse, and Go's server refuses the request before any handler.
    """
    if "%" not in raw:
        return _go_string(raw)
    return unescape(raw, "latin-1").decode("utf-8", "surrogateescape")


def unescape(text: str, encoding: str = "utf-8") -> bytes:
    """Go's ``url.unescape`` outside a query: each ``%XX`` its byte, ``+`` kept; other characters in ``encoding``.

    Shared by the request path (`unescape_path`, request-line text: ``latin-1``, a character per byte)
    and the CEL ``url`` library's path, host and userinfo (text: UTF-8).

    Raises:
        ValueError: a ``%`` not followed by two hex digits, worded as Go's ``EscapeError``
            (``invalid URL escape "%zz"``).
    """
    bad = BAD_ESCAPE.search(text)
    if bad is not None:
        raise ValueError(f"invalid URL escape {go_quote(text[bad.start() : bad.start() + 3])}")
    return urllib.parse.unquote_to_bytes(text.encode(encoding))


_PATH_SAFE: Final = "$&+,/:;=@"
"""What ``shouldEscape`` leaves as it is in ``encodePath`` mode, besides letters, digits and ``-_.~``."""


def escape_path(path: str | bytes) -> str:
    """A path (as `unescape_path` or `unescape` gives it) as Go writes a ``URL`` without ``RawPath`` onto the wire.

    ``URL.EscapedPath`` falls back to ``escape(path, encodePath)`` (src/net/url/url.go): letters,
    digits, ``-_.~`` and ``$&+,/:;=@`` stay, every other byte (``?``, ``%``, a space, ``!*'()``,
    bytes past ASCII) becomes ``%XX`` with upper-case hex.
    """
    raw = path if isinstance(path, bytes) else path.encode("utf-8", "surrogateescape")
    return urllib.parse.quote(raw, safe=_PATH_SAFE)


class GoQuery(Mapping[str, str]):
    """A request's query, parsed once as ``req.URL.Query()`` parses it; reading a name gives its first value.

    kube-apiserver reads every single-valued option from the first value: ``Values.Get``, and the
    query-to-options conversion (``runtime.Convert_Slice_string_To_string`` and its siblings in
    k8s.io/apimachinery/pkg/runtime/conversion.go take ``(*in)[0]``). A list option (``dryRun``,
    ``[]string`` in ``CreateOptions``) takes them all: `every`. The raw text stays for what upstream
    passes on untouched (the pod proxy copies ``req.URL.RawQuery``).

    Values read as text (bytes that are not UTF-8 become U+FFFD); `exact` keeps those bytes, for a
    reader whose errors quote them as Go does.
    """

    def __init__(self, raw: str = "") -> None:
        self.raw: Final = raw
        """The query as it came, without the ``?``: one character per byte (``http.server`` reads a request
        line as Latin-1)."""
        self._values = parse_query(_go_string(raw), errors="surrogateescape")

    def __getitem__(self, name: str) -> str:
        return go_text(self._values[name][0])

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def every(self, name: str) -> list[str]:
        """All of a name's values in order, as text (empty when absent)."""
        return [go_text(value) for value in self._values.get(name, ())]

    def every_exact(self, name: str) -> list[str]:
        """All of a name's values in order as Go holds them: bytes that are not UTF-8 kept as surrogate escapes."""
        return list(self._values.get(name, ()))

    def exact(self, name: str) -> str:
        """The first value as Go holds it: bytes that are not UTF-8 kept as surrogate escapes ("" when absent)."""
        values = self._values.get(name)
        return values[0] if values else ""

    def first_values(self) -> dict[str, str]:
        """Each name's first value, as text (names too): what a request log shows."""
        return {go_text(name): go_text(values[0]) for name, values in self._values.items()}


def clean_path(path: str) -> str:
    """Go's ``path.Clean`` of a rooted path (src/path/path.go): ``//``, ``.`` and ``..`` resolved, no trailing ``/``.

    POSIX ``normpath`` is the same once the leading slashes are one (it keeps exactly two). Shared by the
    pod proxy's subpath (``path.Join``) and the continue token's start key (``storage.DecodeContinue``).
    """
    return posixpath.normpath("/" + path.lstrip("/"))


# --- url.Parse / url.ParseRequestURI -------------------------------------------------------------------
def quote_cut(text: str) -> str:
    """Go's ``%q`` of the text an error names (`go_quote`), as net/url, net/netip and the CEL libraries quote it.

    Cut to 100 characters: upstream quotes the whole text; the cut keeps a hostile text's error message short.
    """
    return go_quote(text[:100])


@dataclass(frozen=True)
class GoUrl:
    """What `parse_url` keeps of a URL (``url.URL``'s fields by those names)."""

    scheme: str
    host: str  # unescaped, as url.URL.Host
    path: str  # raw: escaped as written
    query: str


_SCHEME_CHAR: Final = re.compile(r"[A-Za-z0-9+.\-]")
_USERINFO: Final = re.compile(r"[A-Za-z0-9\-._:~!$&'()*+,;=%@]*")


def valid_port(port: str) -> bool:
    """net/url ``validOptionalPort``: empty, or a colon and digits."""
    return port == "" or (port[:1] == ":" and all("0" <= c <= "9" for c in port[1:]))


_HOST_ASCII: Final = re.compile(r"[^A-Za-z0-9\-_.~!$&'()*+,;=:\[\]<>\"%\x80-\U0010ffff]")
_HOST_ASCII_ESCAPE: Final = re.compile(r"%(?!25)[0-7][0-9A-Fa-f]")
"""net/url ``unescape(encodeHost)``: in a host, ``%XX`` only escapes a non-ASCII byte (RFC 3986), or is
``%25`` (RFC 6874's IPv6 zone); the zone itself (after ``%25`` in brackets) may escape any byte."""


def _parse_host(host: str) -> str:
    """net/url ``parseHost``: a bracketed IPv6 literal, or a host whose last colon starts a port.

    Then ``unescape(host, encodeHost)``: an ASCII character a host may not hold is an error.
    """
    end = host.rfind("]") if host.startswith("[") else -1
    if host.startswith("["):
        if end < 0:
            raise ValueError("missing ']' in host")
        if not valid_port(host[end + 1:]):
            raise ValueError(f"invalid port {quote_cut(host[end + 1:])} after host")
    elif (colon := host.rfind(":")) >= 0 and not valid_port(host[colon:]):
        raise ValueError(f"invalid port {quote_cut(host[colon:])} after host")
    if bad := _HOST_ASCII.search(host):
        raise ValueError(f"invalid character {quote_cut(bad.group())} in host name")
    zone = host.find("%25", 0, end) if end >= 0 else -1
    if bad := _HOST_ASCII_ESCAPE.search(host[:zone] + host[end:] if zone >= 0 else host):
        raise ValueError(f"invalid URL escape {quote_cut(bad.group())}")
    return unescape(host).decode("utf-8", "replace")


def parse_url(text: str, request: bool = True) -> GoUrl:
    """Go's ``url.ParseRequestURI`` (``request``) or ``url.Parse`` of text without its fragment.

    Raises ValueError with Go's reason. Follows net/url ``parse``: no control characters, a scheme
    (letters first, then letters, digits, ``+-.``) before the first colon, then an authority after
    ``//``; a request URI must then be an absolute path, or opaque after a scheme.
    """
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError("net/url: invalid control character in URL")
    if text == "" and request:
        raise ValueError("empty url")
    if text == "*":
        return GoUrl("", "", "*", "")
    scheme, rest = "", text
    for i, c in enumerate(text):
        if c == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            scheme, rest = text[:i].lower(), text[i + 1:]
            break
        if not _SCHEME_CHAR.match(c) or (i == 0 and not c.isalpha()):
            break
    rest, _, query = rest.partition("?")  # a lone trailing "?" is Go's ForceQuery: an empty query too
    if not rest.startswith("/"):
        if scheme:
            return GoUrl(scheme, "", "", query)  # opaque ("mailto:x"): valid, no host or path
        if request:
            raise ValueError("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise ValueError("first path segment in URL cannot contain colon")
    host = ""
    if (scheme or not request and not rest.startswith("///")) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        userinfo, at, hostport = authority.rpartition("@")
        if at and not _USERINFO.fullmatch(userinfo):
            raise ValueError("net/url: invalid userinfo")
        unescape(userinfo)
        host = _parse_host(hostport)
    unescape(rest)
    return GoUrl(scheme, host, rest, query)


__all__ = ["BAD_ESCAPE", "MAX_PARAMS", "GoQuery", "GoUrl", "clean_path", "escape_path", "go_bool", "go_text",
           "parse_query", "parse_url", "quote_cut", "unescape", "unescape_path", "valid_port"]
