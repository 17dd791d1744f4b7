"""The one label key and value rule (apimachinery's validate/content/kube.go), in `label_rule`.

`label_key_errors` and `label_value_errors` are the rule, in kube-apiserver's words; the yes/no forms
(`valid_label_key`, `valid_label_value`, and `valid_label_values`, which checks many values joined in
one pass) are defined as "no errors". The properties below hold them to that on keys and values
built to sit on every edge of the rule: empty, 63/64 bytes, a 253/254-byte prefix, leading and
trailing ``-_.``, bad characters, non-ASCII (more bytes than characters), surrogate escapes (a byte
argv held that is no UTF-8: one byte), lone surrogates, and several ``/``.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubectl_gpushare.label_rule import (
    label_key_errors,
    label_value_errors,
    valid_label_key,
    valid_label_value,
    valid_label_values,
)

_EDGE = st.sampled_from(["", "a", "Z", "9", "-", "_", ".", "/", " ", "\n", "\x00", "\u00e9", "\udc80", "\ud800"])
"""What a text may start or end with: good, marks only a middle may hold, bad, non-ASCII, surrogates."""
_NEAR_EDGE = st.sampled_from(["", "a", "Z", "9", "-", "\u00e9"])
"""Edges mostly good, so that a text of a bad length or a bad middle is often good but for that."""
_NAME_FILL = st.sampled_from(["a", "Zz9", "a-b", "a_b", "a.b", "a--", "a\nb", "\u00e9", "a\udcff"])
_PREFIX_FILL = st.sampled_from(["a", "a.b", "a-b", "a..b", "ab.", "A", "a_b", "\u00e9"])
_ANY = st.text("aZ9-_./ \n\x00\u00e9\udc80\ud800", max_size=8)


@st.composite
def _edged(draw: st.DrawFn, fill: st.SearchStrategy[str], limit: int, edge: st.SearchStrategy[str] = _EDGE) -> str:
    """A run of ``fill`` between two drawn edges, ``limit`` characters long, one either side of it, or tiny."""
    size = draw(st.sampled_from([0, 1, limit - 1, limit, limit + 1]))
    start, end, text = draw(edge), draw(edge), draw(fill)
    size = max(0, size - len(start) - len(end))
    return start + (text * (size // len(text) + 1))[:size] + end


_NEAR_NAMES = _edged(_NAME_FILL, 63, _NEAR_EDGE)
_NAMES = _edged(_NAME_FILL, 63) | _NEAR_NAMES | _ANY
_PREFIXES = _edged(_PREFIX_FILL, 253) | _edged(_PREFIX_FILL, 253, _NEAR_EDGE) | _ANY
_KEYS = (_NAMES | st.builds(lambda prefix, name: f"{prefix}/{name}", _PREFIXES, _NAMES | _NEAR_NAMES)
         | st.lists(_NAMES | _PREFIXES, min_size=3, max_size=4).map("/".join))
_VALUES = _NAMES | st.just("")
_GOOD_VALUES = st.sampled_from(["", "a", "Z9", "a-b", "a_b.c", "a" + "-_." * 20 + "b", "v" * 63])
"""Label values, the shortest and longest among them, with marks inside (the drawn odd ones carry the edges)."""


@settings(max_examples=600, deadline=None)
@given(_KEYS)
@example("a" * 254 + "/b")  # a prefix one byte too long, all allowed characters
@example("a/b/c")
def test_a_key_is_valid_exactly_when_it_has_no_errors(key: str) -> None:
    """Fails if the yes/no key check and the worded rule disagree anywhere (a byte count, a prefix, a ``/``)."""
    assert valid_label_key(key) is (not label_key_errors(key))


@settings(max_examples=600, deadline=None)
@given(_VALUES)
@example("v" * 64)
def test_a_value_is_valid_exactly_when_it_has_no_errors(value: str) -> None:
    assert valid_label_value(value) is (not label_value_errors(value))


@settings(max_examples=400, deadline=None)
@given(st.lists(_GOOD_VALUES, min_size=7, max_size=14), st.lists(_NEAR_NAMES | _VALUES, max_size=2),
       st.integers(0, 14))
@example(["v"] * 9, ["v" * 64], 0)  # one character too many, all allowed ones
@example(["v"] * 9, ["a\na"], 9)  # a newline inside a value, between allowed characters
@example(["v"] * 9, ["a-"], 9)  # a mark at the last value's end
@example(["v"] * 9, ["_a"], 0)  # a mark at the first value's start
@example(["v"] * 9, ["a."], 4)  # a mark at a value's end, beside the newline that joins
def test_values_checked_joined_are_valid_exactly_when_none_has_errors(
    good: list[str], odd: list[str], at: int
) -> None:
    """Good values with a few drawn ones put among them: the joined check (past 8 values) agrees with each's errors.

    Fails if joining lets an edge through (a mark beside the newline that joins, a newline inside
    a value) or refuses a good list.
    """
    values = good[:at] + odd + good[at:]
    assert valid_label_values(values) is all(not label_value_errors(value) for value in values)


_VALUE_REGEX = "a valid label must be an empty string or consist of"
_NAME_REGEX = "name part must consist of alphanumeric characters"


@pytest.mark.parametrize(("value", "starts"), [
    ("", []),
    ("v" * 63, []),
    ("v" * 64, ["must be no more than 63 bytes"]),
    ("\u00e9" * 31 + "a", [_VALUE_REGEX]),  # 63 bytes: only the characters are wrong
    ("\u00e9" * 32, ["must be no more than 63 bytes", _VALUE_REGEX]),  # 32 characters, 64 bytes (Go's len)
    ("\udc80" * 63, [_VALUE_REGEX]),  # surrogate escapes: one byte each
    ("\udc80" * 64, ["must be no more than 63 bytes", _VALUE_REGEX]),
    ("a-", [_VALUE_REGEX]),
], ids=["empty", "63", "64", "63-bytes-non-ascii", "64-bytes-non-ascii", "63-escapes", "64-escapes", "edge-mark"])
def test_value_errors_count_bytes_as_go_does(value: str, starts: list[str]) -> None:
    errors = label_value_errors(value)
    assert [error[: len(start)] for error, start in zip(errors, starts, strict=True)] == starts


@pytest.mark.parametrize(("key", "starts"), [
    ("a" * 253 + "/" + "b" * 63, []),
    ("a" * 254 + "/b", ["prefix part must be no more than 253 bytes"]),
    ("a/" + "b" * 64, ["name part must be no more than 63 bytes"]),
    ("/b", ["prefix part must be non-empty"]),
    ("a/", ["name part must be non-empty", _NAME_REGEX]),
    ("A/b", ["prefix part a lowercase RFC 1123 subdomain"]),
    ("a/b/c", ["a valid label key must consist of"]),
], ids=["longest", "254-prefix", "64-name", "empty-prefix", "empty-name", "upper-prefix", "two-slashes"])
def test_key_errors_name_each_part(key: str, starts: list[str]) -> None:
    errors = label_key_errors(key)
    assert [error[: len(start)] for error, start in zip(errors, starts, strict=True)] == starts
