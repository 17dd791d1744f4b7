"""Request body decoding: JSON and YAML into the same JSON values, with bounds on hostile input."""

from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.bodies import MAX_DEPTH, BodyError, check_depth, decode_json, decode_yaml


def nested(depth: int) -> object:
    """``depth`` arrays, one inside the other."""
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_depth_limit_is_exact() -> None:
    check_depth(nested(MAX_DEPTH))
    with pytest.raises(BodyError):
        check_depth(nested(MAX_DEPTH + 1))
    assert decode_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    with pytest.raises(BodyError, match="deeper"):
        decode_json(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))


@pytest.mark.parametrize("data", [b"{", b'[\xff]', b"\xff\xfe{}", b"[" * 100_000], ids=["short", "utf8", "bom", "deep"])
def test_bad_json_is_a_body_error(data: bytes) -> None:
    with pytest.raises(BodyError):
        decode_json(data)


def test_a_json_strings_invalid_utf8_is_u_fffd_a_byte_as_go_reads_it() -> None:
    # Go's unquoteBytes (src/encoding/json/decode.go): RuneError of size 1 for each unreadable byte.
    assert decode_json(b'"\xff"') == "\ufffd"
    assert decode_json(b'{"a\xe2\x82": ["\xf0\x9f\x98", "\xc0\x80\xc3\xa9"]}') == {
        "a\ufffd\ufffd": ["\ufffd" * 3, "\ufffd\ufffd\u00e9"]}


@pytest.mark.parametrize(
    "data",
    [b"a: &x 1\nb: *x\n", b"a: \xff\n", b"[" * 100_000, b"? [a, b]\n: c\n", b"a: !!python/object:os.system x\n",
     b"a: " + b"9" * 5000 + b"\n", b"a: 2024-02-30\n", b"a: .inf\n", b"a: [1, -.Inf]\n", b"a: {b: .NaN}\n",
     b"a: 1.0e+400\n", b"a: !!bool x\n", b"a: !!int\n", b"a: [!!float ]\n"],
    ids=["alias", "utf8", "deep", "complex-key", "python-tag", "5000-digit-int", "no-such-date", "inf", "minus-inf",
         "nan", "overflowing-float", "not-a-bool", "empty-int", "empty-float"],
)
def test_bad_yaml_is_a_one_line_body_error(data: bytes) -> None:
    with pytest.raises(BodyError) as caught:
        decode_yaml(data)
    assert "\n" not in str(caught.value)


def test_yaml_becomes_its_json_view() -> None:
    assert decode_yaml(b"a: &anchor-only 1\nb: {1: 2020-01-02}\nc: [yes, ~]\n") == {
        "a": 1,
        "b": {"1": "2020-01-02"},
        "c": [True, None],
    }


def test_lone_surrogates_among_many_escapes_read_as_u_fffd() -> None:
    # Go's unquoteBytes: a pair is one rune, a lone half U+FFFD, an escaped backslash starts no escape.
    escapes = rb"\n" * 100_000
    body = rb'["\ud800' + escapes + rb'\ud83d\ude00\\ud800\udc00"]'
    assert decode_json(body) == ["\ufffd" + "\n" * 100_000 + "\U0001f600\\ud800\ufffd"]
