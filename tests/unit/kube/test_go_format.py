"""Go's strconv.Quote, strconv.ParseInt and time.Parse(RFC3339) (kube.go_format), case by case from Go's sources."""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube.go_format import go_quote, parse_int64, parse_rfc3339

# quotetests' Quote column; a byte that is not UTF-8 reaches Python as a surrogate escape.
QUOTED = [
    ("\a\b\f\r\n\t\v", '"\\a\\b\\f\\r\\n\\t\\v"'),
    ("\\", '"\\\\"'),
    (b"abc\xffdef".decode("utf-8", "surrogateescape"), '"abc\\xffdef"'),
    ("\u263a", '"\u263a"'),
    ("\U0010ffff", '"\\U0010ffff"'),
    ("\x04", '"\\x04"'),
    ("!\u00a0!\u2000!\u3000!", '"!\\u00a0!\\u2000!\\u3000!"'),
    ('a"b\x7f', '"a\\"b\\x7f"'),  # appendEscapedRune: DEL is below utf8.RuneSelf and not printable
    ("\u00e9\ufffd", '"\u00e9\ufffd"'),  # printable runes past ASCII stay as they are (Quote, not QuoteToASCII)
]


@pytest.mark.parametrize(("text", "quoted"), QUOTED)
def test_quotes_as_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


# src/strconv/atoi_test.go (parseInt64Tests): leading zeros are digits like any, however many.
PARSED = [
    ("0" * 5000 + "1", 1),
    ("-" + "0" * 5000 + "12", -12),
    ("0" * 5000, 0),
    ("+5", 5),
    ("-9223372036854775808", -(1 << 63)),
    ("9223372036854775807", (1 << 63) - 1),
]


@pytest.mark.parametrize(("text", "value"), PARSED)
def test_parses_as_strconv_parse_int(text: str, value: int) -> None:
    assert parse_int64(text) == value


REFUSED = [
    ("", "invalid syntax"),
    ("-", "invalid syntax"),
    ("12x", "invalid syntax"),
    ("1_0", "invalid syntax"),
    ("9" * 5000, "value out of range"),
    ("0" * 5000 + "9223372036854775808", "value out of range"),
    ("99999999999999999999x", "value out of range"),  # past 2^64-1 before the x
]


@pytest.mark.parametrize(("text", "why"), REFUSED)
def test_refuses_in_strconv_parse_int_words(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"^strconv.ParseInt: parsing .*: {why}$"):
        parse_int64(text)


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [("1970-01-01T00:00:00Z", 0), ("2024-02-29T12:34:56Z", 1709210096 * 10**9),
     ("2024-02-29T12:34:56.123456789999+01:30", (1709210096 - 5400) * 10**9 + 123456789),
     ("0000-01-01T00:00:00Z", -62167219200 * 10**9), ("2024-01-02T1:04:05,5Z", 1704157445 * 10**9 + 5 * 10**8),
     ("2024-01-01T00:00:00+24:00", 1704067200 * 10**9 - 86400 * 10**9)],
    ids=["epoch", "leap-day", "fraction-and-offset", "year-0", "one-digit-hour-comma", "offset-24h"],
)  # fmt: skip
def test_rfc3339_is_read_as_gos_time_parse_reads_it(text: str, nanoseconds: int) -> None:
    # src/time/format.go parse over "2006-01-02T15:04:05Z07:00": a one-digit hour, a comma fraction of any
    # length (9 digits kept) and a 24-hour offset are Go's too (parseRFC3339's fast path takes a subset).
    assert parse_rfc3339(text) == nanoseconds


@pytest.mark.parametrize(
    ("text", "why"),
    [("", ' as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"'),
     ("2024-1-01T00:00:00Z", ' as "2006-01-02T15:04:05Z07:00": cannot parse "1-01T00:00:00Z" as "01"'),
     ("2024-01-01 00:00:00Z", ' as "2006-01-02T15:04:05Z07:00": cannot parse " 00:00:00Z" as "T"'),
     ("2024-01-01T00:00:00+0100", ' as "2006-01-02T15:04:05Z07:00": cannot parse "+0100" as "Z07:00"'),
     ("2024-13-01T00:00:00Z", ": month out of range"), ("2024-00-01T00:00:00Z", ": month out of range"),
     ("2023-02-29T00:00:00Z", ": day out of range"), ("2024-01-01T24:00:00Z", ": hour out of range"),
     ("2024-01-01T00:60:00Z", ": minute out of range"), ("2024-01-01T00:00:60Z", ": second out of range"),
     ("2024-01-01T00:00:00+25:00", ": time zone offset hour out of range"),
     ("2024-01-01T00:00:00+25:61", ": time zone offset minute out of range"),
     ("2024-01-01T00:00:00Z ", ': extra text: " "'),
     ("20\u00e94", ' as "2006-01-02T15:04:05Z07:00": cannot parse "20\\xc3\\xa94" as "2006"')],
    ids=["empty", "short-month", "space", "no-colon-zone", "month-13", "month-0", "not-leap", "hour-24", "minute-60",
         "second-60", "zone-hour", "zone-minute-wins", "extra", "non-ascii"],
)  # fmt: skip
def test_rfc3339_errors_are_gos_parse_errors(text: str, why: str) -> None:
    # time.ParseError.Error: 'parsing time "<value>" as "<layout>": cannot parse "<rest>" as "<element>"', or
    # 'parsing time "<value>"' + its message; every byte past ASCII as \xNN (time.quote).
    with pytest.raises(ValueError) as caught:
        parse_rfc3339(text)
    quoted = text.encode().decode("latin-1").replace("\u00c3\u00a9", "\\xc3\\xa9")
    assert str(caught.value) == f'parsing time "{quoted}"{why}'
