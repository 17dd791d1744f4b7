r"""How Go's net/url and net/http read and write the URL kube-scheduler posts to an extender.

kube-scheduler's ``HTTPExtender.send`` (pkg/scheduler/extender.go) builds the URL as
``strings.TrimRight(urlPrefix, "/") + "/" + verb`` (a concatenation: no ``path.Join``, so no
cleaning of ``..`` or ``//``) and hands it to ``http.NewRequest``, which parses it with
``url.Parse``; net/http then writes ``URL.RequestURI()`` on the request line and names the URL in a
client error by ``URL.String()``. The rules, after src/net/url/url.go:

- ``Parse``: the text after the first ``#`` is the fragment (never sent); a control byte (below a
  space, or DEL) is an error (``net/url: invalid control character in URL``); the text after the
  first ``?`` is the raw query (written as is); a ``%`` not followed by two hex digits is an error
  (``invalid URL escape "%zz"``), in the path and in the fragment alike;
- ``setPath``: ``Path`` is the path unescaped, and ``RawPath`` the path as written when that
  differs from ``escape(Path, encodePath)``;
- ``EscapedPath``: ``RawPath`` when it is ``validEncoded`` (no byte ``shouldEscape`` escapes but
  the sub-delims ``!$&'()*+,;=:@``, ``[``, ``]`` and ``%``) and unescapes to ``Path``, else
  ``escape(Path, encodePath)``: every byte but letters, digits, ``-_.~`` and ``$&+,/:;=@`` as
  ``%XX``. So ``"<>\^`{|}``, a space and bytes beyond ASCII are always escaped, ``!'()*[]`` kept
  unless another byte of the path needs escaping (then they are escaped too, and ``%41`` is
  written ``A``), and ``%2F`` kept as written;
- ``RequestURI``: the escaped path (``/`` when empty), then ``?`` and the raw query if the URL had
  a ``?``.

Pure: no I/O.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Final

from kubectl_gpushare.kube.go_format import go_quote

_PATH_SAFE: Final = "$&+,/:;=@"
"""What ``shouldEscape(c, encodePath)`` keeps beside the unreserved bytes (letters, digits, ``-_.~``,
which ``urllib.parse.quote`` keeps too): of the reserved ones, all but ``?``."""
_FRAGMENT_SAFE: Final = "$&+,/:;=?@!()*"
"""What ``shouldEscape(c, encodeFragment)`` keeps beside the unreserved bytes: the reserved ones and ``!()*``."""
_VALID_ENCODED: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$&'()*+,;=:@[]%")
"""What ``validEncoded`` accepts in any mode: the unreserved bytes, the sub-delims, ``:@[]%``."""
_BAD_ESCAPE: Final = re.compile(rb"%(?![0-9A-Fa-f]{2})")
_CONTROL: Final = re.compile("[\x00-\x1f\x7f]")
_PASSWORD: Final = re.compile(r"^([^:/?#]*://[^/?#:]*:)[^/?#]*@")
"""A user information's password: after the username's ``:``, up to the authority's last ``@``."""


class URLError(ValueError):
    """What ``url.Parse`` returns for a URL it refuses; ``str()`` is Go's ``*url.Error`` text."""


@dataclass(frozen=True)
class GoURL:
    """A parsed URL: what net/http writes on the request line, and how its errors name the URL."""

    request_uri: str
    """``URL.RequestURI()``: the request line's target."""
    shown: str
    """``URL.String()`` less any password, the URL a client error names, Go-quoted (``Post %q: ...``)."""


def without_password(url: str) -> str:
    """``url`` with the password of its user information written ``***``, whether it parses or not.

    net/http's ``stripPassword`` rule (the authority ends at the first ``/``, ``?`` or ``#``; the user
    information at its last ``@``; the username at the first ``:``), the one every message naming the
    extender URL uses. Go applies it only to a client error of a sent request: ``url.Parse``'s errors
    and kube-scheduler's own (``failed ... with extender at URL``, ``claims a filtered node``) quote
    the URL whole (golang/go#53993); here no error, log, Event or reason shows the password.
    """
    return _PASSWORD.sub(r"\1***@", url, count=1)


def _escaped(written: bytes, safe: str) -> str:
    """``setPath`` then ``EscapedPath`` (or ``setFragment`` then ``EscapedFragment``) of ``written``.

    ``unquote_to_bytes`` is Go's ``unescape`` in these modes (``+`` stays; the caller has refused a
    bad ``%``), ``quote_from_bytes`` its ``escape`` (upper-case ``%XX`` for each byte not unreserved or ``safe``).
    """
    if set(written) <= _VALID_ENCODED | set(safe.encode()):
        return written.decode("ascii")  # validEncoded: RawPath (or the path itself, when escaping it changes nothing)
    return urllib.parse.quote_from_bytes(urllib.parse.unquote_to_bytes(written), safe)


def _escapes_checked(written: bytes, named: str) -> bytes:
    """``written`` (a path or a fragment) when every ``%`` in it escapes a byte, as ``unescape`` checks it.

    Raises:
        URLError: Go's ``parse "<named>": invalid URL escape "%zz"`` (``named`` less any password).
    """
    bad = _BAD_ESCAPE.search(written)
    if bad is not None:
        escape = written[bad.start() :][:3].decode("utf-8", "surrogateescape")
        raise URLError(f"parse {go_quote(without_password(named))}: invalid URL escape {go_quote(escape)}")
    return written


def parse(url: str) -> GoURL:
    """``url`` as ``http.NewRequest`` parses it and net/http writes and names it.

    Only URLs with a scheme and an authority (``http://host...``), as a checked ``urlPrefix`` gives;
    the authority (user information, host and port) is kept as written, but for a password, which
    ``shown`` writes ``***`` (net/http's ``stripPassword``).

    Raises:
        URLError: ``url.Parse`` refuses it (Go's ``parse "<url>": <reason>``).
    """
    before, hash_, fragment = url.partition("#")
    if _CONTROL.search(before):
        raise URLError(f"parse {go_quote(without_password(before))}: net/url: invalid control character in URL")
    scheme, _, rest = before.partition(":")
    rest, question, query = rest.partition("?")
    authority, slash, path = rest[2:].partition("/")
    written = _escapes_checked((slash + path).encode("utf-8", "surrogateescape"), before)  # Parse's error: before #
    shown_fragment = ""
    if fragment:  # setFragment's error names the whole URL
        written_fragment = _escapes_checked(fragment.encode("utf-8", "surrogateescape"), url)
        shown_fragment = hash_ + _escaped(written_fragment, _FRAGMENT_SAFE)
    escaped_path = _escaped(written, _PATH_SAFE)
    target = (escaped_path or "/") + question + query
    shown = f"{scheme.lower()}://{authority}{escaped_path}{question}{query}{shown_fragment}"
    return GoURL(target, without_password(shown))


__all__ = ["GoURL", "URLError", "parse", "without_password"]
