"""The extender against hostile clients and hostile objects: every reply is bounded and one line.

Bodies that are not UTF-8 or nest absurdly deep, Content-Length headers that differ, quantities that
no parser can hold, a node that claims 10^8 GPUs, and clients that hoard connections, bytes or time.
Everything goes through a real socket to a running extender fed by the sandbox.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any

import pytest
from extender_http import get, post, used
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.httpd import LARGE_HEAD, Limits
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

FILTER = "/gpushare-scheduler/filter"


def raw_exchange(port: int, data: bytes, timeout: float = 20) -> bytes:
    """Send raw bytes, then read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def filter_body(limit: str | None, names: list[str], name: str = "p") -> bytes:
    limits = {protocol.RESOURCE_MEM: limit} if limit is not None else {}
    pod = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    return json.dumps({"Pod": pod, "NodeNames": names}).encode()


def _protocol_bounds_exponents() -> bool:
    """Whether protocol.parse_quantity refuses huge exponents quickly (today's main spends ~0.3 s here)."""
    started = time.perf_counter()
    try:
        protocol.parse_quantity("1e99999")
    except (ValueError, ArithmeticError):
        return True
    return time.perf_counter() - started < 0.05


@pytest.fixture
def ext(sandbox: Sandbox, extender_factory):  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16, 16], ip="10.0.0.1"), node_object("gpu-2", [16], ip="10.0.0.2")])
    e = extender_factory(max_request_bytes=1 << 20)
    e.wait_synced()
    return e


# --- bodies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        (FILTER, b'{"Pod":{"metadata":{"name":"\xff"}},"NodeNames":["gpu-1"]}', "not UTF-8"),
        (FILTER, b'{"Pod":{},"NodeNames":' + b"[" * 200_000, "too deep"),
        (FILTER, b'{"Pod":' * 100_000, "too deep"),
        ("/gpushare-scheduler/prioritize", b'{"Pod":{},"NodeNames":["\xfe"]}', None),
        ("/gpushare-scheduler/bind", b'{"PodName":"\xff"}', "not UTF-8"),
        ("/gpushare-scheduler/bind", b'{"PodName":' * 80_000, "too deep"),
    ],
    ids=["filter-latin1", "filter-deep-array", "filter-deep-object", "prioritize-latin1", "bind-latin1",
         "bind-deep"],
)
def test_unreadable_bodies_get_400_with_a_one_line_error(
    ext, path: str, body: bytes, needle: str | None  # type: ignore[no-untyped-def]
) -> None:
    ext_port = ext.running.port
    status, reply = post(ext_port, path, body)
    assert status == 400
    decoded = json.loads(reply)
    if needle is None:
        assert decoded == []
    else:
        assert needle in decoded["Error"]
        assert "\n" not in decoded["Error"]
    assert get(ext_port, "/healthz") == (200, b"ok")


@pytest.mark.parametrize(
    ("second", "status"),
    [("{n}", 200), (" {n}\t", 200), ("5", 400), ("0{n}", 400)],
    ids=["same", "same-after-trim", "differs", "leading-zero-differs"],
)
def test_repeated_content_length_headers_are_one_if_equal_as_go_reads_them(  # type: ignore[no-untyped-def]
    ext, second: str, status: int
) -> None:
    """src/net/http/transfer.go ``fixLength``: repeats equal after ``textproto.TrimString`` are one header
    (go.dev/issue/16490); any that differs (``05`` differs from ``5``) is a 400, the connection closed."""
    body = filter_body("2", ["gpu-1"])
    reply = raw_exchange(ext.running.port, (
        f"POST {FILTER} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n"
        f"Content-Length: {second.format(n=len(body))}\r\n\r\n"
    ).encode() + body)
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode()), reply
    if status == 200:
        assert json.loads(payload)["NodeNames"] == ["gpu-1"]
    else:
        assert b"Connection: close" in head
        assert json.loads(payload)["Error"] == "message cannot contain multiple Content-Length headers"


def test_a_content_length_with_many_leading_zeros_frames_the_body_as_go_reads_it(ext) -> None:  # type: ignore[no-untyped-def]
    """``strconv.ParseUint(cl, 10, 63)`` (transfer.go ``parseContentLength``) takes leading zeros of any number."""
    body = filter_body("2", ["gpu-1"])
    reply = raw_exchange(ext.running.port, (
        f"POST {FILTER} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body):030d}\r\n\r\n"
    ).encode() + body)
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), reply
    assert json.loads(payload)["NodeNames"] == ["gpu-1"]


