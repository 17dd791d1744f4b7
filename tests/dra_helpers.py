"""Helpers for the DRA driver's tests (fixtures in tests/integration/dra/conftest.py): the driver's
directories, ``serve`` on a thread, claims as the scheduler leaves them, and a
registration socket that exists before anything serves it."""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from node_agents import ServeThread

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.dra import slices
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra.daemon import Config, Driver, serve
from kubectl_gpushare.dra.servicer import RegistrationServicer
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.node.health import GpuState
from kubectl_gpushare.node.sockets import target

NODE = "gpu-node-1"
GIB = 1 << 30


def node_devices(spec: str = "1x16GiB") -> slices.Devices:
    """The devices the publisher would publish for NODE's fake GPUs (``spec``: `FakeBackend.from_spec`), all healthy."""
    states = [GpuState(gpu) for gpu in FakeBackend.from_spec(spec, seed=NODE).devices()]
    return slices.devices(states, protocol.UNIT_GIB, "remove")


@dataclass(frozen=True)
class Dirs:
    """The host directories the driver uses, under one short temporary directory."""

    root: Path

    @property
    def registration(self) -> str:
        return str(self.root / "reg")

    @property
    def plugin(self) -> str:
        return str(self.root / "plugin")

    @property
    def cdi(self) -> str:
        return str(self.root / "cdi")

    def cdi_spec(self, uid: str) -> Path:
        return Path(self.cdi) / f"k8s.gpu-mem.kubectl-gpushare.io-claim_{uid}.json"


def driver_command(dirs: Dirs, kubeconfig: Path, *extra: str) -> list[str]:
    """``kubectl-gpushare serve-dra-driver`` on two fake 16GiB GPUs and ``dirs``, as the installed entry point."""
    return [str(Path(sys.executable).parent / "kubectl-gpushare"), "serve-dra-driver", "--fake-gpus", "2x16GiB",
            "--plugin-registration-dir", dirs.registration, "--plugin-dir", dirs.plugin, "--cdi-root", dirs.cdi,
            "--kubeconfig", str(kubeconfig), *extra]


