"""The sandbox against hostile clients, over raw sockets: framing, decoding bombs, bad shapes, timeouts.

Every case answers 400/413/422 with a ``Status`` body (or closes the connection), never a 500 or a
traceback, and the server keeps serving everyone else.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
POD = {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "cuda"}]}}


@pytest.fixture
def small() -> Iterator[Sandbox]:
    """A sandbox with a 1 KiB body limit and short timeouts."""
    sb = Sandbox(max_body=1024, idle_timeout=0.5, read_timeout=1.0).start()
    try:
        yield sb
    finally:
        sb.stop()


def exchange(sb: Sandbox, raw: bytes, *, shut_write: bool = False) -> tuple[int, dict[str, Any], bool]:
    """Send raw bytes; return the status, the decoded body and whether the server then closed.

    A reply to HTTP/1.1 says ``Connection: close`` where it closes; one to HTTP/1.0 (its status line says
    so) closes unless it says ``Connection: keep-alive`` (src/net/http/server.go ``chunkWriter.writeHeader``).
    """
    with socket.create_connection(("127.0.0.1", sb.port), timeout=10) as sock:
        sock.sendall(raw)
        if shut_write:
            with contextlib.suppress(OSError):  # the server may already have answered and half-closed
                sock.shutdown(socket.SHUT_WR)
        reader = sock.makefile("rb")
        status_line = reader.readline()
        assert status_line.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")), status_line
        headers: dict[str, str] = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode().partition(":")
            headers[key.strip().lower()] = value.strip()
        body = reader.read(int(headers.get("content-length", "0")))
        if status_line.startswith(b"HTTP/1.0 "):
            closed = headers.get("connection") != "keep-alive"
        else:
            closed = headers.get("connection", "").lower() == "close"
        if closed:
            assert reader.read(1) == b"", "the server closes after Connection: close"
        return int(status_line.split()[1]), json.loads(body) if body else {}, closed


def request(method: str, path: str, body: bytes = b"", headers: dict[str, str | None] | None = None) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: sandbox"]
    sent: dict[str, str | None] = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    sent.update(headers or {})
    head += [f"{k}: {v}" for k, v in sent.items() if v is not None]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(path: str, framed: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: sandbox\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode() + framed


def configmap(name: str, size: int = 0) -> bytes:
    return json.dumps({"metadata": {"name": name}, "data": {"x": "y" * size}}).encode()


def assert_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, err


# --- chunked transfer encoding ----------------------------------------------------------------
def test_valid_chunked_body_is_accepted(small: Sandbox) -> None:
    body = configmap("ok")
    framed = b"%x;ext=1\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (len(body), body)
    status, created, closed = exchange(small, chunked(CONFIGMAPS, framed))
    assert status == 201 and created["metadata"]["name"] == "ok" and not closed


@pytest.mark.parametrize(
    "size_line",
    [b"-1", b"zz", b"0x10", b"+10", b"1_0", b" 10", b"", b"12345678901234567", b"10\n"],
    ids=["minus-one", "zz", "0x", "plus", "underscore", "leading-space", "empty", "too-long", "bare-lf"],
)
def test_malformed_chunk_size_gets_400_and_a_closed_connection(
    sandbox: Sandbox, capfd: pytest.CaptureFixture[str], size_line: bytes
) -> None:
    body = configmap("smuggled")
    framed = size_line + (b"" if size_line.endswith(b"\n") else b"\r\n") + body + b"\r\n0\r\n\r\n"
    status, answer, closed = exchange(sandbox, chunked(CONFIGMAPS, framed), shut_write=True)
    assert status == 400 and answer["reason"] == "BadRequest" and closed, answer
    assert sandbox.get("configmaps", "default", "smuggled") is None
    assert_no_traceback(capfd)


def test_chunk_size_minus_one_cannot_bypass_the_body_limit(small: Sandbox) -> None:
    body = configmap("big", 64 * 1024)
    status, answer, closed = exchange(small, chunked(CONFIGMAPS, b"-1\r\n" + body), shut_write=True)
    assert status == 400 and closed, answer
    assert small.objects("configmaps") == []


def test_chunks_add_up_against_the_body_limit(small: Sandbox) -> None:
    piece = b"x" * 600
    framed = b"258\r\n" + piece + b"\r\n258\r\n" + piece + b"\r\n0\r\n\r\n"
    status, answer, closed = exchange(small, chunked(CONFIGMAPS, framed))
    assert status == 413 and answer["reason"] == "RequestEntityTooLarge" and closed


@pytest.mark.parametrize(
    "framed",
    [b"5\r\nhelloXX0\r\n\r\n", b"5\r\nhel", b"0\r\n" + b"X: y\r\n" * 40 + b"\r\n", b"0\r\n" + b"x" * 5000],
    ids=["no-crlf-after-data", "ends-inside-chunk", "too-many-trailers", "endless-trailer"],
)
def test_broken_chunk_framing_gets_400(sandbox: Sandbox, capfd: pytest.CaptureFixture[str], framed: bytes) -> None:
    status, answer, closed = exchange(sandbox, chunked(CONFIGMAPS, framed), shut_write=True)
    assert status == 400 and closed, answer
    assert_no_traceback(capfd)


@pytest.mark.parametrize(
    "lengths",
    [["-5"], ["+5"], ["5, 6"], ["0x5"], ["1e3"], [""], ["9223372036854775808"], ["5", "05"], ["5", "6"],
     ["x\tchunked"]],
    ids=["minus", "plus", "list", "hex", "exponent", "empty", "past-int63", "same-number-other-text", "two",
         "with-chunked"],
)  # fmt: skip
def test_a_malformed_content_length_gets_gos_plain_400_before_any_handler(lengths: list[str]) -> None:
    # src/net/http/transfer.go readTransfer -> fixLength: values that differ once trimmed ("message cannot
    # contain multiple Content-Length headers"), then parseContentLength's strconv.ParseUint(cl, 10, 63)
    # ("bad Content-Length", "invalid empty Content-Length"), a chunked request's too. Neither is a
    # statusError, so conn.serve (server.go) writes its plain "400 Bad Request" and closes: no handler,
    # no authentication (a 401 here), no Status body, nothing in the request log.
    with Sandbox(auth=True) as sb:
        headers = "".join(f"Content-Length: {length}\r\n" for length in lengths)
        if lengths == ["x\tchunked"]:
            headers = "Transfer-Encoding: chunked\r\nContent-Length: x\r\n"
        raw = f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: sandbox\r\n{headers}\r\nhello".encode()
        assert read_to_close(sb, raw) == GO_BAD_REQUEST
        assert not sb.requests, "no handler saw it"


def test_a_content_length_go_reads_frames_the_body(sandbox: Sandbox) -> None:
    # parseContentLength: leading zeros of any number (ParseUint); fixLength: a value repeated, equal once trimmed.
    for name in ("z1", "z2"):
        body = configmap(name)
        lengths = ["0" * 25 + str(len(body))] if name == "z1" else [f" {len(body)}", f"{len(body)}\t"]
        headers = "".join(f"Content-Length:{length}\r\n" for length in lengths)
        raw = f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: sandbox\r\n{headers}\r\n".encode() + body
        status, created, closed = exchange(sandbox, raw)
        assert (status, created["metadata"]["name"], closed) == (201, name, False)


UNSUPPORTED_TE = (b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  b"Connection: close\r\n\r\nUnsupported transfer encoding")  # fmt: skip


@pytest.mark.parametrize("encoding", ["gzip", "gzip, chunked", "chunked, chunked", "",
                                      "chunked\r\nTransfer-Encoding: chunked", "chunked\r\nTransfer-Encoding:",
                                      "chunked\r\n "],
                         ids=["gzip", "gzip-chunked", "twice", "empty", "two-fields", "empty-second",
                              "empty-continuation"])  # fmt: skip
def test_a_transfer_encoding_go_does_not_read_gets_its_plain_501_before_any_handler(encoding: str) -> None:
    # src/net/http/transfer.go parseTransferEncoding: one field, "chunked" in any case, or an unsupportedTEError,
    # which conn.serve (server.go) answers with a plain 501 and closes: no authentication, nothing logged. An
    # empty continuation line leaves "chunked " (textproto readContinuedLineSlice joins with a space), which
    # parseTransferEncoding's ascii.EqualFold does not trim.
    with Sandbox(auth=True) as sb:
        raw = request("POST", CONFIGMAPS, b"", {"Transfer-Encoding": encoding, "Content-Length": None,
                                                "Expect": "100-continue"})
        assert read_to_close(sb, raw) == UNSUPPORTED_TE
        assert not sb.requests


def test_transfer_encoding_is_read_in_any_case_on_http_1_1_and_ignored_on_http_1_0(sandbox: Sandbox) -> None:
    framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(configmap("c1")), configmap("c1"))
    raw = chunked(CONFIGMAPS, framed).replace(b"chunked", b" CHunked ")
    status, created, _ = exchange(sandbox, raw)
    assert status == 201 and created["metadata"]["name"] == "c1", created
    # go.dev/issue/12785: an HTTP/1.0 request's Transfer-Encoding is dropped: "gzip" is no 501, and the
    # Content-Length frames the body.
    body = configmap("c2")
    raw = request("POST", CONFIGMAPS, body, {"Transfer-Encoding": "gzip"}).replace(b"HTTP/1.1", b"HTTP/1.0")
    status, created, _ = exchange(sandbox, raw)
    assert status == 201 and created["metadata"]["name"] == "c2", created


def test_client_vanishing_mid_body_leaves_no_traceback(sandbox: Sandbox, capfd: pytest.CaptureFixture[str]) -> None:
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(request("POST", CONFIGMAPS, b"{", {"Content-Length": "100"}))
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b"", "closed without an answer"
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(chunked(CONFIGMAPS, b"a\r\n{"))
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1000)
    assert_no_traceback(capfd)
    assert exchange(sandbox, request("GET", CONFIGMAPS))[0] == 200


# --- the request line ------------------------------------------------------------------------
GO_BAD_REQUEST = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                  b"400 Bad Request")  # fmt: skip
GO_VERSION_NOT_SUPPORTED = (b"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version\r\n"
                            b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
                            b"505 HTTP Version Not Supported: unsupported protocol version")  # fmt: skip


def read_to_close(sb: Sandbox, raw: bytes) -> bytes:
    """Send raw bytes; everything the server writes until it closes."""
    with socket.create_connection(("127.0.0.1", sb.port), timeout=10) as sock:
        sock.sendall(raw)
        reader = sock.makefile("rb")
        return reader.read()


@pytest.mark.parametrize(
    "target",
    [f"{CONFIGMAPS}?labelSelector=a%3Db\x01", f"{CONFIGMAPS}\x7f", f"{CONFIGMAPS}\tx",
     "/api/v1/namespaces/kube-system/pods/p:1/proxy/usage?q=\x1f", "/healthz\x00",
     f"{CONFIGMAPS}/c%zz", f"{CONFIGMAPS}/c%4?x=1", "/healthz%", "/api/v1/namespaces/kube-system/pods/p/proxy/%g1",
     CONFIGMAPS[1:], "api/v1/namespaces/kube-system/pods/p/proxy/", ":x/api/v1/namespaces", "1http:/api",
     f"http://[::1{CONFIGMAPS}", f"http://sandbox:6443x{CONFIGMAPS}", f"http://a{{b{CONFIGMAPS}"],
    ids=["query", "path-del", "path-tab", "pod-proxy", "nul", "bad-escape", "short-escape", "lone-percent",
         "proxy-escape", "relative", "relative-proxy", "missing-scheme", "digit-first-scheme", "missing-bracket",
         "bad-port", "bad-host"],
)  # fmt: skip
def test_an_unparsable_target_gets_gos_plain_400_before_any_handler(target: str) -> None:
    # Go's readRequest: url.ParseRequestURI refuses a control byte anywhere, a % without two hex
    # digits in the path (setPath's unescape: EscapeError), a target that is neither "*", an absolute
    # path nor a URL with a scheme ("invalid URI for request"), and a bad authority after "scheme://",
    # so conn.serve writes its plain 400 and closes, before kube-apiserver's handler chain: no
    # authentication (a 401 here), no Status body.
    with Sandbox(auth=True) as sb:
        raw = f"GET {target} HTTP/1.1\r\nHost: sandbox\r\n\r\n".encode("latin-1")
        assert read_to_close(sb, raw) == GO_BAD_REQUEST
        assert not sb.requests, "no handler saw it"
        raw = f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: sandbox\r\n\r\n".encode()
        assert exchange(sb, raw)[0] == 401  # serving on; a byte past ASCII is no control byte:
        assert exchange(sb, f"GET {CONFIGMAPS}?x=\xe9 HTTP/1.1\r\nHost: s\r\n\r\n".encode("latin-1"))[0] == 401
        # and a bad escape in the query is no error: Go keeps the query raw (URL.RawQuery).
        assert exchange(sb, f"GET {CONFIGMAPS}?x=%zz&%4 HTTP/1.1\r\nHost: s\r\n\r\n".encode())[0] == 401


@pytest.mark.parametrize("line", [f"GET\t{CONFIGMAPS}/c%zz HTTP/1.1", f"GET  {CONFIGMAPS}/c%zz HTTP/1.1"],
                         ids=["tab", "two-spaces"])
def test_a_request_line_go_cuts_otherwise_still_gets_the_plain_400(line: str) -> None:
    # Go cuts the line at its first two spaces (parseRequestLine) and refuses these whole (its method
    # "GET\t/..." is no token; after two spaces the target is empty); http.server splits on any
    # whitespace and reads the target "/...c%zz", which must not reach the handler's unescape.
    with Sandbox(auth=True) as sb:
        assert read_to_close(sb, f"{line}\r\nHost: sandbox\r\n\r\n".encode()) == GO_BAD_REQUEST
        assert not sb.requests, "no handler saw it"
        assert exchange(sb, f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: sandbox\r\n\r\n".encode())[0] == 401


@pytest.mark.parametrize(
    ("line", "reply"),
    [(f"GET {CONFIGMAPS}", GO_BAD_REQUEST), (f"GET {CONFIGMAPS} HTTP/1.1 x", GO_BAD_REQUEST),
     (f"GET {CONFIGMAPS} http/1.1", GO_BAD_REQUEST), (f"GET {CONFIGMAPS} HTTP/1.10", GO_BAD_REQUEST),
     (f"G(T {CONFIGMAPS} HTTP/1.1", GO_BAD_REQUEST), (f"GET {CONFIGMAPS} HTTP/0.9", GO_VERSION_NOT_SUPPORTED),
     (f"GET {CONFIGMAPS} HTTP/2.0", GO_VERSION_NOT_SUPPORTED)],
    ids=["http-0.9-form", "three-spaces", "lower-case-version", "two-digit-minor", "method-not-a-token", "http-0.9",
         "http-2"],
)  # fmt: skip
def test_a_request_line_go_cannot_read_gets_its_plain_reply(line: str, reply: bytes) -> None:
    # src/net/http/request.go readRequest: two spaces (parseRequestLine), a token method (validMethod),
    # HTTP/x.y (ParseHTTPVersion), else the plain 400; server.go readRequest: a version other than 1.x
    # is a 505 (http1ServerSupportsRequest). http.server answered "GET /" as HTTP/0.9, with no status line.
    with Sandbox(auth=True) as sb:
        assert read_to_close(sb, f"{line}\r\nHost: sandbox\r\n\r\n".encode()) == reply
        assert not sb.requests, "no handler saw it"
        assert exchange(sb, f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: sandbox\r\n\r\n".encode())[0] == 401


@pytest.mark.parametrize(("head", "reply"), [
    (b"Host: s\r\nNo colon\r\n", GO_BAD_REQUEST),
    (b"Host: s\r\nTransfer-Encoding: gzip\r\n", UNSUPPORTED_TE),
    (b"Host: s\r\nContent-Length: -1\r\n", GO_BAD_REQUEST),
    (b"Host: a b\r\n", GO_VERSION_NOT_SUPPORTED), (b"", GO_VERSION_NOT_SUPPORTED),
], ids=["bad-field", "transfer-encoding", "content-length", "before-bad-host", "before-no-host"])  # fmt: skip
def test_a_version_go_does_not_serve_is_refused_after_the_head_and_its_framing(head: bytes, reply: bytes) -> None:
    # src/net/http/server.go conn.readRequest asks http1ServerSupportsRequest once request.go's readRequest read
    # the header lines (textproto) and readTransfer the framing, then checks Host: those refusals win over the
    # 505, and it over a bad or missing Host (go_http.version_or_host_refused; the extender's rule too). The
    # sandbox answered 505 at the request line.
    with Sandbox(auth=True) as sb:
        assert read_to_close(sb, f"GET {CONFIGMAPS} HTTP/3.0\r\n".encode() + head + b"\r\n") == reply
        assert not sb.requests, "no handler saw it"


@pytest.mark.parametrize("target", ["10.0.0.1:443", "[::1]:6443", "example.com:443", "/api"])
def test_a_connect_reaches_the_handlers_without_host_its_target_an_authority_or_a_path(target: str) -> None:
    # src/net/http/request.go readRequest: a CONNECT target that is not a path is an authority (justAuthority:
    # parsed as "http://" + target, then the scheme dropped), and server.go readRequest needs no Host on a
    # CONNECT: the handler chain answers, here authentication's 401. An address target was Go's plain 400.
    with Sandbox(auth=True) as sb:
        status, body, _ = exchange(sb, f"CONNECT {target} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
        assert (status, body["reason"]) == (401, "Unauthorized"), body
        assert [r.method for r in sb.requests] == ["CONNECT"]


def test_the_http2_preface_reaches_the_handlers_as_go_lets_it_then_the_connection_closes() -> None:
    # http1ServerSupportsRequest (src/net/http/server.go) lets "PRI * HTTP/2.0" through to the
    # handlers, and nothing serves "*": the chain's 401, then 404, in JSON. readRequest sets
    # closeAfterReply for it (isH2Upgrade), so the reply says Connection: close and the preface's "SM"
    # line is never read. http.server answered the 2.0 version with its HTML 505.
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    with Sandbox(auth=True) as sb:
        reply = read_to_close(sb, preface)
        assert reply.startswith(b"HTTP/1.1 401 Unauthorized\r\n") and b"\r\nConnection: close\r\n" in reply, reply
        assert reply.count(b"HTTP/1.1 ") == 1, reply
    with Sandbox() as sb:
        status, answer, closed = exchange(sb, b"PRI * HTTP/2.0\r\n\r\n")
        assert (status, answer["reason"], closed) == (404, "NotFound", True)
        assert [(r.method, r.status) for r in sb.requests] == [("PRI", 404)]


@pytest.mark.parametrize("byte", ["\x85", "\xa0"], ids=["nel", "nbsp"])
def test_bytes_python_takes_for_whitespace_stay_in_the_target_as_go_cuts_it(byte: str) -> None:
    # Go's parseRequestLine (src/net/http/request.go) cuts the line at spaces only, and
    # url.ParseRequestURI refuses control bytes only: 0x85 and 0xA0 (whitespace to Python's
    # str.split, which http.server splits on) are target bytes, so the handler chain answers.
    with Sandbox(auth=True) as sb:
        sb.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
        admin: dict[str, str | None] = {"Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}"}
        status, answer, _ = exchange(sb, request("GET", f"{CONFIGMAPS}/c{byte}x").decode().encode("latin-1"))
        assert (status, answer["reason"]) == (401, "Unauthorized")
        raw = request("GET", f"{CONFIGMAPS}/c{byte}x", headers=admin).decode().encode("latin-1")
        status, answer, closed = exchange(sb, raw)
        # The name is bytes that are not UTF-8: Go's encoding/json writes each as U+FFFD.
        assert (status, answer["message"], closed) == (404, 'configmaps "c\ufffdx" not found', False)
        raw = request("GET", f"{CONFIGMAPS}?labelSelector=a{byte}", headers=admin).decode().encode("latin-1")
        status, answer, _ = exchange(sb, raw)  # the raw query is kept; the selector sees the byte and refuses it
        assert status == 400 and answer["reason"] == "BadRequest", answer
        raw = request("GET", f"{CONFIGMAPS}?x={byte}", headers=admin).decode().encode("latin-1")
        status, answer, _ = exchange(sb, raw)
        assert (status, [item["metadata"]["name"] for item in answer["items"]]) == (200, ["c"])
        assert [entry.path for entry in sb.requests][-4:] == [f"{CONFIGMAPS}/c\ufffdx"] * 2 + [CONFIGMAPS] * 2


def test_targets_go_takes_without_a_leading_slash_are_routed_as_go_splits_them(sandbox: Sandbox) -> None:
    # url.ParseRequestURI: an absolute-form target's path is what follows its authority; "scheme:x"
    # with no "/" is an opaque URL (URL.Path empty) and "*" is the path "*": no route serves either.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
    status, answer, _ = exchange(sandbox, f"GET HTTP://sandbox:1{CONFIGMAPS}/c HTTP/1.1\r\nHost: s\r\n\r\n".encode())
    assert (status, answer["metadata"]["name"]) == (200, "c")
    assert sandbox.requests[-1].path == f"{CONFIGMAPS}/c"
    for target in ("http:api/v1/namespaces", "mailto:x?y=1", "http://sandbox", "*"):
        status, answer, _ = exchange(sandbox, f"GET {target} HTTP/1.1\r\nHost: s\r\n\r\n".encode())
        assert (status, answer["message"]) == (404, "the server could not find the requested resource"), target


def test_options_asterisk_is_gos_own_empty_200_before_any_handler() -> None:
    # net/http serverHandler.ServeHTTP: "OPTIONS *" goes to globalOptionsHandler (Content-Length: 0),
    # never to kube-apiserver's chain: no authentication, no Status, nothing in the request log.
    with Sandbox(auth=True) as sb:
        reply = read_to_close(sb, b"OPTIONS * HTTP/1.1\r\nHost: s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nContent-Length: 0" in head and body == b""
        assert b"Content-Type" not in head and not sb.requests
        token = f"Authorization: Bearer {Sandbox.ADMIN_TOKEN}\r\n".encode()
        assert exchange(sb, b"GET * HTTP/1.1\r\nHost: s\r\n" + token + b"\r\n")[0] == 404  # the chain's


# --- the decoded path -----------------------------------------------------------------------------
PODS = "/api/v1/namespaces/default/pods"


def test_the_path_is_routed_decoded_as_kube_apiserver_routes_req_url_path(sandbox: Sandbox) -> None:
    # url.ParseRequestURI unescapes the path into URL.Path, which RequestInfoFactory.NewRequestInfo
    # (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go) splits and go-restful routes on.
    sandbox.load([{"kind": "Pod", "apiVersion": "v1", **POD, "metadata": {"name": "p1", "namespace": "default"}}])
    status, pod, _ = exchange(sandbox, request("GET", f"{PODS}/p%31"))
    assert (status, pod["metadata"]["name"]) == (200, "p1")
    record = sandbox.requests[-1]
    assert (record.verb, record.resource, record.name, record.path) == ("get", "pods", "p1", f"{PODS}/p1")
    status, pod, _ = exchange(sandbox, request("GET", "/api/v1/namespaces/d%65fault/%70ods/p1"))
    assert (status, pod["metadata"]["name"]) == (200, "p1")


def test_an_escaped_slash_splits_its_segment(sandbox: Sandbox) -> None:
    # URL.Path cannot tell %2F from "/": "p1%2Fstatus" is pod p1's status subresource upstream, and
    # "c%2Fd" is ConfigMap c's unknown subresource "d", which no route serves (not a ConfigMap "c/d").
    sandbox.load([{"kind": "Pod", "apiVersion": "v1", **POD, "metadata": {"name": "p1", "namespace": "default"}}])
    status, pod, _ = exchange(sandbox, request("GET", f"{PODS}/p1%2Fstatus"))
    assert (status, pod["metadata"]["name"]) == (200, "p1")
    assert (sandbox.requests[-1].name, sandbox.requests[-1].subresource) == ("p1", "status")
    status, answer, _ = exchange(sandbox, request("GET", f"{CONFIGMAPS}/c%2Fd"))
    assert (status, answer["message"]) == (404, "the server could not find the requested resource")
    status, answer, _ = exchange(sandbox, request("GET", f"{CONFIGMAPS}/c%2F"))  # splitPath trims the "/"
    assert (status, answer["message"]) == (404, 'configmaps "c" not found')


NOT_FOUND = "the server could not find the requested resource"


@pytest.mark.parametrize("path", ["/api/v1//pods", "//api/v1/pods", "/apis//v1/deployments", "/apis/apps//deployments",
                                  "/api/v1/namespaces/default//pods", "/api/v1/namespaces//nodes",
                                  f"{PODS}/p1//status", "/api//v1/namespaces"])
def test_an_empty_segment_where_routes_have_a_literal_matches_none(sandbox: Sandbox, path: str) -> None:
    # go-restful's CurlyRouter compares a route's literal tokens ("api", "namespaces", a resource, a
    # subresource) with the request's as they are, and tokenizePath trims only the trailing "/"s; Go
    # keeps a leading "//" too (http.server turns it into "/"). No route matches: 404.
    sandbox.load([{"kind": "Pod", "apiVersion": "v1", **POD, "metadata": {"name": "p1", "namespace": "default"}}])
    status, answer, _ = exchange(sandbox, request("GET", path))
    assert (status, answer["message"]) == (404, NOT_FOUND), path


def test_an_empty_namespace_segment_is_every_namespace_for_a_collection_and_none_for_an_object(
    sandbox: Sandbox,
) -> None:
    # A route's {namespace} matches "" (matchesRouteByPathTokens checks nothing of a parameter), so
    # RequestInfo's namespace is empty: a list or watch reads every namespace (NamespaceKeyRootFunc),
    # an object's key cannot be built (NamespaceKeyFunc: 400), a create's object loses its namespace
    # (EnsureObjectNamespaceMatchesRequestNamespace) and fails validation, and a deletecollection lists
    # everything, then fails to delete the first item under the empty namespace.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}} for ns in ("default", "other")])
    status, answer, _ = exchange(sandbox, request("GET", "/api/v1/namespaces//configmaps"))
    assert status == 200 and [i["metadata"]["namespace"] for i in answer["items"]] == ["default", "other"]
    for method, path in (("GET", "/api/v1/namespaces//configmaps/c"), ("DELETE", "/api/v1/namespaces//configmaps/c"),
                         ("DELETE", "/api/v1/namespaces//configmaps"), ("GET", "/api/v1/namespaces//pods/p/proxy/x")):
        status, answer, _ = exchange(sandbox, request(method, path))
        assert (status, answer["message"]) == (400, "Namespace parameter required."), (method, path)
    assert len(sandbox.objects("configmaps")) == 2
    status, answer, _ = exchange(sandbox, request("DELETE", "/api/v1/namespaces//configmaps?labelSelector=none"))
    assert (status, answer["items"]) == (200, [])  # nothing listed, nothing to delete
    body = json.dumps({"metadata": {"name": "new", "namespace": "default"}}).encode()
    status, answer, _ = exchange(sandbox, request("POST", "/api/v1/namespaces//configmaps", body))
    assert (status, answer["message"]) == (422, 'ConfigMap "new" is invalid: metadata.namespace: Required value')
    assert answer["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                            "field": "metadata.namespace"}]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "content_type"), [
    ("POST", "/api/v1/namespaces//pods/p/binding", "application/json"),
    ("POST", "/api/v1/namespaces//serviceaccounts/s/token", "application/json"),
    ("PUT", "/api/v1/namespaces//configmaps/c", "application/json"),
    ("DELETE", "/api/v1/namespaces//configmaps/c", "application/json"),
], ids=["binding", "token", "update", "delete"])  # fmt: skip
def test_an_empty_namespace_is_refused_after_the_body_is_decoded(
    sandbox: Sandbox, method: str, path: str, content_type: str
) -> None:
    # The handlers (endpoints/handlers create.go, update.go, delete.go) take the name from RequestInfo,
    # then read and decode the body (update.go's checkName too), and only then call the store, whose
    # NamespaceKeyFunc (registry/generic/registry/store.go) needs the namespace. The sandbox refused
    # the namespace while routing, before the body.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
    status, answer, _ = exchange(sandbox, request(method, path, b"{bad", {"Content-Type": content_type}))
    assert (status, answer["message"]) == (
        400, "error decoding the request body as JSON: JSON is malformed: object keys must be strings (byte 1)")
    if method == "PUT":
        status, answer, _ = exchange(sandbox, request(method, path, b'{"metadata": {"name": "d"}}'))
        assert (status, answer["message"]) == (400, "the name of the object (d) does not match the name on the URL (c)")
    well_formed = b'{"metadata": {"name": "c"}, "target": {"name": "n"}}' if method != "DELETE" else b"{}"
    status, answer, _ = exchange(sandbox, request(method, path, well_formed))
    assert (status, answer["message"]) == (400, "Namespace parameter required.")
    assert sandbox.requests[-1].verb in ("create", "update", "delete"), "routed: the handler refused it"
    assert sandbox.get("configmaps", "default", "c") is not None


def test_a_scale_update_with_an_empty_namespace_decodes_a_scale_not_the_workload(sandbox: Sandbox) -> None:
    # The scale subresource's handler decodes an autoscaling/v1 Scale, then the store needs the
    # namespace. The sandbox checked the body as a Deployment: a well-formed Scale was its apps/v1 400.
    path = "/apis/apps/v1/namespaces//deployments/d/scale"
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 2}}
    status, answer, _ = exchange(sandbox, request("PUT", path, json.dumps(scale).encode()))
    assert (status, answer["message"]) == (400, "Namespace parameter required.")
    status, answer, _ = exchange(sandbox, request("PUT", path, b"[]"))
    assert (status, answer["message"]) == (400, "json: cannot unmarshal into Go value of type autoscaling.Scale")


def test_a_patch_or_a_log_with_an_empty_namespace_is_refused_before_its_body(sandbox: Sandbox) -> None:
    # A patch's store call builds the key before it applies the patch (patch.go: r.Update, then
    # GuaranteedUpdate), and the log's store Get comes first: no body is read before the 400.
    status, answer, _ = exchange(sandbox, request("PATCH", "/api/v1/namespaces//configmaps/c", b"{bad",
                                                  {"Content-Type": "application/merge-patch+json"}))
    assert (status, answer["message"]) == (400, "Namespace parameter required.")
    status, answer, _ = exchange(sandbox, request("GET", "/api/v1/namespaces//pods/p/log"))
    assert (status, answer["message"]) == (400, "Namespace parameter required.")


@pytest.mark.parametrize("path", [f"{PODS}//status", "/api/v1/nodes//status", "/api/v1/namespaces//status",
                                  f"{PODS}//proxy/x", "/api/v1/namespaces//pods//status"])
def test_an_empty_name_segment_is_a_400_name_must_be_provided(sandbox: Sandbox, path: str) -> None:
    # The handlers read the name from RequestInfo and refuse an empty one first (namer.go errEmptyName).
    status, answer, _ = exchange(sandbox, request("GET", path))
    assert (status, answer["reason"], answer["message"]) == (400, "BadRequest", "name must be provided")


LABEL_RULE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
              "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")  # fmt: skip


@pytest.mark.parametrize(("namespace", "causes"), [
    ("Foo_Bar", [f'"Foo_Bar": {LABEL_RULE}']),
    ("a.b", ['"a.b": must not contain dots']),
    ("x" * 64, [f'"{"x" * 64}": must be no more than 63 characters']),
    ("-" * 64, [f'"{"-" * 64}": must be no more than 63 characters', f'"{"-" * 64}": {LABEL_RULE}']),
    ("n%0A", [f'"n\\n": {LABEL_RULE}']),
], ids=["underscore", "dots", "too-long", "too-long-and-off-pattern", "newline"])
def test_a_write_in_a_namespace_that_is_no_dns_label_fails_validation_and_reads_find_nothing(
    sandbox: Sandbox, namespace: str, causes: list[str]
) -> None:
    # No layer checks a path's namespace; ValidateObjectMeta checks the object's, which the path set
    # (ValidateNamespaceName: IsDNS1123Label), so a create is a 422, while a list finds nothing and a
    # get finds no object.
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    body = json.dumps({"metadata": {"name": "c"}}).encode()
    status, answer, _ = exchange(sandbox, request("POST", path, body))
    assert status == 422, answer
    assert [c["field"] + ": " + c["message"] for c in answer["details"]["causes"]] == [
        "metadata.namespace: Invalid value: " + cause for cause in causes]
    assert sandbox.objects("configmaps") == []
    status, answer, _ = exchange(sandbox, request("GET", path))
    assert (status, answer["items"]) == (200, [])
    status, answer, _ = exchange(sandbox, request("GET", path + "/c"))
    assert (status, answer["message"]) == (404, 'configmaps "c" not found')


def test_a_path_nothing_serves_is_a_401_to_a_stranger_and_a_404_to_a_known_caller() -> None:
    # DefaultBuildHandlerChain (k8s.io/apiserver/pkg/server/config.go) wraps the router in
    # WithAuthentication: a stranger learns nothing of the routes. Only a bad timeout comes first.
    with Sandbox(auth=True) as sb:
        token = {"Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}"}
        for path in ("/api/v1/nosuchthings", "/api/v1//pods", "/nope", "*"):
            assert exchange(sb, request("GET", path))[0] == 401, path
            assert exchange(sb, request("GET", path, headers=token))[0] == 404, path
        assert exchange(sb, request("GET", "/nope?timeout=abc"))[0] == 400


def test_authorization_sees_the_decoded_path() -> None:
    # The RBAC request attributes come from RequestInfo, so an escaped "proxy" is pods/proxy, which
    # the viewer may not use (a 403 naming the decoded pod), not an unknown subresource (404).
    with Sandbox(auth=True) as sb:
        headers: dict[str, str | None] = {"Authorization": f"Bearer {Sandbox.READONLY_TOKEN}"}
        status, answer, _ = exchange(sb, request("GET", f"{PODS}/p%31/prox%79/usage", headers=headers))
        assert (status, answer["reason"]) == (403, "Forbidden")
        # responsewriters.Forbidden: NewForbidden names the resource alone (GroupResource), the
        # message (forbiddenMessage) the resource and subresource.
        assert answer["message"] == ('pods "p1" is forbidden: User "sandbox-viewer" cannot get resource '
                                     '"pods/proxy" in API group "" in the namespace "default"')  # fmt: skip
        assert answer["details"] == {"name": "p1", "kind": "pods"}


METHOD_NOT_ALLOWED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "the server does not allow this method on the requested resource",
                      "reason": "MethodNotAllowed", "details": {}, "code": 405}  # fmt: skip


@pytest.mark.parametrize("auth", [False, True], ids=["open", "auth"])
def test_an_unknown_method_reaches_the_handler_chain_and_gets_go_restfuls_405(
    auth: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    # Go's readRequest takes any token as the method (validMethod); kube-apiserver's chain then
    # authenticates it (a stranger's 401 under --auth) and go-restful routes it: a path with routes
    # but none for the method is a 405 (jsr311.go detectRoute), which APIServerHandler's
    # serviceErrorHandler writes as NewGenericServerResponse(405, ...): the generic message, empty
    # details, no Allow header. http.server answered its HTML 501.
    with Sandbox(auth=auth) as sb:
        sb.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
        admin: dict[str, str | None] = {"Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}"}
        if auth:
            status, answer, _ = exchange(sb, request("FOO", CONFIGMAPS))
            assert (status, answer["reason"]) == (401, "Unauthorized")
        for path in (CONFIGMAPS, f"{CONFIGMAPS}/c", f"{PODS}/p/proxy/usage"):
            status, answer, closed = exchange(sb, request("FOO", path, b"{}", headers=admin))
            assert (status, answer, closed) == (405, METHOD_NOT_ALLOWED, False), path
        assert [(r.method, r.status) for r in sb.requests][-3:] == [("FOO", 405)] * 3
        assert sb.get("configmaps", "default", "c") is not None
    assert_no_traceback(capfd)


def test_a_caller_without_a_token_may_only_get_the_health_checks() -> None:
    # The anonymous caller (system:anonymous, group system:unauthenticated) reaches the health checks
    # alone, and its one role there, system:public-info-viewer (bootstrappolicy/policy.go), grants a
    # get of them: WithAuthorization refuses any other method before the handler answers it.
    with Sandbox(auth=True) as sb:
        for method in ("POST", "DELETE", "FOO"):
            status, answer, closed = exchange(sb, request(method, "/healthz"))
            assert (status, answer["message"], closed) == (
                403, f'forbidden: User "system:anonymous" cannot {method.lower()} path "/healthz"', False)  # fmt: skip
        assert read_to_close(sb, request("GET", "/livez", headers={"Connection": "close"})).endswith(b"\r\n\r\nok")
        assert exchange(sb, request("POST", "/version"))[0] == 401


def test_a_path_byte_that_is_no_utf8_is_quoted_in_the_403_as_go_quotes_it() -> None:
    # forbiddenMessage (responsewriters/errors.go) quotes the decoded path, namespace and name with %q,
    # which writes a byte that is not UTF-8 as \xNN; the unquoted resource and the JSON details get
    # U+FFFD (encoding/json). The message was built from the path's text, every such byte U+FFFD.
    with Sandbox(auth=True) as sb:
        viewer: dict[str, str | None] = {"Authorization": f"Bearer {Sandbox.READONLY_TOKEN}"}
        status, answer, _ = exchange(sb, request("FOO", "/%FF%00/x", headers=viewer))
        assert (status, answer["message"]) == (403, 'forbidden: User "sandbox-viewer" cannot foo path "/\\xff\\x00/x"')
        status, answer, _ = exchange(sb, request("DELETE", "/apis/g%FF/v1/namespaces/n%FE/x/%FD", headers=viewer))
        assert (status, answer["message"], answer["details"]) == (
            403, 'x.g\ufffd "\\xfd" is forbidden: User "sandbox-viewer" cannot delete resource "x" in API group '
                 '"g\\xff" in the namespace "n\\xfe"', {"name": "\ufffd", "group": "g\ufffd", "kind": "x"})  # fmt: skip


def test_authorization_comes_before_routing_so_the_viewer_gets_403_where_a_route_would_answer_405_or_404(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # DefaultBuildHandlerChain (k8s.io/apiserver/pkg/server/config.go) runs WithAuthorization outside
    # the API handler, on the RequestInfo read from the method and path (requestinfo.go): a method
    # with no verb of its own is the empty verb on a resource path and its lower case elsewhere,
    # which the viewer's roles (view; system:discovery and system:public-info-viewer: get on /api,
    # /apis, /openapi, /version, the health checks) never grant. responsewriters.Forbidden words the
    # 403 and HTML-escapes forbiddenMessage (sanitizer). The sandbox answered go-restful's 405 first.
    with Sandbox(auth=True) as sb:
        sb.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
        viewer: dict[str, str | None] = {"Authorization": f"Bearer {Sandbox.READONLY_TOKEN}"}
        admin: dict[str, str | None] = {"Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}"}
        status, answer, closed = exchange(sb, request("FOO", f"{CONFIGMAPS}/c", b"{}", headers=viewer))
        assert (status, closed) == (403, False)
        assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": 'configmaps "c" is forbidden: User "sandbox-viewer" cannot  resource '
                                     '"configmaps" in API group "" in the namespace "default"',
                          "reason": "Forbidden", "details": {"name": "c", "kind": "configmaps"},
                          "code": 403}  # fmt: skip
        status, answer, _ = exchange(sb, request("FOO", "/apis/apps/v1/deployments", headers=viewer))
        assert (status, answer["message"], answer["details"]) == (
            403, 'deployments.apps is forbidden: User "sandbox-viewer" cannot  resource "deployments" in API group '
                 '"apps" at the cluster scope', {"group": "apps", "kind": "deployments"})  # fmt: skip
        for method, path in (("POST", "/version"), ("PUT", "/api/v1"), ("POST", "/apis"), ("DELETE", "/healthz"),
                             ("FOO", "/apis/apps"), ("GET", "/"), ("GET", "/nope")):
            status, answer, _ = exchange(sb, request(method, path, headers=viewer))
            assert (status, answer["message"], answer["details"]) == (
                403, f'forbidden: User "sandbox-viewer" cannot {method.lower()} path "{path}"', {}), (method, path)
        status, answer, _ = exchange(sb, request("GET", "/x%3Ca%26b%3E", headers=viewer))
        assert answer["message"] == 'forbidden: User "sandbox-viewer" cannot get path "/x&lt;a&amp;b&gt;"'
        reply = read_to_close(sb, request("FOO", CONFIGMAPS, headers={**viewer, "Connection": "close"}))
        assert reply.startswith(b"HTTP/1.1 403 ") and b"\r\nX-Content-Type-Options: nosniff\r\n" in reply, reply
        for path in ("/version", "/api/v1", "/apis", "/apis/apps/v1", "/openapi/v2", CONFIGMAPS, f"{CONFIGMAPS}/c",
                     f"{CONFIGMAPS}?watch=1&timeoutSeconds=1"):
            assert exchange(sb, request("GET", path, headers=viewer))[0] == 200, path
        reply = read_to_close(sb, request("GET", "/healthz", headers={**viewer, "Connection": "close"}))
        assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b"\r\n\r\nok"), reply
        assert exchange(sb, request("GET", f"{CONFIGMAPS}/none", headers=viewer))[0] == 404
        # Those it allows still meet the router: the admin's FOO is go-restful's 405, its GET / the
        # root document, its /nope a 404.
        assert exchange(sb, request("FOO", f"{CONFIGMAPS}/c", b"{}", headers=admin))[:2] == (405, METHOD_NOT_ALLOWED)
        assert exchange(sb, request("GET", "/", headers=admin))[0] == 200
        assert exchange(sb, request("GET", "/nope", headers=admin))[0] == 404
        assert [r.user for r in sb.requests if r.status == 403][:2] == ["sandbox-viewer"] * 2
    assert_no_traceback(capfd)


def test_discovery_documents_and_version_are_get_only_but_apis_groups_and_health_answer_any_method(
    sandbox: Sandbox,
) -> None:
    # /version, /api, /api/v1 and /apis/<group>/<version> are each one go-restful ws.GET("/") route
    # (apiserver routes/version.go, endpoints/discovery/legacy.go and version.go), so another method
    # is go-restful's 405; /apis and /apis/<group> are the aggregator's handlers (kube-aggregator
    # handler_apis.go) and /healthz, /livez, /readyz plain mux handlers (healthz.go
    # handleRootHealth): none of them checks the method.
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/version", "/api", "/api/v1", "/apis/apps/v1", "/apis/apps/v1/"):
            status, answer, closed = exchange(sandbox, request(method, path, b"{}"))
            assert (status, answer, closed) == (405, METHOD_NOT_ALLOWED, False), (method, path)
        for path in ("/apis", "/apis/apps"):
            status, answer, _ = exchange(sandbox, request(method, path, b"{}"))
            assert (status, answer["kind"]) == (200, "APIGroupList" if path == "/apis" else "APIGroup"), path
    for path in ("/version", "/api", "/api/v1", "/apis/apps/v1"):
        assert exchange(sandbox, request("GET", path))[0] == 200, path
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(request("POST", "/healthz", b"{}", headers={"Connection": "close"}))
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
    assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b"\r\n\r\nok"), reply


def test_replies_carry_a_date_but_no_server_header(sandbox: Sandbox) -> None:
    # Go's net/http writes Date on every reply (chunkWriter.writeHeader, src/net/http/server.go) and
    # no Server header; http.server's send_response adds "Server: BaseHTTP/... Python/...".
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(request("GET", "/version") + request("OPTIONS", "*") + request("GET", f"{CONFIGMAPS}/none"))
        sock.shutdown(socket.SHUT_WR)
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
    assert re.findall(rb"HTTP/1\.1 ([0-9]{3}) ", reply) == [b"200", b"200", b"404"], reply
    assert reply.lower().count(b"\r\ndate: ") == 3, reply
    assert b"server:" not in reply.lower() and b"basehttp" not in reply.lower(), reply


GO_HEADER_LIMIT = (1 << 20) + 4096
"""kube-apiserver's MaxHeaderBytes (1 << 20, apiserver secure_serving.go) plus Go's 4096 bytes of slop."""
GO_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
                b"Connection: close\r\n\r\n431 Request Header Fields Too Large")  # fmt: skip
"""conn.serve's errTooLarge reply (src/net/http/server.go), then a close."""


