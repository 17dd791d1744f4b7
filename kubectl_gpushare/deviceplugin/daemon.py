"""The device plugin's lifecycle: ``serve(cfg, *, stop, ready)``.

Start-up: open the GPU backend, size the device list against kubelet's message limit (refusing at
once with a clear message when it cannot fit), connect to the API server, publish the node's GPUs
and start the watch cache of this node's pods. Then, in a loop until ``stop``: serve gRPC on the
plugin socket, confirm it by dialling it, register with kubelet (retrying with backoff while
kubelet is absent, and at once when ``kubelet.sock`` appears), and watch for kubelet restarts (a
re-created ``kubelet.sock``) or our socket being deleted (also while still registering: a kubelet
that restarts again wipes the socket we just served), which restart the server and register again.
Health events from the backend update the advertised list as they come.

This module wires the parts together; decisions live in `allocator`, `devices` and the backends.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import asdict, dataclass, field
from typing import Protocol

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin import devices as devices_mod
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc
from kubectl_gpushare.deviceplugin.allocation import AllocationBook, AssignmentRecorder, PodSource
from kubectl_gpushare.deviceplugin.allocator import VisibleMode
from kubectl_gpushare.deviceplugin.devices import DeviceConfigError, Inventory, MemoryUnit
from kubectl_gpushare.deviceplugin.kubelet import (
    Registration,
    RegistrationError,
    SocketIdentity,
    check_plugin_dir,
    check_socket_path,
    dial,
    socket_identity,
)
from kubectl_gpushare.deviceplugin.node_agent import NodeAgent
from kubectl_gpushare.deviceplugin.servicer import POOL_SIZE, Advertisement, DevicePluginServicer
from kubectl_gpushare.node import cgroups, health
from kubectl_gpushare.node.daemon import EXIT_BACKEND, EXIT_CONFIG, DaemonError, api_client, open_agent_backend
from kubectl_gpushare.node.gpus import BackendError, GpuBackend, HealthEvent

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class KubeOptions:
    """How to reach the API server (kubectl's flags; in-cluster config when all are empty)."""

    kubeconfig: str | None = None
    context: str | None = None
    cluster: str | None = None
    user: str | None = None
    as_user: str | None = None
    as_groups: tuple[str, ...] = ()
    request_timeout: str | None = None


@dataclass(frozen=True)
class Config:
    """Everything ``serve`` needs; the command builds it from flags and environment."""

    node_name: str
    device_plugin_path: str = protocol.DEVICE_PLUGIN_PATH
    endpoint: str = protocol.PLUGIN_SOCKET
    resource: str = protocol.RESOURCE_MEM
    memory_unit: str = protocol.UNIT_GIB
    unit_size: int = 1
    fake_gpus: str | None = None
    visible_devices: VisibleMode = "index"
    health_check: bool = True
    ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS
    fail_on_init_error: bool = True
    kube: KubeOptions = field(default_factory=KubeOptions)
    poll_interval: float = 0.5
    max_backoff: float = 5.0
    sync_timeout: float = 30.0
    enforce_memory: str = protocol.ENFORCE_OFF
    usage_interval: float = 10.0
    usage_port: int | None = None
    """The command's default is `protocol.USAGE_PORT`; 0: an ephemeral port (tests, the sandbox); None: none."""
    usage_host: str = ""
    cgroup_root: str = "/sys/fs/cgroup"
    cgroup_driver: str | None = None
    """``systemd``, ``cgroupfs``, or None to detect it from the cgroup tree."""
    proc_root: str = "/proc"

    def as_json(self) -> str:
        """The effective configuration, logged once at start."""
        data = asdict(self)
        data["ignored_xids"] = sorted(self.ignored_xids)
        return json.dumps(data, sort_keys=True)


class Cluster(Protocol):
    """The API-server side the daemon needs (see `cluster.NodeCluster`)."""

    def start(self) -> None:
        """Start the watch caches."""
        ...

    def wait_synced(self, timeout: float) -> bool:
        """Wait for the first full list of this node's pods."""
        ...

    def publish(self, inventory: Inventory) -> None:
        """Write ``aliyun.com/gpu-count`` and the per-GPU annotation onto the node."""
        ...

    def cgpu_disable(self) -> bool:
        """Whether the node carries ``cgpu.disable.isolation=true``."""
        ...

    def stop(self) -> None:
        """Stop the watch caches."""
        ...

    @property
    def source(self) -> PodSource:
        """This node's pods."""
        ...

    on_pods_changed: list[Callable[[], None]]
    """Called after any pod of this node changes (the enforcement loop wakes on it)."""

    @property
    def recorder(self) -> AssignmentRecorder:
        """Where assignments are written."""
        ...


def make_backend(cfg: Config) -> GpuBackend:
    """The backend the configuration asks for (fake GPUs, else NVML, else Null when allowed).

    Raises:
        DaemonError: the fake spec is invalid, or NVML cannot start and failing is configured.
    """
    return open_agent_backend(cfg.fake_gpus, seed=cfg.node_name, ignored_xids=cfg.ignored_xids,
                              fail_on_init_error=cfg.fail_on_init_error)


def make_cluster(cfg: Config) -> Cluster:
    """The API-server side from the kube options (in-cluster config by default).

    Raises:
        DaemonError: no usable kubeconfig or in-cluster configuration.
    """
    from kubectl_gpushare.deviceplugin.cluster import NodeCluster

    return NodeCluster(api_client(asdict(cfg.kube), "device-plugin"), cfg.node_name)


class Plugin:
    """The running parts, exposed for tests and the demo (``serve`` builds and runs one)."""

    def __init__(self, cfg: Config, backend: GpuBackend, cluster: Cluster) -> None:
        self.cfg = cfg
        self.backend = backend
        self.cluster = cluster
        self.unit: MemoryUnit = devices_mod.parse_memory_unit(cfg.memory_unit, cfg.unit_size)
        gpus = backend.devices()
        self.message_size = devices_mod.check_budget(gpus, self.unit)
        self.advertisement = Advertisement(Inventory.of(gpus, self.unit))
        self.advertisement.message()  # encode the device list now, not in kubelet's first call
        self.book = AllocationBook(
            node=cfg.node_name,
            inventory=self.advertisement.inventory,
            inventory_lock=self.advertisement.lock,
            source=cluster.source,
            recorder=cluster.recorder,
            visible=cfg.visible_devices,
            cgpu_disable=cluster.cgpu_disable,
        )
        try:
            self.node = NodeAgent(
                cfg.node_name, backend, self.advertisement, cluster.source, self.unit.bytes, self._republish,
                enforce=cfg.enforce_memory, layout=cgroups.Layout.mounted(cfg.cgroup_root, cfg.cgroup_driver),
                interval=cfg.usage_interval, port=cfg.usage_port, host=cfg.usage_host, proc_root=cfg.proc_root,
            )
        except OSError as exc:  # the usage port is taken or not ours to bind
            raise DaemonError(f"cannot serve usage on port {cfg.usage_port}: {exc}", EXIT_CONFIG) from exc
        cluster.on_pods_changed.append(self.node.enforcer.wake)
        self.registration = Registration(cfg.device_plugin_path, cfg.endpoint, cfg.resource)
        self.registrations = 0
        self.registered = threading.Event()
        self._server: grpc.Server | None = None
        self._served: SocketIdentity | None = None
        """Our socket file as `start_server` created it (a kubelet restart deletes it)."""

    # --- health ----------------------------------------------------------------------------------

    def on_health(self, event: HealthEvent) -> None:
        """Apply one backend health event to the advertised list (`node.health.apply`); republish if GPUs changed."""
        if health.apply(event, self.advertisement, self.backend.devices) is health.Change.GPUS:
            self._republish()

    def _republish(self) -> None:
        try:
            with self.advertisement.lock:
                snapshot = Inventory.of(self.advertisement.inventory.gpus(), self.unit)
            snapshot.enforcement = {st.uuid: (st.enforcement, st.reason) for st in self.node.enforcer.status()}
            self.cluster.publish(snapshot)
        except Exception as exc:  # the node record is advisory; the plugin keeps serving
            log.warning("cannot update the node's GPU list: %s", exc)

    # --- gRPC server -----------------------------------------------------------------------------

    def start_server(self) -> None:
        """Serve on the plugin socket and wait until it answers (or is deleted meanwhile: see `socket_gone`).

        Raises:
            DaemonError: the socket cannot be bound or does not answer.
        """
        path = self.registration.plugin_socket
        try:
            check_socket_path(path)
        except ValueError as exc:
            raise DaemonError(str(exc), EXIT_CONFIG) from exc
        try:
            check_plugin_dir(self.cfg.device_plugin_path)
        except ValueError as exc:
            raise DaemonError(str(exc), EXIT_CONFIG) from exc
        self.advertisement.reopen()
        # Each ListAndWatch stream holds a worker for its whole life; the servicer caps them (MAX_STREAMS).
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="deviceplugin"))
        api_grpc.add_DevicePluginServicer_to_server(  # type: ignore[no-untyped-call]
            DevicePluginServicer(self.advertisement, self.book), server
        )
        try:
            server.add_insecure_port(f"unix://{os.path.abspath(path)}")
        except RuntimeError as exc:
            raise DaemonError(f"cannot listen on {path}: {exc}", EXIT_CONFIG) from exc
        self._served = socket_identity(path)  # the file exists once bound
        server.start()
        self._server = server
        if not dial(path, timeout=5.0):
            if self.socket_gone():  # deleted as we started (kubelet restarting): `run` serves again
                log.warning("our socket %s was deleted as we started serving it", path)
                return
            raise DaemonError(f"the plugin's own socket {path} does not answer", EXIT_CONFIG)
        log.info("serving %s on %s", self.cfg.resource, path)

    def stop_server(self, grace: float = 1.0) -> None:
        """End the streams, stop serving and remove the socket."""
        self.advertisement.close()
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
        try:
            os.unlink(self.registration.plugin_socket)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove %s: %s", self.registration.plugin_socket, exc)

    def socket_gone(self) -> bool:
        """Our socket file was deleted or replaced since `start_server` (kubelet wipes the directory at start)."""
        now = socket_identity(self.registration.plugin_socket)
        return now is None or now != self._served

    def register_until_done(self, stop: threading.Event) -> bool:
        """Register with kubelet, retrying with backoff; False if stopped first or our socket went meanwhile.

        A kubelet that appears (``kubelet.sock`` created) is tried at once instead of waiting out
        the backoff. A kubelet that restarts while we retry (it can restart twice in a row) deletes
        our socket as well: kubelet dials the endpoint back inside Register, so registering one that
        is gone can never succeed; we return and `run` serves again first.
        """
        backoff = min(0.5, self.cfg.max_backoff)
        while not stop.is_set():
            if self.socket_gone():
                log.warning("our socket %s was deleted while registering (kubelet restarted); serving again",
                            self.registration.plugin_socket)
                return False
            seen = socket_identity(self.registration.kubelet_socket)
            try:
                self.registration.register()
            except RegistrationError as exc:
                log.warning("registration failed, retrying in %.1fs: %s", backoff, exc)
                deadline = time.monotonic() + backoff
                while not stop.is_set() and time.monotonic() < deadline:
                    if socket_identity(self.registration.kubelet_socket) != seen or self.socket_gone():
                        break
                    stop.wait(min(self.cfg.poll_interval, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, self.cfg.max_backoff)
                continue
            self.registrations += 1
            self.registered.set()
            log.info("registered %s with kubelet (endpoint %s)", self.cfg.resource, self.cfg.endpoint)
            return True
        return False

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        """Serve, register, and restart on kubelet restarts, until ``stop``."""
        while not stop.is_set():
            self.start_server()
            if ready is not None:
                ready.set()
            if self.register_until_done(stop):
                self._watch_kubelet(stop)
            self.registered.clear()
            self.stop_server()
        self.stop_server()

    def _watch_kubelet(self, stop: threading.Event) -> None:
        """Return once kubelet restarts (``kubelet.sock`` re-created), our socket goes, or ``stop``."""
        kubelet = socket_identity(self.registration.kubelet_socket)
        while not stop.wait(self.cfg.poll_interval):
            now = socket_identity(self.registration.kubelet_socket)
            if now is not None and now != kubelet:
                log.warning("kubelet.sock was re-created (kubelet restarted); registering again")
                return
            if self.socket_gone():
                log.warning("our socket %s was deleted; restarting the server", self.registration.plugin_socket)
                return


def serve(
    cfg: Config,
    *,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
    backend: GpuBackend | None = None,
    cluster: Cluster | None = None,
    started: Callable[[Plugin], None] | None = None,
) -> None:
    """Run the device plugin until ``stop`` is set; set ``ready`` once the socket accepts connections.

    Args:
        cfg: the configuration.
        stop: set it to stop (SIGTERM does, through the command); None runs forever.
        ready: set once the plugin serves on its socket (registration may still be pending).
        backend: a GPU backend to use instead of the configured one (tests inject a `FakeBackend`).
        cluster: the API side to use instead of one built from ``cfg.kube``.
        started: called with the running `Plugin` before serving (tests and the demo).

    Raises:
        DaemonError: the configuration is refused, the backend or the API cannot start.
    """
    stop = stop or threading.Event()
    log.info("device plugin configuration: %s", cfg.as_json())
    backend = backend or make_backend(cfg)
    health_stop = threading.Event()
    health: threading.Thread | None = None
    cluster_started = False
    plugin: Plugin | None = None
    try:
        try:
            # Refuse what can be refused before touching the API server: a device list kubelet would
            # reject, and a device-plugin directory we cannot serve in.
            devices_mod.check_budget(backend.devices(), devices_mod.parse_memory_unit(cfg.memory_unit, cfg.unit_size))
            check_socket_path(os.path.join(cfg.device_plugin_path, cfg.endpoint))
            check_plugin_dir(cfg.device_plugin_path)
            cluster = cluster or make_cluster(cfg)
            plugin = Plugin(cfg, backend, cluster)
        except (DeviceConfigError, ValueError) as exc:
            raise DaemonError(str(exc), EXIT_CONFIG) from exc

        except BackendError as exc:
            raise DaemonError(str(exc), EXIT_BACKEND) from exc
        gpus = plugin.advertisement.inventory.gpus()
        log.info(
            "%d GPU(s): %s; %d devices of %s (%d bytes per ListAndWatch)",
            len(gpus),
            ", ".join(f"{gpu.index}:{gpu.name} {gpu.memory // 2**20}MiB" for gpu in gpus) or "none",
            len(plugin.advertisement.inventory.advertised()),
            plugin.unit.label,
            plugin.message_size,
        )
        cluster.start()
        cluster_started = True
        plugin._republish()
        if not cluster.wait_synced(cfg.sync_timeout):
            log.warning("the pod cache did not sync within %.0fs; serving anyway", cfg.sync_timeout)
        if cfg.health_check:
            health = threading.Thread(
                target=backend.watch_health, args=(health_stop, plugin.on_health), name="gpu-health", daemon=True
            )
            health.start()
        plugin.node.start()
        if started is not None:
            started(plugin)
        plugin.run(stop, ready)
    finally:
        if plugin is not None:
            plugin.node.stop()
        health_stop.set()
        if health is not None:
            health.join(timeout=10)
        if cluster_started and cluster is not None:
            cluster.stop()
        backend.close()
        log.info("device plugin stopped")
