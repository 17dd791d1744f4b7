"""Fixtures for the device-plugin integration tests: a short socket directory, the kubelet
stand-in, and a running plugin (``serve`` on a thread) against the test's sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from node_agents import ServeThread, socket_dir

from kubectl_gpushare.deviceplugin.daemon import Config, KubeOptions, Plugin, serve
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

NODE = "gpu-node-1"
GIB = 1 << 30


@pytest.fixture
def plugin_dir() -> Iterator[str]:
    """A device-plugin directory short enough for unix socket paths (pytest's tmp_path may not be)."""
    with socket_dir("dp") as path:
        yield path


@pytest.fixture
def kubelet(plugin_dir: str) -> Iterator[KubeletSim]:
    sim = KubeletSim(plugin_dir).start()
    try:
        yield sim
    finally:
        sim.stop()


class RunningPlugin(ServeThread[Config, Plugin]):
    """``serve`` on a thread with a FakeBackend the test can poke (None: the plugin opens NVML itself)."""

    def __init__(self, cfg: Config, backend: FakeBackend | None) -> None:
        super().__init__(serve, cfg, backend, what="plugin", name="plugin-under-test")

    @property
    def plugin(self) -> Plugin | None:
        return self.agent

    @property
    def socket(self) -> str:
        return str(Path(self.cfg.device_plugin_path) / self.cfg.endpoint)


@pytest.fixture
def start_plugin(sandbox: Sandbox, kubeconfig: Path, plugin_dir: str) -> Iterator[Any]:
    """Start a plugin for NODE: ``start_plugin("2x16GiB", memory_unit="GiB", ...)``; stopped after.

    A spec of None runs it without ``--fake-gpus``: on NVML, as on a GPU node.
    """
    running: list[RunningPlugin] = []

    def start(
        spec: str | None = "2x16GiB", *, node: str = NODE, add_node: bool = True, **overrides: Any
    ) -> RunningPlugin:
        if add_node and sandbox.get("nodes", None, node) is None:
            sandbox.load(
                [namespace_object("default"), node_object(node, [], ip="10.0.0.1", labels={"gpushare": "true"})]
            )
        cfg = Config(
            node_name=node,
            device_plugin_path=plugin_dir,
            fake_gpus=spec,
            kube=KubeOptions(kubeconfig=str(kubeconfig)),
            **{"poll_interval": 0.1, "max_backoff": 1.0, "sync_timeout": 10, **overrides},
        )
        backend = FakeBackend.from_spec(spec, seed=node, ignored_xids=cfg.ignored_xids) if spec is not None else None
        plugin = RunningPlugin(cfg, backend)
        running.append(plugin)
        return plugin.start()

    yield start
    for plugin in running:
        if plugin.thread.is_alive():
            plugin.shutdown()


class Pods:
    """Create pods over HTTP as the extender leaves them, and read their annotations back."""

    def __init__(self, sandbox: Sandbox, api: Client) -> None:
        self.sandbox = sandbox
        self.api = api

    def create(
        self, name: str, requests: list[int], *, gpu: int | None, node: str = NODE, **kwargs: Any
    ) -> dict[str, Any]:
        """A bound pod with the extender's annotations (ASSIGNED=false), or none when ``gpu`` is None."""
        body = pod_object(name, "default", requests, node=node, gpu=gpu, phase="Pending", assigned=False, **kwargs)
        created = self.api.create(types.PODS, body, "default")
        body["metadata"]["uid"] = created.metadata.uid
        return body

    def annotations(self, name: str) -> dict[str, str]:
        pod = self.sandbox.get("pods", "default", name)
        assert pod is not None
        return dict(pod["metadata"].get("annotations", {}))


@pytest.fixture
def pods(sandbox: Sandbox, api: Client) -> Pods:
    return Pods(sandbox, api)
