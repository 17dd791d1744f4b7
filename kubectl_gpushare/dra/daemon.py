"""The DRA driver's lifecycle: ``serve(cfg, *, stop, ready)``.

Start-up, refusing what can be refused before serving: open the GPU backend, reach the API server,
read this Node and refuse it when the device plugin advertises ``aliyun.com/gpu-mem`` there (both
would sell the same GPUs' memory twice; `EXIT_REFUSED`), restore prepared claims from the checkpoint.
The publisher reads the Node at every sync (for the slice's owner) and the same read is checked
again (`SlicePublisher` ``refuse``): if the device plugin starts later, the driver withdraws its
slice and stops the same way, within ``resync`` seconds or at the next change. The read at start
serves the publisher's first sync (`SlicePublisher.offer`): one GET of the Node per sync.

Then publish the node's ResourceSlice (a thread that re-syncs on every health change, every
``resync`` seconds, and about a second after someone else deletes or edits a slice of ours, which a
watch of this node's and driver's slices sees: `publisher.SliceWatch`), serve the DRA service on
``<plugin dir>/dra.sock`` and, once it answers, the registration service on
``<registration dir>/<driver>-reg.sock`` (kubelet's plugin watcher dials it at once, so the DRA
socket must be up first, as the kubeletplugin helper orders them). Given its pod's UID (a rolling
update, the kubeletplugin helper's ``RollingUpdate(uid)``), the instance serves sockets of its own,
``dra-<pod UID>.sock`` and ``<driver>-<pod UID>-reg.sock``, beside those of the instance it
replaces, and prepares and unprepares under a lock shared with it (`serialize`, `preparer`). Until
``stop``: watch both socket files and serve again if one is deleted; health events update the slice.
Memory enforcement (``--enforce-memory``) holds each pod using a prepared claim to the claim's
memory, through `node.enforce`: the pods the claim was reserved for when prepared, and those of this
node that name it later (`pod_claims`, a pod watch made only when enforcement is on).

This module wires the parts together; decisions live in `preparer`, `claims`, `slices` and
`publisher`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent import futures
from dataclasses import asdict, dataclass, field
from typing import Any

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.dra import cdi, slices
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra.checkpoint import CheckpointFile, ClaimPod, PreparedClaim
from kubectl_gpushare.dra.pod_claims import SYNC_SECONDS, PodClaims
from kubectl_gpushare.dra.preparer import ApiClaims, Preparer
from kubectl_gpushare.dra.publisher import RESYNC_SECONDS, SlicePublisher
from kubectl_gpushare.dra.serialize import SerializeLock
from kubectl_gpushare.dra.servicer import RegistrationServicer, add_dra_services
from kubectl_gpushare.dra.slices import PublishedGpu, UnhealthyMode
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import EXIT_API, EXIT_USAGE, KubeError, NotFound
from kubectl_gpushare.node import cgroups, sockets
from kubectl_gpushare.node.daemon import EXIT_BACKEND, EXIT_CONFIG, DaemonError, api_client, open_agent_backend
from kubectl_gpushare.node.enforce import Enforcer, PodShare
from kubectl_gpushare.node.gpus import BackendError, GpuBackend, GpuDevice, HealthEvent
from kubectl_gpushare.node.health import HealthBook

log = logging.getLogger(__name__)

EXIT_REFUSED = EXIT_USAGE
"""The node advertises ``aliyun.com/gpu-mem``: our device plugin serves its GPUs already."""
POOL_SIZE = 8
"""gRPC workers: kubelet calls one driver at a time per pod, and a few pods at once."""


@dataclass(frozen=True)
class Config:
    """Everything ``serve`` needs; the command builds it from flags and environment."""

    node_name: str
    registration_dir: str = protocol.DRA_REGISTRATION_DIR
    plugin_dir: str = protocol.DRA_PLUGIN_DIR
    cdi_root: str = protocol.DRA_CDI_ROOT
    memory_unit: str = protocol.UNIT_GIB
    unhealthy: UnhealthyMode = "remove"
    visible_devices: cdi.VisibleMode = "index"
    fake_gpus: str | None = None
    health_check: bool = True
    ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS
    fail_on_init_error: bool = True
    enforce_memory: str = protocol.ENFORCE_OFF
    cgroup_root: str = cgroups.DEFAULT_ROOT
    cgroup_driver: str | None = None
    resync: float = RESYNC_SECONDS
    poll_interval: float = 0.5
    pod_uid: str = ""
    """This driver pod's UID: sockets of its own and the shared lock (a rolling update); "" for the fixed names."""
    kube: Mapping[str, Any] = field(default_factory=dict)
    """kubectl's connection flags by option name (``kubeconfig``, ``context``, ...); none is a secret."""

    def __post_init__(self) -> None:
        if self.pod_uid and not cgroups.valid_uid(self.pod_uid):  # it becomes part of two socket paths
            raise ValueError(f"pod UID {protocol.shown_value(self.pod_uid)} is not a UUID")

    @property
    def rolling_update(self) -> bool:
        """Whether this instance may run beside another on the node (it was given its pod's UID)."""
        return bool(self.pod_uid)

    @property
    def registration_socket(self) -> str:
        """Where kubelet's plugin watcher finds us."""
        return os.path.join(self.registration_dir, protocol.dra_registration_socket(self.pod_uid))

    @property
    def plugin_socket(self) -> str:
        """The DRA service kubelet calls."""
        return os.path.join(self.plugin_dir, protocol.dra_plugin_socket(self.pod_uid))

    @property
    def serialize_lock(self) -> str:
        """The lock file prepare and unprepare hold across the instances of a rolling update."""
        return os.path.join(self.plugin_dir, protocol.DRA_SERIALIZE_LOCK)

    def as_json(self) -> str:
        """The effective configuration, logged once at start."""
        data = asdict(self)
        data["ignored_xids"] = sorted(self.ignored_xids)
        data["kube"] = {key: value for key, value in self.kube.items() if value}
        return json.dumps(data, sort_keys=True, default=str)


