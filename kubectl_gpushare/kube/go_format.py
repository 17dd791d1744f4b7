"""Go's ``strconv.Quote`` (``%q``), shared by every message that repeats an upstream Go error.

kube-apiserver, net/url, net/netip and the CEL libraries quote the text they name with ``%q`` or
``strconv.Quote``; a message here that repeats one of theirs quotes with `go_quote`. The ``time``
package's own ``quote`` is another rule (`kube.deadlines`). Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    r"""``text`` as Go's ``strconv.Quote`` writes it: ``%q``, and ``%#v`` of a string or of each one in a ``[]string``.

    Go's ``appendQuotedWith``/``appendEscapedRune`` (src/strconv/quote.go): ``"`` and ``\`` escaped, a
    printable rune (``IsPrint``: Python's ``isprintable`` is the same set of categories) as it is,
    ``\a`` ... ``\v``, other runes below a space and DEL as ``\xNN``, the rest as ``\uNNNN`` or
    ``\UNNNNNNNN``; a byte that is not UTF-8 (a surrogate escape, as ``GoQuery.every_exact`` keeps
    one) as ``\xNN``.
    """
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 0x20 or code == 0x7F or 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code & 0xFF:02x}")
        elif 0xD800 <= code <= 0xDFFF:  # not a rune Go can hold: utf8.RuneError
            out.append("\ufffd")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


__all__ = ["go_quote"]
