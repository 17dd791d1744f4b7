"""The extender daemon: wires client, cache, leader election, binder, app and HTTP server.

`serve` is the one lifecycle both the CLI and the tests run: it returns when ``stop`` is set, sets
``ready`` once the socket accepts connections, and on the way out releases the Lease (so the other
replica takes over at once), stops the server, its threads and the watches, in that order.

Kubernetes readiness (``/readyz``) is stricter than ``ready``: the cache must have synced and be
current (no list or watch failing for ``cache_stale_after`` seconds) and, with leader election,
this replica must lead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
from dataclasses import dataclass, field, fields
from typing import Literal

from kubectl_gpushare.extender.app import DEFAULT_MAX_REQUEST_BYTES, ExtenderApp
from kubectl_gpushare.extender.binder import DEFAULT_DEADLINE, DEFAULT_UNKNOWN_GRACE, Binder
from kubectl_gpushare.extender.cache import ExtenderCache
from kubectl_gpushare.extender.httpd import Limits, start_http_server
from kubectl_gpushare.extender.kubeapi import KubeApi
from kubectl_gpushare.extender.leader import LeaderConfig, LeaderElector
from kubectl_gpushare.extender.metrics import ExtenderMetrics
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import ClientConfig
from kubectl_gpushare.ledger import Policy

log = logging.getLogger("kubectl_gpushare.extender")


@dataclass
class ServeConfig:
    """Everything `serve` needs; the CLI fills it from flags and environment."""

    kube: ClientConfig | None = field(default=None, repr=False)
    bind_address: str = "127.0.0.1"
    port: int = 39999
    url_prefix: str = "/gpushare-scheduler"
    policy: Policy = "binpack"
    leader_elect: bool = False
    lease_namespace: str = "kube-system"
    lease_name: str = "gpushare-schd-extender"
    identity: str = ""
    lease_duration: float = 12.0
    renew_deadline: float = 8.0
    retry_period: float = 1.0
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    cache_stale_after: float = 30.0
    """Seconds a failing list or watch may last before ``/readyz`` reports not ready."""
    limits: Limits = field(default_factory=Limits)
    """Connections, request bytes in flight, idle and read time (see `httpd.Limits`)."""
    bind_deadline: float = DEFAULT_DEADLINE
    unknown_grace: float = DEFAULT_UNKNOWN_GRACE
    log_format: Literal["text", "json"] = "text"

    def effective(self) -> str:
        """The settings as one JSON line for the start-up log (no credentials: the kube config is left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("kube", "limits")}
        values.update({f.name: getattr(self.limits, f.name) for f in fields(self.limits)})
        values["api_server"] = self.kube.server if self.kube is not None else None
        return json.dumps(values, sort_keys=True)


def default_identity() -> str:
    """The Lease holder name: the pod name in a cluster (``POD_NAME``), else host name and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


@dataclass
class Running:
    """Handles of a running extender, for tests that inspect it while `serve` runs."""

    app: ExtenderApp
    state: ExtenderState
    cache: ExtenderCache
    port: int
    elector: LeaderElector | None


def serve(
    cfg: ServeConfig,
    *,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
    running: list[Running] | None = None,
    release_lease: bool = True,
) -> None:
    """Run the extender until ``stop`` is set; set ``ready`` once the socket accepts connections.

    Args:
        cfg: the configuration (``cfg.kube`` must be set).
        stop: set to shut down; a fresh Event (never set) when None.
        ready: set once the HTTP socket is listening.
        running: if given, receives the `Running` handles once started (for tests and embedders).
        release_lease: release the Lease on the way out (False simulates a crash for tests).

    Raises:
        OSError: the address cannot be bound.
        ssl.SSLError: the TLS certificate or key cannot be loaded.
        kube.errors.KubeError: the API client cannot be created.
    """
    if cfg.kube is None:
        raise ValueError("ServeConfig.kube is required")
    stop = stop or threading.Event()
    log.info("starting extender with %s", cfg.effective())
    client = Client(cfg.kube, component="extender")
    # Binds and the Lease: one request at most a quarter of the bind deadline, retried only by KubeApi
    # within its budget, so a bind answers before kube-scheduler gives up on it.
    request_timeout = min(cfg.kube.timeout or cfg.bind_deadline, cfg.bind_deadline / 4)
    api = KubeApi(Client(dataclasses.replace(cfg.kube, timeout=request_timeout), component="extender", retry=None))
    state = ExtenderState()
    # An unbound pod's GPU claim lives as long as its Binding may still land: sent within the bind
    # deadline (plus one request) of the claim, landing within the grace of being sent.
    cache = ExtenderCache(client, state, claim_lifetime=cfg.bind_deadline + request_timeout + cfg.unknown_grace)
    elector: LeaderElector | None = None
    if cfg.leader_elect:
        elector = LeaderElector(
            api,
            LeaderConfig(cfg.lease_namespace, cfg.lease_name, cfg.identity or default_identity(),
                         cfg.lease_duration, cfg.renew_deadline, cfg.retry_period),
            on_started_leading=cache.catch_up,
        )
    is_leader = elector.is_leader if elector is not None else (lambda: True)
    binder = Binder(api, state, policy=cfg.policy, is_leader=is_leader, deadline=cfg.bind_deadline,
                    request_timeout=request_timeout, unknown_grace=cfg.unknown_grace,
                    sweep_interval=min(1.0, cfg.unknown_grace / 4))

    def unavailable() -> str:
        return "" if cache.synced.is_set() else "the extender's cache has not synced with the API server yet"

    app = ExtenderApp(
        state, binder, prefix=cfg.url_prefix, policy=cfg.policy, max_request_bytes=cfg.max_request_bytes,
        ready=lambda: cache.current(cfg.cache_stale_after) and is_leader(), unavailable=unavailable,
        metrics=ExtenderMetrics(state, is_leader),
    )
    httpd, thread = start_http_server(app, cfg.bind_address, cfg.port, tls_cert_file=cfg.tls_cert_file,
                                      tls_key_file=cfg.tls_private_key_file, limits=cfg.limits)
    port = int(httpd.server_address[1])
    scheme = "https" if cfg.tls_cert_file else "http"
    log.info("extender listening on %s://%s:%d%s", scheme, cfg.bind_address, port, app.prefix)
    try:
        cache.start()
        if running is not None:
            running.append(Running(app, state, cache, port, elector))
        if ready is not None:
            ready.set()
        while not stop.is_set():
            if cache.synced.wait(0.1):
                break
        if not stop.is_set():
            nodes, pods = state.counts()
            log.info("cache synced: %d nodes, %d GPU pods", nodes, pods)
            if elector is not None:
                elector.start()
            binder.start_sweeper()
        stop.wait()
    finally:
        log.info("extender stopping")
        if elector is not None:
            elector.stop(release=release_lease, drain=lambda: binder.drain(10.0))
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
        binder.close()
        cache.stop()
        client.close()
        api.client.close()
