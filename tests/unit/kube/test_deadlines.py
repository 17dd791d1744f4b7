"""Go duration text (client-go's ``timeout`` parameter, kube-apiserver's reading of it) and long-running paths.

Expected strings are what Go's ``Duration.String`` prints and ``time.ParseDuration`` answers
(``src/time/time.go``, ``src/time/format.go``).
"""

from __future__ import annotations

import pytest

from kubectl_gpushare.kube.deadlines import (
    HOUR,
    MAX_DURATION,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    SECOND,
    format_duration,
    long_running,
    long_running_request,
    parse_duration,
    seconds_duration,
)

FORMATTED = [
    (0, "0s"),
    (1, "1ns"),
    (1100, "1.1µs"),
    (2200 * MICROSECOND, "2.2ms"),
    (500 * MILLISECOND, "500ms"),
    (SECOND, "1s"),
    (1500 * MILLISECOND, "1.5s"),
    (5 * SECOND + 1, "5.000000001s"),
    (MINUTE, "1m0s"),
    (90 * SECOND, "1m30s"),
    (HOUR, "1h0m0s"),
    (3 * HOUR + 2 * MINUTE + 1 * SECOND, "3h2m1s"),
    (-1500 * MILLISECOND, "-1.5s"),
    (MAX_DURATION, "2562047h47m16.854775807s"),
    (-(1 << 63), "-2562047h47m16.854775808s"),
]


@pytest.mark.parametrize(("nanoseconds", "text"), FORMATTED, ids=[text for _, text in FORMATTED])
def test_format_duration_writes_what_go_prints_and_parses_back(nanoseconds: int, text: str) -> None:
    assert format_duration(nanoseconds) == text
    assert parse_duration(text) == nanoseconds


@pytest.mark.parametrize(("text", "nanoseconds"), [
    ("0", 0), ("-0", 0), ("+5s", 5 * SECOND), (".5s", 500 * MILLISECOND), ("1.s", SECOND),
    ("2h45m", 2 * HOUR + 45 * MINUTE), ("1us", MICROSECOND), ("1\u00b5s", MICROSECOND), ("1\u03bcs", MICROSECOND),
    ("1.0000000001s", SECOND), ("0.3333333333333333333h", 1200 * SECOND), ("-9223372036854775808ns", -(1 << 63)),
])
def test_parse_duration_reads_what_go_reads(text: str, nanoseconds: int) -> None:
    assert parse_duration(text) == nanoseconds


@pytest.mark.parametrize(("text", "message"), [
    ("", 'time: invalid duration ""'),
    ("-", 'time: invalid duration "-"'),
    ("abc", 'time: invalid duration "abc"'),
    (".s", 'time: invalid duration ".s"'),
    ("5", 'time: missing unit in duration "5"'),
    ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
    ("5s ", 'time: unknown unit "s " in duration "5s "'),
    ("3d", 'time: unknown unit "d" in duration "3d"'),
    ("\u00b5s", 'time: invalid duration "\\xc2\\xb5s"'),
    ('1"\\', 'time: unknown unit "\\"\\\\" in duration "1\\"\\\\"'),
    ("1\ns", 'time: unknown unit "\\x0as" in duration "1\\x0as"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("2562048h", 'time: invalid duration "2562048h"'),
    ("99999999999999999999s", 'time: invalid duration "99999999999999999999s"'),
])
def test_parse_duration_refuses_with_gos_message(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/v1/namespaces/d/pods/p/proxy/metrics", True),
    ("/api/v1/namespaces/d/pods/p/log", True),
    ("/api/v1/namespaces/d/pods/p/exec", True),
    ("/api/v1/nodes/n/proxy/configz", True),
    ("/api/v1/proxy/namespaces/d/pods/p", True),
    ("/api/v1/watch/pods", True),
    ("/api/v1/namespaces/d/pods/p", False),
    ("/api/v1/namespaces/d/pods/p/binding", False),
    ("/api/v1/namespaces/d/pods/p/status", False),
    ("/api/v1/namespaces/proxy", False),
    ("/api/v1/namespaces/d/finalize", False),
    ("/apis/resource.k8s.io/v1/namespaces/d/resourceclaims/c/status", False),
    ("/apis/coordination.k8s.io/v1/namespaces/d/leases", False),
    ("/version", False),
])
def test_long_running_reads_the_subresource_where_the_api_server_does(path: str, expected: bool) -> None:
    assert long_running(path) is expected


@pytest.mark.parametrize(("verb", "subresource", "expected"), [
    ("watch", "", True), ("proxy", "", True), ("get", "exec", True), ("create", "attach", True),
    ("get", "log", True), ("create", "portforward", True), ("get", "proxy", True),
    ("list", "", False), ("create", "binding", False), ("update", "status", False), ("create", "eviction", False),
])
def test_long_running_request_is_kube_apiservers_basic_check(verb: str, subresource: str, expected: bool) -> None:
    # BuildGenericConfig: BasicLongRunningRequestCheck({watch, proxy}, {attach, exec, proxy, log, portforward}).
    assert long_running_request(verb, subresource) is expected


def test_seconds_duration_wraps_as_gos_int64_product() -> None:
    # time.Duration(n) * time.Second overflows int64 as Go's multiplication does: the one rule a watch's
    # timeoutSeconds and a log's sinceSeconds share.
    assert seconds_duration(5) == 5 * SECOND and seconds_duration(-5) == -5 * SECOND
    assert seconds_duration(9223372036) == 9223372036 * SECOND <= MAX_DURATION
    assert seconds_duration(9223372037) == 9223372037 * SECOND - (1 << 64) < 0
    assert seconds_duration(1 << 55) == 0 == seconds_duration(-(1 << 63))
    assert seconds_duration(MAX_DURATION) == -SECOND