def reply_past_limit(sb: Sandbox, raw: bytes) -> bytes:
    """Send a head past the limit; everything the server writes until it closes (it may close before it read all)."""
    with socket.create_connection(("127.0.0.1", sb.port), timeout=10) as sock:
        with contextlib.suppress(OSError):  # the server may answer and close before it read everything
            sock.sendall(raw)
        return b"".join(iter(lambda: sock.recv(65536), b""))


def test_a_request_line_past_gos_header_limit_gets_its_plain_431_and_a_longer_one_than_64_kib_is_served(
    sandbox: Sandbox, capfd: pytest.CaptureFixture[str]
) -> None:
    # kube-apiserver's http.Server has MaxHeaderBytes 1 << 20 (apiserver secure_serving.go), and Go reads
    # that plus 4096 bytes (initialReadLimitSize) before conn.serve writes its errTooLarge reply and
    # closes (src/net/http/server.go); http.server answered past 64 KiB with its HTML 414.
    query = "x=" + "a" * (200 * 1024)
    status, answer, closed = exchange(sandbox, request("GET", f"/version?{query}"))
    assert (status, answer["gitVersion"] != "", closed) == (200, True, False)
    assert reply_past_limit(sandbox, request("GET", "/version?x=" + "a" * ((1 << 20) + 8192))) == GO_TOO_LARGE
    assert [r.status for r in sandbox.requests] == [200], "Go answers before any handler, and logs nothing"
    assert exchange(sandbox, request("GET", "/version"))[0] == 200
    assert_no_traceback(capfd)




