"""A URL query string read as Go's ``url.ParseQuery`` reads it (``src/net/url/url.go``, ``parseQuery``).

Shared by the CEL ``url`` library (``URL.Query()``) and the sandbox's reading of ``timeout`` (kube-apiserver
reads it with ``req.URL.Query().Get``). Go splits on ``&`` only and skips, without failing the rest, an
empty pair, a pair holding ``;`` anywhere ("invalid semicolon separator in query") and a pair with a
``%`` not followed by two hex digits; Python's ``parse_qsl`` keeps those. Pure: no I/O.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Final

BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
"""A ``%`` that ``url.QueryUnescape`` refuses (``EscapeError``)."""


def parse_query(query: str, *, errors: str = "replace") -> dict[str, list[str]]:
    """Each key's values in order, as ``url.ParseQuery`` keeps them (``Values.Get`` is the first).

    ``errors`` decodes escaped bytes that are not UTF-8: ``"replace"`` for text, ``"surrogateescape"``
    to keep the bytes themselves (Go strings are bytes).
    """
    result: dict[str, list[str]] = {}
    for pair in query.split("&"):
        key, _, item = pair.partition("=")
        if not pair or ";" in pair or BAD_ESCAPE.search(key) or BAD_ESCAPE.search(item):
            continue
        result.setdefault(urllib.parse.unquote_plus(key, errors=errors), []).append(
            urllib.parse.unquote_plus(item, errors=errors))
    return result


__all__ = ["BAD_ESCAPE", "parse_query"]
