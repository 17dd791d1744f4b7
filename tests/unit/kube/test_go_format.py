"""Go's strconv.Quote (kube.go_format.go_quote), case by case from src/strconv/quote_test.go."""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube.go_format import go_quote

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
