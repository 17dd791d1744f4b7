"""Where ``top`` gets each node's observed usage: the device plugins (through ``pods/proxy``) or Prometheus.

From the plugins: the device-plugin and DRA-driver pods in kube-system (label ``component`` in
`PLUGIN_COMPONENTS`, as the DaemonSets and doctor name them) are listed once; each Running one's
container port named `protocol.USAGE_PORT_NAME` is asked for `protocol.USAGE_PATH` through the API server
(``GET /api/v1/namespaces/kube-system/pods/<pod>:<port>/proxy/usage``), a bounded number at a
time, each reply bounded in size (`protocol.MAX_USAGE_BYTES`) and time (``--request-timeout``).
Any pod in that namespace with that label could answer, so a reply is decoded by the bounded
`protocol.decode_usage_report` and must name the node it was asked for. A node that does not
answer, or answers badly, is unknown (None) and named in one warning; the others stand.

From Prometheus: four instant queries (``/api/v1/query``) for the `protocol` ``METRIC_*`` series,
bounded the same way; a node with no series is unknown.
"""

from __future__ import annotations

import dataclasses
import http.client
import math
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode, urlsplit

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect.top import GpuObserved, NodeObserved, PodObserved, from_report
from kubectl_gpushare.kube import errors
from kubectl_gpushare.kube.lenient import raw_list
from kubectl_gpushare.kube.records import Warnings

if TYPE_CHECKING:
    from kubectl_gpushare.kube.client import Client

PLUGIN_NAMESPACE: Final = "kube-system"
PLUGIN_COMPONENTS: Final = ("gpushare-device-plugin", "gpushare-dra-driver")
"""The ``component`` pod label of the device plugin's DaemonSet (manifests/base/device-plugin.yaml; doctor
reads the same one) and of the DRA driver's (manifests/dra/dra-driver.yaml): both serve the node's usage."""
PLUGIN_SELECTOR: Final = f"component in ({','.join(PLUGIN_COMPONENTS)})"
MAX_CONCURRENT: Final = 16
"""Plugins asked at once: the client's pool of kept-alive connections (`kube._transport`), so no
request opens a connection of its own."""
DEFAULT_TIMEOUT: Final = 10.0
"""Seconds per plugin (and per Prometheus query) when ``--request-timeout`` is 0 (none)."""
MAX_PROMETHEUS_BYTES: Final = 64 * 2**20
"""Longest Prometheus answer read (110 pods on each of 1,000 nodes is about 40 MiB of JSON)."""
MAX_NAMED_NODES: Final = 10


