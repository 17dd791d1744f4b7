"""The sandbox's request deadline: the ``timeout`` query parameter as kube-apiserver reads it.

``WithRequestDeadline`` (k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go) gives a request
that is not long-running the deadline of its arrival plus ``timeout``, capped at
``--request-timeout``; a value ``time.ParseDuration`` refuses is a 400; a write whose storage call
outlives the deadline is answered 504 by ``asyncFinisher`` and may land anyway. Bodies are compared
with golden files (tests/golden/sandbox/, regenerate with GPUSHARE_UPDATE_GOLDEN=1).
"""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from waiting import poll, wait_for

from kubectl_gpushare.sandbox import errors
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "sandbox"
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def configmap(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).encode()


def call(sb: Sandbox, method: str, path: str, body: bytes | None = None,
         token: str | None = None) -> tuple[int, bytes, float]:
    """One request on a fresh connection: status, raw body, seconds it took."""
    conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=30)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read(), time.monotonic() - started
    finally:
        conn.close()


def golden(name: str, body: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert body == path.read_bytes(), f"reply differs from tests/golden/sandbox/{name}"


def status_of(body: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(body)
    assert decoded["kind"] == "Status" and decoded["apiVersion"] == "v1", decoded
    return decoded


@pytest.mark.parametrize(("value", "go_error"), [
    ("abc", 'time: invalid duration "abc"'),
    ("5", 'time: missing unit in duration "5"'),
    ("3d", 'time: unknown unit "d" in duration "3d"'),
    ("%C2%B5s", 'time: invalid duration "\\xc2\\xb5s"'),  # "µs": Go quotes non-ASCII bytes as \xNN
    ("1%FFs", 'time: unknown unit "\\xffs" in duration "1\\xffs"'),  # not UTF-8: the byte itself
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
], ids=["word", "no-unit", "unknown-unit", "non-ascii", "not-utf8", "overflow"])
def test_a_timeout_that_is_not_a_go_duration_is_a_400_before_authentication(value: str, go_error: str) -> None:
    with Sandbox(port=0, auth=True) as sb:
        status, body, _ = call(sb, "POST", f"{CONFIGMAPS}?timeout={value}", configmap("c"))  # no token
        assert status == 400, body
        message = status_of(body)["message"]
        assert message == f"invalid timeout specified in the request URL - {go_error}"
        assert not sb.objects("configmaps")
        if value == "abc":
            golden("timeout_invalid.json", body)
        # With a token it is the same 400; a watch is long-running, so its timeout is never read.
        assert call(sb, "GET", f"{CONFIGMAPS}?timeout={value}", token=Sandbox.ADMIN_TOKEN)[0] == 400
        watch = f"{CONFIGMAPS}?watch=true&timeoutSeconds=1&timeout={value}"
        assert call(sb, "GET", watch, token=Sandbox.ADMIN_TOKEN)[0] == 200


@pytest.mark.parametrize("value", ["", "0", "0s", "-1s", "2s", "1h"], ids=["empty", "zero", "0s", "negative",
                                                                          "the-cap", "over-the-cap"])
def test_a_timeout_not_shorter_than_the_servers_leaves_the_servers(value: str) -> None:
    # request_deadline.go: only 0 < timeout < --request-timeout shortens the deadline.
    with Sandbox(port=0, request_timeout=2.0) as sb:
        held = sb.inject("POST", r"/configmaps\?", latency=1.0, times=1)
        status, body, _ = call(sb, "POST", f"{CONFIGMAPS}?timeout={value}", configmap("c"))
        assert (status, held.hits) == (201, 1), body
        assert sb.get("configmaps", "default", "c") is not None


def test_a_timeout_shorter_than_a_hold_abandons_the_write() -> None:
    with Sandbox(port=0) as sb:  # the server's own request timeout: 60 s
        held = sb.inject("POST", r"/configmaps\?", latency=1.0, times=1)
        status, body, _ = call(sb, "POST", f"{CONFIGMAPS}?timeout=300ms", configmap("c"))
        assert (status, held.hits) == (504, 1), body
        assert status_of(body)["message"] == errors.REQUEST_TIMEOUT_MESSAGE
        assert not sb.objects("configmaps")  # held before it was handled: it never lands


def test_a_write_committing_past_its_timeout_is_a_504_at_the_deadline_and_lands_anyway() -> None:
    with Sandbox(port=0) as sb:
        slow = sb.inject("POST", r"/configmaps\?", latency=2.0, after=True, times=1)
        status, body, took = call(sb, "POST", f"{CONFIGMAPS}?timeout=500ms", configmap("c"))
        assert (status, slow.hits) == (504, 1), body
        assert took < 1.9, took  # answered at the deadline, not when the commit ends
        golden("timeout_write_unknown_outcome.json", body)
        assert sb.get("configmaps", "default", "c") is None  # not yet ...
        wait_for(lambda: sb.get("configmaps", "default", "c") is not None, 10)  # ... but it lands
        assert [r.status for r in sb.requests if r.resource == "configmaps" and r.verb == "create"] == [504]


def test_a_slow_commit_within_its_timeout_answers_as_usual() -> None:
    with Sandbox(port=0) as sb:
        sb.inject("POST", r"/configmaps\?", latency=0.3, after=True, times=1)
        status, body, took = call(sb, "POST", f"{CONFIGMAPS}?timeout=20s", configmap("c"))
        assert status == 201 and json.loads(body)["metadata"]["name"] == "c" and took >= 0.3


def test_a_slow_commit_ending_a_request_timeout_past_its_deadline_never_lands() -> None:
    # Clients count on nothing landing a request timeout after they gave up (kube.errors.API_REQUEST_TIMEOUT).
    with Sandbox(port=0, request_timeout=0.5) as sb:
        sb.inject("POST", r"/configmaps", latency=1.5, after=True, times=1)  # the deadline, 0.5 s, + 0.5 s < 1.5 s
        status, body, took = call(sb, "POST", CONFIGMAPS, configmap("c"))
        assert status == 504 and took < 1.4, (status, took)
        assert not poll(lambda: sb.get("configmaps", "default", "c"), 2.5)  # past the commit's end, still absent


@pytest.mark.parametrize("query", ["timeout=%zz", "timeout=1%s", "timeout=abc;x=1", "timeout=%zz&timeout=300ms"],
                         ids=["bad-escape", "bad-escape-in-unit", "semicolon", "skipped-then-read"])
def test_a_timeout_pair_go_cannot_unescape_or_split_is_skipped_not_refused(query: str) -> None:
    # url.ParseQuery (net/url/url.go) skips a pair with a bad %-escape or a ';' in its key and goes
    # on; WithRequestDeadline's URL.Query().Get then sees no timeout (or the next one), never a 400.
    with Sandbox(port=0) as sb:
        held = sb.inject("POST", r"/configmaps\?", latency=0.6, times=1)
        status, body, _ = call(sb, "POST", f"{CONFIGMAPS}?{query}", configmap("c"))
        expected = 504 if query.endswith("300ms") else 201
        assert (status, held.hits) == (expected, 1), body
