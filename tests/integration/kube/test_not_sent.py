"""A write never sent is told apart from one of unknown outcome, over real loopback sockets.

``Unreachable.sent`` is False only where no byte of the request can have reached the server: a
closed port, a TLS handshake that failed, a deadline passed before asking. A listener that takes
the request and never answers, or a kept-alive connection that breaks once the request is on it,
leaves the outcome unknown, and a write is never sent twice on a fresh connection after that (Go's
``net/http``: ``persistConn.shouldRetryRequest``).
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from certificates import self_signed_pair

from kubectl_gpushare.kube import errors, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.retry import RetryPolicy, call_with_retry
from kubectl_gpushare.sandbox.server import Sandbox
from tests.loopback_kubeconfig import scripted, serving, write_kubeconfig

pytestmark = pytest.mark.integration

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
CREATED = (b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","uid":"u",'
           b'"resourceVersion":"1"},"spec":{"containers":[{"name":"c"}]}}')


def client_of(tmp_path: Path, port: int, *, scheme: str = "http", timeout: float | None = None) -> Client:
    config = write_kubeconfig(tmp_path / "kubeconfig", port)
    if scheme != "http":
        config.write_text(config.read_text().replace("http://", f"{scheme}://"))
    return Client(load_config(str(config), request_timeout=timeout), retry=None)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connecting is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_request(reader: Any) -> tuple[str, bytes] | None:
    """One HTTP/1.1 request off a socket file: (request line, body), or None at EOF."""
    line = reader.readline()
    if not line:
        return None
    length = 0
    while (header := reader.readline()) not in (b"\r\n", b""):
        name, _, value = header.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return line.decode().strip(), reader.read(length)


def answer(sock: socket.socket, status: str, body: bytes) -> None:
    sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                 .encode() + body)


def test_a_write_to_a_closed_port_is_not_sent_and_says_nothing_changed(tmp_path: Path) -> None:
    with client_of(tmp_path, closed_port()) as client, pytest.raises(errors.Unreachable) as raised:
        client.create(types.PODS, POD, "default")
    assert raised.value.sent is False and errors.not_sent(raised.value) and errors.did_not_happen(raised.value)
    line = errors.write_failure("create pod default/p", raised.value)
    assert line.startswith("create pod default/p: not sent, nothing changed: cannot reach the API server")
    assert "Connection refused" in line and "outcome unknown" not in line


def test_a_write_to_a_listener_that_never_answers_may_have_landed(tmp_path: Path) -> None:
    taken: list[str] = []
    release = threading.Event()

    def swallow(_: int, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            request = read_request(reader)
            taken.append(request[0] if request else "")
            release.wait(30)  # never answers while the client waits

    try:
        with scripted(swallow) as port, client_of(tmp_path, port, timeout=0.5) as client, \
                pytest.raises(errors.Unreachable) as raised:
            client.create(types.PODS, POD, "default")
    finally:
        release.set()
    assert taken and taken[0].startswith("POST /api/v1/namespaces/default/pods")
    assert raised.value.sent is True and raised.value.timeout and not errors.did_not_happen(raised.value)
    assert "outcome unknown (timed out); the write may have landed" in errors.write_failure("create", raised.value)


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.seen.append(self.path)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_a_failed_tls_handshake_sends_nothing(tmp_path: Path) -> None:
    # https in the kubeconfig, plain HTTP at the port: the handshake fails on the server's plain answer.
    _Recorder.seen = []
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)) as port, \
            client_of(tmp_path, port, scheme="https") as client, pytest.raises(errors.Unreachable) as raised:
        client.create(types.PODS, POD, "default")
    assert raised.value.sent is False and "TLS error" in str(raised.value)
    assert _Recorder.seen == []  # the server never saw the request it could have acted on


def test_a_tls_handshake_that_times_out_sends_nothing(tmp_path: Path) -> None:
    # The port accepts TCP (its backlog) and never speaks TLS: the handshake runs out of time.
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            client_of(tmp_path, int(listener.getsockname()[1]), scheme="https", timeout=0.5) as client, \
            pytest.raises(errors.Unreachable) as raised:
        client.create(types.PODS, POD, "default")
    assert raised.value.sent is False and raised.value.timeout
    assert "did not complete a connection (TCP or TLS handshake) after 0.5s" in str(raised.value)
    assert errors.write_failure("create", raised.value).startswith("create: not sent, nothing changed: ")


def test_an_untrusted_server_certificate_sends_nothing(tmp_path: Path) -> None:
    cert, key = self_signed_pair(tmp_path, "not-the-cluster")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    _Recorder.seen = []
    with serving(server) as port, client_of(tmp_path, port, scheme="https") as client, \
            pytest.raises(errors.Unreachable) as raised:
        client.create(types.PODS, POD, "default")
    assert raised.value.sent is False and "is not trusted" in str(raised.value)
    assert _Recorder.seen == []


def test_a_deadline_passed_before_asking_sends_nothing(sandbox: Sandbox, kubeconfig: Path) -> None:
    with Client(load_config(str(kubeconfig)), retry=None) as client, pytest.raises(errors.Unreachable) as raised:
        client.request("POST", types.PODS.path("default"), body=b"{}", deadline=time.monotonic() - 1)
    assert raised.value.sent is False and raised.value.timeout
    assert not [r for r in sandbox.requests if r.verb == "create"]


def keep_alive_then(
    second: Callable[[socket.socket, Any, str], None], log: list[str]
) -> Callable[[int, socket.socket], None]:
    """Connection 0 answers its first request, then hands the next to ``second``; later ones answer 201."""

    def serve(index: int, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            while (request := read_request(reader)) is not None:
                log.append(f"{index} {request[0].split()[0]}")
                if index == 0 and len([e for e in log if e.startswith("0 ")]) == 2:
                    second(sock, reader, request[0])
                    return
                answer(sock, "201 Created" if request[0].startswith("POST") else "200 OK",
                       CREATED if request[0].startswith("POST") else b'{"major":"1","minor":"34"}')

    return serve


def close_unanswered(sock: socket.socket, reader: Any, line: str) -> None:
    sock.shutdown(socket.SHUT_RDWR)  # it read the request, and may have acted on it


def test_a_write_on_a_kept_alive_connection_that_breaks_is_not_sent_again(tmp_path: Path) -> None:
    log: list[str] = []
    with scripted(keep_alive_then(close_unanswered, log)) as port, client_of(tmp_path, port) as client:
        client.request("GET", "/version")
        with pytest.raises(errors.Unreachable) as raised:
            client.create(types.PODS, POD, "default")
    assert raised.value.sent is True and not errors.did_not_happen(raised.value)
    assert log == ["0 GET", "0 POST"]  # once: sending it again could create it twice


def test_a_read_on_a_kept_alive_connection_that_breaks_is_sent_again_on_a_fresh_one(tmp_path: Path) -> None:
    log: list[str] = []
    with scripted(keep_alive_then(close_unanswered, log)) as port, client_of(tmp_path, port) as client:
        client.request("GET", "/version")
        assert client.request("GET", "/version")
    assert log == ["0 GET", "0 GET", "1 GET"]


def test_an_idle_connection_the_server_closed_is_not_used_for_a_write(tmp_path: Path) -> None:
    log: list[str] = []
    closed = threading.Event()

    def serve(index: int, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            while (request := read_request(reader)) is not None:
                log.append(f"{index} {request[0].split()[0]}")
                answer(sock, "201 Created" if request[0].startswith("POST") else "200 OK",
                       CREATED if request[0].startswith("POST") else b'{"major":"1","minor":"34"}')
                if index == 0:  # its idle timeout: closed with no request pending, as kept alive
                    sock.shutdown(socket.SHUT_RDWR)
                    closed.set()
                    return

    with scripted(serve) as port, client_of(tmp_path, port) as client:
        client.request("GET", "/version")
        assert closed.wait(10)
        created = client.create(types.PODS, POD, "default")
    assert created.metadata.name == "p"
    assert log == ["0 GET", "1 POST"]


def test_a_retried_write_not_sent_on_its_last_try_may_still_have_landed(tmp_path: Path) -> None:
    # First try: taken and never answered (unknown). Then the listener is gone: the retry is refused.
    listener = socket.create_server(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()

    def close_listener(*_: object) -> None:
        listener.close()

    policy = RetryPolicy(attempts=2, base=0.01, cap=0.01, jitter=0, deadline=None)
    try:
        with client_of(tmp_path, port, timeout=0.5) as client, pytest.raises(errors.Unreachable) as raised:
            call_with_retry(lambda: client.create(types.PODS, POD, "default"), policy, on_retry=close_listener)
    finally:
        listener.close()
        for sock in accepted:
            sock.close()
    assert "Connection refused" in str(raised.value)  # the last try's error ...
    assert raised.value.sent is True  # ... but the first may have landed
    assert "outcome unknown" in errors.write_failure("create", raised.value)
