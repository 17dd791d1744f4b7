"""Go's net/http request rules (kube/go_http), without sockets: the cases its sources name."""

from __future__ import annotations

import io

import pytest

from kubectl_gpushare.kube import go_http


@pytest.mark.parametrize(
    ("proto", "expected"),
    [("HTTP/1.1", (1, 1)), ("HTTP/1.0", (1, 0)), ("HTTP/1.9", (1, 9)), ("HTTP/0.9", (0, 9)), ("HTTP/2.0", (2, 0)),
     ("HTTP/1.10", None), ("HTTP/01.1", None), ("HTTP/1.1 ", None), ("HTTP/2", None), ("http/1.1", None),
     ("HTTP/1,1", None), ("HTTP/+.1", None), ("HTTP/\u0661.1", None), ("HTTP/1.\xb2", None), ("", None)],
)
def test_parse_http_version_takes_one_ascii_digit_each_side(proto: str, expected: tuple[int, int] | None) -> None:
    assert go_http.parse_http_version(proto) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [("GET / HTTP/1.1", ("GET", "/", "HTTP/1.1")), ("GET  / HTTP/1.1", ("GET", "", "/ HTTP/1.1")),
     ("GET /a\tb HTTP/1.1", ("GET", "/a\tb", "HTTP/1.1")), ("GET / HTTP/1.1 ", ("GET", "/", "HTTP/1.1 ")),
     ("GET /", None), ("GET", None)],
)
def test_cut_request_line_cuts_at_the_first_two_spaces_only(line: str, expected: tuple[str, str, str] | None) -> None:
    assert go_http.cut_request_line(line) == expected


def test_only_1_x_and_the_http2_preface_are_served() -> None:
    assert go_http.http1_server_supports((1, 9), "GET", "/")
    assert go_http.http1_server_supports((2, 0), "PRI", "*")
    assert not go_http.http1_server_supports((2, 0), "GET", "*")
    assert not go_http.http1_server_supports((0, 9), "GET", "/")


@pytest.mark.parametrize(
    ("values", "version", "refused", "chunked"),
    [([], (1, 1), False, False), (["chunked"], (1, 1), False, True), (["ChUnKeD"], (1, 9), False, True),
     (["chun\u212aed"], (1, 1), True, False),  # str.lower() takes the Kelvin sign for k; ascii.EqualFold does not
     (["gzip"], (1, 1), True, False), (["gzip, chunked"], (1, 1), True, False),
     (["chunked", "chunked"], (1, 1), True, False), ([""], (1, 1), True, False),
     (["gzip"], (1, 0), False, False), (["chunked", "x"], (1, 0), False, False)],
)
def test_transfer_encoding_is_one_chunked_field_on_http_1_1_and_ignored_on_1_0(
    values: list[str], version: tuple[int, int], refused: bool, chunked: bool
) -> None:
    assert go_http.transfer_encoding_refused(values, version) is refused
    if not refused:  # `chunked` reads what it let through
        assert go_http.chunked(values, version) is chunked


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], 0), (["5"], 5), ([" 5\t"], 5), (["5", "5"], 5), (["5", " 5 "], 5), (["0" * 30 + "7"], 7),
     ([str((1 << 63) - 1)], (1 << 63) - 1)],
)
def test_content_length_reads_what_go_reads(values: list[str], expected: int) -> None:
    assert go_http.content_length(values) == expected


@pytest.mark.parametrize(
    "values",
    [["5", "05"], ["5", "6"], [""], ["-5"], ["+5"], ["5x"], ["5\xa0"], ["\u0665"], [str(1 << 63)], ["9" * 5000]],
)
def test_content_length_refuses_what_go_refuses(values: list[str]) -> None:
    with pytest.raises(ValueError):
        go_http.content_length(values)


@pytest.mark.parametrize(
    ("value", "token", "expected"),
    [("close", "close", True), ("Keep-Alive, CLOSE", "close", True), ("foo close", "close", True),
     ("x,\tclose ,y", "close", True), ("closed", "close", False), ("xclose", "close", False),
     ("close;", "close", False), ("", "close", False), ("keep-alive", "keep-alive", True)],
)
def test_has_token_needs_a_space_comma_or_tab_either_side(value: str, token: str, expected: bool) -> None:
    assert go_http.has_token(value, token) is expected


