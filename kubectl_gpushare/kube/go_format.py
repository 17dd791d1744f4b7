"""Go's ``strconv.Quote`` (``%q``) and ``strconv.ParseInt``'s errors, shared by every message that repeats one.

kube-apiserver, net/url, net/netip and the CEL libraries quote the text they name with ``%q`` or
``strconv.Quote``; a message here that repeats one of theirs quotes with `go_quote`. The ``time``
package's own ``quote`` is another rule (`kube.deadlines`). Pure: no I/O.
"""

from __future__ import annotations

import re
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


_DIGITS: Final = re.compile(r"[0-9]*")
_UINT64_MAX: Final = (1 << 64) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def parse_int64(text: str) -> int:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it, or its error's words.

    src/strconv/atoi.go: one ``+`` or ``-``, then ``ParseUint``'s loop, which stops at the first byte
    that is no ASCII digit ("invalid syntax"; an empty text too) or at the first digit that takes the
    value past 2^64-1 ("value out of range"), whichever comes first; then the int64 range ("value out
    of range"). The error names the whole text, quoted (``NumError.Error``): a 5,000-digit value is a
    range error, ``12x`` a syntax error. Linear in the text (a request head may be a megabyte).

    Raises:
        ValueError: ``strconv.ParseInt: parsing "<text>": invalid syntax`` (or ``value out of range``).
    """
    sign = text[:1] if text[:1] in ("+", "-") else ""
    body = text[len(sign) :]
    digits = _DIGITS.match(body)
    assert digits is not None  # "*" matches the empty text
    prefix = digits.group().lstrip("0")
    if len(prefix) > 20 or (prefix and int(prefix) > _UINT64_MAX):  # overflowed before any other byte
        why = "value out of range"
    elif not body or digits.end() < len(body):
        why = "invalid syntax"
    else:
        magnitude = int(prefix or "0")  # past its leading zeros: 20 digits at most (int() refuses 4,300)
        value = -magnitude if sign == "-" else magnitude
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        why = "value out of range"
    raise ValueError(f"strconv.ParseInt: parsing {go_quote(text)}: {why}")


__all__ = ["go_quote", "parse_int64"]
