"""``pods/log`` options: which lines the kubelet is asked to leave out (`sandbox.logs.LogOptions.since`)."""

from __future__ import annotations

from kubectl_gpushare.kube.deadlines import SECOND
from kubectl_gpushare.kube.go_format import parse_rfc3339
from kubectl_gpushare.kube.go_query import GoQuery
from kubectl_gpushare.sandbox.logs import ContainerLogs, log_options, pod_log


def _since(query: str, now: int = 0) -> int | None:
    return log_options(GoQuery(query), "p").since(now)


def test_since_time_reaches_the_kubelet_in_whole_seconds() -> None:
    # kube-apiserver's LogLocation (pkg/registry/core/pod/strategy.go) passes sinceTime on as
    # SinceTime.Format(time.RFC3339): the fraction is dropped, so a line later in that second is kept.
    whole = parse_rfc3339("2024-01-01T00:00:05Z")
    assert _since("sinceTime=2024-01-01T00:00:05.999999999Z") == whole
    assert _since("sinceTime=2024-01-01T01:00:05.5%2B01:00") == whole
    assert _since("sinceTime=1969-12-31T23:59:59.5Z") == -SECOND  # before 1970 too: the second it falls in
    assert _since("sinceTime=") == parse_rfc3339("0001-01-01T00:00:00Z")  # the zero time: every line
    assert _since("") is None


def test_since_seconds_counts_back_from_now_and_wraps_as_go() -> None:
    now = 1_700_000_000 * SECOND + 123
    assert _since("sinceSeconds=10", now) == now - 10 * SECOND  # no rounding: now's fraction stays
    assert _since("sinceSeconds=9223372036854775807", now) == now + SECOND  # the product wrapped to -1 s


def test_tail_lines_past_the_log_keep_all_of_it() -> None:
    # The kubelet's tail (pkg/kubelet/kuberuntime/logs/logs.go findTailLineStartIndex) starts at the file's
    # beginning when it holds fewer lines than asked for; 4 of 3 lines once gave the last one alone.
    logs = ContainerLogs()
    for index in range(3):
        logs.write("u1", "main", f"line {index}")
    pod = {"metadata": {"name": "p", "uid": "u1"}, "spec": {"containers": [{"name": "main"}], "nodeName": "n"},
           "status": {"phase": "Running"}}  # fmt: skip
    every = ["line 0", "line 1", "line 2"]
    for tail, shown in [(0, []), (2, every[1:]), (3, every), (4, every), (5, every), (9223372036854775807, every)]:
        assert pod_log(pod, log_options(GoQuery(f"tailLines={tail}"), "p"), logs).decode().splitlines() == shown, tail