def head_of_size(size: int, *, line: int) -> bytes:
    """A GET /version whose head (request line, header lines, blank line) is ``size`` bytes, in lines of ``line``."""
    head = b"GET /version HTTP/1.1\r\nHost: sandbox\r\n"
    index = 0
    while size - len(head) - 2 > line:
        head += b"X-Pad-%06d: %s\r\n" % (index, b"a" * (line - 16))
        index += 1
    last = size - len(head) - 2 - len(b"X-Last: \r\n")
    assert last >= 0
    head += b"X-Last: " + b"b" * last + b"\r\n\r\n"
    assert len(head) == size
    return head


@pytest.mark.parametrize("line", [1024, 200 * 1024], ids=["many-headers", "long-lines"])
def test_header_lines_count_against_gos_one_limit_for_the_whole_head(
    sandbox: Sandbox, line: int, capfd: pytest.CaptureFixture[str]
) -> None:
    # Go's server reads the request line and the header lines under one read limit, MaxHeaderBytes
    # plus 4096 (src/net/http/server.go connReader, initialReadLimitSize), and textproto's
    # ReadMIMEHeader bounds neither a line's length nor the lines' number (readMIMEHeader(r,
    # math.MaxInt64, math.MaxInt64), src/net/textproto/reader.go); a head that does not end within
    # the limit gets conn.serve's plain 431 and a close. http.server answered a 101st header or a
    # header line over 64 KiB with its HTML 431, and took any head up to those bounds.
    status, answer, closed = exchange(sandbox, head_of_size(GO_HEADER_LIMIT, line=line))
    assert (status, answer["gitVersion"] != "", closed) == (200, True, False)
    assert reply_past_limit(sandbox, head_of_size(GO_HEADER_LIMIT + 1, line=line)) == GO_TOO_LARGE
    assert [r.status for r in sandbox.requests] == [200], "Go answers before any handler, and logs nothing"
    assert exchange(sandbox, request("GET", "/version"))[0] == 200
    assert_no_traceback(capfd)


