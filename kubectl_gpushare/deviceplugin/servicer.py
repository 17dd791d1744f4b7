"""The v1beta1 DevicePlugin gRPC servicer: a thin adapter over `Advertisement` and `AllocationBook`.

`Advertisement` owns the inventory behind a lock and the ListAndWatch message built from it (once
per change, shared by every stream). The servicer translates gRPC calls into calls on it and on
the allocation book, and failures into gRPC status codes with messages kubelet shows on the pod
(never UNKNOWN: an unexpected error is INTERNAL with a one-line message). A stream holds one of the
server's worker threads for its whole life, so at most `MAX_STREAMS` are served at once and the
rest of the pool is always free for kubelet's unary calls. No decisions are made here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc
from kubectl_gpushare.deviceplugin.allocation import AllocateError, AllocationBook
from kubectl_gpushare.deviceplugin.allocator import preferred_devices
from kubectl_gpushare.deviceplugin.devices import Inventory
from kubectl_gpushare.node.gpus import GpuDevice

log = logging.getLogger(__name__)

STREAM_POLL = 0.5
"""How often an idle ListAndWatch stream checks that kubelet is still there and we are not stopping."""
MAX_STREAMS = 4
"""ListAndWatch streams served at once (kubelet keeps one; a restart briefly overlaps two)."""
UNARY_WORKERS = 8
"""Worker threads left for Allocate and the other unary calls whatever the streams do."""
POOL_SIZE = MAX_STREAMS + UNARY_WORKERS

_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "precondition": grpc.StatusCode.FAILED_PRECONDITION,
    "exhausted": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "internal": grpc.StatusCode.INTERNAL,
}


class Advertisement:
    """The inventory with its lock, change notification and cached ListAndWatch message."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.lock = threading.Lock()
        self._changed = threading.Condition(self.lock)
        self._cached: tuple[int, api.ListAndWatchResponse] | None = None
        self._segments: dict[tuple[str, int, str], bytes] = {}
        self.closed = False

    def change(self, update: Callable[[Inventory], bool]) -> bool:
        """Apply ``update`` under the lock; wake the streams if it reports a change."""
        with self._changed:
            changed = update(self.inventory)
            if changed:
                self._changed.notify_all()
            return changed

    # The GPUs' health, kept by `node.health.apply` (a `node.health.HealthKeeper`): each a `change`.

    def knows(self, uuid: str) -> bool:
        """Whether a GPU is advertised."""
        with self.lock:
            return self.inventory.has(uuid)

    def remove(self, uuid: str) -> GpuDevice | None:
        """Stop advertising a GPU that disappeared (`Inventory.remove`)."""
        gone: GpuDevice | None = None

        def update(inventory: Inventory) -> bool:
            nonlocal gone
            gone = inventory.remove(uuid)
            return gone is not None

        self.change(update)
        return gone

    def add(self, gpu: GpuDevice) -> bool:
        """Advertise a GPU that came back (`Inventory.add`)."""
        return self.change(lambda inventory: inventory.add(gpu))

    def set_health(self, uuid: str | None, healthy: bool, reason: str) -> bool:
        """Mark one GPU, or all (`Inventory.set_health`)."""
        return self.change(lambda inventory: inventory.set_health(uuid, healthy, reason))

    def close(self) -> None:
        """End every stream (the plugin is stopping or restarting)."""
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def reopen(self) -> None:
        """Allow streams again after a restart."""
        with self._changed:
            self.closed = False

    def message(self) -> tuple[int, api.ListAndWatchResponse]:
        """The current device list and its version, built at most once per version.

        Each GPU's devices are encoded once per health state and kept; a new list is the
        concatenation of those segments (serialised repeated fields concatenate into one list),
        so a health change on a node of 65,000 devices costs milliseconds, not a rebuild.
        """
        with self.lock:
            version = self.inventory.version
            if self._cached is None or self._cached[0] != version:
                states = self.inventory.states()
                data = b"".join(self._segment(gpu.uuid, units, health) for gpu, units, health in states)
                self._cached = (version, api.ListAndWatchResponse.FromString(data))
            return self._cached

    def _segment(self, uuid: str, units: int, health: str) -> bytes:
        key = (uuid, units, health)
        segment = self._segments.get(key)
        if segment is None:
            devices = [api.Device(ID=protocol.fake_device_id(uuid, j), health=health) for j in range(units)]
            segment = api.ListAndWatchResponse(devices=devices).SerializeToString()
            self._segments[key] = segment
        return segment

    def wait_change(self, version: int, timeout: float) -> bool:
        """Wait until the version moves past ``version`` or the advertisement closes."""
        with self._changed:
            return self._changed.wait_for(lambda: self.closed or self.inventory.version != version, timeout)