def make_client(cfg: Config) -> Client:
    """The API client from kubectl's flags (in-cluster configuration when none is given).

    Raises:
        DaemonError: no usable kubeconfig or in-cluster configuration.
    """
    return api_client(cfg.kube, "dra-driver")


def advertised_gpu_memory(node: types.Node) -> str | None:
    """The node's ``aliyun.com/gpu-mem`` capacity when the device plugin advertises some, else None."""
    for table in (node.status.capacity, node.status.allocatable):
        value = table.get(protocol.RESOURCE_MEM)
        if value is None:
            continue
        try:
            if protocol.parse_quantity(str(value)) > 0:
                return str(value)
        except ValueError:
            return str(value)[:64]  # unreadable, but present: someone advertises it
    return None


def check_node(client: Client, name: str) -> types.Node:
    """Read this node and refuse it when our device plugin already sells its GPUs; the Node read.

    The slice's owner is the Node as read at each sync (`SlicePublisher`); this read serves the first.

    Raises:
        DaemonError: the node does not exist, cannot be read, or advertises ``aliyun.com/gpu-mem``.
    """
    try:
        node = client.get_node(name)
    except NotFound:
        raise DaemonError(f"node {name!r} does not exist (is --node-name right?)", EXIT_API) from None
    except KubeError as exc:  # UndecodableReply included: one line, exit 1 (EXIT_API)
        raise DaemonError(f"cannot read node {name!r}: {exc}", exc.exit_code) from exc
    advertised = advertised_gpu_memory(node)
    if advertised is not None:
        raise DaemonError(
            f"refusing to start: node {name} advertises {protocol.RESOURCE_MEM}={advertised} (the gpushare device "
            f"plugin runs there); the device plugin and the DRA driver must not sell the same GPUs",
            EXIT_REFUSED,
        )
    return node


def device_plugin_refusal(node: types.Node) -> str | None:
    """Why the driver must stop once running, when the node now advertises ``aliyun.com/gpu-mem``."""
    advertised = advertised_gpu_memory(node)
    if advertised is None:
        return None
    return (f"stopping: node {node.metadata.name} now advertises {protocol.RESOURCE_MEM}={advertised} (the gpushare "
            "device plugin started there); the device plugin and the DRA driver must not sell the same GPUs")


