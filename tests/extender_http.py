"""Requests to a running extender over a real socket, for its integration tests."""

from __future__ import annotations

import http.client
import json


def exchange(port: int, method: str, path: str, body: bytes | None = None,
             timeout: float = 20) -> tuple[int, str | None, bytes]:
    """One request on a fresh connection: the reply's status, Content-Type and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()


def post(port: int, path: str, body: bytes, timeout: float = 20) -> tuple[int, bytes]:
    """POST ``body`` as JSON: the reply's status and body."""
    status, _, reply = exchange(port, "POST", path, body, timeout)
    return status, reply


def get(port: int, path: str) -> tuple[int, bytes]:
    """GET ``path``: the reply's status and body."""
    status, _, reply = exchange(port, "GET", path)
    return status, reply


def used(port: int, node: str = "gpu-1") -> int:
    """GPU memory the extender counts as used on ``node`` (its ``/inspect`` answer)."""
    status, reply = get(port, f"/gpushare-scheduler/inspect/{node}")
    assert status == 200
    return int(json.loads(reply)["nodes"][0]["usedGPU"])