@contextmanager
def served_grpc(
    path: str, registration: RegistrationServicer | None, dra: v1_grpc.DRAPluginServicer | None
) -> Iterator[grpc.Server]:
    """A gRPC server on the unix socket ``path`` with the given services (a stand-in plugin), stopped after."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    if registration is not None:
        reg_grpc.add_RegistrationServicer_to_server(registration, server)  # type: ignore[no-untyped-call]
    if dra is not None:
        v1_grpc.add_DRAPluginServicer_to_server(dra, server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(target(path))
    server.start()
    try:
        yield server
    finally:
        server.stop(None)


def saved_claims(plugin_dir: str | Path) -> dict[str, Any]:
    """The claims the checkpoint on disk holds now, read without touching it: the document, then each
    journal line in order (a claim prepared, or removed)."""
    claims: dict[str, Any] = json.loads((Path(plugin_dir) / "checkpoint.json").read_text())["claims"]
    journal = Path(plugin_dir) / "checkpoint.journal"
    for line in journal.read_text().splitlines() if journal.exists() else []:
        change = json.loads(line)
        for uid in change.get("unprepared", []):
            claims.pop(uid, None)
        claims.update(change.get("prepared", {}))
    return claims


class RunningDriver(ServeThread[Config, Driver]):
    """``serve`` on a thread with a FakeBackend the test can poke (None: the driver opens NVML itself)."""

    def __init__(self, cfg: Config, backend: FakeBackend | None) -> None:
        super().__init__(serve, cfg, backend, what="driver", name="dra-under-test")

    @property
    def driver(self) -> Driver | None:
        return self.agent


class Claims:
    """ResourceClaims and pods as the scheduler leaves them: the claim allocated and reserved for the pod."""

    def __init__(self, api: Client) -> None:
        self.api = api
        self.count = 0

    def pod(self, name: str, claims: dict[str, str], namespace: str = "default", node: str = NODE) -> dict[str, Any]:
        """A pod on ``node`` referencing ``claims`` (pod claim name -> ResourceClaim name); its JSON, with UID."""
        body = {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "cuda", "resources": {
                    "claims": [{"name": pod_claim} for pod_claim in claims]}}],
                "resourceClaims": [{"name": pod_claim, "resourceClaimName": claim}
                                   for pod_claim, claim in claims.items()],
            },
        }
        created = self.api.create(types.PODS, body, namespace)
        body["metadata"]["uid"] = created.metadata.uid
        return body

    def claim(
        self,
        name: str,
        *,
        device: str = "gpu-0",
        memory: str | None = "4Gi",
        pool: str = NODE,
        driver: str = protocol.DRA_DRIVER,
        pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
        namespace: str = "default",
        results: list[dict[str, Any]] | None = None,
        allocate: bool = True,
    ) -> dra_objects.WireResourceClaim:
        """Create a claim asking ``memory`` of our class, then allocate it on ``device`` via /status."""
        self.count += 1
        request: dict[str, Any] = {"deviceClassName": protocol.DRA_DEVICE_CLASS}
        if memory is not None:
            request["capacity"] = {"requests": {"memory": memory}}
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}
        created: dra_objects.WireResourceClaim = self.api.create(types.DRA_CLAIMS, body, namespace)
        if not allocate:
            return created
        result: dict[str, Any] = {"request": "gpu", "driver": driver, "pool": pool, "device": device,
                                  "shareID": f"00000000-0000-4000-8000-{self.count:012d}"}
        if memory is not None:
            result["consumedCapacity"] = {"memory": memory}
        status = {"status": {
            "allocation": {"devices": {"results": results if results is not None else [result]}},
            "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                            for p in pods],
        }}
        patched: dra_objects.WireResourceClaim = self.api.patch(types.DRA_CLAIMS, name, status, namespace, "merge",
                                                      subresource="status")
        return patched

    def on_both_gpus(self, count: int, memory: str) -> list[dra_objects.WireResourceClaim]:
        """``count`` claims named c0, c1, ... of ``memory`` each, allocated on gpu-0 and gpu-1 in turn."""
        return [self.claim(f"c{i}", device=f"gpu-{i % 2}", memory=memory) for i in range(count)]

    def reserve(self, name: str, pods: list[dict[str, Any]], namespace: str = "default") -> None:
        """Set the claim's ``status.reservedFor`` to ``pods``, as the scheduler does when another pod joins it."""
        status = {"status": {"reservedFor": [
            {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods]}}
        self.api.patch(types.DRA_CLAIMS, name, status, namespace, "merge", subresource="status")




class NotServedYet:
    """A unix socket file that exists before anything serves it, then is served through the same file.

    Until `serve_from` its connections are accepted and closed at once (a dial gets no HTTP/2 answer,
    as when the plugin's server is not up yet); afterwards each connection is forwarded to
    ``upstream``, a socket a driver serves elsewhere. The file is never re-created, so a watcher sees
    one socket whose first answers failed.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.closed_unserved = 0
        self._upstream: str | None = None
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self._threads = [threading.Thread(target=self._accept, name="not-served-yet", daemon=True)]
        self._threads[0].start()

    def serve_from(self, upstream: str) -> None:
        self._upstream = upstream

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            if self._upstream is None:
                self.closed_unserved += 1
                conn.close()
                continue
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self._upstream)
            thread = threading.Thread(target=self._forward, args=(conn, upstream), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _forward(self, a: socket.socket, b: socket.socket) -> None:
        with a, b, selectors.DefaultSelector() as selector:
            selector.register(a, selectors.EVENT_READ, b)
            selector.register(b, selectors.EVENT_READ, a)
            while not self._stop.is_set():
                for key, _ in selector.select(0.05):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(1 << 16)
                        if data:
                            key.data.sendall(data)
                    except OSError:
                        data = b""
                    if not data:
                        return
