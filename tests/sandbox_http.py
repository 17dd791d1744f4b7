"""One JSON request to a test's sandbox over plain HTTP, for tests that check its replies directly."""

from __future__ import annotations

import http.client
import json
from typing import Any

from kubectl_gpushare.sandbox.server import Sandbox


def send(sandbox: Sandbox, method: str, path: str, body: Any = None,
         content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    """The status and decoded body of one request; ``body`` goes as JSON (integers written out as given, no
    float rounding) with ``content_type``, and None sends no body at all."""
    connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body)
        connection.request(method, path, data, {"Content-Type": content_type} if data else {})
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        connection.close()