def test_headers_read_past_http_servers_bounds_still_rule_the_connection(sandbox: Sandbox) -> None:
    # The headers are parsed as http.server parsed them: Connection: close still closes, Expect:
    # 100-continue is still answered before the body, and a header past the 100th is still seen.
    pad = "".join(f"X-Pad-{index}: a\r\n" for index in range(150))
    raw = (f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: sandbox\r\n{pad}Content-Type: application/json\r\n"
           f"Content-Length: {len(configmap('c1'))}\r\nConnection: close\r\n\r\n").encode() + configmap("c1")
    status, _, closed = exchange(sandbox, raw)
    assert (status, closed) == (201, True)
    body = configmap("c2")
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(request("POST", CONFIGMAPS, headers={"Expect": "100-continue", "Content-Length": str(len(body)),
                                                          "X-Pad": "a" * (100 * 1024)}))
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 100 "), "100 Continue before the body"
        assert reader.readline() == b"\r\n"
        sock.sendall(body)
        assert reader.readline().startswith(b"HTTP/1.1 201 ")
    assert sandbox.get("configmaps", "default", "c2") is not None


def test_a_reply_to_http_1_0_says_http_1_0_and_connection_only_where_go_s_does(sandbox: Sandbox) -> None:
    # src/net/http/server.go writeStatusLine: "HTTP/1.0" to a request that is not ProtoAtLeast(1, 1); and
    # chunkWriter.writeHeader: a closing reply says "Connection: close" on HTTP/1.1 only, one that keeps an
    # HTTP/1.0 connection (keep-alive in the first Connection value) says "Connection: keep-alive", and a
    # stream without a length is not chunked to HTTP/1.0: its bytes end at the close. The extender's rule
    # too (go_http.reply_connection). The sandbox said HTTP/1.1 and Connection: close, and chunked a watch.
    head, _, body = read_to_close(sandbox, b"GET /version HTTP/1.0\r\n\r\n").partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK\r\n") and b"\r\nConnection:" not in head, head
    assert json.loads(body)["gitVersion"], body
    raw = b"GET /version HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(raw + b"GET /version HTTP/1.0\r\n\r\n")
        replies = sock.makefile("rb").read()
    first, second = replies.split(b"HTTP/1.0 200 OK\r\n")[1:]
    assert b"\r\nConnection: keep-alive\r\n" in first and b"Connection:" not in second, replies
    assert exchange(sandbox, request("POST", CONFIGMAPS, configmap("w1")))[0] == 201
    watch = f"GET {CONFIGMAPS}?watch=1&timeoutSeconds=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".encode()
    head, _, body = read_to_close(sandbox, watch).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK\r\n") and b"Connection:" not in head, head
    assert b"Transfer-Encoding" not in head and b"Content-Length" not in head, head
    assert json.loads(body.splitlines()[0])["type"] == "ADDED", body


