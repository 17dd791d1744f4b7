"""DRA nodes for ``sandbox --stack``: the DRA driver and kubelet's DRA manager on each of them.

A node labelled ``gpushare.kubectl-gpushare.io/dra=true`` (the DRA driver DaemonSet's node
selector, ``manifests/dra``) whose hardware is known runs, as threads of this process: the DRA
driver (`dra.daemon.serve`, fake GPUs) and a kubelet stand-in (`dra.kubeletsim.KubeletSim`) that
registers it over unix sockets in the node's own directory; the driver publishes the node's
ResourceSlice through the API, as on a real cluster. A pod bound there with ResourceClaims is
prepared (``NodePrepareResources``) before it is reported Running; a preparation that fails is a
``FailedPrepareDynamicResources`` Warning Event (``Failed to prepare dynamic resources: ...``) and
the pod stays Pending, retried with backoff, as kubelet's pod sync does. A pod that is gone has its
claims unprepared. When the label goes, the driver stops and deletes its slice. A driver that stops
otherwise (it failed) has its slice wiped by the kubelet stand-in 30 s later, as kubelet does.

Differs from a node: the driver's CDI specs are written but no container reads them; pods running
before a restart of the stack are not prepared again (the driver's checkpoint has them).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.node.fake_backend import FakeBackend

log = logging.getLogger("kubectl_gpushare.nodes")

REGISTER_PATIENCE: Final = 60.0
"""Seconds a new driver has to register with its kubelet before it is reported as failed."""
FAILED_PREPARE: Final = "FailedPrepareDynamicResources"
"""kubelet's event reason (``pkg/kubelet/events``) when NodePrepareResources fails."""


@dataclass
class DraAgent:
    """The DRA driver and its kubelet on one node."""

    node: str
    directory: str
    kubelet: Any
    """A `dra.kubeletsim.KubeletSim` (imported with grpc, only when a DRA node exists)."""
    client: Client
    stop: threading.Event
    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)


def is_dra_node(node: Mapping[str, Any]) -> bool:
    """Labelled for the DRA driver's DaemonSet."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, dict) and labels.get(protocol.LABEL_DRA) == "true"


class DraAgents:
    """Start and stop DRA drivers with their label; prepare and unprepare the claims of bound pods."""

    def __init__(self, kubeconfig: Path, workdir: str, host: Callable[[str, str], tuple[FakeBackend, Path]]) -> None:
        """``host(node, gpus)`` gives the node's fake GPUs (shared with the device plugin's, as on a host)."""
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.host = host
        self.agents: dict[str, DraAgent] = {}
        self._lock = threading.Lock()
        self.prepared: dict[str, dict[str, Any]] = {}
        """pod uid -> the pod as prepared (what unprepare needs)."""

    def reconcile(self, nodes: Mapping[str, Mapping[str, Any]], hardware: Callable[[str], str | None]) -> None:
        """Drivers on the labelled nodes with hardware, none elsewhere."""
        for name, node in nodes.items():
            gpus = hardware(name)
            if is_dra_node(node) and gpus and name not in self.agents:
                self._start(name, gpus)
            elif not is_dra_node(node) and name in self.agents:
                self._stop_agent(name)
        for name in [n for n in self.agents if n not in nodes]:
            self._stop_agent(name)

    def _start(self, node: str, gpus: str) -> None:
        from kubectl_gpushare.dra.daemon import Config, serve
        from kubectl_gpushare.dra.kubeletsim import KubeletSim

        directory = tempfile.mkdtemp(prefix="dra", dir=self.workdir)  # short: socket paths are limited
        client = Client(load_config(str(self.kubeconfig)), component="dra-driver")
        kubelet = KubeletSim(str(Path(directory, "reg")), client, node_name=node)
        backend, _ = self.host(node, gpus)
        cfg = Config(node_name=node, registration_dir=str(Path(directory, "reg")),
                     plugin_dir=str(Path(directory, "plugin")), cdi_root=str(Path(directory, "cdi")),
                     fake_gpus=gpus, health_check=False, poll_interval=2.0)
        stop = threading.Event()
        agent = DraAgent(node, directory, kubelet, client, stop, threading.Thread())

        def run() -> None:
            try:
                serve(cfg, stop=stop, backend=backend, client=client)
            except BaseException as exc:  # logged; the node simply has no driver
                agent.errors.append(exc)
                log.error("DRA driver on %s stopped: %s", node, exc)

        # kubelet runs before the driver's DaemonSet pod; a socket its plugin manager dials before the
        # driver serves it is tried again with backoff, so both start together here.
        kubelet.start()
        agent.thread = threading.Thread(target=run, name=f"dra-driver {node}", daemon=True)
        agent.thread.start()
        with self._lock:
            self.agents[node] = agent
        log.info("DRA driver on %s started with %s", node, gpus)

    def _stop_agent(self, node: str) -> None:
        with self._lock:
            agent = self.agents.pop(node, None)
        if agent is None:
            return
        agent.stop.set()
        agent.thread.join(15)
        agent.kubelet.stop()
        agent.client.close()
        shutil.rmtree(agent.directory, ignore_errors=True)
        log.info("DRA driver on %s stopped", node)

    def stop(self) -> None:
        """Stop every driver and kubelet."""
        for name in list(self.agents):
            self._stop_agent(name)

    def wait_registered(self, node: str, timeout: float = REGISTER_PATIENCE) -> bool:
        """Whether ``node``'s driver registered with its kubelet within ``timeout`` seconds."""
        agent = self.agents.get(node)
        return agent is not None and agent.kubelet.wait_registered(protocol.DRA_DRIVER, timeout) is not None

    def prepare(self, pod: dict[str, Any], node: str) -> str:
        """NodePrepareResources for the pod's claims; "" when prepared, else kubelet's event message."""
        from kubectl_gpushare.dra.kubeletsim import KubeletPrepareError

        agent = self.agents.get(node)
        if agent is None:
            return f"Failed to prepare dynamic resources: DRA driver {protocol.DRA_DRIVER} is not registered"
        try:
            agent.kubelet.prepare(pod)
        except KubeletPrepareError as exc:
            return f"Failed to prepare dynamic resources: {exc}"
        self.prepared[str(pod["metadata"].get("uid", ""))] = pod
        return ""

    def forget(self, uid: str) -> None:
        """The pod is gone: unprepare what only it used (kubelet's UnprepareResources)."""
        from kubectl_gpushare.dra.kubeletsim import KubeletPrepareError

        pod = self.prepared.pop(uid, None)
        if pod is None:
            return
        agent = self.agents.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if agent is None:
            return
        try:
            agent.kubelet.unprepare(pod)
        except KubeletPrepareError as exc:
            log.warning("unprepare the claims of pod %s: %s", pod["metadata"].get("name"), exc)
