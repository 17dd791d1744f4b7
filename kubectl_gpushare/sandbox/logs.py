"""``GET .../pods/NAME/log``: what the sandbox's fake containers printed, as kube-apiserver serves it.

A real kube-apiserver checks the request against the pod (``LogLocation`` in
kubernetes/pkg/registry/core/pod/strategy.go: the container name, the node) and proxies the rest to
the kubelet, which reads the container runtime's log file (kubelet ``/containerLogs``,
pkg/kubelet/kuberuntime/logs). Here the node side is `ContainerLogs`: the kubelet stand-in of
``--stack`` writes each container's lines in process (it started the container, the environment
Allocate gave it); a Running pod nothing wrote for (seeded, or without a stand-in) prints the one
line its fake container would. Bounded: the newest `MAX_LINES` lines per container,
`MAX_LINE_BYTES` per line, `MAX_PODS` pods (the oldest forgotten first).

Parameters (``PodLogOptions``, kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/
#read-log-of-the-specified-pod): ``container``, ``tailLines``, ``limitBytes``, ``timestamps``,
``previous`` (no container here ever restarted, so it is always the kubelet's "previous terminated
container ... not found"), ``follow`` (answers what exists and closes, as the log of a container that
exited does), ``sinceSeconds``/``sinceTime`` (lines older than either are left out, as the kubelet's
log writer leaves them). Each is converted and validated as kube-apiserver does it (`log_options`): a
bool never fails, an int64 fails in ``strconv.ParseInt``'s words, a time in ``time.Parse``'s.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from typing import Any, NamedTuple

from kubectl_gpushare.kube.deadlines import SECOND, seconds_duration
from kubectl_gpushare.kube.go_format import parse_rfc3339
from kubectl_gpushare.kube.go_query import GoQuery, go_bool
from kubectl_gpushare.sandbox import errors

MAX_LINES = 1000
MAX_LINE_BYTES = 4096
MAX_PODS = 10_000


def _stamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e9):09d}Z"


class ContainerLogs:
    """Each container's lines, keyed by pod UID (a pod re-created under its name starts empty); thread-safe."""

    def __init__(self) -> None:
        self._pods: OrderedDict[str, dict[str, deque[tuple[str, str]]]] = OrderedDict()
        self._lock = threading.Lock()

    def write(self, pod_uid: str, container: str, line: str) -> None:
        """Append one line (newlines inside it are kept as separate lines)."""
        with self._lock:
            containers = self._pods.get(pod_uid)
            if containers is None:
                containers = self._pods[pod_uid] = {}
                while len(self._pods) > MAX_PODS:
                    self._pods.popitem(last=False)
            lines = containers.setdefault(container, deque(maxlen=MAX_LINES))
            stamp = _stamp()
            for part in line.splitlines() or [""]:
                lines.append((stamp, part.encode()[:MAX_LINE_BYTES].decode(errors="ignore")))

    def lines(self, pod_uid: str, container: str) -> list[tuple[str, str]] | None:
        """(timestamp, text) lines, or None when nothing was written for the container."""
        with self._lock:
            found = self._pods.get(pod_uid, {}).get(container)
            return list(found) if found is not None else None

    def forget(self, pod_uid: str) -> None:
        """Drop a deleted pod's lines."""
        with self._lock:
            self._pods.pop(pod_uid, None)


def _names(containers: Any) -> list[str]:
    if not isinstance(containers, list):
        return []
    return [str(c.get("name")) for c in containers if isinstance(c, dict) and c.get("name")]


_GO_ZERO_TIME = parse_rfc3339("0001-01-01T00:00:00Z")
"""Go's ``time.Time{}``, in unix nanoseconds."""


def _since_time(query: GoQuery) -> int | None:
    """``sinceTime`` as unix nanoseconds (None: absent), as ``metav1.Convert_Slice_string_To_Pointer_v1_Time`` reads it.

    k8s.io/apimachinery/pkg/apis/meta/v1/conversion.go: the first value, through
    ``Time.UnmarshalQueryParameter`` (time.go): an empty value or ``null`` is the zero time, still set
    (`_GO_ZERO_TIME`: before every line), anything else ``time.Parse(time.RFC3339, ...)`` (`go_format.parse_rfc3339`),
    whose error the handler answers as a 400 in its words, as for an int64 (`errors.int64_option`).
    """
    if "sinceTime" not in query:
        return None
    text = query.exact("sinceTime")
    if text in ("", "null"):
        return _GO_ZERO_TIME
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from None


