"""Go's strconv.Quote and strconv.ParseInt (kube.go_format), case by case from src/strconv/*_test.go."""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube.go_format import go_quote, parse_int64

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