def pod_shares(
    prepared: Iterable[PreparedClaim],
    users: Mapping[tuple[str, str], Iterable[ClaimPod]] | None = None,
    ended: Collection[str] = frozenset(),
) -> list[PodShare]:
    """Each pod using a prepared claim, holding the claim's memory on its GPU (summed per pod and GPU).

    A claim's pods are those it was reserved for when prepared, less those since deleted or finished
    (``ended``, UIDs), and those of this node that name it now (``users``, by namespace and name);
    both from `pod_claims.PodClaims`; each pod counted once.
    """
    totals: dict[tuple[str, int], tuple[PreparedClaim, str, int]] = {}
    for claim in prepared:
        pods = {pod.uid: pod for pod in claim.pods if pod.uid not in ended}
        for pod in (users or {}).get((claim.namespace, claim.name), ()):
            pods.setdefault(pod.uid, pod)
        for pod in pods.values():
            key = (pod.uid, claim.gpu)
            _, name, held = totals.get(key, (claim, pod.name, 0))
            totals[key] = (claim, name, held + claim.memory_bytes)
    return [PodShare(uid, claim.namespace, name, gpu, held) for (uid, gpu), (claim, name, held) in totals.items()]


class Driver:
    """The running parts, exposed for tests and the sandbox (``serve`` builds and runs one)."""

    def __init__(self, cfg: Config, backend: GpuBackend, client: Client) -> None:
        self.cfg = cfg
        self.backend = backend
        self.client = client
        self.health = HealthBook(backend.devices(), backend.devices)
        self.publisher = SlicePublisher(client, cfg.node_name, refuse=device_plugin_refusal)
        self.preparer = Preparer(
            cfg.node_name, ApiClaims(client), self.published, cdi.CdiDir(cfg.cdi_root),
            CheckpointFile(cfg.plugin_dir, cfg.node_name), visible=cfg.visible_devices,
            shared=SerializeLock(cfg.serialize_lock) if cfg.rolling_update else None,
        )
        self.registration = RegistrationServicer(os.path.abspath(cfg.plugin_socket))
        self.enforcer = Enforcer(
            backend, cgroups.Layout.mounted(cfg.cgroup_root, cfg.cgroup_driver), cfg.enforce_memory, self.gpus,
            self.shares,
        )
        self.preparer.on_change.append(self.enforcer.wake)
        self.pod_claims: PodClaims | None = None
        """This node's pods and the claims they name (enforcement only: otherwise no pod is read)."""
        if cfg.enforce_memory != protocol.ENFORCE_OFF:
            self.pod_claims = PodClaims(client, cfg.node_name, self.enforcer.wake)
        self._wake_publisher = threading.Event()
        self._servers: list[grpc.Server] = []

    @property
    def refused(self) -> str:
        """Why the driver stops: the node began advertising ``aliyun.com/gpu-mem`` as we ran (`publish`); else ""."""
        return self.publisher.refusal or ""

    # --- what the slice, the claims and enforcement see ------------------------------------------

    def shares(self) -> list[PodShare]:
        """The memory each pod using a prepared claim is held to (`pod_shares`)."""
        prepared = list(self.preparer.prepared().values())
        if self.pod_claims is None:
            return pod_shares(prepared)
        ended = self.pod_claims.ended({pod.uid for claim in prepared for pod in claim.pods})
        return pod_shares(prepared, self.pod_claims.users(), ended)

    def enforce(self, stop: threading.Event) -> None:
        """Run the enforcer, once this node's pods are listed (bounded by `pod_claims.SYNC_SECONDS`).

        Its first pass clears limits on pod cgroups that hold no share; before the first list, pods
        that joined a shared claim would lose theirs until it arrived.
        """
        if self.pod_claims is not None:
            self.pod_claims.start()
            deadline = time.monotonic() + SYNC_SECONDS
            while not self.pod_claims.wait_synced(0.1):
                if stop.is_set():
                    return
                if time.monotonic() >= deadline:
                    log.warning("this node's pods are not listed after %.0fs (%s); enforcing the claims' "
                                "first pods meanwhile", SYNC_SECONDS, self.pod_claims.informer.last_error)
                    break
        self.enforcer.run(stop)

    def mode(self) -> UnhealthyMode:
        """How unhealthy GPUs are shown: as asked, unless the API server drops device taints."""
        return "remove" if "DRADeviceTaints" in self.publisher.dropped else self.cfg.unhealthy

    def devices(self) -> slices.Devices:
        """The slice's devices now."""
        return slices.devices(self.health.states(), self.cfg.memory_unit, self.mode())

    def published(self) -> dict[str, PublishedGpu]:
        """Device name -> GPU, for the devices the slice offers now."""
        return {gpu.device: gpu for gpu in slices.published(self.health.states(), self.cfg.memory_unit, self.mode())}

    def gpus(self) -> list[GpuDevice]:
        """The GPUs present (enforcement holds limits on all of them)."""
        return [state.gpu for state in self.health.states()]

    def on_health(self, event: HealthEvent) -> None:
        """A GPU's health changed: re-publish the slice."""
        if self.health.apply(event):
            self._wake_publisher.set()

    def republish(self) -> None:
        """Sync the slice soon (tests, and after kubelet re-registers us)."""
        self._wake_publisher.set()

    # --- sockets -------------------------------------------------------------------------------

    def _serve(self, path: str, add: Callable[[grpc.Server], None]) -> grpc.Server:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="dra"))
        add(server)
        try:
            server.add_insecure_port(sockets.target(path))
        except RuntimeError as exc:
            raise DaemonError(f"cannot listen on {path}: {exc}", EXIT_BACKEND) from exc
        server.start()
        self._servers.append(server)
        if not sockets.dial(path, timeout=5.0):
            raise DaemonError(f"our own socket {path} does not answer", EXIT_BACKEND)
        return server

    def start_servers(self) -> None:
        """Serve DRA, then registration (kubelet dials the DRA socket as soon as it sees the other).

        Raises:
            DaemonError: a directory cannot be used or a socket cannot be served.
        """
        for path, what, flag in ((self.cfg.plugin_socket, "plugin directory", "--plugin-dir"),
                                 (self.cfg.registration_socket, "plugin registration directory",
                                  "--plugin-registration-dir")):
            try:
                sockets.check_socket_path(path)
                sockets.check_socket_dir(os.path.dirname(path), what, flag)
            except ValueError as exc:
                raise DaemonError(str(exc), EXIT_CONFIG) from exc
        self._serve(self.cfg.plugin_socket, lambda server: add_dra_services(server, self.preparer))
        self._serve(self.cfg.registration_socket, lambda server: reg_grpc.add_RegistrationServicer_to_server(
            self.registration, server))  # type: ignore[no-untyped-call]
        log.info("serving %s on %s (registration %s)", protocol.DRA_DRIVER, self.cfg.plugin_socket,
                 self.cfg.registration_socket)

    def stop_servers(self, grace: float = 1.0) -> None:
        """Stop serving and remove both sockets (the registration one first: kubelet stops calling).

        Only our own: in a rolling update the other instance's stay, and so do those a killed
        instance left (the kubeletplugin helper cannot tell a stale socket from a live one either:
        ``RollingUpdate`` leaves them, each pod removes its own on SIGTERM). kubelet keeps trying a
        stale registration socket with backoff, and calls the newest instance it registered.
        """
        for server in reversed(self._servers):
            server.stop(grace).wait()
        self._servers.clear()
        for path in (self.cfg.registration_socket, self.cfg.plugin_socket):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("cannot remove %s: %s", path, exc)

    def run(self, stop: threading.Event, ready: threading.Event | None = None) -> None:
        """Serve until ``stop``; serve again when a socket file is deleted."""
        while not stop.is_set():
            self.start_servers()
            if ready is not None:
                ready.set()
            seen = {path: sockets.socket_identity(path)
                    for path in (self.cfg.plugin_socket, self.cfg.registration_socket)}
            while not stop.wait(self.cfg.poll_interval):
                gone = [path for path, identity in seen.items() if sockets.socket_identity(path) != identity]
                if gone:
                    log.warning("socket %s was deleted or replaced; serving again", gone[0])
                    break
            self.stop_servers()
            self.republish()  # kubelet wipes the slices of a driver none of whose instances is connected

    def publish(self, stop: threading.Event) -> None:
        """Publish the slice until ``stop``; stop when a sync found the device plugin started on this node.

        Both would sell the same GPUs: the publisher has withdrawn our slice (`SlicePublisher` ``refuse``);
        log it and stop (``serve`` then exits with `EXIT_REFUSED`, as at start).
        """
        self.publisher.run(stop, self._wake_publisher, self.devices, resync=self.cfg.resync)
        if self.refused:
            log.error("%s", self.refused)
            stop.set()

    def threads(self, stop: threading.Event) -> list[threading.Thread]:
        """The background work: slice publishing (and node re-checks), health watching, enforcement."""
        work = [threading.Thread(target=self.publish, args=(stop,), name="slice-publisher", daemon=True)]
        if self.cfg.health_check:
            work.append(threading.Thread(target=self.backend.watch_health, args=(stop, self.on_health),
                                         name="gpu-health", daemon=True))
        if self.cfg.enforce_memory != protocol.ENFORCE_OFF:
            work.append(threading.Thread(target=self.enforce, args=(stop,), name="memory-enforcer", daemon=True))
        return work


