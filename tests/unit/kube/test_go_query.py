"""`GoQuery`, `go_bool` and the path helpers: a request target read as kube-apiserver reads it (Go's ``net/url``)."""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube.go_query import MAX_PARAMS, GoQuery, escape_path, go_bool, go_text, unescape, unescape_path


def test_a_name_reads_its_first_value_and_every_gives_them_all() -> None:
    query = GoQuery("a=1&b=x&a=2&a=&c")
    assert (query["a"], query.get("c"), query.get("d")) == ("1", "", None)
    assert query.every("a") == ["1", "2", ""] and query.every("d") == []
    assert query.first_values() == {"a": "1", "b": "x", "c": ""}
    assert query.raw == "a=1&b=x&a=2&a=&c"


@pytest.mark.parametrize("raw", ["a=1;", "a;=1", "a=%", "a=%4", "a=%zz", "%zz=1", "a%=1"])
def test_a_pair_go_cannot_split_or_unescape_is_skipped_and_the_rest_kept(raw: str) -> None:
    query = GoQuery(f"{raw}&a=2&b=3")
    assert query.every("a") == ["2"] and query["b"] == "3"


def test_bytes_that_are_not_utf8_read_as_text_or_exactly() -> None:
    query = GoQuery("t=%ff1s&u=a+b%20c")
    assert query["t"] == "\ufffd1s"  # text for the routes
    assert query.exact("t").encode("utf-8", "surrogateescape") == b"\xff1s"  # Go's bytes, for error quoting
    assert (query["u"], query.exact("absent")) == ("a b c", "")


def test_raw_bytes_of_the_request_line_read_as_go_reads_them() -> None:
    # http.server hands the request line over as Latin-1, a character per byte; Go keeps the bytes.
    query = GoQuery("a=\xc3\xa9&t=\xff1s&m=%C3\xa9")
    assert (query["a"], query["m"]) == ("\u00e9", "\u00e9")  # UTF-8, raw or half escaped: the character
    assert (query["t"], query.exact("t")) == ("\ufffd1s", "\udcff1s")  # not UTF-8: U+FFFD, or the byte itself


def test_more_than_max_params_pairs_parse_to_nothing() -> None:
    assert GoQuery("&".join(["a=1"] * MAX_PARAMS))["a"] == "1"
    assert len(GoQuery("&".join(["a=1"] * (MAX_PARAMS + 1)))) == 0


@pytest.mark.parametrize(("value", "expected"), [(None, False), ("0", False), ("false", False), ("FaLsE", False),
                                                 ("FAL\u017fE", False),  # EqualFold: U+017F folds to "s"
                                                 ("", True), ("1", True), ("true", True), ("yes", True),
                                                 ("00", True)])  # fmt: skip
def test_go_bool_is_false_only_for_absent_0_and_false(value: str | None, expected: bool) -> None:
    assert go_bool(value) is expected


def test_a_path_is_unescaped_as_url_path_holds_it() -> None:
    # setPath: unescape(p, encodePath): every %XX, %2F included; "+" stays; raw and escaped bytes join.
    assert unescape_path("/p%31/a%2Fb+c%20d") == "/p1/a/b+c d"
    assert unescape_path("/\xc3%A9") == "/\u00e9"  # a raw UTF-8 lead byte and an escaped continuation
    assert go_text(unescape_path("/%ff")) == "/\ufffd" and unescape_path("/%ff") == "/\udcff"


@pytest.mark.parametrize("raw", ["/a%zz", "/a%4", "/a%", "/%%41", "/%g0"])
def test_a_path_go_cannot_unescape_is_an_error(raw: str) -> None:
    with pytest.raises(ValueError, match="invalid URL escape"):
        unescape_path(raw)


def test_a_path_is_escaped_as_escaped_path_writes_it() -> None:
    # escape(path, encodePath): letters, digits, -_.~ and $&+,/:;=@ stay; the rest is %XX, upper case.
    assert escape_path("/a b?c%d!*'()#~-_.$&+,/:;=@") == "/a%20b%3Fc%25d%21%2A%27%28%29%23~-_.$&+,/:;=@"
    assert escape_path("/\u00e9\udcff") == "/%C3%A9%FF"


def test_unescape_is_go_url_unescape_with_its_escape_error() -> None:
    assert unescape("a%2Fb+%e2%82%ac") == b"a/b+\xe2\x82\xac"
    assert unescape("\xff%41", "latin-1") == b"\xffA"
    with pytest.raises(ValueError, match=r'^invalid URL escape "%zz"$'):
        unescape("a%zzb")
