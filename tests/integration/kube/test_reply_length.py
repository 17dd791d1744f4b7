"""A bounded read (`Client.proxy_get`) and a hostile ``Content-Length``, over a real loopback socket.

http.client ignores a ``Content-Length`` it cannot read (``HTTPResponse.begin``: ``int()`` failing
leaves the length unknown, the body read to the close); the bound on the reply does not trip on it
either, where ``int()`` refuses more than 4,300 digits with a ValueError.
"""

from __future__ import annotations

import socket
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from kubectl_gpushare.kube import errors
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from tests.loopback_kubeconfig import scripted, write_kubeconfig

pytestmark = pytest.mark.integration


def answering(head: bytes, body: bytes) -> AbstractContextManager[int]:
    """A loopback listener answering each connection with ``head`` then ``body``, then closing it; yields its port."""

    def serve(_: int, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            while reader.readline() not in (b"\r\n", b""):
                pass
            sock.sendall(head + b"\r\n" + body)

    return scripted(serve)


def _proxy_get(tmp_path: Path, port: int, max_bytes: int) -> bytes:
    config = load_config(str(write_kubeconfig(tmp_path / "kubeconfig", port)))
    with Client(config, retry=None) as client:
        return client.proxy_get("ns", "p", 80, "/usage", max_bytes=max_bytes, deadline=time.monotonic() + 30)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"


def test_a_five_thousand_digit_content_length_is_read_as_unknown_and_the_body_bounded(tmp_path: Path) -> None:
    with answering(HEAD + b"Content-Length: " + b"9" * 5000 + b"\r\n", b"{}") as port:
        assert _proxy_get(tmp_path, port, 1000) == b"{}"
    with answering(HEAD + b"Content-Length: " + b"9" * 5000 + b"\r\n", b" " * 1001) as port, pytest.raises(
        errors.ReplyTooLarge, match="longer than 1000 bytes"
    ):
        _proxy_get(tmp_path, port, 1000)


def test_a_declared_length_past_the_bound_is_refused_before_reading(tmp_path: Path) -> None:
    with answering(HEAD + b"Content-Length: 1001\r\n", b" " * 1001) as port, pytest.raises(
        errors.ReplyTooLarge, match="declares 1001 bytes, more than 1000"
    ):
        _proxy_get(tmp_path, port, 1000)
