"""`extender.go_url`: the extender URL as Go's ``url.Parse`` reads it and net/http writes and names it.

Each case follows src/net/url/url.go (``setPath``, ``EscapedPath``, ``validEncoded``,
``shouldEscape`` with ``encodePath``, ``RequestURI``, ``String``) and kube-scheduler's
``strings.TrimRight(urlPrefix, "/") + "/" + verb`` (pkg/scheduler/extender.go).
"""

from __future__ import annotations

import pytest

from kubectl_gpushare.extender.go_url import URLError, parse, without_password

BASE = "http://127.0.0.1:1/x/"


@pytest.mark.parametrize(("verb", "target", "shown"), [
    ("filter", "/x/filter", None),
    ("b\u00efnd", "/x/b%C3%AFnd", None),
    ("bind now", "/x/bind%20now", None),
    ('"<>\\^`{|}', "/x/%22%3C%3E%5C%5E%60%7B%7C%7D", None),  # shouldEscape(encodePath): always escaped
    ("a(b)!*'[]", "/x/a(b)!*'[]", None),  # validEncoded: RawPath kept as written
    ("a(b) c", "/x/a%28b%29%20c", None),  # one byte to escape: RawPath invalid, the whole path escaped
    ("$&+,;=:@/", "/x/$&+,;=:@/", None),  # the reserved bytes a path keeps
    ("%41%2f", "/x/%41%2f", None),  # valid escapes as written
    ("%41 ", "/x/A%20", None),  # ... unless the path needs escaping: Path re-escaped
    ("filter#part", "/x/filter", "http://127.0.0.1:1/x/filter#part"),  # the fragment is never sent
    ("filter#a b<", "/x/filter", "http://127.0.0.1:1/x/filter#a%20b%3C"),  # EscapedFragment
    ("f?q=a b", "/x/f?q=a b", None),  # the raw query as written
    ("f?q=\u00efn <", "/x/f?q=\u00efn <", None),  # ... beyond ASCII too: RawQuery is never escaped
    ("f?", "/x/f?", None),  # ForceQuery
    ("../x//y", "/x/../x//y", None),  # a concatenation: nothing cleaned (no path.Join)
], ids=["plain", "beyond-ascii", "space", "escaped-always", "sub-delims-kept", "sub-delims-escaped", "reserved",
        "valid-escapes", "escapes-redone", "fragment", "fragment-escaped", "query", "query-beyond-ascii",
        "force-query", "not-cleaned"])
def test_the_request_line_and_the_named_url_are_gos(verb: str, target: str, shown: str | None) -> None:
    url = parse(BASE + verb)
    assert url.request_uri == target
    assert url.shown == (shown or "http://127.0.0.1:1" + target)


def test_a_password_is_never_shown() -> None:
    """net/http's client errors name ``stripPassword(req.URL)``: the password as ``***``."""
    url = parse("http://user:secret@127.0.0.1:1/x/filter")
    assert (url.request_uri, url.shown) == ("/x/filter", "http://user:***@127.0.0.1:1/x/filter")


def test_a_query_in_the_prefix_takes_the_verb() -> None:
    """``url.Parse`` cuts the query before it reads the authority: the path is empty, written ``/``."""
    url = parse("http://h?a=1/filter")
    assert (url.request_uri, url.shown) == ("/?a=1/filter", "http://h?a=1/filter")


@pytest.mark.parametrize(("verb", "error"), [
    ("%zz", r'parse "http://127.0.0.1:1/x/%zz": invalid URL escape "%zz"'),
    ("a%4", r'parse "http://127.0.0.1:1/x/a%4": invalid URL escape "%4"'),
    ("f#%g1", r'parse "http://127.0.0.1:1/x/f#%g1": invalid URL escape "%g1"'),  # the whole URL named
    ("f\n", r'parse "http://127.0.0.1:1/x/f\n": net/url: invalid control character in URL'),
    ("f\x7f", r'parse "http://127.0.0.1:1/x/f\x7f": net/url: invalid control character in URL'),
], ids=["bad-escape", "short-escape", "fragment-escape", "newline", "del"])
def test_what_url_parse_refuses_is_its_error(verb: str, error: str) -> None:
    with pytest.raises(URLError) as refused:
        parse(BASE + verb)
    assert str(refused.value) == error


def test_a_control_character_in_the_fragment_is_taken_as_url_parse_takes_it() -> None:
    """``parse`` checks control bytes before the ``#`` only; ``setFragment`` does not."""
    assert parse(BASE + "f#\x01").request_uri == "/x/f"


@pytest.mark.parametrize(("url", "shown"), [
    ("http://u:p@h/x", "http://u:***@h/x"),
    ("http://u:@h/x", "http://u:***@h/x"),  # a password set, empty: net/http strips it too
    ("http://u:p@ss@h:1/x@y:z", "http://u:***@h:1/x@y:z"),  # the authority's last @; the path untouched
    ("http://a@b:p@h/x", "http://a@b:***@h/x"),  # the username ends at the first colon
    ("http://u@h:1/x", "http://u@h:1/x"),  # no password
    ("http://h:1/a:b@c", "http://h:1/a:b@c"),  # an @ in the path is not user information
    ("http://u:p@h/%zz\n", "http://u:***@h/%zz\n"),  # a URL that does not parse: stripped all the same
], ids=["password", "empty", "last-at", "first-colon", "user-only", "path-at", "unparsed"])
def test_without_password_is_net_https_strip_password(url: str, shown: str) -> None:
    assert without_password(url) == shown


def test_a_refused_url_never_shows_its_password() -> None:
    """Go's ``url.Parse`` error quotes the URL whole (golang/go#53993); this one strips the password."""
    for verb in ("%zz", "f\n", "f#%g1"):
        with pytest.raises(URLError) as refused:
            parse("http://u:s3cret@h/x/" + verb)
        assert "s3cret" not in str(refused.value) and "u:***@h" in str(refused.value)
