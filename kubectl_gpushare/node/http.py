"""The device plugin's HTTP port (``--usage-port``): ``/metrics`` for Prometheus, ``/usage`` for ``top``.

Both serve the sampler's latest sample, so a scrape costs no NVML call and no API request. Read-only
GET; anything else is 404/405. Port 0 binds an ephemeral port (tests, the sandbox), read back from
`UsageServer.port`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kubectl_gpushare import protocol
from kubectl_gpushare.node.usage import Sampler

log = logging.getLogger(__name__)

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"
IDLE_TIMEOUT = 10.0
"""Seconds a connection may sit without sending its request: each connection holds a thread, and the port
is open to the pod network, so a client that connects and stays silent must not keep one for ever."""


class UsageCollector(Collector):
    """Turns the latest `protocol.UsageReport` into the gauges named in `protocol`."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One family per metric; GPU and pod series labelled as `protocol.METRIC_LABELS_*`."""
        report = self.sampler.latest()
        node = report.node
        gpu_used = GaugeMetricFamily(protocol.METRIC_GPU_USED, "GPU memory in use, every process (bytes).",
                                     labels=list(protocol.METRIC_LABELS_GPU))
        enforced = GaugeMetricFamily(protocol.METRIC_GPU_ENFORCED,
                                     "1 where the driver holds pods on this GPU to their share, else 0.",
                                     labels=[*protocol.METRIC_LABELS_GPU, "mode", "reason"])
        uuids = {}
        for gpu in report.gpus:
            uuids[gpu.index] = gpu.uuid
            labels = [node, str(gpu.index), gpu.uuid]
            if gpu.used_bytes is not None:
                gpu_used.add_metric(labels, float(gpu.used_bytes))
            enforced.add_metric([*labels, gpu.enforcement, gpu.reason],
                                0.0 if gpu.enforcement == protocol.ENFORCE_OFF else 1.0)
        pod_used = GaugeMetricFamily(protocol.METRIC_POD_USED, "GPU memory a pod holds on one GPU (bytes).",
                                     labels=list(protocol.METRIC_LABELS_POD))
        pod_limit = GaugeMetricFamily(protocol.METRIC_POD_LIMIT,
                                      "Hard GPU memory limit the driver enforces for a pod on one GPU (bytes).",
                                      labels=list(protocol.METRIC_LABELS_POD))
        # One sample per label set. Two pods of one name on one GPU (one replaced under its name while
        # the old one ends) would give two series with the same labels: prometheus_client writes every
        # sample it is given and its parser reads both back (client_python d0b497f, exposition.py
        # generate_latest, parser.py), but Prometheus keeps the first and drops the second as a
        # "duplicate sample for timestamp" (prometheus d15adb9, scrape/scrape.go: scrapeCache.get's
        # alreadyScraped -> storage.ErrDuplicateSampleForTimestamp, counted by
        # prometheus_target_scrapes_sample_duplicate_timestamp_total), so it would show half of what
        # `top` shows. Merged per name by the rule `top` reads /usage with (`protocol.pod_usage_by_name`:
        # used and limits summed) rather than told apart by a ``uid`` label: a uid label makes a new
        # series at every pod re-creation (cardinality and churn in Prometheus' head), and every query
        # would have to ``sum by`` it away again to get what a pod name holds.
        for (namespace, name, index), usage in protocol.pod_usage_by_name(report.pods).items():
            labels = [node, str(index), uuids.get(index, ""), namespace, name]
            if usage.used_bytes is not None:
                pod_used.add_metric(labels, float(usage.used_bytes))
            if usage.limit_bytes is not None:
                pod_limit.add_metric(labels, float(usage.limit_bytes))
        yield from (gpu_used, enforced, pod_used, pod_limit)


class UsageServer:
    """A threaded HTTP server on ``host:port`` serving one sampler."""

    def __init__(
        self, sampler: Sampler, host: str = "", port: int = protocol.USAGE_PORT, idle_timeout: float = IDLE_TIMEOUT
    ) -> None:
        self.sampler = sampler
        self.idle_timeout = idle_timeout
        registry = CollectorRegistry(auto_describe=False)
        registry.register(UsageCollector(sampler))
        self.registry = registry
        handler = _handler(self)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one when asked for 0)."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="usage-http", daemon=True)
        self._thread.start()
        log.info("serving %s and %s on port %d", protocol.METRICS_PATH, protocol.USAGE_PATH, self.port)

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()


def _handler(server: UsageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gpushare-device-plugin"
        timeout = server.idle_timeout  # StreamRequestHandler: a silent client's read times out, its thread ends

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            try:
                if path == protocol.USAGE_PATH:
                    body = protocol.encode_usage_report(server.sampler.latest())
                    ctype = "application/json"
                elif path == protocol.METRICS_PATH:
                    body = generate_latest(server.registry)
                    ctype = CONTENT_TYPE_METRICS
                else:
                    self.send_error(404, "not found")
                    return
            except Exception:  # never a traceback on the wire
                log.exception("serving %s failed", path)
                self.send_error(500, "sample failed")
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _not_allowed(self) -> None:
            self.send_response(405, "method not allowed")
            self.send_header("Allow", "GET")
            self.send_header("Content-Length", "0")
            self.end_headers()

        # http.server answers a method without a do_ handler 501 Not Implemented; these are known methods
        # this read-only port refuses (RFC 9110 section 15.5.6: 405 with an Allow header).
        do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
            log.debug("usage http: " + format, *args)

    return Handler
