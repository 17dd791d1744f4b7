"""Compressed replies over real HTTP: a gzip body that does not decompress, or expands past the bound, is one error.

A relay (`api_relay`) in front of the sandbox sends the sandbox's status with a body the sandbox never
serves, marked ``Content-Encoding: gzip``: a proxy's broken compression, a truncated body, a "gzip bomb".
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Final

import pytest
from api_relay import Reply, relay

from kubectl_gpushare.kube import errors, types
from kubectl_gpushare.kube._transport import MAX_DECOMPRESSED_BYTES
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import ClientConfig, load_config
from kubectl_gpushare.kube.types import Node
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox
from tests.loopback_kubeconfig import loopback_client

pytestmark = pytest.mark.integration

GZIP: Final = {"Content-Encoding": "gzip"}
NOT_GZIP: Final = Reply(b'{"kind":"NodeList","items":[]}', GZIP)  # marked gzip, sent plain: a proxy's mistake


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """Twice `MAX_DECOMPRESSED_BYTES` of zeros (512 MiB), gzip-compressed a MiB at a time: about 500 KiB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    mib = bytes(1 << 20)
    return b"".join([packer.compress(mib) for _ in range(2 * MAX_DECOMPRESSED_BYTES >> 20)] + [packer.flush()])


def _relayed(config: ClientConfig, port: int) -> ClientConfig:
    return dataclasses.replace(config, server=f"http://127.0.0.1:{port}")