@pytest.mark.parametrize("head", [
    b" X-Lead: space\r\nHost: s\r\n", b"Host: s\r\nNo colon here\r\n", b"Host: s\r\nX-Bad[name]: v\r\n",
    b"Host: s\r\nX-Ctl: a\x01b\r\n", b"Host: s\r\nX-Nul: a\x00\r\n", b"Host: a\r\nhost: b\r\n",
    b"Host: s\r\n: empty\r\n",
], ids=["leading-space", "no-colon", "bad-name-byte", "control-byte", "nul", "two-hosts", "empty-name"])  # fmt: skip
def test_header_lines_go_cannot_read_get_its_plain_400(head: bytes) -> None:
    # textproto's readMIMEHeader (src/net/textproto/reader.go): a first line starting with a space, a
    # line without a colon, an empty name (canonicalMIMEHeaderKey's len(a) == 0; older Go skipped the
    # field), a name byte that is no tchar (nor a space), or a value with a control byte other than a tab
    # is a ProtocolError; request.go readRequest refuses a second Host. conn.serve
    # writes its plain 400 and closes, before any handler (no 401, nothing logged).
    with Sandbox(auth=True) as sb:
        assert read_to_close(sb, f"GET {CONFIGMAPS} HTTP/1.1\r\n".encode() + head + b"\r\n") == GO_BAD_REQUEST
        assert not sb.requests
        assert exchange(sb, request("GET", CONFIGMAPS))[0] == 401


