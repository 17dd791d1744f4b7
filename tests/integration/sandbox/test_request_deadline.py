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
import threading
import time
from pathlib import Path
from typing import Any

import golden_files
import pytest
from waiting import poll, wait_for

from kubectl_gpushare.sandbox import errors
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def configmap(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).encode()


def call(sb: Sandbox, method: str, path: str, body: bytes | None = None,
         token: str | None = None) -> tuple[int, bytes, float]:
    """One request on a fresh connection: status, raw body, seconds it took."""
    status, _, raw, took = call_with_type(sb, method, path, body, token)
    return status, raw, took


def call_with_type(sb: Sandbox, method: str, path: str, body: bytes | None = None,
                   token: str | None = None) -> tuple[int, str, bytes, float]:
    """As `call`, with the reply's Content-Type."""
    conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=30)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, response.getheader("Content-Type") or "", raw, time.monotonic() - started
    finally:
        conn.close()




def golden(name: str, body: bytes) -> None:
    golden_files.golden(f"sandbox/{name}", body)


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


@pytest.mark.parametrize("path", ["/nothing-here", "/api/v1/widgets", "/apis/nope.example.com/v1/things",
                                  "/api/v1/namespaces/default/configmaps/c/nosuchsub"],
                         ids=["non-resource", "unknown-resource", "unknown-group", "unknown-subresource"])
def test_a_malformed_timeout_on_a_path_nothing_serves_is_a_400_not_a_404(path: str) -> None:
    # DefaultBuildHandlerChain (k8s.io/apiserver/pkg/server/config.go) wraps the API handler, which
    # routes, in WithRequestDeadline: the timeout is read before anything looks the path up.
    with Sandbox(port=0) as sb:
        status, body, _ = call(sb, "GET", f"{path}?timeout=abc")
        assert status == 400, body
        assert status_of(body)["message"] == f'{errors.INVALID_TIMEOUT_IN_URL} - time: invalid duration "abc"'
        assert call(sb, "GET", f"{path}?timeout=1s")[0] == 404  # a good timeout leaves the 404
        # A watch (by query or the /watch/ path) and a long-running subresource never read it.
        assert call(sb, "GET", "/api/v1/widgets?watch=true&timeout=abc")[0] == 404
        assert call(sb, "GET", "/api/v1/watch/widgets?timeout=abc")[0] == 404
        assert call(sb, "GET", "/api/v1/namespaces/default/widgets/w/exec?timeout=abc")[0] == 404


@pytest.mark.parametrize("value", ["", "0", "0s", "-1s", "2s", "1h"], ids=["empty", "zero", "0s", "negative",
                                                                          "the-cap", "over-the-cap"])
def test_a_timeout_not_shorter_than_the_servers_leaves_the_servers(value: str) -> None:
    # request_deadline.go: only 0 < timeout < --request-timeout shortens the deadline.
    with Sandbox(port=0, request_timeout=2.0) as sb:
        held = sb.inject("POST", r"/configmaps\?", latency=1.0, times=1)
        status, body, _ = call(sb, "POST", f"{CONFIGMAPS}?timeout={value}", configmap("c"))
        assert (status, held.hits) == (201, 1), body
        assert sb.get("configmaps", "default", "c") is not None


def test_a_timeout_shorter_than_a_hold_abandons_the_write_at_the_deadline() -> None:
    # timeoutHandler (k8s.io/apiserver/pkg/server/filters/timeout.go) answers when the deadline
    # passes, whatever the handler is doing; the write, not yet handled, never reaches storage.
    with Sandbox(port=0) as sb:  # the server's own request timeout: 60 s
        held = sb.inject("POST", r"/configmaps\?", latency=20.0, times=1)
        status, content_type, body, took = call_with_type(sb, "POST", f"{CONFIGMAPS}?timeout=300ms", configmap("c"))
        assert (status, held.hits) == (504, 1), body
        assert took < 10, took  # at the deadline, not when the 20 s hold ends
        assert content_type == errors.HANDLER_TIMEOUT_CONTENT_TYPE
        golden("timeout_handler.txt", body)  # json.NewEncoder of the bare Status: no kind, a newline
        assert not sb.objects("configmaps")  # held before it was handled: it never lands
        # The connection's thread is free again: the next request is answered at once.
        assert call(sb, "POST", f"{CONFIGMAPS}?timeout=10s", configmap("c"))[0] == 201


def test_a_hold_in_transit_starts_the_deadline_when_the_request_arrives() -> None:
    # The deadline counts from arrival (WithRequestReceivedTimestamp in DefaultBuildHandlerChain):
    # a request the network sits on is not cut off by the server, however long it took to come.
    with Sandbox(port=0) as sb:
        transit = sb.inject("POST", r"/configmaps\?", latency=1.0, in_transit=True, times=1)
        status, body, took = call(sb, "POST", f"{CONFIGMAPS}?timeout=300ms", configmap("c"))
        assert (status, transit.hits) == (201, 1), body
        assert took >= 1.0 and sb.get("configmaps", "default", "c") is not None


