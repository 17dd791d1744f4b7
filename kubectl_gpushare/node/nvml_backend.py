"""Real GPUs through NVIDIA's nvidia-ml-py (module ``pynvml``), imported only when used.

Enumerates GPUs (index, UUID, minor number, model, memory) and runs the Xid event loop the way
NVIDIA's own device plugin does: register critical-Xid (and ECC) events per GPU, wait in 5 s slices,
ignore application Xids (13, 31, 43, 45, 68, 109 by default), mark a GPU unhealthy on any other Xid,
and mark every GPU unhealthy when the wait itself fails. A GPU that NVML reports lost, or that no
longer enumerates, is reported removed. This module must not know about gRPC or Kubernetes.
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any

from kubectl_gpushare import protocol
from kubectl_gpushare.node.gpus import BackendError, GpuDevice, HealthEvent, HealthSink

log = logging.getLogger(__name__)

WAIT_MS = 5000
RESCAN_EVERY = 6
"""Re-enumerate GPUs after this many empty waits (about 30 s) to notice GPUs that vanished."""


def _text(value: Any) -> str:
    """NVML strings: str on current bindings, bytes on very old ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlBackend:
    """GPUs from NVML; construct with `NvmlBackend.start`."""

    name = "nvml"

    def __init__(self, nvml: ModuleType, ignored_xids: frozenset[int], wait_ms: int = WAIT_MS) -> None:
        self._nvml = nvml
        self.ignored_xids = ignored_xids
        self.wait_ms = wait_ms
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def start(cls, ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS, wait_ms: int = WAIT_MS) -> NvmlBackend:
        """Load the driver library and initialise NVML.

        Raises:
            BackendError: nvidia-ml-py is missing or NVML cannot start (no driver, no GPU runtime).
        """
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise BackendError("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from exc
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise BackendError(
                f"cannot initialise NVML: {exc}; is this a GPU node with the NVIDIA driver, and does the "
                "container run with the nvidia runtime? (use --fake-gpus to run without GPUs)"
            ) from exc
        return cls(pynvml, ignored_xids, wait_ms)

    def devices(self) -> list[GpuDevice]:
        """Enumerate GPUs by NVML index.

        Raises:
            BackendError: NVML failed while enumerating.
        """
        nvml = self._nvml
        found: list[GpuDevice] = []
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                try:
                    found.append(self._device(index))
                except nvml.NVMLError_GpuIsLost:
                    log.error("GPU %d is lost (fallen off the bus); leaving it out", index)
        except nvml.NVMLError as exc:
            raise BackendError(f"NVML failed while listing GPUs: {exc}") from exc
        return found

    def _device(self, index: int) -> GpuDevice:
        nvml = self._nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        try:
            minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
        except nvml.NVMLError_NotSupported:
            minor = index
        return GpuDevice(
            index=index,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            name=_text(nvml.nvmlDeviceGetName(handle)),
            memory=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            minor=minor,
        )

    def watch_health(self, stop: threading.Event, sink: HealthSink) -> None:
        """Run the Xid event loop until ``stop``; never raises."""
        nvml = self._nvml
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            log.warning("health checks disabled: cannot create an NVML event set: %s", exc)
            stop.wait()
            return
        try:
            known = self._register(event_set, sink)
            idle = 0
            while not stop.is_set():
                try:
                    event = nvml.nvmlEventSetWait(event_set, self.wait_ms)
                except nvml.NVMLError_Timeout:
                    idle += 1
                    if idle >= RESCAN_EVERY:
                        idle = 0
                        known = self._rescan(known, sink)
                    continue
                except nvml.NVMLError_GpuIsLost:
                    known = self._rescan(known, sink)
                    continue
                except nvml.NVMLError as exc:
                    log.error("NVML event wait failed, marking every GPU unhealthy: %s", exc)
                    sink(HealthEvent(None, healthy=False, reason=f"NVML event wait failed: {exc}"))
                    stop.wait(self.wait_ms / 1000)
                    continue
                self._handle(event, sink)
        finally:
            try:
                nvml.nvmlEventSetFree(event_set)
            except nvml.NVMLError:
                pass

    def _register(self, event_set: Any, sink: HealthSink) -> set[str]:
        """Register Xid/ECC events per GPU; a GPU that cannot be watched is reported unhealthy."""
        nvml = self._nvml
        wanted = nvml.nvmlEventTypeXidCriticalError | nvml.nvmlEventTypeDoubleBitEccError
        known: set[str] = set()
        for gpu in self.devices():
            known.add(gpu.uuid)
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(gpu.uuid)
                supported = nvml.nvmlDeviceGetSupportedEventTypes(handle)
                nvml.nvmlDeviceRegisterEvents(handle, wanted & supported, event_set)
            except nvml.NVMLError_NotSupported as exc:
                log.warning(
                    "GPU %d (%s) is too old for health checks, marking it unhealthy: %s", gpu.index, gpu.uuid, exc
                )
                sink(HealthEvent(gpu.uuid, healthy=False, reason="health checks not supported"))
            except nvml.NVMLError as exc:
                log.warning("cannot watch GPU %d (%s), marking it unhealthy: %s", gpu.index, gpu.uuid, exc)
                sink(HealthEvent(gpu.uuid, healthy=False, reason=f"cannot register events: {exc}"))
        return known

    def _handle(self, event: Any, sink: HealthSink) -> None:
        nvml = self._nvml
        if event.eventType != nvml.nvmlEventTypeXidCriticalError:
            return
        xid = int(event.eventData)
        if xid in self.ignored_xids:
            log.info("ignoring application Xid %d", xid)
            return
        try:
            uuid: str | None = _text(nvml.nvmlDeviceGetUUID(event.device))
        except nvml.NVMLError:
            uuid = None
        log.warning("Xid %d on %s: marking it unhealthy", xid, uuid or "an unknown GPU (all GPUs)")
        sink(HealthEvent(uuid, healthy=False, reason=f"Xid {xid}"))

    def _rescan(self, known: set[str], sink: HealthSink) -> set[str]:
        """Report GPUs that no longer enumerate as removed, and new ones as healthy."""
        try:
            present = {gpu.uuid for gpu in self.devices()}
        except BackendError as exc:
            log.warning("cannot re-enumerate GPUs: %s", exc)
            return known
        for uuid in sorted(known - present):
            log.error("GPU %s disappeared; removing its devices", uuid)
            sink(HealthEvent(uuid, healthy=False, reason="GPU is lost", removed=True))
        for uuid in sorted(present - known):
            sink(HealthEvent(uuid, healthy=True, reason="GPU present"))
        return present

    def close(self) -> None:
        """Shut NVML down once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass
