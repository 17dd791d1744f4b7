"""Go's ``strconv.Quote`` (``%q``), ``strconv.ParseInt`` and ``time.Parse(time.RFC3339, ...)``, errors included.

kube-apiserver, net/url, net/netip and the CEL libraries quote the text they name with ``%q`` or
``strconv.Quote``; a message here that repeats one of theirs quotes with `go_quote`. The ``time``
package's own ``quote`` is another rule (`time_quote`: its duration and time errors); `trim_string` is
``textproto.TrimString``, which trims header values. Pure: no I/O.
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


def trim_string(value: str) -> str:
    """``value`` less the ASCII whitespace at its ends (space, tab, CR, LF), as ``textproto.TrimString`` trims it.

    Not ``str.strip()``, which also trims a no-break space, a form feed and the like, which Go keeps. A
    line break included: ``http.client`` keeps one in a folded value.
    """
    return value.strip(" \t\r\n")


def time_quote(text: str) -> str:
    r"""``text`` double-quoted as the ``time`` package quotes it in errors: non-ASCII and control bytes as ``\xNN``.

    Go's ``time.quote`` (src/time/format.go), not ``strconv.Quote`` (`go_quote`): the time package
    cannot import strconv, and writes every byte of a non-ASCII rune (or a byte that is no UTF-8,
    held as a surrogate escape) as ``\xNN``.
    """
    out = ['"']
    for char in text:
        if char >= "\x80" or char < " ":
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogateescape"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    out.append('"')
    return "".join(out)


RFC3339: Final = "2006-01-02T15:04:05Z07:00"
"""Go's ``time.RFC3339`` layout, which a ``metav1.Time`` query parameter is parsed with."""
_DAYS_IN_MONTH: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class _TimeParseError(ValueError):
    """A ``time.ParseError``, worded as its ``Error`` method words it (src/time/format.go)."""

    def __init__(self, value: str, layout_elem: str, value_elem: bytes, message: str = "") -> None:
        if not message:
            elem = value_elem.decode("utf-8", "surrogateescape")
            message = f" as {time_quote(RFC3339)}: cannot parse {time_quote(elem)} as {time_quote(layout_elem)}"
        super().__init__(f"parsing time {time_quote(value)}{message}")


def _getnum(value: bytes, fixed: bool) -> tuple[int, bytes] | None:
    """Go's ``getnum``: one or two leading digits (two when ``fixed``) and the rest; None: ``errBad``."""
    if not value[:1].isdigit():
        return None
    if not value[1:2].isdigit():
        return None if fixed else (value[0] - 48, value[1:])
    return (value[0] - 48) * 10 + value[1] - 48, value[2:]


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 included, as Go's ``Date`` takes it)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def parse_rfc3339(text: str) -> int:
    """Unix nanoseconds of ``text`` as ``time.Parse(time.RFC3339, text)`` reads it, or its error's words.

    src/time/format.go ``parse``, step by step over the layout `RFC3339` (``parseRFC3339``'s fast
    path accepts a subset and returns the same time): a 4-digit year; ``-``, a 2-digit month (1-12),
    ``-``, a 2-digit day; ``T``, an hour of one or two digits (below 24); ``:``, 2-digit minutes and
    seconds (below 60), the seconds followed by an optional ``.`` or ``,`` fraction of any length
    (nanoseconds from its first 9 digits); then ``Z`` or ``±hh:mm`` (an hour up to 24, minutes up to
    60). Go slices the value by bytes, so the text is read as its UTF-8 bytes (a byte that is no
    UTF-8 held as a surrogate escape). A failed element is ``parsing time "<text>" as
    "2006-01-02T15:04:05Z07:00": cannot parse "<rest>" as "<element>"``; a value out of range is
    ``parsing time "<text>": month out of range`` (hour, minute, second, ``time zone offset hour``,
    ``time zone offset minute``), a day past its month's end ``: day out of range``, and text after
    the zone ``: extra text: "<rest>"``.

    Raises:
        ValueError: Go's ``ParseError`` text.
    """
    value = text.encode("utf-8", "surrogateescape")

    def expect(literal: bytes, rest: bytes) -> bytes:  # skip(): the layout's literal between two elements
        if not rest.startswith(literal):
            raise _TimeParseError(text, literal.decode(), rest)
        return rest[len(literal) :]

    def number(element: str, rest: bytes, fixed: bool, below: int, what: str) -> tuple[int, bytes]:
        got = _getnum(rest, fixed)
        if got is None:
            raise _TimeParseError(text, element, rest)
        if not 0 <= got[0] < below:
            raise _TimeParseError(text, element, got[1], f": {what} out of range")
        return got

    year_text = value[:4]
    if len(value) < 4 or not value[:1].isdigit() or not year_text.isdigit():  # stdLongYear: atoi of 4 bytes
        raise _TimeParseError(text, "2006", value)
    year, value = int(year_text), value[4:]
    month, value = number("01", expect(b"-", value), True, 13, "month")
    if month == 0:
        raise _TimeParseError(text, "01", value, ": month out of range")
    value = expect(b"-", value)
    got = _getnum(value, True)  # stdZeroDay: any two digits; the month's end is checked last
    if got is None:
        raise _TimeParseError(text, "02", value)
    day, value = got
    hour, value = number("15", expect(b"T", value), False, 24, "hour")
    minute, value = number("04", expect(b":", value), True, 60, "minute")
    second, value = number("05", expect(b":", value), True, 60, "second")
    nanos = 0
    if len(value) >= 2 and value[:1] in (b".", b",") and value[1:2].isdigit():  # a fraction the layout lacks
        end = 2
        while end < len(value) and value[end : end + 1].isdigit():
            end += 1
        digits = value[1:min(end, 10)]
        nanos, value = int(digits) * 10 ** (9 - len(digits)), value[end:]
    offset = 0
    if value[:1] == b"Z":
        value = value[1:]
    else:  # stdISO8601ColonTZ falls through to the numeric zone: sign, hh, ':', mm
        zone, hold = value[:6], value
        if len(value) < 6 or zone[3:4] != b":":
            raise _TimeParseError(text, "Z07:00", hold)
        value = value[6:]
        hours = _getnum(zone[1:3], True)
        minutes = _getnum(zone[4:6], True) if hours is not None else None  # read only after the hours
        hour_value, minute_value = hours[0] if hours else 0, minutes[0] if minutes else 0
        if minute_value > 60 or hour_value > 24:  # a range error wins over errBad; the minutes' over the hours'
            what = "minute" if minute_value > 60 else "hour"
            raise _TimeParseError(text, "Z07:00", value, f": time zone offset {what} out of range")
        if hours is None or minutes is None or zone[:1] not in (b"+", b"-"):
            raise _TimeParseError(text, "Z07:00", hold)
        offset = (hour_value * 60 + minute_value) * 60 * (-1 if zone[:1] == b"-" else 1)
    if value:
        raise _TimeParseError(text, "", value, ": extra text: " + time_quote(value.decode("utf-8", "surrogateescape")))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= day <= _DAYS_IN_MONTH[month - 1] + (month == 2 and leap):
        raise _TimeParseError(text, "", value, ": day out of range")
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 1_000_000_000 + nanos


__all__ = ["RFC3339", "go_quote", "parse_int64", "parse_rfc3339", "time_quote", "trim_string"]
