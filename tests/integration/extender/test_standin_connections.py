"""The kube-scheduler stand-in's connections behave as Go's net/http Transport, over real loopback sockets.

kube-scheduler's extender client is a Go ``http.Client`` (src/net/http/transport.go): a POST whose
bytes were written is never re-sent (``shouldRetryRequest`` re-sends a non-idempotent request only
on ``nothingWrittenError``), and a kept connection the server closed while idle is noticed by
``persistConn.readLoop`` before it is reused, so the next call dials anew instead of failing.
A recording extender stand-in stands on the other end: it answers, drops a POST it has read, or
closes a connection once it has answered.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from certificates import self_signed_pair
from waiting import wait_for

from kubectl_gpushare.extender.schedsim import ExtenderCallError, ExtenderConfig, HTTPExtender
from tests.loopback_kubeconfig import scripted

pytestmark = pytest.mark.integration

NODE = {"metadata": {"name": "gpu-1"}}
POD = {"metadata": {"name": "job", "namespace": "default", "uid": "u-1"}}


class RecordingExtender(ThreadingHTTPServer):
    """Answers filter with gpu-1, records each request's connection (client port) and each close.

    ``mode``: ``answer`` keeps the connection; ``drop`` reads the POST and closes without answering;
    ``close`` answers (without ``Connection: close``) and then closes with a FIN; ``reset`` answers
    and then closes with an RST (SO_LINGER 0); ``deep`` answers a body nested 100,000 deep; ``refuse``
    answers 503.
    """

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tls = tls
        self.mode = "answer"
        self.requests: list[int] = []
        self.posted: list[tuple[str, bytes]] = []
        """Each POST's path as written on the request line, and its body."""
        self.closed: list[int] = []
        self._ports: dict[Any, int] = {}
        self.lock = threading.Lock()

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True)
        self._ports[sock] = address[1]
        return sock, address

    def shutdown_request(self, request: Any) -> None:
        port = self._ports.pop(request)
        if self.mode == "reset":
            request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_request(request)
        else:
            super().shutdown_request(request)
        with self.lock:
            self.closed.append(port)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the extender serves
    server: RecordingExtender

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.requests.append(self.client_address[1])
            self.server.posted.append((self.path, body))
        if self.server.mode == "drop":
            self.close_connection = True
            return
        body = b'{"NodeNames": ["gpu-1"], "FailedNodes": {}, "Error": ""}'
        if self.server.mode == "refuse":
            self.send_error(503)
            return
        if self.server.mode == "deep":
            body = b"[" * 100_000 + b"]" * 100_000
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = self.server.mode in ("close", "reset")  # without telling the client

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: the test reads the records instead."""


@contextmanager
def _serve(tls: ssl.SSLContext | None = None) -> Iterator[RecordingExtender]:
    server = RecordingExtender(tls)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def server() -> Iterator[RecordingExtender]:
    with _serve() as recording:
        yield recording


def _client(server: RecordingExtender, **kw: Any) -> HTTPExtender:
    scheme = "https" if server.tls else "http"
    return HTTPExtender(ExtenderConfig(url_prefix=f"{scheme}://127.0.0.1:{server.server_port}/x", **kw))


def _passes(client: HTTPExtender) -> bool:
    return [n["metadata"]["name"] for n in client.filter(POD, [NODE]).nodes] == ["gpu-1"]


@pytest.mark.parametrize("kept", [False, True], ids=["new-connection", "kept-connection"])
def test_post_read_and_dropped_is_sent_once_and_fails(server: RecordingExtender, kept: bool) -> None:
    client = _client(server)
    if kept:
        assert _passes(client)
    server.mode = "drop"
    with pytest.raises(ExtenderCallError, match=r'^Post "http://127\.0\.0\.1:\d+/x/bind": '):
        client.bind(POD, "gpu-1")
    assert len(server.requests) == (2 if kept else 1)  # the bind reached the extender once: never re-sent
    server.mode = "answer"
    assert _passes(client)  # the broken connection was dropped; the next call dials anew


@pytest.mark.parametrize("close", ["close", "reset"])
def test_connection_closed_while_idle_is_replaced_not_failed(server: RecordingExtender, close: str) -> None:
    client = _client(server)
    server.mode = close
    assert _passes(client)
    first = server.requests[0]
    wait_for(lambda: first in server.closed, what="the server to close the idle connection")
    server.mode = "answer"
    assert _passes(client)
    assert len(server.requests) == 2 and server.requests[1] != first  # one request each, on a new connection


def test_kept_connection_is_reused(server: RecordingExtender) -> None:
    client = _client(server)
    for _ in range(5):
        assert _passes(client)
    assert len(set(server.requests)) == 1 and server.closed == []


def test_over_tls_a_live_connection_is_kept_and_a_closed_one_replaced(tmp_path: Path) -> None:
    cert, key = self_signed_pair(tmp_path)
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    serving.minimum_version = ssl.TLSVersion.TLSv1_3  # session tickets arrive after the handshake
    trusting = ssl.create_default_context(cafile=str(cert))
    with _serve(serving) as server:
        client = _client(server, tls_context=trusting)
        for _ in range(3):
            assert _passes(client)
        assert len(set(server.requests)) == 1  # the tickets' bytes are no reason to drop a live connection
        server.mode = "close"
        assert _passes(client)
        wait_for(lambda: server.requests[-1] in server.closed, what="the server to close the idle connection")
        server.mode = "answer"
        assert _passes(client)
        assert len(server.requests) == 5 and len(set(server.requests)) == 2


def test_a_reply_nested_too_deep_is_a_one_line_error(server: RecordingExtender) -> None:
    # Go's encoding/json refuses nesting past its max depth with an error; so does the stand-in, no RecursionError.
    server.mode = "deep"
    with pytest.raises(ExtenderCallError, match=r"^filter: undecodable reply: "):
        _client(server).filter(POD, [NODE])
    server.mode = "answer"
    assert _passes(_client(server))


@pytest.mark.parametrize(("verb", "path"), [("bïnd", "/x/b%C3%AFnd"), ("bind now", "/x/bind%20now")],
                         ids=["beyond-ascii", "space"])
def test_a_verb_beyond_ascii_or_with_a_space_is_sent_percent_encoded_as_go_sends_it(
    server: RecordingExtender, verb: str, path: str
) -> None:
    """kube-scheduler's ``http.NewRequest`` takes such a URL and writes ``URL.EscapedPath()``: no error of its own.

    http.client refused the one (``UnicodeEncodeError``, which reached the binding cycle's catch-all)
    and the other (``InvalidURL``) unsent.
    """
    _client(server, bind_verb=verb).bind(POD, "gpu-1")
    assert server.posted[-1][0] == path


@pytest.mark.parametrize(("verb", "line"), [
    ("bind?q=a b", b"POST /x/bind?q=a b HTTP/1.1"),
    ("bind?q=\u00efn", b"POST /x/bind?q=\xc3\xafn HTTP/1.1"),
    ("bind?q=\udcff \udcfe", b"POST /x/bind?q=\xff \xfe HTTP/1.1"),
], ids=["space", "beyond-ascii", "surrogates"])
def test_a_query_in_the_verb_goes_out_raw_as_go_writes_it(verb: str, line: bytes) -> None:
    """``url.Parse`` keeps ``RawQuery`` unchecked and ``Request.write`` writes ``RequestURI()`` as it is, refusing
    control bytes only: a space and UTF-8 bytes go out raw (they were percent-encoded)."""
    lines: list[bytes] = []

    def serve(_: int, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            lines.append(reader.readline().removesuffix(b"\r\n"))
            length = 0
            while (header := reader.readline()) not in (b"\r\n", b""):
                name, _, value = header.partition(b":")
                length = int(value) if name.lower() == b"content-length" else length
            reader.read(length)
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                         b"Connection: close\r\n\r\n{}")

    with scripted(serve) as port:
        HTTPExtender(ExtenderConfig(url_prefix=f"http://127.0.0.1:{port}/x", bind_verb=verb)).bind(POD, "gpu-1")
    assert lines == [line]


def test_a_failed_call_names_its_url_go_quoted() -> None:
    """``url.Error.Error`` is ``"%s %q: %s"``: a ``"`` and a byte that is not UTF-8 in the raw query escaped."""

    def serve(_: int, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            while reader.readline() not in (b"\r\n", b""):
                pass  # the head read, then closed unanswered

    with scripted(serve) as port, pytest.raises(ExtenderCallError) as failed:
        HTTPExtender(ExtenderConfig(url_prefix=f"http://127.0.0.1:{port}/x", bind_verb='bind?q="a"\udcff')).bind(
            POD, "gpu-1")
    assert str(failed.value).startswith(f'Post "http://127.0.0.1:{port}/x/bind?q=\\"a\\"\\xff": ')


def test_a_pod_without_a_uid_is_bound_with_an_empty_uid_as_go_sends_it(server: RecordingExtender) -> None:
    """``ExtenderBindingArgs.PodUID`` is the pod's ``UID``: "" when it has none (a pod seeded so in storage)."""
    _client(server).bind({"metadata": {"name": "job", "namespace": "default"}}, "gpu-1")
    assert json.loads(server.posted[-1][1]) == {"PodName": "job", "PodNamespace": "default", "PodUID": "",
                                                "Node": "gpu-1"}


@pytest.mark.parametrize(("verb", "path"), [('bind"<>\\^`{|}', "/x/bind%22%3C%3E%5C%5E%60%7B%7C%7D"),
                                            ("bind#now", "/x/bind"), ("bind(now)", "/x/bind(now)")],
                         ids=["escaped-always", "fragment", "sub-delims"])
def test_a_verb_with_reserved_characters_is_sent_as_go_escapes_it(
    server: RecordingExtender, verb: str, path: str
) -> None:
    """net/url's ``EscapedPath`` escapes ``"<>\\^`{|}`` always and keeps what ``validEncoded`` allows; a ``#``
    starts the fragment, which is never sent (http.client sent all of them as written)."""
    _client(server, bind_verb=verb).bind(POD, "gpu-1")
    assert server.posted[-1][0] == path


def test_a_verb_url_parse_refuses_is_an_error_of_the_call_and_nothing_is_sent(server: RecordingExtender) -> None:
    """``http.NewRequest`` returns ``url.Parse``'s error and ``send`` returns it: no request is made."""
    with pytest.raises(ExtenderCallError) as failed:
        _client(server, bind_verb="bind%zz").bind(POD, "gpu-1")
    assert str(failed.value) == (f'parse "http://127.0.0.1:{server.server_port}/x/bind%zz": '
                                 'invalid URL escape "%zz"')
    assert server.posted == []


def test_a_filtered_node_not_asked_about_is_named_with_the_url_prefix_as_configured(server: RecordingExtender) -> None:
    """``HTTPExtender.Filter``: ``extender %q claims a filtered node %q ...`` of ``extenderURL``, the urlPrefix."""
    client = _client(server)
    with pytest.raises(ExtenderCallError) as failed:
        client.filter(POD, [{"metadata": {"name": "gpu-2"}}])  # the extender answers gpu-1
    assert str(failed.value) == (f'extender "{client.config.url_prefix}" claims a filtered node "gpu-1" which is not '
                                 "found in the input node list")


def test_no_error_naming_the_url_shows_its_password(server: RecordingExtender) -> None:
    """Each error that names the URL (they reach the pod's Events and condition) writes its password ``***``.

    Go's ``url.Parse`` errors and kube-scheduler's ``failed ... with extender at URL`` and
    ``claims a filtered node`` quote it whole; only net/http's client errors strip it.
    """
    prefix = f"http://user:s3cret@127.0.0.1:{server.server_port}/x"
    shown = f"http://user:***@127.0.0.1:{server.server_port}/x"
    client = HTTPExtender(ExtenderConfig(url_prefix=prefix, bind_verb="bind%zz"))
    errors = []
    for call in (lambda: client.bind(POD, "gpu-1"), lambda: client.filter(POD, [{"metadata": {"name": "gpu-2"}}])):
        with pytest.raises(ExtenderCallError) as failed:
            call()
        errors.append(str(failed.value))
    server.mode = "refuse"
    with pytest.raises(ExtenderCallError) as failed:
        client.filter(POD, [NODE])
    errors.append(str(failed.value))
    assert errors == [f'parse "{shown}/bind%zz": invalid URL escape "%zz"',
                      f'extender "{shown}" claims a filtered node "gpu-1" which is not found in the input node list',
                      f"failed filter with extender at URL {shown}/filter, code 503"]
    with pytest.raises(ValueError, match=r"^urlPrefix 'ftp://user:\*\*\*@h/x' is not an http\(s\) URL$"):
        HTTPExtender(ExtenderConfig(url_prefix="ftp://user:s3cret@h/x"))
