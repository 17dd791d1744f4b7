"""The scheduler stand-in (`cli.scheduler.SchedulerLoop`) on a sandbox, with its own API client, for a test."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

from kubectl_gpushare.cli.scheduler import Extender, SchedulerLoop
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.errors import API_REQUEST_TIMEOUT
from kubectl_gpushare.sandbox.server import Sandbox


@contextlib.contextmanager
def scheduler_loop(sandbox: Sandbox, kubeconfig: Path, extenders: Sequence[Extender] = (), *, start: bool = False,
                   client_timeout: float | None = None, server: str | None = None,
                   request_timeout: float | None = None) -> Iterator[SchedulerLoop]:
    """A stand-in calling ``extenders``, driven by `SchedulerLoop.run_once` (its thread too with ``start``).

    ``client_timeout``: its API client gives up on a request after this long; ``server``: its API
    server URL (a `tests.api_relay.relay` in front of the sandbox); ``request_timeout``: the API
    server's ``--request-timeout`` it assumes. Stopped, and its client closed, on exit.
    """
    config = load_config(str(kubeconfig))
    if client_timeout is not None:
        config = dataclasses.replace(config, timeout=client_timeout)
    if server is not None:
        config = dataclasses.replace(config, server=server)
    api = Client(config, component="test-scheduler")
    try:
        loop = SchedulerLoop(sandbox, api, list(extenders),
                             request_timeout=API_REQUEST_TIMEOUT if request_timeout is None else request_timeout)
        if start:
            loop.start()
        try:
            yield loop
        finally:
            loop.stop()
    finally:
        api.close()
