"""Fixtures for the extender's integration tests: a running extender against the test's sandbox."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.extender.schedsim import ExtenderConfig, HTTPExtender
from kubectl_gpushare.extender.server import Running, ServeConfig, serve
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.server import Sandbox


@dataclass
class ExtenderProcess:
    """An extender served on a thread (stopped at teardown), with its handles."""

    thread: threading.Thread
    stop: threading.Event
    running: Running
    config: ServeConfig

    @property
    def url(self) -> str:
        scheme = "https" if self.config.tls_cert_file else "http"
        return f"{scheme}://127.0.0.1:{self.running.port}{self.config.url_prefix}"

    def scheduler(self, **kw: Any) -> HTTPExtender:
        return HTTPExtender(ExtenderConfig(url_prefix=self.url, **kw))

    def wait_synced(self, timeout: float = 20.0) -> None:
        assert self.running.cache.synced.wait(timeout), "extender cache did not sync"

    def shutdown(self, release: bool = True) -> None:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive()


def start_extender(
    kubeconfig: Path, release_lease: bool = True, request_timeout: float | None = None, **overrides: Any
) -> ExtenderProcess:
    cfg = ServeConfig(kube=load_config(str(kubeconfig), request_timeout=request_timeout), **{"port": 0, **overrides})
    stop, ready = threading.Event(), threading.Event()
    running: list[Running] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            serve(cfg, stop=stop, ready=ready, running=running, release_lease=release_lease)
        except BaseException as exc:  # surfaced by the assert below
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(20), "extender did not start"
    if errors:
        raise errors[0]
    return ExtenderProcess(thread, stop, running[0], cfg)


@pytest.fixture
def extender_factory(kubeconfig: Path) -> Iterator[Callable[..., ExtenderProcess]]:
    started: list[ExtenderProcess] = []

    def make(**overrides: Any) -> ExtenderProcess:
        ext = start_extender(kubeconfig, **overrides)
        started.append(ext)
        return ext

    yield make
    for ext in started:
        if ext.thread.is_alive():
            ext.shutdown()


@pytest.fixture
def extender(extender_factory: Callable[..., ExtenderProcess], sandbox: Sandbox) -> ExtenderProcess:
    ext = extender_factory()
    ext.wait_synced()
    return ext