class _Port(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    container_port: int = 0


class _Container(msgspec.Struct, frozen=True):
    ports: list[_Port] = []


class _Spec(msgspec.Struct, frozen=True, rename="camel"):
    node_name: str = ""
    containers: list[_Container] = []


class _Status(msgspec.Struct, frozen=True):
    phase: str = ""


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""
    namespace: str = ""


class _PluginPod(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()
    status: _Status = _Status()


_pod_decoder = msgspec.json.Decoder(_PluginPod)


class Plugin(msgspec.Struct, frozen=True):
    """The device-plugin pod serving one node, and the number of its usage port."""

    namespace: str
    name: str
    port: int


def plugins_by_node(client: Client) -> dict[str, Plugin]:
    """Running device-plugin pods with a usage port, by node (one per node; the first in name order).

    A pod that does not decode (a field of the wrong type, nested past the decoder, a string not in
    UTF-8), or has no port named `protocol.USAGE_PORT_NAME`, is left out; a reply that is no list, none.

    Raises:
        KubeError: listing the pods failed (``Forbidden`` without ``list pods`` in kube-system).
    """
    data = client.request(
        "GET", f"/api/v1/namespaces/{PLUGIN_NAMESPACE}/pods", {"labelSelector": PLUGIN_SELECTOR}
    )
    found: dict[str, Plugin] = {}
    try:
        items = raw_list(data).items  # an item nested past the decoder is split off alone
    except (msgspec.DecodeError, UnicodeDecodeError):  # msgspec raises the latter for a string not in UTF-8
        return found
    for raw in items:
        try:
            pod = _pod_decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            continue
        node = pod.spec.node_name
        if pod.status.phase != "Running" or not node or node in found:
            continue
        ports = [p.container_port for c in pod.spec.containers for p in c.ports if p.name == protocol.USAGE_PORT_NAME]
        if ports and 0 < ports[0] < 65536:
            found[node] = Plugin(pod.metadata.namespace or PLUGIN_NAMESPACE, pod.metadata.name, ports[0])
    return dict(sorted(found.items()))


def usage_timeout(request_timeout: str | None) -> float:
    """Seconds every plugin together has to answer: ``--request-timeout`` when given (not 0), else `DEFAULT_TIMEOUT`.

    Raises:
        ConfigError: the flag's value is not a duration.
    """
    from kubectl_gpushare.kube.config import parse_request_timeout

    return parse_request_timeout(request_timeout) or DEFAULT_TIMEOUT


def _timeout(client_timeout: float | None) -> float:
    return client_timeout if client_timeout else DEFAULT_TIMEOUT


def _one_node(client: Client, node: str, plugin: Plugin, deadline: float) -> protocol.UsageReport:
    """Raises KubeError or AnnotationError: that node only is unknown."""
    data = client.proxy_get(
        plugin.namespace, plugin.name, plugin.port, protocol.USAGE_PATH, max_bytes=protocol.MAX_USAGE_BYTES,
        deadline=deadline,
    )  # fmt: skip
    report = protocol.decode_usage_report(data)
    if report.node != node:
        raise protocol.AnnotationError(f"the document is for node {protocol.printable(report.node, 64)!r}")
    return report


class Fetched(msgspec.Struct):
    """What the plugins answered: documents by node, and why the others did not."""

    reports: dict[str, protocol.UsageReport]
    failures: dict[str, str]
    listing_error: str = ""


def fetch_reports(client: Client, nodes: Sequence[str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> Fetched:
    """Ask the plugins of ``nodes`` (None: of every node that has one), `MAX_CONCURRENT` at a time.

    All of them together get ``timeout`` seconds: a plugin that has not answered by then, or was
    not yet asked, is "timed out", so a thousand hung plugins cost one timeout, not a thousand.
    Safe to run in a thread beside other requests on the same client (``top`` lists pods meanwhile).
    """
    fetched = Fetched({}, {})
    try:
        plugins = plugins_by_node(client)
    except errors.KubeError as exc:
        fetched.listing_error = f"cannot list the device-plugin pods in {PLUGIN_NAMESPACE} ({exc}): usage is unknown"
        return fetched
    asked = [node for node in (plugins if nodes is None else nodes) if node in plugins]
    if not asked:
        return fetched
    from kubectl_gpushare.kube.client import Client as ProxyClient

    deadline = time.monotonic() + timeout
    proxy = ProxyClient(dataclasses.replace(client.config, timeout=timeout), client.user_agent, retry=None)

    def ask(node: str) -> tuple[str, protocol.UsageReport | None, str]:
        if time.monotonic() >= deadline:
            return node, None, "timed out"
        try:
            return node, _one_node(proxy, node, plugins[node], deadline), ""
        except errors.Unreachable as exc:
            return node, None, "timed out" if exc.timeout else "unreachable"
        except errors.ReplyTooLarge as exc:
            return node, None, "timed out" if "in time" in str(exc) else protocol.printable(str(exc), 120)
        except errors.ApiError as exc:
            return node, None, f"HTTP {exc.status}"
        except (errors.KubeError, protocol.AnnotationError) as exc:
            return node, None, protocol.printable(str(exc), 120)

    with proxy, ThreadPoolExecutor(max_workers=min(MAX_CONCURRENT, len(asked)), thread_name_prefix="top") as pool:
        for node, report, why in pool.map(ask, asked):
            if report is None:
                fetched.failures[node] = why
            else:
                fetched.reports[node] = report
    return fetched


def settle(fetched: Fetched, nodes: Sequence[str], warnings: Warnings) -> dict[str, protocol.UsageReport | None]:
    """Each of ``nodes`` with its document or None; one warning names the nodes without one."""
    if fetched.listing_error:
        warnings.add(fetched.listing_error)
        return dict.fromkeys(nodes)
    reports: dict[str, protocol.UsageReport | None] = {node: fetched.reports.get(node) for node in nodes}
    failures = {node: fetched.failures.get(node, "no running device-plugin pod with a usage port")
                for node, report in reports.items() if report is None}  # fmt: skip
    if failures:
        warnings.add(unknown_warning(failures))
    return reports


def reports_from_plugins(
    client: Client, nodes: Sequence[str], warnings: Warnings, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, protocol.UsageReport | None]:
    """Each node's usage document from its device plugin; None (and one warning for them all) where none came."""
    if not nodes:
        return {}
    return settle(fetch_reports(client, nodes, timeout), nodes, warnings)


def observations(reports: Mapping[str, protocol.UsageReport | None]) -> dict[str, NodeObserved | None]:
    """Documents as observations (`inspect.top.from_report`)."""
    return {node: None if report is None else from_report(report) for node, report in reports.items()}


def from_plugins(
    client: Client, nodes: Sequence[str], warnings: Warnings, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, NodeObserved | None]:
    """Each node's observation from its device plugin (`reports_from_plugins`)."""
    return observations(reports_from_plugins(client, nodes, warnings, timeout))


def unknown_warning(failures: Mapping[str, str]) -> str:
    """One line naming the nodes shown as unknown and why (the first few of them)."""
    named = sorted(failures)[:MAX_NAMED_NODES]
    more = len(failures) - len(named)
    listed = "; ".join(f"{node}: {failures[node]}" for node in named) + (f"; and {more} more" if more else "")
    count = len(failures)
    return f"no usage from {count} node{'' if count == 1 else 's'}, shown as <unknown> ({listed})"


# --- Prometheus ------------------------------------------------------------------------------------


class _Sample(msgspec.Struct, frozen=True):
    metric: dict[str, str]
    value: tuple[float, str]


class _Data(msgspec.Struct, frozen=True, rename="camel"):
    result_type: str
    result: list[_Sample]


class _Answer(msgspec.Struct, frozen=True, rename="camel"):
    status: str
    data: _Data | None = None
    error: str = ""


_answer_decoder = msgspec.json.Decoder(_Answer)


def _prometheus_get(url: str, query: str, timeout: float) -> list[_Sample]:
    """One instant query.

    Raises:
        Unreachable: no answer, an error status, or an answer that is not a vector.
    """
    try:
        parts = urlsplit(url)
        port = parts.port  # urllib checks the port (a number below 65536) only when asked for it
    except ValueError:  # "http://[::1" (an unclosed IPv6 host), "http://host:99999"
        parts, port = urlsplit(""), None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise errors.ConfigError(f"--prometheus {url!r} is not an http(s) URL")
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname, port, timeout=timeout,
                                                 context=ssl.create_default_context())  # fmt: skip
    else:
        connection = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)
    path = f"{parts.path.rstrip('/')}/api/v1/query?{urlencode({'query': query})}"
    deadline = time.monotonic() + timeout
    try:
        connection.request("GET", path, headers={"Accept": "application/json"})
        response = connection.getresponse()
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read1(64 * 1024):
            size += len(chunk)
            if size > MAX_PROMETHEUS_BYTES or time.monotonic() > deadline:
                raise errors.Unreachable(f"Prometheus at {url}: the answer is too long or too slow", url)
            chunks.append(chunk)
    except (OSError, http.client.HTTPException) as exc:
        timed_out = isinstance(exc, TimeoutError)
        raise errors.Unreachable(f"cannot reach Prometheus at {url}: {exc}", url, timed_out) from None
    finally:
        connection.close()
    try:
        answer = _answer_decoder.decode(b"".join(chunks))
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):  # a field nested past the decoder (one
        # Prometheus adds, such as "warnings", is skipped but still parsed), or a string not in UTF-8
        why = f"Prometheus at {url} answered HTTP {response.status} without a query result"
        raise errors.Unreachable(why, url) from None
    if answer.status != "success" or answer.data is None or answer.data.result_type != "vector":
        why = protocol.printable(answer.error, 200) or f"HTTP {response.status}"
        raise errors.Unreachable(f"Prometheus at {url} refused the query {query}: {why}", url)
    return answer.data.result


def _value(sample: _Sample) -> int | None:
    try:
        number = float(sample.value[1])
    except ValueError:
        return None
    if not math.isfinite(number) or not 0 <= number <= protocol.MAX_INT64:
        return None
    return int(number)


def _index(sample: _Sample) -> int | None:
    index = protocol.parse_int_strict(sample.metric.get("gpu", ""))
    return index if index is not None and protocol.valid_gpu_index(index) else None


def from_prometheus(
    url: str, nodes: Sequence[str], warnings: Warnings, timeout: float | None
) -> dict[str, NodeObserved | None]:
    """Each node's observation from Prometheus's latest samples; None where it has none.

    Raises:
        Unreachable: Prometheus did not answer a query, or refused it.
        ConfigError: ``url`` is not an http(s) URL.
    """
    seconds = _timeout(timeout)
    wanted = set(nodes)
    gpus: dict[str, dict[int, dict[str, object]]] = {}
    pods: dict[str, dict[tuple[str, str, int], dict[str, int | None]]] = {}

    def each(metric: str, record: Callable[[str, int, _Sample, int | None], None]) -> None:
        for sample in _prometheus_get(url, metric, seconds):
            node, index = sample.metric.get("node", ""), _index(sample)
            if node in wanted and index is not None:
                record(node, index, sample, _value(sample))

    def gpu_used(node: str, index: int, sample: _Sample, value: int | None) -> None:
        gpus.setdefault(node, {}).setdefault(index, {})["used"] = value

    def gpu_enforced(node: str, index: int, sample: _Sample, value: int | None) -> None:
        entry = gpus.setdefault(node, {}).setdefault(index, {})
        entry["enforced"] = None if value is None else value > 0
        entry["reason"] = protocol.printable(sample.metric.get("reason", ""), protocol.MAX_ENFORCEMENT_REASON)

    def pod_metric(field: str) -> Callable[[str, int, _Sample, int | None], None]:
        def record(node: str, index: int, sample: _Sample, value: int | None) -> None:
            key = (sample.metric.get("namespace", ""), sample.metric.get("pod", ""), index)
            pods.setdefault(node, {}).setdefault(key, {})[field] = value

        return record

    each(protocol.METRIC_GPU_USED, gpu_used)
    each(protocol.METRIC_GPU_ENFORCED, gpu_enforced)
    each(protocol.METRIC_POD_USED, pod_metric("used"))
    each(protocol.METRIC_POD_LIMIT, pod_metric("limit"))
    observed: dict[str, NodeObserved | None] = {}
    missing: dict[str, str] = {}
    for node in nodes:
        if node not in gpus:
            observed[node] = None
            missing[node] = "no series in Prometheus"
            continue
        observed[node] = NodeObserved(
            {index: GpuObserved(_int(e.get("used")), _bool(e.get("enforced")), str(e.get("reason", "")))
             for index, e in gpus[node].items()},
            {key: PodObserved(e.get("used"), e.get("limit")) for key, e in pods.get(node, {}).items()},
        )  # fmt: skip
    if missing:
        warnings.add(unknown_warning(missing))
    return observed


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