class DevicePluginServicer(api_grpc.DevicePluginServicer):
    """Serves kubelet: options, the device stream, preferred allocation, Allocate, PreStartContainer."""

    def __init__(self, advertisement: Advertisement, book: AllocationBook, max_streams: int = MAX_STREAMS) -> None:
        self.advertisement = advertisement
        self.book = book
        self._streams = threading.BoundedSemaphore(max_streams)

    def GetDevicePluginOptions(self, request: api.Empty, context: grpc.ServicerContext) -> api.DevicePluginOptions:  # noqa: N802
        """GetPreferredAllocation is offered; PreStartContainer is not needed."""
        return api.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(self, request: api.Empty, context: grpc.ServicerContext) -> Iterator[api.ListAndWatchResponse]:  # noqa: N802
        """Send the full list now and again after every change, until kubelet goes or we stop."""
        if not self._streams.acquire(blocking=False):
            log.warning("refusing a ListAndWatch stream: %d are open already", MAX_STREAMS)
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"gpushare device plugin: {MAX_STREAMS} ListAndWatch streams are open already",
            )
        try:
            sent = -1
            while context.is_active() and not self.advertisement.closed:
                version, message = self.advertisement.message()
                if version != sent:
                    log.debug("ListAndWatch: sending %d devices (version %d)", len(message.devices), version)
                    yield message
                    sent = version
                self.advertisement.wait_change(sent, STREAM_POLL)
        finally:
            self._streams.release()

    def GetPreferredAllocation(  # noqa: N802
        self, request: api.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> api.PreferredAllocationResponse:
        """Prefer fake devices of the GPU the pod's annotation names (any devices if that cannot be worked out)."""
        responses = []
        for container in request.container_requests:
            available = list(container.available_deviceIDs)
            must_include = list(container.must_include_deviceIDs)
            try:
                chosen = self.book.preferred(available, must_include, container.allocation_size)
            except Exception as exc:  # a preference is advice: never fail kubelet's call over it
                log.warning("GetPreferredAllocation: %s: %s; no preference", type(exc).__name__, str(exc)[:200])
                chosen = preferred_devices(available, must_include, container.allocation_size, None)
            responses.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return api.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: api.AllocateRequest, context: grpc.ServicerContext) -> api.AllocateResponse:  # noqa: N802
        """Find the pod for each container request and return the env that pins it to its GPU."""
        responses = []
        for container in request.container_requests:
            try:
                allocated = self.book.allocate(list(container.devices_ids))
            except AllocateError as exc:
                log.warning("Allocate failed: %s", exc.message)
                context.abort(_CODES[exc.kind], exc.message)
            except Exception as exc:  # a bug must reach kubelet as one clear line, not UNKNOWN
                log.exception("Allocate failed unexpectedly")
                context.abort(
                    grpc.StatusCode.INTERNAL,
                    f"gpushare device plugin: internal error in Allocate ({type(exc).__name__}: {str(exc)[:200]})",
                )
            responses.append(api.ContainerAllocateResponse(envs=allocated.env))
        return api.AllocateResponse(container_responses=responses)

    def PreStartContainer(  # noqa: N802
        self, request: api.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> api.PreStartContainerResponse:
        """Nothing to prepare (not requested in the options; answered for completeness)."""
        return api.PreStartContainerResponse()