def serve(
    cfg: Config,
    *,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
    backend: GpuBackend | None = None,
    client: Client | None = None,
    started: Callable[[Driver], None] | None = None,
) -> None:
    """Run the DRA driver until ``stop`` is set; set ``ready`` once kubelet can register it.

    Args:
        cfg: the configuration.
        stop: set it to stop (SIGTERM does, through the command); None runs forever.
        ready: set once both sockets answer.
        backend: a GPU backend to use instead of the configured one (tests inject a `FakeBackend`).
        client: the API client to use instead of one built from ``cfg.kube``.
        started: called with the running `Driver` before serving (tests and the sandbox).

    Raises:
        DaemonError: the configuration or the node is refused, the backend or the API cannot start.
    """
    stop = stop or threading.Event()
    log.info("DRA driver configuration: %s", cfg.as_json())
    if backend is None:
        backend = open_agent_backend(cfg.fake_gpus, seed=cfg.node_name, ignored_xids=cfg.ignored_xids,
                                     fail_on_init_error=cfg.fail_on_init_error)
    background: list[threading.Thread] = []
    driver: Driver | None = None
    try:
        client = client or make_client(cfg)
        read_at = time.monotonic()
        node = check_node(client, cfg.node_name)
        try:
            driver = Driver(cfg, backend, client)
        except BackendError as exc:
            raise DaemonError(str(exc), EXIT_BACKEND) from exc
        gpus = driver.health.states()
        log.info("%d GPU(s): %s", len(gpus), ", ".join(
            f"{s.gpu.index}:{s.gpu.name} {s.gpu.memory // 2**20}MiB" for s in gpus) or "none")
        shown = {gpu.index for gpu in slices.published(gpus, cfg.memory_unit, "taint")}
        for left in (s.gpu for s in gpus if s.gpu.index not in shown):
            log.warning("GPU %d (%s) is not published: an index past %d or less than one %s of memory", left.index,
                        left.uuid, protocol.MAX_GPUS_PER_NODE - 1, cfg.memory_unit)
        try:
            driver.preparer.restore()
        except OSError as exc:  # the checkpoint's files cannot be read or folded: an unusable --plugin-dir
            raise DaemonError(f"cannot load the checkpoint in {cfg.plugin_dir}: {exc}", EXIT_CONFIG) from exc
        driver.publisher.offer(node, read_at)  # the first sync's read (if it comes within OFFER_SECONDS of it)
        background = driver.threads(stop)
        for thread in background:
            thread.start()
        if started is not None:
            started(driver)
        driver.run(stop, ready)
        if driver.refused:
            raise DaemonError(driver.refused, EXIT_REFUSED)
    finally:
        stop.set()
        if driver is not None:
            driver.republish()
            driver.enforcer.wake()
            if driver.pod_claims is not None:
                driver.pod_claims.stop()
            driver.stop_servers()
            driver.preparer.checkpoint.close()
        for thread in background:
            thread.join(timeout=10)
        backend.close()
        log.info("DRA driver stopped")
