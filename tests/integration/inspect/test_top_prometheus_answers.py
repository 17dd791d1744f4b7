"""``top --prometheus`` against hostile or failing answers from a stand-in of Prometheus's HTTP API.

The stand-in answers ``GET /api/v1/query`` as Prometheus documents it (prometheus.io/docs/prometheus/
latest/querying/api/: ``{"status": "success", "data": {"resultType": "vector", "result": [{"metric":
{...}, "value": [<time>, "<value>"]}]}}``; errors as ``{"status": "error", "errorType", "error"}``
with a 4xx/5xx status; sample values are strings and may be ``NaN`` or ``+Inf``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import usage_standin

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


@pytest.fixture
def fake_prometheus() -> Iterator[tuple[str, dict[str, Any]]]:
    answers: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            query = parse_qs(urlsplit(self.path).query).get("query", [""])[0]
            status, body = answers.get(query, answers.get("*", (200, {"status": "success",
                                                                     "data": {"resultType": "vector", "result": []}})))
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        server.server_close()


def _vector(*samples: tuple[dict[str, str], str]) -> tuple[int, dict[str, Any]]:
    result = [{"metric": labels, "value": [1700000000.0, value]} for labels, value in samples]
    return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_hostile_values_are_unknown_and_other_nodes_stand(
    sandbox: Sandbox, kubectl: Callable[..., Any], fake_prometheus: tuple[str, dict[str, Any]]
) -> None:
    url, answers = fake_prometheus
    sandbox.load(usage_standin.cluster())
    gpu = {"node": "alpha", "gpu": "0", "uuid": "u"}
    answers[protocol.METRIC_GPU_USED] = _vector(
        (gpu, "NaN"), ({**gpu, "gpu": "1"}, "-5"), ({**gpu, "gpu": "99"}, "1"), ({**gpu, "gpu": "x"}, "1"),
        ({**gpu, "node": "bravo"}, "+Inf"), ({"node": "charlie", "gpu": "0"}, "1073741824"),
    )  # fmt: skip
    answers[protocol.METRIC_GPU_ENFORCED] = _vector((gpu, "1"), ({"node": "charlie", "gpu": "0", "reason": "MIG"}, "0"))
    answers[protocol.METRIC_POD_USED] = _vector(
        ({**gpu, "namespace": "team-a", "pod": "greedy"}, "1e30"),
        ({**gpu, "namespace": "team-a", "pod": "trainer"}, "1"),
    )
    result = kubectl("gpushare", "top", "-A", "-o", "json", "--prometheus", url)
    document = json.loads(result.stdout)
    gpus = {(g["node"], g["index"]): (g["usedBytes"], g["enforced"], g["reason"]) for g in document["gpus"]}
    assert gpus[("alpha", 0)] == (None, True, "")  # NaN: unknown, never 0
    assert gpus[("alpha", 1)] == (None, None, "")  # a negative value is dropped
    assert gpus[("bravo", 0)] == (None, None, "")  # +Inf too
    assert gpus[("charlie", 0)] == (1 << 30, False, "MIG")
    pods = {p["name"]: (p["usedBytes"], p["over"]) for p in document["pods"]}
    assert pods["greedy"] == (None, None) and pods["trainer"] == (1, False)
    assert document["unknownNodes"] == [] and result.stderr == ""


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ((400, {"status": "error", "errorType": "bad_data", "error": "parse error"}), "refused the query"),
        ((200, b"<html>login</html>"), "without a query result"),
        ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}), "refused the query"),
        ((200, b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"node": "\xff"}, '
               b'"value": [1, "1"]}]}}'), "without a query result"),
        ((200, b'{"status": "success", "warnings": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
         "without a query result"),  # a field it does not read, nested past the decoder
    ],
)
def test_a_failing_prometheus_fails_the_command_with_one_line(
    sandbox: Sandbox, kubectl: Callable[..., Any], fake_prometheus: tuple[str, dict[str, Any]],
    answer: tuple[int, Any], words: str,
) -> None:  # fmt: skip
    url, answers = fake_prometheus
    answers["*"] = answer
    sandbox.load(usage_standin.cluster())
    result = kubectl("gpushare", "top", "--prometheus", url, check=False)
    assert result.returncode == 3 and result.stdout == ""
    assert words in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://127.0.0.1:99999", "http://127.0.0.1:port", "http://[::1"])
def test_not_a_url_is_a_usage_error(sandbox: Sandbox, kubectl: Callable[..., Any], url: str) -> None:
    sandbox.load(usage_standin.cluster())
    result = kubectl("gpushare", "top", "--prometheus", url, check=False)
    assert result.returncode == 2 and "is not an http(s) URL" in result.stderr and result.stderr.count("\n") == 1