@pytest.mark.parametrize(
    ("version", "connection", "expected"),
    [((1, 1), [], (False, None)), ((1, 1), ["close"], (True, "close")),
     ((1, 1), ["Keep-Alive, CLOSE"], (True, "close")),
     ((1, 1), ["foo close"], (True, "close")),  # wantsClose's hasToken, not shouldClose's element
     ((1, 1), ["x", "close"], (True, "close")),  # shouldClose reads every value
     ((1, 1), ["keep-alive"], (False, None)), ((1, 9), ["close"], (True, "close")),
     ((1, 0), [], (True, None)), ((1, 0), ["close"], (True, None)), ((1, 0), ["keep-alive"], (False, "keep-alive")),
     ((1, 0), ["Keep-Alive, close"], (False, "keep-alive")),  # writeHeader asks wantsHttp10KeepAlive first
     ((1, 0), ["x", "keep-alive"], (True, None))],  # the keep-alive token counts in the first value only
)
def test_reply_connection_is_go_s_close_after_reply(
    version: tuple[int, int], connection: list[str], expected: tuple[bool, str | None]
) -> None:
    assert go_http.reply_connection(version, connection) == expected


def test_header_pairs_cut_at_the_first_colon_and_trim_the_value_s_start() -> None:
    fields = go_http.header_fields(b"A: x:y \r\nB:\t z\n  folded\r\n")
    assert go_http.header_pairs(fields) == [("A", "x:y"), ("B", "z folded")]


def test_the_http2_preface_is_pri_star_2_0_with_no_named_field_and_closes_after_the_reply() -> None:
    preface = go_http.read_request_line(b"PRI * HTTP/2.0\r\n")
    assert isinstance(preface, go_http.RequestLine)
    assert go_http.is_h2_preface(preface, [])
    assert not go_http.is_h2_preface(preface, [b"Host: x"])
    get = go_http.read_request_line(b"GET / HTTP/1.1\r\n")
    assert isinstance(get, go_http.RequestLine) and not go_http.is_h2_preface(get, [])
    assert go_http.reply_connection((2, 0), [], h2_preface=True) == (True, "close")
    assert go_http.reply_connection((2, 0), []) == (False, None)


def test_a_header_block_is_read_as_one_bytes_and_split_at_lf_only_as_textproto_splits_it() -> None:
    stream = io.BytesIO(b"A: 1\r\nB: x\ry\n  c\r\n\r\nbody")
    block = go_http.read_header_block(stream, 100)
    assert block == b"A: 1\r\nB: x\ry\n  c\r\n" and stream.read() == b"body"
    assert go_http.header_fields(block) == [b"A: 1", b"B: x\ry c"]  # a lone CR is a value byte
    assert go_http.read_header_block(io.BytesIO(b"A: 1\r\n\r\n"), 7) is None  # the blank line counts: 8 bytes
    cut = go_http.read_header_block(io.BytesIO(b"A: 1\r\nB: 2"), 100)  # the stream ended inside the head
    assert cut is not None and go_http.header_fields(cut) == [b"A: 1", b"B: 2"]
    # a first byte the caller read already (GoHeadHandler peeks at it) starts the first line, or ends the head
    assert go_http.read_header_block(io.BytesIO(b": 1\r\n\r\n"), 8, b"A") == b"A: 1\r\n"
    assert go_http.read_header_block(io.BytesIO(b"\n"), 2, b"\r") == b""
    assert go_http.read_header_block(io.BytesIO(b"B: 2\r\n"), 100, b"\n") == b""
    assert go_http.read_header_block(io.BytesIO(b": 1\r\n\r\n"), 7, b"A") is None


@pytest.mark.parametrize(
    ("version", "expect", "body", "expected"),
    [((1, 1), ["100-continue"], True, "continue"), ((1, 1), ["x 100-Continue"], True, "continue"),
     ((1, 1), ["100-continue"], False, "none"), ((1, 0), ["100-continue"], True, "none"),
     ((1, 1), ["x-other", "100-continue"], True, "fail"), ((1, 1), [], True, "none")],
    ids=["continue", "space-bounded-token", "no-body", "http-1.0", "first-value-decides", "none"],
)
def test_expectation_is_conn_serve_s(version: tuple[int, int], expect: list[str], body: bool, expected: str) -> None:
    assert go_http.expectation(version, expect, body) == expected


