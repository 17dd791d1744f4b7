"""A stand-in for the device plugin's usage HTTP server, and a small cluster for ``top``.

The stand-in is a real HTTP server on 127.0.0.1 (port 0) that answers ``GET /usage`` with a body
the test sets: a document built with `protocol.UsageReport`, or a hostile one (huge, deep,
another node's, a slow drip, a hang). It follows what the real plugin serves: the JSON document
at `protocol.USAGE_PATH` (``application/json``) and 404 elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

GIB = 1 << 30


class StandIn:
    """One node's plugin: ``body`` is served at /usage; ``hang`` holds every request until closed."""

    def __init__(self) -> None:
        self.body: bytes = b""
        self.metrics: bytes = b""
        """Served at /metrics (Prometheus text exposition) when set."""
        self.status = 200
        self.headers: dict[str, str] = {"Content-Type": "application/json"}
        self.drip: float = 0.0
        self.length = True
        """False: no Content-Length, the body ends when the connection closes."""
        self.hang = threading.Event()
        self.closing = threading.Event()
        self.paths: list[str] = []
        """Each request's target (path and query) as it arrived, in order (raw: ``http.server``'s ``path``
        turns a leading ``//`` into ``/``, CPython gh-87389)."""
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib naming
                standin.paths.append(self.raw_requestline.split(b" ")[1].decode("latin-1"))
                if standin.hang.is_set():
                    standin.closing.wait(30)
                    return
                if self.path.split("?")[0] == protocol.METRICS_PATH and standin.metrics:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(standin.metrics)))
                    self.end_headers()
                    self.wfile.write(standin.metrics)
                    return
                if self.path.split("?")[0] != protocol.USAGE_PATH:
                    self.send_error(404)
                    return
                self.send_response(standin.status)
                for key, value in standin.headers.items():
                    self.send_header(key, value)
                if standin.length:
                    self.send_header("Content-Length", str(len(standin.body)))
                else:
                    self.close_connection = True
                self.end_headers()
                if standin.drip:
                    for index in range(0, len(standin.body), 16):
                        if standin.closing.wait(standin.drip):
                            return
                        self.wfile.write(standin.body[index:index + 16])
                        self.wfile.flush()
                    return
                self.wfile.write(standin.body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


def report(node: str, gpus: list[protocol.UsageGpu], pods: list[protocol.UsagePod]) -> bytes:
    return protocol.encode_usage_report(
        protocol.UsageReport(node, "2026-01-01T00:00:00Z", 10.0, "cgroup-limits", gpus, pods)
    )


class _Latest:
    """Hands the device plugin's collector a fixed sample (it reads only ``latest()`` of its sampler)."""

    def __init__(self, report: protocol.UsageReport) -> None:
        self.report = report

    def latest(self) -> protocol.UsageReport:
        return self.report


def exposition(data: bytes) -> bytes:
    """The /metrics text the device plugin's own collector (`node.http.UsageCollector`) writes for ``data``."""
    from prometheus_client import CollectorRegistry, generate_latest

    from kubectl_gpushare.node.http import UsageCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(UsageCollector(_Latest(protocol.decode_usage_report(data))))  # type: ignore[arg-type]
    return bytes(generate_latest(registry))


def plugin_pod(node: str, ip: str, port: int = protocol.USAGE_PORT) -> dict[str, Any]:
    """A Running device-plugin pod on ``node`` with a container port named usage."""
    pod = pod_object(f"gpushare-device-plugin-{node}", "kube-system", [0], node=node, phase="Running", ip=ip,
                     labels={"component": "gpushare-device-plugin"}, ready=True)  # fmt: skip
    pod["spec"]["containers"][0]["ports"] = [
        {"name": "grpc-like", "containerPort": 1234},
        {"name": protocol.USAGE_PORT_NAME, "containerPort": port, "protocol": "TCP"},
    ]
    return pod


def cluster() -> list[dict[str, Any]]:
    """Three nodes: alpha answers (one pod over its share), bravo and charlie are made to fail by tests."""
    return [
        node_object("alpha", [16, 16], ip="10.7.0.1"),
        node_object("bravo", [8], ip="10.7.0.2"),
        node_object("charlie", [8], ip="10.7.0.3"),
        plugin_pod("alpha", "10.7.1.1"),
        plugin_pod("bravo", "10.7.1.2"),
        plugin_pod("charlie", "10.7.1.3"),
        pod_object("trainer", "team-a", [4], node="alpha", gpu=0, gpu_memory=16, uid="uid-trainer"),
        pod_object("greedy", "team-a", [2], node="alpha", gpu=0, gpu_memory=16, uid="uid-greedy"),
        pod_object("notebook", "team-b", [8], node="alpha", gpu=1, gpu_memory=16, uid="uid-notebook"),
        pod_object("server", "team-b", [3], node="bravo", gpu=0, gpu_memory=8, uid="uid-server"),
    ]


def alpha_report() -> bytes:
    gpus = [
        protocol.UsageGpu(0, "GPU-alpha-0", 16 * GIB, 6 * GIB, 10 * GIB, protocol.ENFORCE_OFF,
                          "driver 550.54 is older than r615: no memory limits"),
        protocol.UsageGpu(1, "GPU-alpha-1", 16 * GIB, 8 * GIB, 1 * GIB, protocol.ENFORCE_HARD),
    ]  # fmt: skip
    pods = [
        protocol.UsagePod("team-a", "trainer", "uid-trainer", 0, 4 * GIB, 3 * GIB),
        protocol.UsagePod("team-a", "greedy", "uid-greedy", 0, 2 * GIB, 6 * GIB + 512 * 2**20),
        protocol.UsagePod("team-b", "notebook", "uid-notebook", 1, 8 * GIB, 1 * GIB, 8 * GIB, 8 * GIB),
    ]
    return report("alpha", gpus, pods)


@contextmanager
def plugins(sandbox: Sandbox, nodes: tuple[str, ...] = ("alpha", "bravo", "charlie")) -> Iterator[dict[str, StandIn]]:
    """A stand-in per node, registered as the proxy target of that node's plugin pod; alpha serves its report."""
    with ExitStack() as stack:
        found: dict[str, StandIn] = {}
        for node in nodes:
            standin = StandIn()
            stack.callback(standin.close)
            sandbox.register_proxy_target("kube-system", f"gpushare-device-plugin-{node}",
                                          protocol.USAGE_PORT_NAME, "127.0.0.1", standin.port)  # fmt: skip
            found[node] = standin
        if "alpha" in found:
            found["alpha"].body = alpha_report()
        yield found