@pytest.mark.parametrize(("line", "head", "why"), [
    ("GET /version HTTP/1.1", b"", b"missing required Host header"),
    ("GET /version HTTP/1.1", b"Host: a b\r\n", b"malformed Host header"),
    ("GET /version HTTP/1.1", b"Host: a\x80\r\n", b"malformed Host header"),
    ("GET /version HTTP/1.1", b"Host: a\r\n \r\n", b"malformed Host header"),
    ("GET /version HTTP/1.1", b"Host: s\r\nX-Name : v\r\n", b"invalid header name"),
    ("GET /version HTTP/1.1", b"Host : s\r\n", b"missing required Host header"),
], ids=["no-host", "host-space", "host-byte", "host-empty-continuation", "spaced-name", "spaced-host"])  # fmt: skip
def test_a_head_go_reads_but_refuses_gets_its_400_with_the_reason(line: str, head: bytes, why: bytes) -> None:
    # src/net/http/server.go readRequest, after the headers are read: an HTTP/1.1 request needs a Host
    # (CONNECT aside), ValidHostHeader refuses bytes outside validHostByte, and a name textproto kept
    # with a space (go.dev/issue/34540) fails ValidHeaderFieldName; each a badRequestError, which
    # (an empty continuation line leaves "a " in Host: textproto's readContinuedLineSlice joins with a space)
    # conn.serve writes as "400 Bad Request: <why>" in the status line and the body.
    with Sandbox() as sb:
        reply = read_to_close(sb, line.encode() + b"\r\n" + head + b"\r\n")
        assert reply == (b"HTTP/1.1 400 Bad Request: " + why + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         b"Connection: close\r\n\r\n400 Bad Request: " + why)  # fmt: skip
        assert not sb.requests


def test_header_forms_go_reads_are_served() -> None:
    # HTTP/1.0 needs no Host; a continuation line folds into the header before it; a tab and bytes past
    # ASCII are value bytes.
    with Sandbox() as sb:
        reply = read_to_close(sb, b"GET /version HTTP/1.0\r\n\r\n")
        assert reply.startswith(b"HTTP/1.0 200 "), reply
        raw = (b"GET /version HTTP/1.1\r\nHost: s\r\nX-Folded: a\r\n  b\r\nX-Obs: \tcaf\xe9\r\n"
               b"Connection: close\r\n\r\n")
        assert read_to_close(sb, raw).startswith(b"HTTP/1.1 200 ")
        assert [r.status for r in sb.requests] == [200, 200]


def test_a_whole_head_of_continuation_lines_is_served() -> None:
    # textproto folds each continuation into the field before it (readContinuedLineSlice), and Go reads
    # any number of them within its one limit: 260,000 here, each once joined into a growing field.
    head = b"GET /version HTTP/1.1\r\nHost: s\r\nX-Folded: a\r\n"
    head += b" b\r\n" * ((GO_HEADER_LIMIT - len(head) - 2) // 4) + b"\r\n"
    assert len(head) <= GO_HEADER_LIMIT
    with Sandbox() as sb:
        status, answer, closed = exchange(sb, head)
        assert (status, answer["gitVersion"] != "", closed) == (200, True, False)


def test_a_folded_header_is_read_as_go_folds_it() -> None:
    # readContinuedLineSlice (src/net/textproto/reader.go) joins a continuation line to its field with
    # one space: the token and the close below are Go's "Bearer <token>" and "keep-alive, close". The
    # email parser kept the line break in the value: a 401, and the connection left open.
    with Sandbox(auth=True) as sb:
        raw = (f"GET {CONFIGMAPS} HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer\r\n\t{Sandbox.ADMIN_TOKEN}\r\n"
               "Connection: keep-alive,\r\n close\r\n\r\n").encode()  # fmt: skip
        status, answer, closed = exchange(sb, raw)
        assert (status, answer["kind"], closed) == (200, "ConfigMapList", True)
        assert read_to_close(sb, b"GET /version HTTP/1.1\r\nHost: s\r\nX-Cr: a\r\r\n\r\n") == GO_BAD_REQUEST


def test_an_expectation_other_than_100_continue_gets_gos_417_and_a_close() -> None:
    # src/net/http/server.go conn.serve: a request whose Expect holds no 100-continue token gets
    # sendExpectationFailed (417, Connection: close, no body) before any handler: no 401, no log.
    with Sandbox(auth=True) as sb:
        reply = read_to_close(sb, request("POST", CONFIGMAPS, configmap("c"), {"Expect": "something-else"}))
        head, _, body = reply.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0] == b"HTTP/1.1 417 Expectation Failed" and body == b"", reply
        # Its handler header (Connection) first, then chunkWriter.writeHeader's Date and Content-Length, which
        # a reply to HEAD does without (``!isHEAD || len(p) > 0``).
        assert [line.split(b":")[0] for line in lines[1:]] == [b"Connection", b"Date", b"Content-Length"], reply
        assert b"Connection: close" in lines and b"Content-Length: 0" in lines
        head = read_to_close(sb, b"HEAD /version HTTP/1.1\r\nHost: s\r\nExpect: something-else\r\n\r\n")
        assert [line.split(b":")[0] for line in head.split(b"\r\n")[1:-2]] == [b"Connection", b"Date"], head
        # Header.get("Expect"): the first value decides, a 100-continue in a second field or not.
        raw = request("POST", CONFIGMAPS, configmap("c"), {"Expect": "x-other"}).replace(
            b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n", 1)
        assert read_to_close(sb, raw).startswith(b"HTTP/1.1 417 Expectation Failed\r\n")
        assert not sb.requests


def test_expect_and_connection_are_read_as_go_reads_their_tokens(sandbox: Sandbox) -> None:
    # httpguts.HeaderValuesContainsToken: comma-separated tokens in any case. A 100-continue token
    # is honoured only with a body (ContentLength != 0, conn.serve); Connection's close token closes an
    # HTTP/1.1 connection wherever it stands in the list (shouldClose). http.server compared each
    # whole value, so "keep-alive, close" kept the connection and "100-Continue, x" got a 417 here.
    body = configmap("c1")
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(request("POST", CONFIGMAPS, headers={"Expect": "100-Continue, x-other",
                                                          "Content-Length": str(len(body))}))
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 100 ") and reader.readline() == b"\r\n"
        sock.sendall(body)
        assert reader.readline().startswith(b"HTTP/1.1 201 ")
    # expectsContinue is server.go's hasToken on the first value: a space bounds the token too.
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        sock.sendall(request("POST", CONFIGMAPS, headers={"Expect": "x 100-continue",
                                                          "Content-Length": str(len(body))}))
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 100 ") and reader.readline() == b"\r\n"
    reply = read_to_close(sandbox, request("GET", "/version", headers={"Expect": "100-continue",
                                                                      "Connection": "keep-alive, Close"}))
    assert reply.startswith(b"HTTP/1.1 200 ") and b"100 Continue" not in reply, reply  # no body: no 100; closed
    raw = b"GET /version HTTP/1.0\r\nConnection: foo, Keep-Alive\r\n\r\n"
    status, _, closed = exchange(sandbox, raw + raw)
    assert (status, closed) == (200, False)
    # src/net/http/request.go wantsClose and wantsHttp10KeepAlive read the first value with server.go's
    # hasToken, where a space bounds a token too: "foo close" closes an HTTP/1.1 connection, and an
    # HTTP/1.0 one whose first value has keep-alive stays, a close token beside it or not.
    raw = request("GET", "/version", headers={"Connection": "foo close"})
    assert exchange(sandbox, raw + raw)[::2] == (200, True)
    raw = b"GET /version HTTP/1.0\r\nConnection: x keep-alive, close\r\n\r\n"
    assert exchange(sandbox, raw + raw)[::2] == (200, False)


@pytest.mark.parametrize("framing", [{"Content-Length": "00"}, {"Content-Length": "x"},
                                     {"Content-Length": None, "Transfer-Encoding": "gzip"}],
                         ids=["zero", "malformed", "other-encoding"])  # fmt: skip
def test_100_continue_is_not_sent_where_go_reads_no_body(sandbox: Sandbox, framing: dict[str, str | None]) -> None:
    # conn.serve sends 100 Continue only for req.ContentLength != 0, and readTransfer
    # (src/net/http/transfer.go) refuses a bad Content-Length or another Transfer-Encoding before it.
    raw = request("POST", CONFIGMAPS, headers={"Expect": "100-continue", "Connection": "close", **framing})
    assert not read_to_close(sandbox, raw).startswith(b"HTTP/1.1 100 ")


def test_100_continue_goes_out_only_when_the_handler_reads_the_body() -> None:
    # Go's expectContinueReader sends 100 Continue on the handler's first read of the body (server.go), and
    # kube-apiserver authenticates, authorizes and routes before its handler reads one: a refused request
    # gets its answer without 100 Continue, and "Connection: close" (chunkWriter.writeHeader: an unread
    # expect-continue body sets closeAfterReply). The sandbox sent 100 Continue to everyone, then read.
    body = configmap("c1")
    with Sandbox(auth=True) as sb:
        viewer = {"Authorization": f"Bearer {Sandbox.READONLY_TOKEN}"}
        admin = {"Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}"}
        for path, headers, status in [(CONFIGMAPS, {}, b"401"), (CONFIGMAPS, viewer, b"403"),
                                      ("/api/v1/nosuch", admin, b"404"), (f"{CONFIGMAPS}/c1", admin, b"405"),
                                      ("/version", admin, b"200")]:  # fmt: skip
            method = "GET" if path == "/version" else "POST"  # a read's handler never reads a body
            raw = request(method, path, headers={**headers, "Expect": "100-continue", "Content-Length": str(len(body))})
            reply = read_to_close(sb, raw)  # the body never sent: the server closes after its answer
            lines = reply.split(b"\r\n\r\n")[0].split(b"\r\n")
            assert lines[0].startswith(b"HTTP/1.1 " + status + b" ") and b"Connection: close" in lines, reply
            assert b" 100 " not in reply, reply
        assert sb.objects("configmaps") == []
        with socket.create_connection(("127.0.0.1", sb.port), timeout=10) as sock:
            sock.sendall(request("POST", CONFIGMAPS, headers={**admin, "Expect": "100-continue",
                                                              "Content-Length": str(len(body))}))
            reader = sock.makefile("rb")
            assert reader.readline() == b"HTTP/1.1 100 Continue\r\n" and reader.readline() == b"\r\n"
            sock.sendall(body)
            assert reader.readline().startswith(b"HTTP/1.1 201 ")
            while reader.readline() != b"\r\n":
                pass
        assert [c["metadata"]["name"] for c in sb.objects("configmaps")] == ["c1"]
        watch = f"{CONFIGMAPS}?watch=1&timeoutSeconds=1"  # a stream says it closes too, as Go's chunkWriter does
        reply = read_to_close(sb, request("GET", watch, headers={**admin, "Expect": "100-continue",
                                                                 "Content-Length": "2"}))
        head = reply.split(b"\r\n\r\n")[0].split(b"\r\n")
        assert head[0] == b"HTTP/1.1 200 OK" and b"Connection: close" in head and b" 100 " not in reply, reply
        with socket.create_connection(("127.0.0.1", sb.port), timeout=10) as sock:  # the test hooks' API too
            sock.sendall(request("POST", "/_sandbox/faults", headers={**viewer, "Expect": "100-continue",
                                                                       "Content-Length": "2"}))
            reply = sock.makefile("rb").read()
            assert reply.startswith(b"HTTP/1.1 403 ") and b" 100 " not in reply, reply


def test_a_kept_alive_connection_goes_on_past_refusals_and_an_awaited_body_that_was_read() -> None:
    # Only an awaited body left unread closes the connection (closeAfterReply): a refusal of a request that
    # sent its body (kubectl's and our client's: neither awaits 100 Continue) and a write whose awaited body
    # the handler read both keep it for the next request, as Go's server does.
    admin = {"Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}"}
    with Sandbox(auth=True) as sb, socket.create_connection(("127.0.0.1", sb.port), timeout=10) as sock:
        reader = sock.makefile("rb")

        def answer() -> tuple[bytes, list[bytes]]:
            status = reader.readline()
            head = list(iter(reader.readline, b"\r\n"))
            length = next(int(h.split(b":")[1]) for h in head if h.lower().startswith(b"content-length:"))
            reader.read(length)
            return status, head

        sock.sendall(request("POST", CONFIGMAPS, configmap("c0")))  # no token: 401, its body read
        status, head = answer()
        assert status.startswith(b"HTTP/1.1 401 ") and b"Connection: close\r\n" not in head, (status, head)
        body = configmap("c1")
        sock.sendall(request("POST", CONFIGMAPS, headers={**admin, "Expect": "100-continue",
                                                          "Content-Length": str(len(body))}))
        assert reader.readline() == b"HTTP/1.1 100 Continue\r\n" and reader.readline() == b"\r\n"
        sock.sendall(body)
        status, head = answer()
        assert status.startswith(b"HTTP/1.1 201 ") and b"Connection: close\r\n" not in head, (status, head)
        sock.sendall(request("GET", f"{CONFIGMAPS}/c1", headers=admin))
        status, head = answer()
        assert status.startswith(b"HTTP/1.1 200 "), (status, head)


# --- decoding bombs and bad shapes ------------------------------------------------------------
def test_yaml_aliases_are_refused(sandbox: Sandbox) -> None:
    laughs = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    laughs += [f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
    bomb = ("metadata: {name: bomb}\ndata:\n" + "\n".join("  " + line for line in laughs) + "\n").encode()
    assert len(bomb) < 1024
    started = time.monotonic()
    status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, bomb, {"Content-Type": "application/yaml"}))
    assert status == 400 and "aliases are not allowed" in answer["message"] and "\n" not in answer["message"]
    assert time.monotonic() - started < 5
    single = b"metadata: {name: alias}\ndata: {a: &v one, b: *v}\n"
    status, _, _ = exchange(sandbox, request("POST", CONFIGMAPS, single, {"Content-Type": "application/yaml"}))
    assert status == 400 and sandbox.objects("configmaps") == []