def test_fields_textproto_cannot_read_and_a_second_host_are_the_plain_400_the_rest_version_or_host_refused_s() -> None:
    for bad in ([b"No colon"], [b"X-A\tB: v"], [b"X-A: a\x00"], [b"Host: a", b"HOST: b"], [b": empty"]):
        assert go_http.fields_refused(bad) == go_http.BAD_REQUEST_REPLY, bad
    assert go_http.fields_refused([b"Host: a", b"X-Sp ace: v", b"X-Obs: caf\xe9\t"]) is None
    line = go_http.read_request_line(b"GET / HTTP/1.1\r\n")
    old = go_http.read_request_line(b"GET / HTTP/1.0\r\n")
    connect = go_http.read_request_line(b"CONNECT /x HTTP/1.1\r\n")
    assert isinstance(line, go_http.RequestLine) and isinstance(old, go_http.RequestLine)
    assert isinstance(connect, go_http.RequestLine)
    refused = go_http.version_or_host_refused
    assert refused([], line) == go_http.bad_request_because("missing required Host header")
    assert refused([], old) is None and refused([], connect) is None
    assert refused([b"Host: a/b"], line) == go_http.bad_request_because("malformed Host header")
    assert refused([b"Host: a", b"X-A : v"], line) == go_http.bad_request_because("invalid header name")
    assert refused([b"host:  [::1]:80"], line) is None  # textproto cuts the leading blanks
    # A trailing space reaches a field only from an empty continuation line ("Host: a\r\n \r\n": textproto's
    # readContinuedLineSlice joins with a space), and textproto keeps it: ValidHostHeader refuses it.
    assert refused([b"host:  [::1]:80 "], line) == go_http.bad_request_because("malformed Host header")


def test_connection_header_says_close_on_http_1_1_only_and_keep_alive_where_http_1_0_is_kept() -> None:
    keep_10 = go_http.reply_connection((1, 0), ["keep-alive"])
    assert go_http.connection_header((1, 0), keep_10, close=False) == "keep-alive"
    assert go_http.connection_header((1, 0), keep_10, close=True) is None  # the server closes it: nothing said
    assert go_http.connection_header((1, 0), go_http.reply_connection((1, 0), []), close=True) is None
    assert go_http.connection_header((1, 1), go_http.reply_connection((1, 1), []), close=True) == "close"
    assert go_http.connection_header((1, 1), go_http.reply_connection((1, 1), []), close=False) is None


def test_a_version_go_does_not_serve_is_read_then_refused_after_the_head_before_host() -> None:
    # src/net/http/server.go conn.readRequest: http1ServerSupportsRequest once readRequest read the head and
    # its framing, before the Host checks; the line itself was read.
    line = go_http.read_request_line(b"GET / HTTP/3.0\r\n")
    assert isinstance(line, go_http.RequestLine) and line.version == (3, 0)
    assert go_http.version_or_host_refused([], line) == go_http.VERSION_NOT_SUPPORTED_REPLY
    assert go_http.version_or_host_refused([b"Host: a b"], line) == go_http.VERSION_NOT_SUPPORTED_REPLY
    preface = go_http.read_request_line(b"PRI * HTTP/2.0\r\n")
    assert isinstance(preface, go_http.RequestLine) and go_http.version_or_host_refused([], preface) is None


def test_a_connect_target_that_is_no_path_is_read_as_an_authority() -> None:
    # src/net/http/request.go readRequest's justAuthority: "http://" + target, the scheme then dropped.
    for target, host in [(b"10.0.0.1:443", "10.0.0.1:443"), (b"[::1]:6443", "[::1]:6443")]:
        read = go_http.read_request_line(b"CONNECT " + target + b" HTTP/1.1\r\n")
        assert isinstance(read, go_http.RequestLine), target
        assert (read.url.scheme, read.url.host, read.url.path, read.path) == ("", host, "", target.decode())
    assert go_http.read_request_line(b"CONNECT h:x HTTP/1.1\r\n") == go_http.BAD_REQUEST_REPLY  # a bad port
    assert go_http.read_request_line(b"GET 10.0.0.1:443 HTTP/1.1\r\n") == go_http.BAD_REQUEST_REPLY


@pytest.mark.parametrize(
    ("size", "version", "head", "framing"),
    [(0, (1, 1), False, "length"), (2048, (1, 1), False, "length"), (2049, (1, 1), False, "chunked"),
     (2049, (1, 0), False, "close"), (2048, (1, 0), False, "length"), (1, (1, 1), True, "length"),
     (0, (1, 1), True, "none"), (2049, (1, 1), True, "none"), (2049, (1, 0), True, "none")],
)
def test_a_handler_s_one_write_is_framed_as_go_s_server_frames_it(
    size: int, version: tuple[int, int], head: bool, framing: str
) -> None:
    """src/net/http/server.go: up to ``bufferBeforeChunkingSize`` bytes get a Content-Length (not an empty body
    to HEAD); more are chunked on HTTP/1.1, ended by the close on HTTP/1.0, and neither to HEAD."""
    assert go_http.reply_framing(size, version, head) == framing


def test_a_chunked_body_is_one_chunk_and_the_last_chunk() -> None:
    """``chunkWriter.Write``'s ``%x`` size line (lowercase hex), then ``chunkWriter.close``'s ``0\\r\\n\\r\\n``."""
    body = b"x" * 2059
    assert go_http.chunked_body(body) == b"80b\r\n" + body + b"\r\n0\r\n\r\n"
