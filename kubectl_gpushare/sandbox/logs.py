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
exited does), ``sinceSeconds``/``sinceTime`` (accepted; every line is recent).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from kubectl_gpushare import protocol
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


def _int_param(query: Mapping[str, str], name: str, pod: str) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    value = protocol.parse_int_strict(raw)  # strconv.ParseInt(raw, 10, 64), as the query's int64 is decoded
    if value is None:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw[:64]}": invalid syntax')
    if value < 0:
        cause = f"{name}: Invalid value: {value}: must be greater than or equal to 0"
        raise errors.invalid("PodLogOptions", pod, [cause])
    return value


def _flag(query: Mapping[str, str], name: str) -> bool:
    raw = query.get(name, "false")
    if raw not in ("true", "false", "1", "0", "True", "False", ""):
        raise errors.bad_request(f'strconv.ParseBool: parsing "{raw[:64]}": invalid syntax')
    return raw in ("true", "1", "True")


def pod_log(pod: dict[str, Any], query: Mapping[str, str], logs: ContainerLogs) -> bytes:
    """The body of ``GET pods/NAME/log`` for ``pod``, or the `ApiError` kube-apiserver or the kubelet gives."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    name = str(meta.get("name", ""))
    tail = _int_param(query, "tailLines", name)
    limit = _int_param(query, "limitBytes", name)
    timestamps, previous = _flag(query, "timestamps"), _flag(query, "previous")
    _flag(query, "follow")
    containers, init = _names(spec.get("containers")), _names(spec.get("initContainers"))
    container = query.get("container") or ""
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
    if previous:
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
        lines = lines[len(lines) - tail:] if tail else []
    body = b"".join(((f"{stamp} " if timestamps else "") + text + "\n").encode() for stamp, text in lines)
    return body[:limit] if limit is not None else body

