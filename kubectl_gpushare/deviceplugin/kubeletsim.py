"""A kubelet stand-in for the device-plugin API: a Registration server and a DevicePlugin client.

It does what kubelet's device manager does over the wire: serves ``Registration`` on
``kubelet.sock``, validates the request, dials the plugin's endpoint *inside* Register and calls
GetDevicePluginOptions there (so a plugin that registers before serving fails, as with kubelet),
then consumes ListAndWatch in the background, and allocates devices for pods the way admission
does: per container that asks for the resource, in container order, GetPreferredAllocation first
when the plugin offers it, then Allocate. `restart` behaves like a kubelet restart: every socket in
the directory is deleted and ``kubelet.sock`` is created anew.

Pods that were already running when it started are not allocated again: `restore` records their
devices as kubelet does from its checkpoint (``kubelet_internal_checkpoint``, read by the device
manager's ``readCheckpoint`` in ``pkg/kubelet/cm/devicemanager/manager.go``; ``devicesToAllocate``
then finds the container's devices already allocated and calls no Allocate).

Where it differs from kubelet: no checkpoint file (`restore` is told what it would hold), no pod
admission or lifecycle beyond the device calls the caller asks for, no topology manager, no
pod-resources API, no 5-minute grace period before a vanished resource is dropped (devices simply
turn Unhealthy), one plugin per resource, and init containers are not allocated. It ships in the
package so the demo can use it too.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc
from kubectl_gpushare.deviceplugin.kubelet import check_socket_path, target

log = logging.getLogger(__name__)

SUPPORTED_VERSIONS = (protocol.DEVICE_PLUGIN_API_VERSION,)


class KubeletAllocateError(RuntimeError):
    """The plugin failed an Allocate (or kubelet-side checks failed); ``details`` is what kubelet would show."""

    def __init__(self, code: grpc.StatusCode | None, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


@dataclass
class _Plugin:
    """One registered plugin endpoint."""

    resource: str
    endpoint: str
    options: api.DevicePluginOptions
    channel: grpc.Channel
    stub: api_grpc.DevicePluginStub
    devices: dict[str, str] = field(default_factory=dict)
    updates: int = 0
    connected: bool = True
    stream: Any = None


class KubeletSim(api_grpc.RegistrationServicer):
    """Kubelet's device manager, over real unix sockets, for tests and the demo."""

    def __init__(self, plugin_dir: str, *, dial_timeout: float = 5.0) -> None:
        self.plugin_dir = plugin_dir
        self.socket = os.path.join(plugin_dir, protocol.KUBELET_SOCKET)
        check_socket_path(self.socket)
        self.dial_timeout = dial_timeout
        self._server: grpc.Server | None = None
        self._cond = threading.Condition()
        self._plugins: dict[str, _Plugin] = {}
        self.registrations: list[api.RegisterRequest] = []
        self.allocations: dict[str, dict[str, list[str]]] = {}
        """pod UID -> container name -> device ids kubelet handed out."""
        self.allocate_calls = 0
        self.preferred_calls = 0

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> KubeletSim:
        """Listen on ``kubelet.sock``."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="kubeletsim"))
        api_grpc.add_RegistrationServicer_to_server(self, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(target(self.socket))
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Stop serving and drop every plugin connection (kubelet going away)."""
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
        with self._cond:
            plugins = list(self._plugins.values())
            self._plugins.clear()
            self._cond.notify_all()
        for plugin in plugins:
            if plugin.stream is not None:
                plugin.stream.cancel()
            plugin.channel.close()

    def restart(self) -> None:
        """Restart like kubelet: stop, delete every socket in the directory, listen again."""
        self.stop()
        for name in os.listdir(self.plugin_dir):
            path = os.path.join(self.plugin_dir, name)
            if not name.startswith("kubelet_internal_checkpoint") and _is_socket(path):
                os.unlink(path)
        self.start()

    def __enter__(self) -> KubeletSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- Registration service ----------------------------------------------------------------------

    def Register(self, request: api.RegisterRequest, context: grpc.ServicerContext) -> api.Empty:  # noqa: N802
        """Validate, dial back, read the options, and start consuming ListAndWatch."""
        if request.version not in SUPPORTED_VERSIONS:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported API version {request.version!r}")
        if "/" not in request.resource_name or request.resource_name.split("/")[0].endswith("kubernetes.io"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid extended resource {request.resource_name!r}")
        channel = grpc.insecure_channel(target(os.path.join(self.plugin_dir, request.endpoint)))
        stub = api_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        try:
            options = stub.GetDevicePluginOptions(api.Empty(), timeout=self.dial_timeout)
        except grpc.RpcError as exc:
            channel.close()
            context.abort(grpc.StatusCode.UNKNOWN, f"cannot dial the plugin back: {exc.details()}")
        plugin = _Plugin(request.resource_name, request.endpoint, options, channel, stub)
        with self._cond:
            old = self._plugins.get(request.resource_name)
            self._plugins[request.resource_name] = plugin
            self.registrations.append(request)
            self._cond.notify_all()
        if old is not None:
            if old.stream is not None:
                old.stream.cancel()
            old.channel.close()
        threading.Thread(target=self._watch, args=(plugin,), name="kubeletsim-law", daemon=True).start()
        return api.Empty()

    def _watch(self, plugin: _Plugin) -> None:
        try:
            stream = plugin.stub.ListAndWatch(api.Empty())
        except ValueError:  # "Channel closed!": kubelet stopped, or the plugin registered again, meanwhile
            stream = None
        if stream is not None:
            plugin.stream = stream
            try:
                for response in stream:
                    with self._cond:
                        plugin.devices = {device.ID: device.health for device in response.devices}
                        plugin.updates += 1
                        self._cond.notify_all()
            except grpc.RpcError:
                pass
        with self._cond:
            plugin.connected = False
            plugin.devices = dict.fromkeys(plugin.devices, "Unhealthy")
            self._cond.notify_all()

    # --- what tests read -------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Wait until ``predicate()`` (called under the lock) holds."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def wait_registered(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Wait until at least ``count`` registrations have been accepted."""
        return self.wait_for(lambda: len(self.registrations) >= count, timeout)

    def plugin(self, resource: str = protocol.RESOURCE_MEM) -> _Plugin | None:
        """The plugin registered for a resource."""
        with self._cond:
            return self._plugins.get(resource)

    def devices(self, resource: str = protocol.RESOURCE_MEM) -> dict[str, str]:
        """Device id -> health from the latest ListAndWatch message."""
        with self._cond:
            plugin = self._plugins.get(resource)
            return dict(plugin.devices) if plugin else {}

    def wait_devices(
        self,
        predicate: Callable[[Mapping[str, str]], bool],
        resource: str = protocol.RESOURCE_MEM,
        timeout: float = 10.0,
    ) -> dict[str, str]:
        """Wait until the device list satisfies ``predicate``; return it (whatever it is on timeout)."""

        def check() -> bool:
            plugin = self._plugins.get(resource)
            return plugin is not None and plugin.updates > 0 and predicate(plugin.devices)

        self.wait_for(check, timeout)
        return self.devices(resource)

    def capacity(self, resource: str = protocol.RESOURCE_MEM) -> tuple[int, int]:
        """(capacity, allocatable) as kubelet would report them: all devices, healthy devices."""
        devices = self.devices(resource)
        return len(devices), sum(1 for health in devices.values() if health == "Healthy")

    # --- allocation ------------------------------------------------------------------------------

    def allocate_pod(self, pod: Mapping[str, Any], resource: str = protocol.RESOURCE_MEM) -> dict[str, dict[str, str]]:
        """Allocate devices for every container of a pod (a dict as the API returns it).

        Returns:
            container name -> env the plugin returned.

        Raises:
            KubeletAllocateError: not enough healthy free devices, or the plugin failed a call.
        """
        plugin = self.plugin(resource)
        if plugin is None:
            raise KubeletAllocateError(None, f"no device plugin registered for {resource}")
        uid = pod["metadata"]["uid"]
        result: dict[str, dict[str, str]] = {}
        for container in pod["spec"].get("containers", []):
            limit = (container.get("resources") or {}).get("limits", {}).get(resource)
            count = protocol.parse_quantity(str(limit)) if limit is not None else 0
            if count <= 0:
                continue
            devices = self._pick(plugin, count)
            self.allocate_calls += 1
            try:
                response = plugin.stub.Allocate(
                    api.AllocateRequest(container_requests=[api.ContainerAllocateRequest(devices_ids=devices)]),
                    timeout=30,
                )
            except grpc.RpcError as exc:
                raise KubeletAllocateError(exc.code(), exc.details() or "") from exc
            with self._cond:
                self.allocations.setdefault(uid, {})[container["name"]] = devices
            result[container["name"]] = dict(response.container_responses[0].envs)
        return result

    def restore(self, pod: Mapping[str, Any], resource: str = protocol.RESOURCE_MEM) -> bool:
        """Record a running pod's devices without calling the plugin, as kubelet restores them from its checkpoint.

        The checkpoint names the device ids; here the lowest free healthy ids stand for them (gpu-mem
        ids are interchangeable units). Idempotent; False when the pod holds nothing of ``resource``
        or the plugin has not listed enough devices yet.
        """
        uid = str(pod["metadata"].get("uid", ""))
        with self._cond:
            if uid in self.allocations:
                return True
            plugin = self._plugins.get(resource)
            if plugin is None:
                return False
            used = {device for containers in self.allocations.values() for ids in containers.values() for device in ids}
            free = sorted(d for d, health in plugin.devices.items() if health == "Healthy" and d not in used)
            restored: dict[str, list[str]] = {}
            for container in (pod.get("spec") or {}).get("containers") or []:
                limit = ((container.get("resources") or {}).get("limits") or {}).get(resource)
                try:
                    count = protocol.parse_quantity(str(limit)) if limit is not None else 0
                except ValueError:
                    count = 0
                if count <= 0:
                    continue
                if count > len(free):
                    return False
                restored[str(container.get("name", ""))], free = free[:count], free[count:]
            if not restored:
                return False
            self.allocations[uid] = restored
            return True

    def release_pod(self, uid: str) -> None:
        """Give a pod's devices back (the pod ended)."""
        with self._cond:
            self.allocations.pop(uid, None)

    def _pick(self, plugin: _Plugin, count: int) -> list[str]:
        with self._cond:
            used = {device for containers in self.allocations.values() for ids in containers.values() for device in ids}
            available = sorted(d for d, health in plugin.devices.items() if health == "Healthy" and d not in used)
        if len(available) < count:
            raise KubeletAllocateError(
                None, f"requested number of devices unavailable for {plugin.resource}. "
                f"Requested: {count}, Available: {len(available)}"
            )
        if not plugin.options.get_preferred_allocation_available:
            return available[:count]
        self.preferred_calls += 1
        try:  # kubelet's devicemanager fails the admission when this call fails (callGetPreferredAllocationIfAvailable)
            response = plugin.stub.GetPreferredAllocation(
                api.PreferredAllocationRequest(
                    container_requests=[
                        api.ContainerPreferredAllocationRequest(available_deviceIDs=available, allocation_size=count)
                    ]
                ),
                timeout=30,
            )
        except grpc.RpcError as exc:
            raise KubeletAllocateError(exc.code(), exc.details() or "") from exc
        chosen = list(response.container_responses[0].deviceIDs)
        if len(chosen) != count or not set(chosen) <= set(available):
            log.warning("preferred allocation %s is not %d available devices; ignoring it", chosen, count)
            return available[:count]
        return chosen


def _is_socket(path: str) -> bool:
    import stat

    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False
