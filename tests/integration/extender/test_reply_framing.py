"""The extender's replies framed as Go's net/http frames a handler's one ``Write`` of its body, over a real socket.

src/net/http/server.go: a body of up to ``bufferBeforeChunkingSize`` (2048) bytes is still buffered when the
handler returns and gets a ``Content-Length``; a larger one goes out while the handler runs, as one chunk on
HTTP/1.1 and ended by the connection's close on HTTP/1.0 (`go_http.reply_framing`).
"""

from __future__ import annotations

import json
import re
import socket

import pytest
from extender_http import exchange, post

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

FILTER = "/gpushare-scheduler/filter"
_DATE = rb"Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n"


@pytest.fixture
def ext(sandbox: Sandbox, extender_factory):  # type: ignore[no-untyped-def]
    nodes = [node_object(f"gpu-{i}", [16, 16], ip=f"10.0.0.{i}") for i in range(1, 31)]
    sandbox.load([*nodes, pod_object("job", "default", [2])])  # /inspect of 30 nodes is over 2048 bytes
    e = extender_factory()
    e.wait_synced()
    return e


def _filter_body(names: int) -> bytes:
    """A filter request whose reply grows with ``names``: each unknown name is a FailedNodes entry."""
    return json.dumps({"Pod": pod_object("job", "default", [2]),
                       "NodeNames": ["gpu-1"] + [f"missing-{i:04d}" for i in range(names)]}).encode()


def _exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, then read until the extender closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        return sock.makefile("rb").read()


def _request(body: bytes, version: bytes = b"1.1", extra: bytes = b"Connection: close\r\n") -> bytes:
    return (b"POST " + FILTER.encode() + b" HTTP/" + version + b"\r\nHost: x\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _reply_of(port: int, body: bytes) -> bytes:
    """The reply's body as the app writes it (over http.client, which reads either framing)."""
    status, reply = post(port, FILTER, body)
    assert status == 200
    return reply


def test_a_filter_reply_over_2048_bytes_comes_back_as_one_chunk_as_go_writes_it(ext) -> None:  # type: ignore[no-untyped-def]
    """``Transfer-Encoding: chunked`` last in the head, after ``Connection``, no ``Content-Length``; the body one
    chunk (bufio.Writer writes a large write straight through to ``chunkWriter.Write``), then ``0\\r\\n\\r\\n``."""
    body = _filter_body(100)
    reply = _reply_of(ext.running.port, body)
    assert len(reply) > 2048
    answer = _exchange(ext.running.port, _request(body))
    assert re.fullmatch(rb"HTTP/1\.1 200 OK\r\nContent-Type: application/json\r\n" + _DATE
                        + rb"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n" + re.escape(
                            b"%x\r\n" % len(reply) + reply + b"\r\n0\r\n\r\n"), answer), answer[:400]


def test_a_chunked_reply_keeps_the_connection(ext) -> None:  # type: ignore[no-untyped-def]
    """Chunked, the body's end is on the wire: a second request on the connection is answered."""
    body = _filter_body(100)
    answer = _exchange(ext.running.port, _request(body, extra=b"") + _request(body))
    assert answer.count(b"HTTP/1.1 200 OK") == 2 and answer.count(b"\r\n0\r\n\r\n") == 2, answer[-200:]
    assert b"Content-Length" not in answer


@pytest.mark.parametrize("names", [0, 5])
def test_a_filter_reply_of_at_most_2048_bytes_keeps_its_content_length(ext, names: int) -> None:  # type: ignore[no-untyped-def]
    """Still in Go's buffer when the handler returns: ``chunkWriter.writeHeader`` sets ``Content-Length``."""
    body = _filter_body(names)
    reply = _reply_of(ext.running.port, body)
    assert len(reply) <= 2048
    answer = _exchange(ext.running.port, _request(body))
    assert re.fullmatch(rb"HTTP/1\.1 200 OK\r\nContent-Type: application/json\r\n" + _DATE
                        + rb"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(reply) + re.escape(reply),
                        answer), answer


def test_the_2048_byte_boundary_is_go_s(ext) -> None:  # type: ignore[no-untyped-def]
    """Exactly 2048 bytes fit Go's buffer (``len(p) > b.Available()`` is false); 2049 do not."""
    padding = 0
    while len(_reply_of(ext.running.port, _filter_body(padding))) <= 2048:
        padding += 1
    bigger = _filter_body(padding)
    fits = _filter_body(padding - 1)
    assert b"Transfer-Encoding: chunked" in _exchange(ext.running.port, _request(bigger))
    small = _exchange(ext.running.port, _request(fits))
    length = len(_reply_of(ext.running.port, fits))
    assert b"Transfer-Encoding" not in small and b"Content-Length: %d\r\n" % length in small


@pytest.mark.parametrize("extra", [b"", b"Connection: keep-alive\r\n"], ids=["1.0", "1.0-keep-alive"])
def test_a_large_reply_to_http_1_0_is_ended_by_the_close(ext, extra: bytes) -> None:  # type: ignore[no-untyped-def]
    """HTTP/1.0 has no chunks: ``closeAfterReply``, no ``Content-Length``, no ``Connection`` (``close`` goes to
    HTTP/1.1 only), even where the request asked to keep the connection; the body is the rest of the stream."""
    body = _filter_body(100)
    reply = _reply_of(ext.running.port, body)
    answer = _exchange(ext.running.port, _request(body, b"1.0", extra) + _request(body, b"1.0", extra))
    assert re.fullmatch(rb"HTTP/1\.0 200 OK\r\nContent-Type: application/json\r\n" + _DATE + rb"\r\n"
                        + re.escape(reply), answer), answer[:400]


def test_a_large_reply_to_head_has_neither_length_nor_chunks(ext) -> None:  # type: ignore[no-untyped-def]
    """``chunkWriter.writeHeader``: a HEAD reply has no body; a large one's head went out before the handler was
    done, so it has no ``Content-Length`` (a small one has), no ``Transfer-Encoding``, and the connection is kept."""
    status, _, cluster = exchange(ext.running.port, "GET", "/gpushare-scheduler/inspect")
    assert status == 200 and len(cluster) > 2048
    head = b"HEAD /gpushare-scheduler/inspect HTTP/1.1\r\nHost: x\r\n"
    answer = _exchange(ext.running.port, head + b"\r\n" + head + b"Connection: close\r\n\r\n")
    first, second, rest = answer.split(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 OK") and second.startswith(b"HTTP/1.1 200 OK") and rest == b"", answer
    assert b"Content-Length" not in answer and b"Transfer-Encoding" not in answer, answer
    small = _exchange(ext.running.port, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert small.endswith(b"Content-Length: 2\r\nConnection: close\r\n\r\n"), small


def test_the_stand_in_scheduler_reads_a_chunked_filter_reply(ext) -> None:  # type: ignore[no-untyped-def]
    """kube-scheduler's Go client reads either framing; so does the stand-in (http.client)."""
    missing = [node_object(f"missing-{i:04d}", [16], ip="10.1.0.1") for i in range(100)]
    nodes = [node_object("gpu-1", [16, 16], ip="10.0.0.1"), *missing]
    outcome = ext.scheduler(node_cache_capable=True).filter(pod_object("job", "default", [2]), nodes)
    assert [node["metadata"]["name"] for node in outcome.nodes] == ["gpu-1"]
    assert len(outcome.failed) == 100