def test_yaml_is_decoded_as_its_json_view(sandbox: Sandbox) -> None:
    body = b"metadata: {name: typed, labels: {1: '2'}}\ndata: {when: 2024-01-01}\n"
    status, created, _ = exchange(sandbox, request("POST", CONFIGMAPS, body, {"Content-Type": "application/yaml"}))
    assert status == 201 and created["metadata"]["labels"] == {"1": "2"} and created["data"] == {"when": "2024-01-01"}


@pytest.mark.parametrize("value", [b"9" * 5000, b"2024-02-30", b".inf", b"1.0e+400"],
                         ids=["5000-digit-int", "no-such-date", "inf", "overflowing-float"])
def test_a_yaml_scalar_without_a_json_value_is_a_one_line_400(sandbox: Sandbox, value: bytes) -> None:
    # PyYAML raises ValueError (not a YAMLError) for the first two: once a 500 with Python's advice
    # in it. An infinite float has no JSON form (sigs.k8s.io/yaml's json.Marshal refuses it): it was
    # stored as null.
    body = b"metadata: {name: big}\ndata: {n: " + value + b"}\n"
    status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, body, {"Content-Type": "application/yaml"}))
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert "the YAML document has a value" in answer["message"] and "\n" not in answer["message"], answer
    assert "set_int_max_str_digits" not in answer["message"]
    if value == b"9" * 5000:
        assert answer["message"].endswith(
            ": the YAML document has a value that cannot be decoded: integer too large (5,000 digits)")
    assert sandbox.objects("configmaps") == []


@pytest.mark.parametrize("query", ["limit=%C2%B2", "limit=" + "9" * 5000, "limit=9223372036854775808",
                                   "watch=true&resourceVersion=%C2%B2", "watch=true&resourceVersion=" + "9" * 5000,
                                   "watch=true&resourceVersion=-3", "watch=true&timeoutSeconds=nan",
                                   "watch=true&timeoutSeconds=1e400", "watch=true&timeoutSeconds=" + "9" * 5000],
                         ids=["limit-superscript", "limit-5000-digits", "limit-past-int64",
                              "watch-rv-superscript", "watch-rv-5000-digits", "watch-rv-negative",
                              "watch-timeout-nan", "watch-timeout-infinite", "watch-timeout-5000-digits"])
def test_a_list_or_watch_number_that_is_no_integer_is_a_one_line_400(sandbox: Sandbox, query: str) -> None:
    # str.isdigit accepts '²' (int() does not) and int() refuses 5,000 digits: both were a 500. (A
    # resourceVersion's error quotes it twice, whole, as Go's strconv.NumError and field.Invalid do; limit's
    # and timeoutSeconds' are strconv.ParseInt's own, as the ListOptions conversion returns it.)
    status, answer, _ = exchange(sandbox, request("GET", f"{CONFIGMAPS}?{query}"))
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    message = answer["message"]
    assert "Invalid value" in message or message.startswith("strconv.ParseInt: parsing "), answer
    assert "\n" not in message and len(message) < 200 + 2 * len(query), answer
    assert not [r for r in sandbox.requests if r.status >= 500]


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_deeply_nested_bodies_get_400(sandbox: Sandbox, content_type: str) -> None:
    for depth in (150, 5000):
        body = b'{"metadata": {"name": "deep"}, "data": ' + b"[" * depth + b"]" * depth + b"}"
        status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, body, {"Content-Type": content_type}))
        assert status == 400 and "deeper than" in answer["message"], answer


def test_non_utf8_bodies_get_400(sandbox: Sandbox) -> None:
    """Invalid UTF-8 outside a JSON string is a syntax error for Go's decoder too; in YAML anywhere."""
    sandbox.load([{"kind": "Pod", "metadata": {"name": "p1", "namespace": "default"}, **POD}])
    bad = b'{"metadata": {"name": \xff\xfe}}'
    status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, b'metadata: {name: "\xff"}',
                                                  {"Content-Type": "application/yaml"}))
    assert status == 400 and answer["reason"] == "BadRequest", answer
    for method, path, content_type in [
        ("POST", CONFIGMAPS, "application/json"),
        ("POST", CONFIGMAPS, "application/yaml"),
        ("PUT", CONFIGMAPS + "/x", "application/json"),
        ("PATCH", "/api/v1/namespaces/default/pods/p1", "application/merge-patch+json"),
        ("DELETE", "/api/v1/namespaces/default/pods/p1", "application/json"),
        ("POST", "/api/v1/namespaces/default/pods/p1/binding", "application/json"),
    ]:
        status, answer, _ = exchange(sandbox, request(method, path, bad, {"Content-Type": content_type}))
        assert status == 400 and answer["kind"] == "Status" and answer["reason"] == "BadRequest", (method, answer)
    assert sandbox.get("pods", "default", "p1") is not None


def test_invalid_utf8_in_a_json_string_is_stored_as_u_fffd_a_byte(sandbox: Sandbox) -> None:
    # Go's encoding/json unquoteBytes (sigs.k8s.io/json keeps it): each byte utf8.DecodeRune cannot
    # read is one U+FFFD ("\xe2\x82" is two, an encoded surrogate three), in keys too; valid text stays.
    body = b'{"metadata": {"name": "bytes"}, "data": {"k\xff": "a\xffb\xe2\x82A\xed\xa0\x80\xc3\xa9\\ud800"}}'
    status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, body))
    expected = {"k\ufffd": "a\ufffdb\ufffd\ufffdA\ufffd\ufffd\ufffd\u00e9\ufffd"}
    assert status == 201 and answer["data"] == expected, answer
    status, answer, _ = exchange(sandbox, request("GET", CONFIGMAPS + "/bytes"))
    assert status == 200 and answer["data"] == expected