# --- quantities and nodes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limit",
    [
        "1e9999999",
        pytest.param("1e999999", marks=pytest.mark.skipif(
            not _protocol_bounds_exponents(), reason="needs protocol.parse_quantity to bound exponents")),
    ],
    ids=["huge-exponent", "slow-exponent"],
)
def test_an_unreadable_request_fails_the_pod_with_an_error_quickly(ext, limit: str) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    status, reply = post(ext.running.port, FILTER, filter_body(limit, ["gpu-1", "gpu-2"]))
    elapsed = time.monotonic() - started
    assert status == 200
    result = json.loads(reply)
    assert result["NodeNames"] is None
    assert protocol.RESOURCE_MEM in result["Error"]
    assert "\n" not in result["Error"]
    assert elapsed < 5, f"filter took {elapsed:.1f} s"
    status, reply = post(ext.running.port, FILTER, filter_body("2", ["gpu-1"]))
    assert json.loads(reply)["NodeNames"] == ["gpu-1"]


def test_a_node_claiming_1e8_gpus_fails_alone_and_the_rest_keep_answering(
    sandbox: Sandbox, ext  # type: ignore[no-untyped-def]
) -> None:
    huge = node_object("huge", [16], ip="10.0.0.9")
    huge["status"]["capacity"][protocol.RESOURCE_COUNT] = "1e8"
    huge["status"]["allocatable"][protocol.RESOURCE_COUNT] = "1e8"
    sandbox.load([huge])
    wait_for(lambda: ext.running.state.counts()[0] == 3, what="the node to reach the cache")
    for _ in range(2):  # the second filter must not trip over the first one's leftovers
        status, reply = post(ext.running.port, FILTER, filter_body("2", ["huge", "gpu-1", "gpu-2"]))
        assert status == 200
        result = json.loads(reply)
        assert result["Error"] == ""
        assert result["NodeNames"] == ["gpu-1", "gpu-2"]
        reason = result["FailedNodes"]["huge"]  # refused by the extender's bound or as not gpushare
        assert (protocol.RESOURCE_COUNT in reason and str(protocol.MAX_GPUS_PER_NODE) in reason) or reason in (
            protocol.REASON_NOT_GPUSHARE.format(node="huge"), protocol.REASON_INSUFFICIENT)
    status, reply = post(ext.running.port, "/gpushare-scheduler/prioritize",
                         filter_body("2", ["huge", "gpu-1"]))
    assert status == 200 and dict((h["Host"], h["Score"]) for h in json.loads(reply))["huge"] == 0
    status, reply = get(ext.running.port, "/gpushare-scheduler/inspect")
    shown = {n["name"]: n for n in json.loads(reply)["nodes"]}
    assert status == 200 and {"gpu-1", "gpu-2"} <= set(shown)
    assert "huge" not in shown or not shown["huge"]["devs"], "never 10**8 devices"
    assert get(ext.running.port, "/metrics")[0] == 200


# --- resource bounds -------------------------------------------------------------------------------


def test_connections_past_the_cap_get_503_and_a_freed_slot_is_reused(extender_factory, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    ext = extender_factory(limits=Limits(max_connections=3))
    ext.wait_synced()
    port = ext.running.port
    held = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(3)]
    try:
        # Each held connection is served by a thread; a request on it proves the slot is taken.
        for sock in held:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        reply = raw_exchange(port, b"")  # the answer comes unasked; sending would race the close
        head, _, payload = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503")
        assert f"Content-Length: {len(payload)}".encode() in head
        assert json.loads(payload)["Error"] == "too many connections; try again later"
    finally:
        held.pop().close()

    def served() -> bool:
        return raw_exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").startswith(
            b"HTTP/1.1 200")

    try:
        wait_for(served, what="a freed connection slot to be reused")
    finally:
        for sock in held:
            sock.close()