@pytest.mark.parametrize(
    ("path", "token", "expected"),
    [
        (f"{CONFIGMAPS}?timeout=5s", Sandbox.ADMIN_TOKEN, 201),
        (f"{CONFIGMAPS}?x=1", "not-a-token", 401),
        (f"{CONFIGMAPS}?timeout=abc", Sandbox.ADMIN_TOKEN, 400),
        ("/api/v1/nosuchthings?x=1", Sandbox.ADMIN_TOKEN, 404),
    ],
    ids=["served", "unauthenticated", "bad-timeout", "no-route"],
)
def test_a_request_held_in_transit_is_held_before_authentication_and_routing(path: str, token: str,
                                                                             expected: int) -> None:  # fmt: skip
    # A request lost in transit has not reached kube-apiserver: whatever it answers, a 401
    # (WithAuthentication), a 400 for its timeout (WithRequestDeadline) or a 404, comes after the hold.
    with Sandbox(port=0, auth=True) as sb:
        transit = sb.inject("POST", r"\?", latency=1.0, in_transit=True, times=1)
        status, body, took = call(sb, "POST", path, configmap("c"), token=token)
        assert (status, transit.hits) == (expected, 1), body
        assert took >= 1.0, took


def test_a_fault_acting_in_the_server_is_not_spent_on_a_request_refused_before_it() -> None:
    with Sandbox(port=0, auth=True) as sb:
        failing = sb.inject("POST", r"/configmaps\?", status=500, times=1)
        assert call(sb, "POST", f"{CONFIGMAPS}?x=1", configmap("c"), token="not-a-token")[0] == 401
        assert failing.hits == 0
        assert call(sb, "POST", f"{CONFIGMAPS}?x=1", configmap("c"), token=Sandbox.ADMIN_TOKEN)[0] == 500
        assert failing.hits == 1


@pytest.mark.parametrize("after", [False, True], ids=["held", "slow-read"])
def test_a_read_past_its_deadline_gets_the_timeout_filters_504_not_the_finishers(after: bool) -> None:
    # Reads have no finisher (endpoints/handlers/get.go): the timeout filter answers, in text/plain
    # (which client-go words as "the server was unable to return a response in the time allotted").
    with Sandbox(port=0) as sb:
        sb.load([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
        slow = sb.inject("GET", r"/configmaps/c\?", latency=20.0, after=after, times=1)
        status, content_type, body, took = call_with_type(sb, "GET", f"{CONFIGMAPS}/c?timeout=300ms")
        assert (status, slow.hits, content_type) == (504, 1, errors.HANDLER_TIMEOUT_CONTENT_TYPE), body
        assert took < 10, took
        golden("timeout_handler.txt", body)
        assert [r.status for r in sb.requests if r.resource == "configmaps" and r.verb == "get"] == [504]


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


def test_a_slow_commit_pending_at_stop_is_dropped_so_the_saved_state_matches_memory(tmp_path: Path) -> None:
    # stop() saves the state file; a slow commit still pending then never lands, so the saved state
    # and the one in memory agree (one that landed before stop is saved with the rest).
    state = tmp_path / "state.json"
    sb = Sandbox(port=0, state_file=state, save_interval=0).start()
    try:
        assert call(sb, "POST", CONFIGMAPS, configmap("landed"))[0] == 201
        slow = sb.inject("POST", r"/configmaps\?", latency=1.5, after=True, times=1)
        status, body, _ = call(sb, "POST", f"{CONFIGMAPS}?timeout=200ms", configmap("pending"))
        assert (status, slow.hits) == (504, 1), body
    finally:
        sb.stop()
    # Condition, not sleep: the commit's thread has ended (dropped, or landed after the save).
    wait_for(lambda: not any(t.name == "sandbox-slow-commit" for t in threading.enumerate()), 20,
             what="the slow commit's thread to end")
    in_memory = sorted(o["metadata"]["name"] for o in sb.objects("configmaps"))
    with Sandbox(port=0, state_file=state, save_interval=0) as again:
        status, listed, _ = call(again, "GET", CONFIGMAPS)
        saved = sorted(item["metadata"]["name"] for item in json.loads(listed)["items"])
    assert in_memory == saved == ["landed"]


@pytest.mark.parametrize("in_transit", [False, True], ids=["held", "in-transit"])
def test_a_request_held_at_stop_never_lands_so_the_saved_state_matches_memory(tmp_path: Path,
                                                                               in_transit: bool) -> None:
    # As a slow commit: stop() saves the state file, and a write still held then must not land in
    # memory afterwards (nor keep its thread until the hold ends).
    state = tmp_path / "state.json"
    sb = Sandbox(port=0, state_file=state, save_interval=0).start()
    replies: list[object] = []

    def post() -> None:
        try:
            replies.append(call(sb, "POST", f"{CONFIGMAPS}?timeout=50s", configmap("held"))[0])
        except OSError as exc:  # the server went away: no reply
            replies.append(type(exc).__name__)

    try:
        held = sb.inject("POST", r"/configmaps\?", latency=3.0, in_transit=in_transit, times=1)
        poster = threading.Thread(target=post)
        poster.start()
        wait_for(lambda: held.hits == 1, 10, what="the request to be held")
    finally:
        sb.stop()
    # The request is recorded once its thread is done with it: dropped at stop, or (wrongly) landed.
    # One held in transit never reached routing: it is found by method and path, not verb.
    wait_for(lambda: [r for r in sb.requests if r.method == "POST"], 20, what="the held request to end")
    poster.join(20)
    assert [(r.status, r.path) for r in sb.requests if r.method == "POST"] == [(0, CONFIGMAPS)]  # closed unanswered
    assert replies and replies[0] != 201, replies
    with Sandbox(port=0, state_file=state, save_interval=0) as again:
        saved = [item["metadata"]["name"] for item in json.loads(call(again, "GET", CONFIGMAPS)[1])["items"]]
    assert sb.objects("configmaps") == [] and saved == []


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
