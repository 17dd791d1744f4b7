"""Fixtures for the DRA driver's tests (helpers in tests/dra_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_helpers import NODE, Claims, Dirs, RunningDriver
from node_agents import socket_dir

from kubectl_gpushare.dra.daemon import Config
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.sandbox.builders import namespace_object, node_object
from kubectl_gpushare.sandbox.server import Sandbox


@pytest.fixture
def dirs() -> Iterator[Dirs]:
    """Short enough for unix socket paths (pytest's tmp_path may not be)."""
    with socket_dir("dra") as path:
        yield Dirs(Path(path))


@pytest.fixture
def start_driver(sandbox: Sandbox, kubeconfig: Path, dirs: Dirs) -> Iterator[Callable[..., RunningDriver]]:
    """Start a driver for NODE: ``start_driver("2x16GiB", memory_unit="MiB", ...)``; stopped after.

    A spec of None runs it without ``--fake-gpus``: on NVML, as on a GPU node.
    """
    running: list[RunningDriver] = []

    def start(spec: str | None = "2x16GiB", *, node: str = NODE, backend: FakeBackend | None = None,
              **overrides: Any) -> RunningDriver:
        if sandbox.get("nodes", None, node) is None:
            sandbox.load([namespace_object("default"), node_object(node, [], ip="10.0.0.1", gpushare=False)])
        kube = {"kubeconfig": str(kubeconfig), **overrides.pop("kube", {})}  # kube={"request_timeout": "1s"}
        settings: dict[str, Any] = {"registration_dir": dirs.registration, "plugin_dir": dirs.plugin,
                                    "cdi_root": dirs.cdi, "poll_interval": 0.05, **overrides}
        cfg = Config(node_name=node, fake_gpus=spec, kube=kube, **settings)
        if backend is None and spec is not None:
            backend = FakeBackend.from_spec(spec, seed=node)
        driver = RunningDriver(cfg, backend)
        running.append(driver)
        return driver.start()

    yield start
    for driver in running:
        if driver.thread.is_alive():
            driver.shutdown()


@pytest.fixture
def kubelet(api: Client, dirs: Dirs) -> Iterator[KubeletSim]:
    sim = KubeletSim(dirs.registration, api).start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def claims(api: Client) -> Claims:
    return Claims(api)
