"""Body framing without sockets: chunked decoding, Content-Length, and their bounds."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.sandbox.framing import (
    BodyTooLargeError,
    FramingError,
    content_length,
    read_chunked,
)


def frame(parts: list[bytes], trailers: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n" + trailers + b"\r\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=300), max_size=8), st.binary(max_size=20))
def test_chunked_round_trip_leaves_the_next_request_unread(parts: list[bytes], rest: bytes) -> None:
    stream = io.BytesIO(frame(parts) + rest)
    assert read_chunked(stream, 10_000) == b"".join(parts)
    assert stream.read() == rest


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_arbitrary_size_lines_never_raise_anything_but_framing_errors(line: bytes) -> None:
    try:
        body = read_chunked(io.BytesIO(line + b"\r\nhello\r\n0\r\n\r\n"), 100)
    except (FramingError, BodyTooLargeError):
        return
    assert len(body) <= 100


@pytest.mark.parametrize("line", [b"-1", b"+5", b"0x5", b"5_0", b" 5", b"5 x", b"g", b"1" * 17])
def test_chunk_sizes_are_plain_bounded_hex(line: bytes) -> None:
    with pytest.raises(FramingError):
        read_chunked(io.BytesIO(line + b"\r\n" + b"x" * 5 + b"\r\n0\r\n\r\n"), 1 << 20)


def test_chunk_extensions_and_trailers_are_accepted() -> None:
    assert read_chunked(io.BytesIO(b"3;name=v\r\nabc\r\n0\r\nX-A: 1\r\n\r\n"), 10) == b"abc"


def test_total_counts_against_the_limit() -> None:
    with pytest.raises(BodyTooLargeError):
        read_chunked(io.BytesIO(frame([b"x" * 60, b"y" * 60])), 100)
    with pytest.raises(BodyTooLargeError):
        read_chunked(io.BytesIO(b"ffffffffffffffff\r\n"), 100)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], 0), (["12"], 12), (["12", " 12"], 12), (["0"], 0), (["0" * 30 + "7"], 7),
     (["9223372036854775807"], (1 << 63) - 1)],
    ids=["none", "one", "same", "0", "leading-zeros", "int63-max"],
)  # fmt: skip
def test_content_length(values: list[str], expected: int) -> None:
    assert content_length(values) == expected


@pytest.mark.parametrize("values", [["-1"], ["+1"], ["1e3"], [""], ["1", "2"], ["1" * 20], ["0x10"],
                                    ["9223372036854775808"], ["5", "05"], ["\u0665"]])  # fmt: skip
def test_bad_content_length(values: list[str]) -> None:
    with pytest.raises(FramingError):
        content_length(values)
