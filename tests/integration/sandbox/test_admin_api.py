"""The admin API under /_sandbox/: faults injected and cleared over HTTP by any client."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

import pytest

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

PODS = "/api/v1/namespaces/default/pods"


def call(sb: Sandbox, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=10)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, json.loads(raw) if raw else None


def test_fault_added_over_http_fires_and_is_cleared(sandbox: Sandbox) -> None:
    status, fault = call(sandbox, "POST", "/_sandbox/faults", {"method": "get", "path": "/pods", "status": 503})
    assert status == 201 and fault["method"] == "GET" and fault["status"] == 503 and fault["hits"] == 0
    status, answer = call(sandbox, "GET", PODS)
    assert status == 503 and answer["reason"] == "ServiceUnavailable"
    assert call(sandbox, "GET", "/api/v1/nodes")[0] == 200, "the path regex limits the fault"
    _, listed = call(sandbox, "GET", "/_sandbox/faults")
    assert listed["kind"] == "SandboxFaultList" and [(f["path"], f["hits"]) for f in listed["items"]] == [("/pods", 1)]
    status, cleared = call(sandbox, "DELETE", "/_sandbox/faults")
    assert status == 200 and cleared["status"] == "Success"
    assert call(sandbox, "GET", PODS)[0] == 200
    assert call(sandbox, "GET", "/_sandbox/faults")[1]["items"] == []


def test_times_retry_after_and_after_match_the_python_api(sandbox: Sandbox) -> None:
    fault = {"method": "POST", "path": "/pods$", "status": 429, "retry_after": 3, "times": 1, "after": True}
    assert call(sandbox, "POST", "/_sandbox/faults", fault)[0] == 201
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    status, answer = call(sandbox, "POST", PODS, pod)
    assert status == 429 and answer["details"]["retryAfterSeconds"] == 3
    assert sandbox.get("pods", "default", "p") is not None, "after: the write took effect"
    assert call(sandbox, "POST", PODS, {**pod, "metadata": {"name": "q"}})[0] == 201, "times: fired once"
    assert sandbox.faults.snapshot()[0].hits == 1


def test_faults_never_apply_to_the_admin_routes(sandbox: Sandbox) -> None:
    sandbox.inject(status=500)
    assert call(sandbox, "GET", "/version")[0] == 500
    assert call(sandbox, "GET", "/_sandbox/faults")[0] == 200
    assert call(sandbox, "DELETE", "/_sandbox/faults")[0] == 200
    assert call(sandbox, "GET", "/version")[0] == 200
    assert all(not r.path.startswith("/_sandbox") for r in sandbox.requests), "admin calls stay out of the log"


def test_drop_watches_over_http_breaks_open_streams(sandbox: Sandbox) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=10)
    conn.request("GET", PODS + "?watch=true&timeoutSeconds=30")
    response = conn.getresponse()
    assert response.status == 200
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(response.read())
        except (http.client.HTTPException, OSError) as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert call(sandbox, "POST", "/_sandbox/drop-watches")[0] == 200
    reader.join(timeout=10)
    assert not reader.is_alive() and isinstance(outcome[0], (http.client.IncompleteRead, OSError)), outcome


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"status": "\xff"}',
        b"[]",
        b"",
        {"colour": "red"},
        {"status": "500"},
        {"status": 42},
        {"status": 500.0},
        {"latency": -1},
        {"times": -1},
        {"path": "("},
        {"path": "a" * 2000},
        {"method": "GET /x"},
        {"drop_watch": 1},
        {"hits": 3},
    ],
    ids=lambda b: str(b)[:24],
)
def test_malformed_fault_gets_400(sandbox: Sandbox, body: Any) -> None:
    status, answer = call(sandbox, "POST", "/_sandbox/faults", body)
    assert status == 400 and answer["kind"] == "Status" and answer["reason"] == "BadRequest", answer
    assert "\n" not in answer["message"]
    assert sandbox.faults.snapshot() == []


def test_unknown_admin_routes_and_methods(sandbox: Sandbox) -> None:
    assert call(sandbox, "GET", "/_sandbox/nothing")[0] == 404
    assert call(sandbox, "PUT", "/_sandbox/faults", {})[0] == 405
    assert call(sandbox, "GET", "/_sandbox/drop-watches")[0] == 405


def test_admin_api_needs_the_admin_token_when_auth_is_on() -> None:
    with Sandbox(auth=True) as sb:
        sb.add_token("writer", "some-component")
        fault = {"status": 500}
        assert call(sb, "POST", "/_sandbox/faults", fault)[0] == 401
        assert call(sb, "POST", "/_sandbox/faults", fault, token="wrong")[0] == 401
        assert call(sb, "POST", "/_sandbox/faults", fault, token=sb.READONLY_TOKEN)[0] == 403
        assert call(sb, "DELETE", "/_sandbox/faults", token="writer")[0] == 403
        assert sb.faults.snapshot() == []
        assert call(sb, "POST", "/_sandbox/faults", fault, token=sb.ADMIN_TOKEN)[0] == 201
        assert call(sb, "GET", "/version", token=sb.READONLY_TOKEN)[0] == 500