def test_a_trickling_request_is_cut_off_at_the_read_deadline(extender_factory, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    ext = extender_factory(limits=Limits(request_timeout=1.0, idle_timeout=30.0))
    ext.wait_synced()
    sock = socket.create_connection(("127.0.0.1", ext.running.port), timeout=20)
    started = time.monotonic()
    closed = threading.Event()

    def reader() -> None:
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass
        closed.set()

    threading.Thread(target=reader, daemon=True).start()
    try:
        sock.sendall(b"POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: x\r\n")
        while not closed.is_set() and time.monotonic() - started < 20:
            try:
                sock.sendall(b"X")  # one byte of a never-ending header line every 0.2 s
            except OSError:
                break
            closed.wait(0.2)
        assert closed.wait(5), "the server kept a trickling request open"
        assert time.monotonic() - started < 15
    finally:
        sock.close()


def test_an_idle_keep_alive_connection_is_closed(extender_factory, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    ext = extender_factory(limits=Limits(idle_timeout=0.5))
    ext.wait_synced()
    with socket.create_connection(("127.0.0.1", ext.running.port), timeout=20) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = sock.makefile("rb")
        assert reply.readline().startswith(b"HTTP/1.1 200")
        while reply.readline() not in (b"\r\n", b""):
            pass
        assert reply.read(2) == b"ok"
        started = time.monotonic()
        assert reply.read() == b""  # closed by the server, not by our 20 s timeout
        assert time.monotonic() - started < 10


def test_bodies_past_the_in_flight_byte_budget_wait_then_get_503(extender_factory, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory(max_request_bytes=4096, limits=Limits(max_inflight_bytes=4096, inflight_wait=0.3))
    ext.wait_synced()
    port = ext.running.port
    body = filter_body("2", ["gpu-1"]).ljust(3000)
    head = f"POST {FILTER} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    first = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        first.sendall(head + body[:100])  # holds 3000 bytes of the budget while the rest is awaited
        refusals: list[bytes] = []

        def refused() -> bool:
            status, reply = post(port, FILTER, body)  # 200 until the first body holds the budget
            if status == 503:
                refusals.append(reply)
            return bool(refusals)

        wait_for(refused, what="a body past the budget to be refused")
        assert json.loads(refusals[0])["Error"] == "too many request bytes in flight; try again later"
        first.sendall(body[100:])
        reply = first.makefile("rb").readline()
        assert reply.startswith(b"HTTP/1.1 200")
    finally:
        first.close()
    status, reply = post(port, FILTER, body)
    assert status == 200 and json.loads(reply)["NodeNames"] == ["gpu-1"]


def test_request_heads_past_16_kib_are_served_a_few_at_a_time_and_one_more_gets_503(  # type: ignore[no-untyped-def]
    extender_factory, sandbox: Sandbox
) -> None:
    """Go's server parses any head within 1 MiB + 4096 bytes; in Python a head of short header lines costs ~50
    times its bytes once parsed, so heads past `LARGE_HEAD` are parsed and served ``max_large_heads`` at a time."""
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory(limits=Limits(max_large_heads=1, inflight_wait=0.3))
    ext.wait_synced()
    port = ext.running.port
    pad = b"X-Pad: " + b"a" * LARGE_HEAD + b"\r\n"
    body = filter_body("2", ["gpu-1"])
    first = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:  # parsed, then holds the one slot while its body is awaited
        first.sendall(b"POST " + FILTER.encode() + b" HTTP/1.1\r\nHost: x\r\n" + pad
                      + b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        refusals: list[bytes] = []

        def refused() -> bool:  # 200 until the first head holds the slot
            reply = raw_exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + pad + b"\r\n")
            if reply.startswith(b"HTTP/1.1 503"):
                refusals.append(reply)
            return bool(refusals)

        wait_for(refused, what="a second large head to be refused")
        head, _, payload = refusals[0].partition(b"\r\n\r\n")
        assert b"Connection: close" in head and b"Retry-After: 1" in head
        assert json.loads(payload)["Error"] == "too many large request heads; try again later"
        assert get(port, "/healthz") == (200, b"ok")  # a small head needs no slot
        first.sendall(body[10:])
        reader = first.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 200")
        # The slot goes back after the reply is written: the connection's next request is read only then, so
        # its reply is the barrier (a new connection's head waits only ``inflight_wait`` for the slot).
        first.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert reader.read().endswith(b"\r\n\r\nok")
    finally:
        first.close()
    # The slot came back, also from a large head whose version is refused once its headers were read.
    bad = raw_exchange(port, b"GET /" + b"a" * LARGE_HEAD + b" HTTP/9.9\r\nHost: x\r\n\r\n")
    assert bad.startswith(b"HTTP/1.1 505"), bad
    for _ in range(2):
        reply = raw_exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + pad + b"\r\n")
        assert reply.startswith(b"HTTP/1.1 200"), reply


# --- objects the watch cannot decode ---------------------------------------------------------------


def bad_pod(name: str, node: str = "gpu-1", gpu: int = 0) -> dict[str, Any]:
    """A placed pod with an annotation whose value is a JSON object: valid JSON, not a v1.Pod."""
    pod = pod_object(name, "default", [4], node=node, gpu=gpu, gpu_memory=16, phase="Running", assigned=True,
                     uid=f"uid-{name}")
    pod["metadata"]["annotations"]["hostile"] = {"not": "a string"}
    return pod


def test_an_undecodable_pod_in_the_list_does_not_stop_the_sync(extender_factory, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16, 16], ip="10.0.0.1"), bad_pod("bad"),
                  pod_object("good", "default", [3], node="gpu-1", gpu=1, gpu_memory=16, phase="Running",
                             assigned=True)])
    ext = extender_factory()
    ext.wait_synced()
    assert used(ext.running.port) == 3
    assert get(ext.running.port, "/readyz")[0] == 200


