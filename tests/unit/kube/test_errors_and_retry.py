"""Error mapping by status, and the retry policy's decisions, with a fake clock."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import errors
from kubectl_gpushare.kube._transport import error_from_reply
from kubectl_gpushare.kube.retry import RetryPolicy, backoff_delay, call_with_retry, is_retryable


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, errors.BadRequest),
        (401, errors.Unauthorized),
        (403, errors.Forbidden),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (410, errors.Expired),
        (422, errors.Invalid),
        (429, errors.TooManyRequests),
        (500, errors.ServerError),
        (503, errors.ServerError),
        (418, errors.ApiError),
    ],
)
def test_api_error_class_by_status(status: int, cls: type[errors.ApiError]) -> None:
    error = errors.api_error(status, "Reason", "the\n  message")
    assert type(error) is cls
    assert error.status == status and str(error) == "the message"
    expected = errors.EXIT_AUTH if status in (401, 403) else errors.EXIT_API
    assert isinstance(error, errors.KubeError) and error.exit_code == expected


def test_api_error_without_a_message_says_the_status() -> None:
    assert str(errors.api_error(502)) == "the server answered HTTP 502"
    assert str(errors.api_error(404, "NotFound")) == "the server answered HTTP 404 (NotFound)"


class FakeClock:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def failing(*failures: Exception, result: str = "ok") -> tuple[list[int], Callable[[], str]]:
    calls = [0]

    def operation() -> str:
        calls[0] += 1
        if calls[0] <= len(failures):
            raise failures[calls[0] - 1]
        return result

    return calls, operation


@pytest.mark.parametrize("body", [b'{"message":"bad \xff"}', b'{"x":' + b"[" * 5000 + b"]" * 5000 + b"}"],
                         ids=["not-utf8", "deep"])
def test_an_error_body_that_does_not_decode_is_still_the_status_error(body: bytes) -> None:
    error = error_from_reply(503, body, {})
    assert isinstance(error, errors.ApiError) and error.status == 503 and "\n" not in str(error)


def test_retries_429_honouring_retry_after() -> None:
    clock = FakeClock()
    calls, operation = failing(errors.TooManyRequests(429, "TooManyRequests", "slow down", retry_after=3))
    assert call_with_retry(operation, RetryPolicy(deadline=None), sleep=clock.sleep) == "ok"
    assert calls[0] == 2 and clock.waits[0] >= 3


def test_retries_5xx_and_unreachable_with_growing_delays() -> None:
    clock = FakeClock()
    failures = [errors.ServerError(503, "ServiceUnavailable", "x"), errors.Unreachable("down"), errors.api_error(500)]
    calls, operation = failing(*failures)
    policy = RetryPolicy(attempts=4, base=0.1, cap=10, jitter=0, deadline=None)
    assert call_with_retry(operation, policy, sleep=clock.sleep) == "ok"
    assert calls[0] == 4 and clock.waits == [0.1, 0.2, 0.4]


@pytest.mark.parametrize(
    "error",
    [
        errors.api_error(400),
        errors.api_error(401),
        errors.api_error(403),
        errors.api_error(404),
        errors.api_error(409),
        errors.api_error(410),
        errors.api_error(422),
        errors.api_error(501),
        errors.ConfigError("bad"),
    ],
    ids=["400", "401", "403", "404", "409", "410", "422", "501", "config"],
)
def test_never_retries_permanent_errors(error: errors.KubeError) -> None:
    clock = FakeClock()
    calls, operation = failing(error)
    with pytest.raises(type(error)):
        call_with_retry(operation, sleep=clock.sleep)
    assert calls[0] == 1 and clock.waits == []


def test_conflicts_are_retried_only_when_asked() -> None:
    conflict = errors.api_error(409)
    assert not is_retryable(conflict)
    assert is_retryable(conflict, retry_conflict=True)
    calls, operation = failing(conflict)
    assert call_with_retry(operation, RetryPolicy(retry_conflict=True), sleep=FakeClock().sleep) == "ok"
    assert calls[0] == 2


def test_gives_up_after_attempts_and_raises_the_last_error() -> None:
    calls, operation = failing(*(errors.api_error(503) for _ in range(10)))
    with pytest.raises(errors.ServerError):
        call_with_retry(operation, RetryPolicy(attempts=3, deadline=None), sleep=FakeClock().sleep)
    assert calls[0] == 3


def test_deadline_and_overlong_retry_after_end_retries() -> None:
    calls, operation = failing(errors.TooManyRequests(429, "", "", retry_after=120))
    with pytest.raises(errors.TooManyRequests):
        call_with_retry(operation, RetryPolicy(deadline=None), sleep=FakeClock().sleep)
    calls, operation = failing(errors.TooManyRequests(429, "", "", retry_after=20))
    with pytest.raises(errors.TooManyRequests):
        call_with_retry(operation, RetryPolicy(deadline=10), sleep=FakeClock().sleep)
    assert calls[0] == 1


def test_stop_event_interrupts_the_wait() -> None:
    stop = threading.Event()
    stop.set()
    calls, operation = failing(errors.api_error(503), errors.api_error(503))
    with pytest.raises(errors.ServerError):
        call_with_retry(operation, RetryPolicy(deadline=None), stop=stop)
    assert calls[0] == 1


def test_backoff_is_capped_and_jittered_upwards_only() -> None:
    policy = RetryPolicy(base=1, cap=4, jitter=0.5)
    for attempt in range(1, 8):
        delay = backoff_delay(attempt, policy)
        expected = min(4, 2 ** (attempt - 1))
        assert expected <= delay <= expected * 1.5


@pytest.mark.parametrize(("status", "known"), [(400, True), (403, True), (404, True), (409, True), (422, True),
                                              (429, False), (500, False), (504, False), (302, False), (101, False)])
def test_only_a_4xx_other_than_429_says_a_write_did_not_happen(status: int, known: bool) -> None:
    """A redirect or an informational reply from a proxy says nothing about the write: its outcome stays unknown."""
    assert errors.refused(errors.ApiError(status, "Reason", "message")) is known


def test_a_write_answered_with_an_undecodable_reply_is_logged_as_landed_not_failed() -> None:
    landed = errors.UndecodableReply("pod default/a does not decode as a v1.Pod (uid: expected str)")
    assert errors.write_failure("report the status of default/a", landed) == (
        "report the status of default/a: the write landed, but its reply does not decode: "
        "pod default/a does not decode as a v1.Pod (uid: expected str)")
    assert not errors.refused(landed)


@pytest.mark.parametrize(("exc", "line"), [
    (errors.Unreachable("the API server at https://127.0.0.1:1 did not answer after 5s (https://127.0.0.1:1/x)",
                        timeout=True),
     "record Scheduled: outcome unknown (timed out); the write may have landed: "
     "the API server at https://127.0.0.1:1 did not answer after 5s (https://127.0.0.1:1/x)"),
    (errors.api_error(504, "Timeout", "Timeout: request did not complete within requested timeout"),
     "record Scheduled: outcome unknown (HTTP 504); the write may have landed: "
     "Timeout: request did not complete within requested timeout"),
    (errors.api_error(500, "InternalError", "etcdserver: leader changed"),
     "record Scheduled: outcome unknown (HTTP 500); the write may have landed: etcdserver: leader changed"),
    (errors.api_error(429, "TooManyRequests", "too many requests"),
     "record Scheduled: outcome unknown (HTTP 429); the write may have landed: too many requests"),
    (errors.Unreachable("cannot reach the API server at https://127.0.0.1:1: the server closed the connection "
                        "without replying"),
     "record Scheduled: outcome unknown; the write may have landed: cannot reach the API server at "
     "https://127.0.0.1:1: the server closed the connection without replying"),
    (errors.Unreachable("cannot reach the API server at https://127.0.0.1:1: Connection refused", sent=False),
     "record Scheduled: not sent, nothing changed: cannot reach the API server at https://127.0.0.1:1: "
     "Connection refused"),
    (errors.Unreachable("no time left to ask the API server at https://127.0.0.1:1 (https://127.0.0.1:1/x)",
                        timeout=True, sent=False),
     "record Scheduled: not sent, nothing changed: no time left to ask the API server at https://127.0.0.1:1 "
     "(https://127.0.0.1:1/x)"),
    (errors.api_error(404, "NotFound", 'pods "a" not found'), 'cannot record Scheduled: pods "a" not found'),
    (errors.api_error(409, "Conflict", "the object has been modified"),
     "cannot record Scheduled: the object has been modified"),
    (errors.api_error(403, "Forbidden", "forbidden"), "cannot record Scheduled: forbidden"),
])
def test_a_failed_write_says_cannot_only_when_the_api_refused_it(exc: errors.KubeError, line: str) -> None:
    """A timeout, a 5xx or a 429 may have landed (`refused`): its line says the outcome is unknown, not "cannot"."""
    assert errors.write_failure("record Scheduled", exc) == line


@pytest.mark.parametrize("server", [
    "http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:port", "http://bad host:6443", "http://a\x1bb:1",
    "ftp://127.0.0.1", "http://",
    "http://" + "a" * 64 + ":1", "http://a..b:1",
    "http://127.0.0.1:1/\u00fc", "http://127.0.0.1:1/a\x00", "http://127.0.0.1:1/a b",
])
def test_a_server_url_that_cannot_be_reached_is_one_kube_error(server: str) -> None:
    # urlsplit raises ValueError for an unclosed "[", .port for a port past 65535 or not a number, and
    # http.client refuses a host with a space or a control character only once it connects; the socket
    # layer a host label past 63 characters or empty (IDNA), http.client a path not ASCII (tracebacks).
    from kubectl_gpushare.kube._transport import Transport
    from kubectl_gpushare.kube.config import ClientConfig

    with pytest.raises(errors.ConfigError, match="^invalid server URL ") as refused:
        Transport(ClientConfig(server=server), "test")
    assert refused.value.exit_code == errors.EXIT_USAGE, "no usable kubeconfig: the usage exit code"


def test_a_status_message_is_one_line_cut_as_the_cli_cuts_it() -> None:
    """Every face quotes an API error's message (the CLI's ``error:`` line, a daemon's log): one bound, here."""
    sent = "etcd:\n\x1b[31mred\x1b[0m " + "y" * (1 << 20)
    error = errors.api_error(500, "InternalError", sent)
    assert error.message == protocol.one_line(sent)
    assert error.message.startswith("etcd:  [31mred [0m yyy") and error.message.endswith("y…")
    assert len(error.message) == protocol.MAX_SHOWN_NAME * protocol.SENTENCE_NAMES


@pytest.mark.parametrize(("earlier", "unknown"), [
    (errors.api_error(500, "InternalError", "etcd"), True),
    (errors.Unreachable("did not answer", timeout=True), True),
    (errors.Unreachable("connection refused", sent=False), False),
    (errors.api_error(409, "Conflict", "modified"), False),
])
def test_a_last_try_never_sent_is_marked_sent_when_an_earlier_try_may_have_landed(
    earlier: errors.KubeError, unknown: bool
) -> None:
    tries: list[errors.KubeError] = [earlier, errors.Unreachable("connection refused", sent=False)]

    def operation() -> None:
        raise tries.pop(0)

    policy = RetryPolicy(attempts=2, base=0, jitter=0, deadline=None, retry_conflict=True)
    with pytest.raises(errors.Unreachable) as raised:
        call_with_retry(operation, policy, sleep=lambda _: None)
    assert raised.value.sent is unknown and errors.did_not_happen(raised.value) is not unknown
