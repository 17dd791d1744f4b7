"""A kubelet stand-in for DRA: the plugin watcher, the registration handshake, and the DRA manager's calls.

What it does, after kubelet (kubernetes/kubernetes):

- ``pkg/kubelet/pluginmanager/pluginwatcher``: watches the registration directory; files whose name
  starts with ``.`` and files that are not unix sockets are ignored; a new socket is dialled and
  ``GetInfo`` called; a socket that disappears deregisters its plugin.
- ``pkg/kubelet/cm/dra/plugin`` (``RegistrationHandler``, ``DRAPlugin``): only ``type: DRAPlugin``
  is handled; the service is the first of ``v1.DRAPlugin``, ``v1beta1.DRAPlugin`` that both sides
  list (``servicesSupportedByKubelet``; an empty list is refused); ``NotifyRegistrationStatus`` tells
  the plugin the verdict; calls go to the ``endpoint`` from ``GetInfo``.
- ``pkg/kubelet/cm/dra/manager.go`` (``PrepareResources``): for each of the pod's
  ``spec.resourceClaims``, the claim is ``resourceClaimName`` or, for a template, the name in
  ``status.resourceClaimStatuses`` (none there: nothing to prepare); the claim is read from the API,
  must be allocated and list the pod in ``status.reservedFor``; claims already prepared on this node
  only gain the pod; the rest are grouped by the drivers of their allocation results and sent in one
  ``NodePrepareResources`` per driver, which must answer every claim without error.
  ``UnprepareResources`` calls ``NodeUnprepareResources`` for a claim once no pod uses it.

Where it differs from kubelet: no checkpoint of its own, no CDI injection into containers (the CDI
ids are returned to the caller), no check that a container references the claim, no ownership check
of template claims, no retries or 45-second backoff (each call is made once, with `call_timeout`),
one plugin per driver name, polling (and inotify where available) instead of fsnotify.

API: `start`/`stop` (or ``with``), `wait_registered`, `prepare(pod)` -> CDI ids per claim UID,
`unprepare(pod)`. ``pod`` is the pod's JSON (a mapping) or a `types.Pod`.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.dra._api import dra_v1_pb2, dra_v1beta1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra._api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2 as reg
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra_objects import WireResourceClaim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import KubeError
from kubectl_gpushare.node.dirwatch import DirWatch
from kubectl_gpushare.node.sockets import CHANNEL_OPTIONS, socket_identity, target

log = logging.getLogger(__name__)

KUBELET_SERVICES = (protocol.DRA_SERVICE_V1, protocol.DRA_SERVICE_V1BETA1)
"""What kubelet 1.34+ speaks, most recent first (``servicesSupportedByKubelet``)."""
POLL_SECONDS = 0.05


class KubeletPrepareError(RuntimeError):
    """Preparing or unpreparing a pod's claims failed; the message is what kubelet would put on the pod."""


@dataclass
class Plugin:
    """One registered DRA plugin."""

    name: str
    endpoint: str
    service: str
    registration_socket: str
    channel: grpc.Channel
    stub: Any


@dataclass
class _Prepared:
    driver: str
    uid: str
    cdi_ids: list[str]
    pods: set[str] = field(default_factory=set)