class LogOptions(NamedTuple):
    """A log request's ``PodLogOptions``, converted and validated as kube-apiserver does before it reads the pod."""

    container: str
    """The ``container`` parameter ("" when absent)."""
    previous: bool
    timestamps: bool
    tail_lines: int | None
    limit_bytes: int | None
    since_seconds: int | None = None
    since_time: int | None = None
    """Unix nanoseconds (`_since_time`)."""

    def since(self, now: int) -> int | None:
        """The oldest line's time to show, in unix nanoseconds at ``now``: the kubelet's ``NewLogOptions``.

        pkg/kubelet/kuberuntime/logs/logs.go: ``now.Add(-time.Duration(sinceSeconds) * time.Second)``
        (the product wraps past int64, as Go's does), then ``sinceTime`` where it is after that. None:
        every line. The kubelet gets ``sinceTime`` in whole seconds: kube-apiserver's ``LogLocation``
        (pkg/registry/core/pod/strategy.go) passes it on as ``SinceTime.Format(time.RFC3339)``, which
        drops the fraction (a line in the same second is never older).
        """
        since: int | None = None
        if self.since_seconds is not None:
            since = now - seconds_duration(self.since_seconds)
        if self.since_time is not None:
            since_time = self.since_time - self.since_time % SECOND
            if since is None or since_time > since:
                since = since_time
        return since


def log_options(query: GoQuery, pod: str) -> LogOptions:
    """The request's ``PodLogOptions``, or the 400 or 422 kube-apiserver answers before it looks the pod up.

    ``Convert_url_Values_To_v1_PodLogOptions`` (pkg/apis/core/v1/zz_generated.conversion.go) reads the
    fields in its order (follow, previous, sinceSeconds, sinceTime, timestamps, tailLines, limitBytes)
    and stops at the first error (`errors.int64_option`). A bool is ``runtime.Convert_Slice_string_To_bool``,
    which refuses nothing (`go_bool`: ``follow=yes`` is true). Then ``LogREST.Get``
    (pkg/registry/core/pod/rest/log.go) runs ``ValidatePodLogOptions`` (pkg/apis/core/validation),
    whose causes make one 422 ``PodLogOptions "<name>" is invalid``, and only then reads the pod (404).
    ``sinceTime`` is a time (`_since_time`); with ``sinceSeconds`` it is Forbidden, at no field.
    """
    container = query.get("container") or ""  # Convert_Slice_string_To_string: its first value, never an error
    previous = go_bool(query.get("previous"))
    since = errors.int64_option(query, "sinceSeconds")
    since_time = _since_time(query)
    timestamps = go_bool(query.get("timestamps"))
    tail = errors.int64_option(query, "tailLines")
    limit = errors.int64_option(query, "limitBytes")
    causes: list[str] = []
    if tail is not None and tail < 0:
        causes.append(f"tailLines: Invalid value: {tail}: must be greater than or equal to 0")
    if limit is not None and limit < 1:
        causes.append(f"limitBytes: Invalid value: {limit}: must be greater than 0")
    if since is not None and since_time is not None:  # field.Forbidden(field.NewPath(""), ...): no field name
        causes.append(": Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
    elif since is not None and since < 1:
        causes.append(f"sinceSeconds: Invalid value: {since}: must be greater than 0")
    if causes:
        raise errors.invalid("PodLogOptions", pod, causes)
    return LogOptions(container, previous, timestamps, tail, limit, since, since_time)


def _older(stamp: str, since: int) -> bool:
    """Whether a line's time is before ``since`` (unix nanoseconds); one that does not parse is never older."""
    try:
        return parse_rfc3339(stamp) < since
    except ValueError:
        return False


def pod_log(pod: dict[str, Any], options: LogOptions, logs: ContainerLogs) -> bytes:
    """The body of ``GET pods/NAME/log`` for ``pod``, or the `ApiError` kube-apiserver or the kubelet gives."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    name = str(meta.get("name", ""))
    container, tail, limit = options.container, options.tail_lines, options.limit_bytes
    containers, init = _names(spec.get("containers")), _names(spec.get("initContainers"))
    if not container:
        if len(containers) == 1:
            container = containers[0]
        elif not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        else:
            message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
            if init:
                message += f" or one of the init containers: [{' '.join(init)}]"
            raise errors.bad_request(message)
    elif container not in containers and container not in init:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    if not spec.get("nodeName"):
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    if options.previous:
        raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
    lines = logs.lines(str(meta.get("uid", "")), container)
    status = pod.get("status") or {}
    if lines is None:
        if status.get("phase") not in ("Running", "Succeeded", "Failed"):
            raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
        image = next((c.get("image", "") for c in spec.get("containers") or [] if isinstance(c, dict)
                      and c.get("name") == container), "")
        started = (status.get("startTime") or meta.get("creationTimestamp") or "")
        lines = [(str(started), f"started container {container} (image {image}) on node {spec['nodeName']}")]
    if tail is not None:
        lines = lines[max(0, len(lines) - tail):]  # a tail past the log is all of it (not a negative index)
    since = options.since(time.time_ns())
    if since is not None:  # the kubelet's logWriter.write skips a line older than since, after the tail is found
        lines = [(stamp, text) for stamp, text in lines if not _older(stamp, since)]
    body = b"".join(((f"{stamp} " if options.timestamps else "") + text + "\n").encode() for stamp, text in lines)
    return body[:limit] if limit is not None else body