def test_a_lone_surrogate_escape_is_stored_as_u_fffd(sandbox: Sandbox) -> None:
    # Go's encoding/json unquoteBytes (sigs.k8s.io/json keeps it): a \uXXXX surrogate without its
    # other half reads as U+FFFD; a pair stays one rune, and the escape after a lone half is its own.
    body = rb'{"metadata": {"name": "lone"}, "data": {"k": "a\ud800b\udc00\ud800\u0041\ud83d\ude00\\ud800"}}'
    status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, body))
    expected = "a\ufffdb\ufffd\ufffdA\U0001f600\\ud800"
    assert status == 201 and answer["data"] == {"k": expected}, answer
    status, answer, _ = exchange(sandbox, request("GET", CONFIGMAPS + "/lone"))
    assert status == 200 and answer["data"] == {"k": expected}
    patch = rb'{"data": {"k2": "\udbff"}}'
    status, answer, _ = exchange(sandbox, request("PATCH", CONFIGMAPS + "/lone", patch,
                                                  {"Content-Type": "application/merge-patch+json"}))
    assert status == 200 and answer["data"] == {"k": expected, "k2": "\ufffd"}, answer


@pytest.mark.parametrize(
    ("content_type", "patch", "code"),
    [
        ("application/merge-patch+json", {"metadata": None}, 422),
        ("application/strategic-merge-patch+json", {"metadata": None}, 422),
        ("application/strategic-merge-patch+json", {"$patch": "replace", "spec": {}}, 422),
        ("application/json-patch+json", [{"op": "remove", "path": "/metadata"}], 422),
        ("application/json-patch+json", [{"op": "replace", "path": "/metadata", "value": None}], 422),
        ("application/json-patch+json", [{"op": "replace", "path": "", "value": [1]}], 400),
        ("application/json-patch+json", [{"op": "replace", "path": "/metadata", "value": "x"}], 400),
        ("application/merge-patch+json", {"metadata": []}, 400),
    ],
    ids=["merge-null", "smp-null", "smp-replace", "json-remove", "json-null", "json-not-obj", "json-str", "merge-list"],
)
def test_patches_that_break_metadata_get_400_or_422(
    sandbox: Sandbox, content_type: str, patch: object, code: int
) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default", "labels": {"a": "b"}}}])
    raw = request("PATCH", CONFIGMAPS + "/cm", json.dumps(patch).encode(), {"Content-Type": content_type})
    status, answer, _ = exchange(sandbox, raw)
    assert status == code and answer["kind"] == "Status" and answer["code"] == code, answer
    kept = sandbox.get("configmaps", "default", "cm")
    assert kept is not None and kept["metadata"]["labels"] == {"a": "b"}
    assert exchange(sandbox, request("GET", CONFIGMAPS))[0] == 200


def test_put_without_metadata_takes_the_name_from_the_url(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}])
    status, updated, _ = exchange(sandbox, request("PUT", CONFIGMAPS + "/cm", b'{"data": {"a": "1"}}'))
    assert status == 200 and updated["metadata"]["name"] == "cm" and updated["data"] == {"a": "1"}


@pytest.mark.parametrize(
    "binding",
    [
        {"metadata": {"name": "p1"}, "target": "node-a"},
        {"metadata": {"name": "p1"}, "target": ["node-a"]},
        {"metadata": {"name": "p1"}, "target": {"name": 7}},
        {"metadata": "p1", "target": {"name": "node-a"}},
        {"metadata": {"name": "p1", "annotations": ["a"]}, "target": {"name": "node-a"}},
        {"metadata": {"name": "p1", "uid": 5}, "target": {"name": "node-a"}},
        ["not", "an", "object"],
    ],
    ids=["target-string", "target-list", "target-name-int", "metadata-string", "annotations-list", "uid-int", "list"],
)
def test_bindings_with_mistyped_fields_get_400(sandbox: Sandbox, binding: object) -> None:
    sandbox.load([{"kind": "Pod", "metadata": {"name": "p1", "namespace": "default"}, **POD}])
    for path in ("/api/v1/namespaces/default/pods/p1/binding", "/api/v1/namespaces/default/bindings"):
        status, answer, _ = exchange(sandbox, request("POST", path, json.dumps(binding).encode()))
        assert status == 400 and answer["reason"] == "BadRequest", answer
    pod = sandbox.get("pods", "default", "p1")
    assert pod is not None and not pod["spec"].get("nodeName")


@pytest.mark.parametrize(
    "options",
    [{"preconditions": "x"}, {"preconditions": {"uid": 5}}, {"dryRun": "All"}, {"dryRun": [1]}],
    ids=["preconditions-string", "uid-int", "dryrun-string", "dryrun-int"],
)
def test_delete_options_with_mistyped_fields_get_400(sandbox: Sandbox, options: object) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}])
    status, answer, _ = exchange(sandbox, request("DELETE", CONFIGMAPS + "/cm", json.dumps(options).encode()))
    assert status == 400 and answer["reason"] == "BadRequest", answer
    assert sandbox.get("configmaps", "default", "cm") is not None


# --- timeouts ---------------------------------------------------------------------------------
def wait_closed(sock: socket.socket, within: float) -> float:
    """Seconds until the server closes ``sock`` (reading and dropping anything it sends)."""
    started = time.monotonic()
    sock.settimeout(within)
    while sock.recv(4096):
        pass
    return time.monotonic() - started


def test_idle_connection_is_closed_after_the_idle_timeout(small: Sandbox) -> None:
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as sock:
        assert wait_closed(sock, 10) < 8, "an idle connection without a request is closed"
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as sock:
        sock.sendall(request("GET", CONFIGMAPS))
        assert sock.recv(12) == b"HTTP/1.1 200"
        assert wait_closed(sock, 10) < 8, "a keep-alive connection idle after its request is closed"


def test_trickling_client_is_cut_off_at_the_read_timeout(small: Sandbox) -> None:
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as sock:
        sock.sendall(b"POST " + CONFIGMAPS.encode() + b" HTTP/1.1\r\nHost: s\r\nContent-Length: 100\r\n\r\n")
        started = time.monotonic()
        with pytest.raises(OSError):
            while time.monotonic() - started < 8:  # a byte every 0.2 s never lets the idle timeout fire
                sock.sendall(b"x")
                time.sleep(0.2)  # the trickle's pace (the thing under test)
                sock.settimeout(0.01)
                try:
                    if sock.recv(1) == b"":
                        raise ConnectionResetError("closed by the server")
                except TimeoutError:
                    pass
        assert time.monotonic() - started < 8


def test_keep_alive_within_the_idle_timeout_is_kept(sandbox: Sandbox) -> None:
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as sock:
        reader = sock.makefile("rb")
        for _ in range(3):
            sock.sendall(request("GET", "/version"))
            assert reader.readline().startswith(b"HTTP/1.1 200")
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            time.sleep(0.3)  # idle between requests, within the idle timeout (the thing under test)


@pytest.mark.parametrize(
    ("kind", "path", "spec"),
    [
        ("Node", "/api/v1/nodes", {"taints": "x"}),
        ("Node", "/api/v1/nodes", {"taints": [1]}),
        ("Node", "/api/v1/nodes", {"taints": [{"key": "k", "effect": 7}]}),
        ("Pod", "/api/v1/namespaces/default/pods", {**POD["spec"], "tolerations": ["x"]}),
        ("Pod", "/api/v1/namespaces/default/pods", {**POD["spec"], "nodeSelector": {"gpu": True}}),
        ("Pod", "/api/v1/namespaces/default/pods", {**POD["spec"], "affinity": "x"}),
        ("Pod", "/api/v1/namespaces/default/pods", {**POD["spec"], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [1]}]}]}}}}),
    ],
    ids=["taints-string", "taint-number", "taint-effect-number", "toleration-string", "node-selector-bool",
         "affinity-string", "affinity-value-number"],
)
def test_mistyped_scheduling_fields_get_400_as_go_decodes_them(
    sandbox: Sandbox, kind: str, path: str, spec: dict[str, Any]
) -> None:
    """kube-apiserver decodes into typed structs: a Node or Pod the scheduler could not read is never stored."""
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "odd"}, "spec": spec}
    status, answer, _ = exchange(sandbox, request("POST", path, json.dumps(body).encode()))
    assert (status, answer["reason"]) == (400, "BadRequest") and "cannot unmarshal" in answer["message"], answer
    assert sandbox.get(path.rsplit("/", 1)[1], "default" if kind == "Pod" else None, "odd") is None


def test_a_create_with_a_resource_version_is_a_400_and_stores_nothing(sandbox: Sandbox) -> None:
    # The etcd3 store's ErrResourceVersionSetOnCreate, in its words, as a 400 (kube-apiserver's is an
    # unconverted 500; the sandbox answers no bad input with a 500).
    body = json.dumps({"metadata": {"name": "rv-set", "resourceVersion": "5"}}).encode()
    status, answer, _ = exchange(sandbox, request("POST", CONFIGMAPS, body, {"Content-Type": "application/json"}))
    assert (status, answer["reason"], answer["message"]) == (
        400, "BadRequest", "resourceVersion should not be set on objects to be created"), answer
    assert exchange(sandbox, request("GET", f"{CONFIGMAPS}/rv-set"))[0] == 404


@pytest.mark.parametrize("method", ["do_GET", "__class__", "__getattr__", "parse_request", "get", "head", "M" * 60000])
def test_a_method_named_like_a_handler_attribute_is_only_a_method(
    sandbox: Sandbox, method: str, capfd: pytest.CaptureFixture[str]
) -> None:
    # http.server looks up "do_" + method on the handler: whatever the token names, it is served as a
    # method no route has (go-restful matches methods case-sensitively: "get" is no GET), never as
    # another handler attribute; a 60,000-byte token fits http.server's 64 KiB line as it fits Go's.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
    status, answer, closed = exchange(sandbox, request(method, f"{CONFIGMAPS}/c"))
    assert (status, answer, closed) == (405, METHOD_NOT_ALLOWED, False)
    assert exchange(sandbox, request("GET", f"{CONFIGMAPS}/c"))[0] == 200
    assert_no_traceback(capfd)