class KubeletSim:
    """kubelet's plugin watcher and DRA manager, over real unix sockets, for tests and the sandbox.

    Args:
        registration_dir: the directory to watch (kubelet's ``plugins_registry``).
        client: reads ResourceClaims (kubelet's own client).
        services: the DRA services this "kubelet" speaks, most recent first (an older kubelet: v1beta1 only).
        call_timeout: seconds for each gRPC call.
    """

    def __init__(
        self,
        registration_dir: str,
        client: Client,
        *,
        services: tuple[str, ...] = KUBELET_SERVICES,
        call_timeout: float = 10.0,
    ) -> None:
        self.registration_dir = registration_dir
        self.client = client
        self.services = services
        self.call_timeout = call_timeout
        self._cond = threading.Condition()
        self._plugins: dict[str, Plugin] = {}
        self._seen: dict[str, tuple[int, int, int] | None] = {}
        self._prepared: dict[tuple[str, str], _Prepared] = {}
        self.refused: dict[str, str] = {}
        """Registration socket -> why its plugin was refused."""
        self.prepare_calls = 0
        self.unprepare_calls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> KubeletSim:
        """Watch the registration directory on a thread."""
        os.makedirs(self.registration_dir, exist_ok=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="kubeletsim-dra", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching and drop every plugin connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        with self._cond:
            plugins = list(self._plugins.values())
            self._plugins.clear()
            self._seen.clear()
        for plugin in plugins:
            plugin.channel.close()

    def __enter__(self) -> KubeletSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_registered(self, driver: str = protocol.DRA_DRIVER, timeout: float = 10.0) -> Plugin | None:
        """The registered plugin of ``driver``, waiting up to ``timeout`` seconds for it."""
        with self._cond:
            self._cond.wait_for(lambda: driver in self._plugins, timeout)
            return self._plugins.get(driver)

    def plugin(self, driver: str = protocol.DRA_DRIVER) -> Plugin | None:
        """The registered plugin of ``driver`` now, if any."""
        with self._cond:
            return self._plugins.get(driver)

    # --- the plugin watcher -------------------------------------------------------------------------

    def _watch(self) -> None:
        watch = DirWatch.open([self.registration_dir])
        try:
            while not self._stop.is_set():
                self._scan()
                if watch is not None:
                    watch.wait(POLL_SECONDS * 4)  # inotify wakes us; the timeout catches removals
                else:
                    self._stop.wait(POLL_SECONDS)
        finally:
            if watch is not None:
                watch.close()

    def _scan(self) -> None:
        try:
            names = os.listdir(self.registration_dir)
        except OSError:
            names = []
        present: dict[str, tuple[int, int, int] | None] = {}
        for name in names:
            path = os.path.join(self.registration_dir, name)
            if name.startswith("."):
                continue  # plugin_watcher.go: "Ignoring file (starts with '.')"
            try:
                if not stat.S_ISSOCK(os.stat(path).st_mode):
                    continue
            except OSError:
                continue
            present[path] = socket_identity(path)
        for path in [p for p in self._seen if p not in present]:
            self._deregister(path)
        for path, identity in present.items():
            if self._seen.get(path, "new") != identity:
                self._seen[path] = identity
                self._register(path)

    def _register(self, path: str) -> None:
        channel = grpc.insecure_channel(target(path), options=CHANNEL_OPTIONS)
        try:
            stub = reg_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            info: reg.PluginInfo = stub.GetInfo(reg.InfoRequest(), timeout=self.call_timeout)
        except grpc.RpcError as exc:
            self.refused[path] = f"GetInfo failed: {exc.details()}"
            channel.close()
            return
        error = ""
        chosen = next((s for s in self.services if s in info.supported_versions), "")
        if info.type != protocol.DRA_PLUGIN_TYPE:
            error = f"plugin type {info.type!r} is not handled here"
        elif not info.supported_versions:
            error = "empty list of supported gRPC services (aka supported versions)"
        elif not chosen:
            error = f"none of the services {list(info.supported_versions)} is supported"
        try:
            stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=not error, error=error),
                                          timeout=self.call_timeout)
        except grpc.RpcError as exc:
            log.info("NotifyRegistrationStatus: %s", exc.details())
        channel.close()
        if error:
            self.refused[path] = error
            return
        plugin_channel = grpc.insecure_channel(target(info.endpoint), options=CHANNEL_OPTIONS)
        grpc_module = v1_grpc if chosen == protocol.DRA_SERVICE_V1 else v1beta1_grpc
        plugin = Plugin(info.name, info.endpoint, chosen, path, plugin_channel,
                        grpc_module.DRAPluginStub(plugin_channel))
        with self._cond:
            old = self._plugins.get(info.name)
            self._plugins[info.name] = plugin
            self.refused.pop(path, None)
            self._cond.notify_all()
        if old is not None:
            old.channel.close()
        log.info("registered DRA plugin %s (%s at %s)", info.name, chosen, info.endpoint)

    def _deregister(self, path: str) -> None:
        self._seen.pop(path, None)
        with self._cond:
            gone = [name for name, plugin in self._plugins.items() if plugin.registration_socket == path]
            plugins = [self._plugins.pop(name) for name in gone]
            self._cond.notify_all()
        for plugin in plugins:
            plugin.channel.close()
            log.info("deregistered DRA plugin %s", plugin.name)

    # --- the DRA manager ------------------------------------------------------------------------

    @staticmethod
    def _pod(pod: Mapping[str, Any] | types.Pod) -> types.Pod:
        if isinstance(pod, types.Pod):
            return pod
        return msgspec.convert(dict(pod), types.Pod, from_attributes=False)

    def _claim_names(self, pod: types.Pod) -> list[str]:
        statuses = {status.name: status.resource_claim_name for status in pod.status.resource_claim_statuses}
        names = []
        for claim in pod.spec.resource_claims:
            if claim.resource_claim_name:
                names.append(claim.resource_claim_name)
            elif claim.resource_claim_template_name:
                if claim.name not in statuses:
                    raise KubeletPrepareError(
                        f"prepare resource claim: pod {pod.metadata.name}: no status for claim {claim.name!r} yet")
                name = statuses[claim.name]
                if name:  # None: the template made no claim, nothing to prepare
                    names.append(name)
        return names

    def prepare(self, pod: Mapping[str, Any] | types.Pod) -> dict[str, list[str]]:
        """Prepare a pod's claims, as kubelet does before its containers start.

        Returns:
            Claim UID -> the CDI device ids the pod's containers get from it.

        Raises:
            KubeletPrepareError: a claim cannot be read, is not allocated or reserved for the pod,
                its driver is not registered, or the driver failed or skipped a claim.
        """
        decoded = self._pod(pod)
        namespace, pod_uid = decoded.metadata.namespace, decoded.metadata.uid
        by_driver: dict[str, list[WireResourceClaim]] = {}
        out: dict[str, list[str]] = {}
        for name in self._claim_names(decoded):
            with self._cond:
                known = self._prepared.get((namespace, name))
                if known is not None:
                    known.pods.add(pod_uid)
                    out[known.uid] = list(known.cdi_ids)
                    continue
            try:
                claim: WireResourceClaim = self.client.get(types.DRA_CLAIMS, name, namespace)
            except KubeError as exc:
                raise KubeletPrepareError(
                    f"failed to fetch ResourceClaim {name} referenced by pod {decoded.metadata.name}: {exc}") from exc
            if claim.status.allocation is None:
                raise KubeletPrepareError(f"claim {namespace}/{name}: not allocated")
            if not any(ref.uid == pod_uid for ref in claim.status.reserved_for):
                raise KubeletPrepareError(f"pod {decoded.metadata.name}({pod_uid}) is not allowed to use resource "
                                          f"claim {name}({claim.metadata.uid})")
            drivers = {result.driver for result in claim.status.allocation.devices.results}
            for driver in sorted(drivers):
                by_driver.setdefault(driver, []).append(claim)
        for driver, claims in by_driver.items():
            for uid, ids in self._call_prepare(driver, claims).items():
                out[uid] = out.get(uid, []) + ids
        with self._cond:
            for driver, claims in by_driver.items():
                for claim in claims:
                    key = (namespace, claim.metadata.name)
                    entry = self._prepared.setdefault(key, _Prepared(driver, claim.metadata.uid, []))
                    entry.cdi_ids = out.get(claim.metadata.uid, [])
                    entry.pods.add(pod_uid)
        return out

    def _stub(self, driver: str) -> Plugin:
        plugin = self.plugin(driver)
        if plugin is None:
            raise KubeletPrepareError(f"DRA driver {driver} is not registered")
        return plugin

    def _call_prepare(self, driver: str, claims: list[WireResourceClaim]) -> dict[str, list[str]]:
        plugin = self._stub(driver)
        api = dra_v1_pb2 if plugin.service == protocol.DRA_SERVICE_V1 else dra_v1beta1_pb2
        request = api.NodePrepareResourcesRequest(claims=[
            api.Claim(namespace=c.metadata.namespace, uid=c.metadata.uid, name=c.metadata.name) for c in claims
        ])
        self.prepare_calls += 1
        try:
            response = plugin.stub.NodePrepareResources(request, timeout=self.call_timeout)
        except grpc.RpcError as exc:
            raise KubeletPrepareError(f"NodePrepareResources failed: {exc.details()}") from exc
        out: dict[str, list[str]] = {}
        for claim in claims:
            uid = claim.metadata.uid
            if uid not in response.claims:
                missing = sum(c.metadata.uid not in response.claims for c in claims)
                raise KubeletPrepareError(f"NodePrepareResources left out {missing} claims")
            result = response.claims[uid]
            if result.error:
                raise KubeletPrepareError(f"NodePrepareResources failed for ResourceClaim {claim.metadata.name}: "
                                          f"{result.error}")
            out[uid] = [cdi for device in result.devices for cdi in device.cdi_device_ids]
        return out

    def unprepare(self, pod: Mapping[str, Any] | types.Pod) -> list[str]:
        """Unprepare the pod's claims that no other pod uses any more; their UIDs.

        Raises:
            KubeletPrepareError: the driver failed a claim or is not registered.
        """
        decoded = self._pod(pod)
        namespace, pod_uid = decoded.metadata.namespace, decoded.metadata.uid
        release: list[tuple[tuple[str, str], _Prepared]] = []
        with self._cond:
            for key, entry in self._prepared.items():
                if key[0] == namespace and pod_uid in entry.pods:
                    entry.pods.discard(pod_uid)
                    if not entry.pods:
                        release.append((key, entry))
        by_driver: dict[str, list[tuple[str, str, str]]] = {}
        for (ns, name), entry in release:
            by_driver.setdefault(entry.driver, []).append((ns, name, entry.uid))
        for driver, claims in by_driver.items():
            plugin = self._stub(driver)
            api = dra_v1_pb2 if plugin.service == protocol.DRA_SERVICE_V1 else dra_v1beta1_pb2
            request = api.NodeUnprepareResourcesRequest(claims=[api.Claim(namespace=ns, name=name, uid=uid)
                                                                for ns, name, uid in claims])
            self.unprepare_calls += 1
            try:
                response = plugin.stub.NodeUnprepareResources(request, timeout=self.call_timeout)
            except grpc.RpcError as exc:
                raise KubeletPrepareError(f"NodeUnprepareResources failed: {exc.details()}") from exc
            for ns, name, uid in claims:
                if uid not in response.claims or response.claims[uid].error:
                    error = response.claims[uid].error if uid in response.claims else "left out"
                    raise KubeletPrepareError(f"NodeUnprepareResources failed for ResourceClaim {name}: {error}")
                with self._cond:
                    self._prepared.pop((ns, name), None)
        return [entry.uid for _, entry in release]