def test_a_get_whose_gzip_body_does_not_decompress_is_one_line_and_exit_1(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1")])

    def rewrite(method: str, path: str, body: bytes) -> Reply | None:
        return NOT_GZIP if path.startswith("/api/v1/nodes") else None

    with relay(sandbox, rewrite) as port:
        kubeconfig = tmp_path / "relayed"
        kubeconfig.write_text(Path(kube_env["KUBECONFIG"]).read_text().replace(f":{sandbox.port}", f":{port}"))
        result = subprocess.run(["kubectl-inspect-gpushare"], env={**kube_env, "KUBECONFIG": str(kubeconfig)},
                                capture_output=True, text=True, timeout=60)

    assert result.returncode == errors.EXIT_API, result.stderr  # docs/cli.md: an API error
    (line,) = result.stderr.splitlines()
    assert "gzip body does not decompress (" in line, line  # inspect words it "Failed due to ...", as gpushare
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("body", [gzip.compress(b'{"kind":"Node"}')[:-6], b"\x1f\x8b"], ids=["truncated", "header"])
def test_a_write_answered_2xx_with_a_broken_gzip_body_landed_and_says_so(
    sandbox: Sandbox, kubeconfig: Path, body: bytes
) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1")])

    def rewrite(method: str, path: str, request: bytes) -> Reply | None:
        return Reply(body, GZIP) if method == "PATCH" else None

    with relay(sandbox, rewrite) as port, Client(_relayed(load_config(str(kubeconfig)), port), retry=None) as client:
        with pytest.raises(errors.UndecodableReply) as info:
            client.patch_node_status("n1", {"status": {"capacity": {"example.com/x": "1"}}}, "merge")
    assert str(info.value).startswith("the reply's gzip body is truncated (PATCH http://127.0.0.1:")
    assert errors.write_failure("patch node n1", info.value).startswith("patch node n1: the write landed")
    landed = sandbox.get("nodes", "", "n1")
    assert landed is not None and landed["status"]["capacity"]["example.com/x"] == "1"  # the write landed


def test_an_error_status_whose_gzip_body_does_not_decompress_keeps_its_status(
    sandbox: Sandbox, kubeconfig: Path
) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1")])
    sandbox.inject(method="GET", path=r"^/api/v1/nodes/n1", status=403)
    sandbox.inject(method="GET", path=r"^/api/v1/nodes/n2", status=404)
    status = json.dumps({"kind": "Status", "code": 404, "reason": "NotFound", "message": 'nodes "n2" not found'})

    def rewrite(method: str, path: str, body: bytes) -> Reply | None:
        if path.startswith("/api/v1/nodes/n1"):
            return Reply(b"<html>not gzip</html>", GZIP)
        return Reply(gzip.compress(status.encode()), GZIP)  # well compressed: its words are read

    with relay(sandbox, rewrite) as port, Client(_relayed(load_config(str(kubeconfig)), port), retry=None) as client:
        with pytest.raises(errors.Forbidden) as forbidden:
            client.get_node("n1")
        with pytest.raises(errors.NotFound) as missing:
            client.get_node("n2")
    assert forbidden.value.status == 403
    assert str(forbidden.value).startswith("the server answered HTTP 403, but the reply's gzip body does not "
                                           "decompress (Error -3 while decompressing data: incorrect header check)")
    assert "\n" not in str(forbidden.value)
    assert str(missing.value) == 'nodes "n2" not found'


def test_a_gzip_bomb_is_refused_without_expanding_it(sandbox: Sandbox, kubeconfig: Path, bomb: bytes) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1")])

    def rewrite(method: str, path: str, body: bytes) -> Reply | None:
        return Reply(bomb, GZIP) if path.startswith("/api/v1/nodes/n1") else None

    with relay(sandbox, rewrite) as port, Client(_relayed(load_config(str(kubeconfig)), port), retry=None) as client:
        tracemalloc.start()
        try:
            with pytest.raises(errors.UndecodableReply) as info:
                client.get_node("n1")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert str(info.value).startswith(f"the reply expands past {MAX_DECOMPRESSED_BYTES} bytes once decompressed")
    assert peak < 16 * 1024 * 1024, f"{peak} bytes at the peak: the bomb was expanded"


def test_a_bomb_whose_trailer_lies_is_refused_at_the_bound(sandbox: Sandbox, kubeconfig: Path, bomb: bytes) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1")])
    liar = bomb[:-4] + (100).to_bytes(4, "little")  # ISIZE says 100 bytes: kept as it expands, up to the bound

    def rewrite(method: str, path: str, body: bytes) -> Reply | None:
        return Reply(liar, GZIP) if path.startswith("/api/v1/nodes/n1") else None

    with relay(sandbox, rewrite) as port, Client(_relayed(load_config(str(kubeconfig)), port), retry=None) as client:
        tracemalloc.start()
        try:
            with pytest.raises(errors.UndecodableReply, match="expands past"):
                client.get_node("n1")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < MAX_DECOMPRESSED_BYTES * 1.2, f"{peak} bytes at the peak: more than the bound"


class _Recording(BaseHTTPRequestHandler):
    """Answers a GET with an empty node list and a watch with one ADDED node; records each request's headers."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, Any]] = []
    watch_encoding = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        type(self).seen.append((self.path, self.headers.get("Accept-Encoding")))
        watch = "watch=true" in self.path
        body = b'{"kind":"NodeList","metadata":{},"items":[]}'
        if watch:
            event = {"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "2"}}}
            body = json.dumps(event).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if watch and self.watch_encoding:
            body = gzip.compress(body)
            self.send_header("Content-Encoding", self.watch_encoding)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close" if watch else "keep-alive")
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def _recording(tmp_path: Path, watch_encoding: str) -> Iterator[Client]:
    _Recording.seen = []
    _Recording.watch_encoding = watch_encoding
    with loopback_client(tmp_path, _Recording, gzip=True) as client:
        yield client


def test_a_watch_asks_for_no_compression_and_refuses_a_compressed_stream(tmp_path: Path) -> None:
    with _recording(tmp_path, "") as client:
        client.list_nodes()
        events = list(client.watch(types.NODES, "1"))
    assert [(event.type, isinstance(event.object, Node) and event.object.metadata.name) for event in events] == [
        ("ADDED", "n1")]
    (list_encoding,) = [encoding for path, encoding in _Recording.seen if "watch=true" not in path]
    (watch_encoding,) = [encoding for path, encoding in _Recording.seen if "watch=true" in path]
    assert (list_encoding, watch_encoding) == ("gzip", None)  # kube-apiserver never compresses a watch

    with _recording(tmp_path, "gzip") as client, pytest.raises(errors.UndecodableReply) as info:
        client.watch(types.NODES, "1")
    assert str(info.value).startswith("the watch stream is encoded as 'gzip', which was not asked for (http://")


def test_a_watch_refused_with_a_compressed_status_reads_its_words(sandbox: Sandbox, kubeconfig: Path) -> None:
    sandbox.inject(method="GET", path=r"watch=true", status=410)
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 1 (9)"}

    def rewrite(method: str, path: str, body: bytes) -> Reply | None:
        return Reply(gzip.compress(json.dumps(status).encode()), GZIP) if "watch=true" in path else None

    with relay(sandbox, rewrite) as port, Client(_relayed(load_config(str(kubeconfig)), port), retry=None) as client:
        with pytest.raises(errors.Expired, match=r"^too old resource version: 1 \(9\)$"):
            client.watch(types.NODES, "1")