def test_an_undecodable_watch_event_is_skipped_and_the_last_good_copy_kept(ext, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    port = ext.running.port
    placed = pod_object("p", "default", [4], node="gpu-1", gpu=0, gpu_memory=16, phase="Running", assigned=True,
                        uid="uid-p")
    sandbox.load([placed])
    wait_for(lambda: used(port) == 4, what="the pod to be counted")
    sandbox.load([bad_pod("p")])  # MODIFIED into something that does not decode: keep counting 4
    sandbox.load([pod_object("later", "default", [5], node="gpu-1", gpu=1, gpu_memory=16, phase="Running",
                             assigned=True)])
    wait_for(lambda: used(port) == 9, what="a later event to be applied past the bad one")
    assert get(port, "/readyz")[0] == 200
    assert ext.running.cache._pods.undecodable == 1  # reported once, not once per retry
    status, _ = http_delete(sandbox, "/api/v1/namespaces/default/pods/p")
    assert status == 200
    wait_for(lambda: used(port) == 5, what="the deletion of the undecodable pod to be applied")


def http_delete(sandbox: Sandbox, path: str) -> tuple[int, bytes]:
    host, port = sandbox.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        conn.request("DELETE", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_readyz_fails_while_the_cache_cannot_be_kept_current(extender_factory, sandbox: Sandbox) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory(cache_stale_after=1.0)
    ext.wait_synced()
    port = ext.running.port
    assert get(port, "/readyz")[0] == 200
    sandbox.inject(method="GET", path=r"/api/v1/pods", status=500)
    sandbox.drop_watches()
    wait_for(lambda: get(port, "/readyz")[0] == 503, what="/readyz to report the stale cache")
    assert get(port, "/healthz")[0] == 200
    sandbox.clear_faults()
    wait_for(lambda: get(port, "/readyz")[0] == 200, timeout=45, what="/readyz to recover")


def test_an_unparsable_pod_is_logged_once_and_keeps_its_last_record(
    ext, sandbox: Sandbox, caplog: pytest.LogCaptureFixture  # type: ignore[no-untyped-def]
) -> None:
    port = ext.running.port
    sandbox.load([pod_object("p", "default", [4], node="gpu-1", gpu=0, gpu_memory=16, phase="Running",
                             assigned=True, uid="uid-p")])
    wait_for(lambda: used(port) == 4, what="the pod to be counted")
    caplog.clear()
    for version in ("1", "2"):  # two versions, the same problem
        bad = pod_object("p", "default", [4], node="gpu-1", gpu=0, gpu_memory=16, phase="Running", assigned=True,
                         uid="uid-p", labels={"version": version},
                         annotations={protocol.ANN_ASSUME_TIME: "1" + "0" * 5000})
        sandbox.load([bad])
    sandbox.load([pod_object("later", "default", [5], node="gpu-1", gpu=1, gpu_memory=16, phase="Running",
                             assigned=True)])
    wait_for(lambda: used(port) == 9, what="later events to be applied")
    about_p = [r for r in caplog.records if "default/p" in r.getMessage() and r.levelno >= 30]
    assert len(about_p) <= 1, [r.getMessage() for r in about_p]
    assert not any(r.exc_info for r in caplog.records)
    assert get(port, "/readyz")[0] == 200


def newer_node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A node whose per-GPU annotation a newer device plugin wrote (version 2: not understood here)."""
    gpus = [{"index": i, "memory": 16, "version": protocol.NODE_GPUS_VERSION + 1} for i in range(2)]
    return node_object(name, [16, 16], ip="10.0.0.9", labels=labels,
                       annotations={protocol.ANN_NODE_GPUS: json.dumps(gpus)})


def test_a_node_annotation_from_a_newer_version_is_logged_once_and_never_counted_free(
    sandbox: Sandbox, extender_factory, caplog: pytest.LogCaptureFixture  # type: ignore[no-untyped-def]
) -> None:
    caplog.set_level("WARNING", logger="kubectl_gpushare.extender.cache")
    sandbox.load([newer_node("gpu-new")])
    ext = extender_factory()
    ext.wait_synced()
    for i in range(3):  # the node is read again on every change
        sandbox.load([newer_node("gpu-new", labels={"round": str(i)})])
    sandbox.load([node_object("gpu-plain", [16, 16], ip="10.0.0.1")])  # arrives after the three updates
    wait_for(lambda: ext.running.state.counts()[0] == 2, what="the node updates to reach the cache")
    lines = [r.getMessage() for r in caplog.records if protocol.ANN_NODE_GPUS in r.getMessage()]
    assert lines == [f"node gpu-new: annotation {protocol.ANN_NODE_GPUS} is version 2, newer than version 1 that "
                     "this kubectl-gpushare reads; its GPUs count with no free memory until kubectl-gpushare is "
                     "upgraded"], lines
    fits, failed = ext.running.state.filter(["gpu-new", "gpu-plain"], 1)
    assert fits == ["gpu-plain"] and "gpu-new" in failed
