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
from kubectl_gpushare.node.gpus import (
    BackendError,
    GpuDevice,
    HealthEvent,
    HealthSink,
    LimitsUnsupportedError,
    MemoryLimits,
    ProcessUsage,
)

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
        self._memory_v2: bool | None = None
        """Whether ``nvmlDeviceGetMemoryInfo_v2`` answers (None: not asked yet)."""

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

    # --- per-cgroup memory limits (driver r615+, nvidia-ml-py 13.615) ------------------------------
    # nvidia-ml-py 13.615's pynvml: nvmlDeviceSetMemoryLimits_v1(device, c_nvmlSetMemoryLimits_v1_t)
    # with fields nameSpace (c_char_p: the cgroup's full sysfs path), softLimit, hardLimit;
    # nvmlDeviceGetMemoryLimits_v1(device, c_nvmlGetMemoryLimits_v1_t) fills softLimit, hardLimit and
    # currentUsed in place (neither struct has a version field in that binding). A driver without
    # the symbols raises NVMLError_FunctionNotFound; MIG and unsupported setups NVMLError_NotSupported.

    def _unsupported(self, exc: Exception) -> str | None:
        nvml = self._nvml
        if isinstance(exc, nvml.NVMLError_FunctionNotFound):
            return "driver has no per-cgroup memory limits (needs NVIDIA driver r615 / CUDA 13.4 or newer)"
        if isinstance(exc, nvml.NVMLError_NotSupported):
            return f"driver does not support memory limits on this GPU: {exc}"
        if isinstance(exc, nvml.NVMLError_NoPermission):
            return f"no permission to set memory limits (run as root): {exc}"
        return None

    def _limits_call(self, uuid: str, fn: str, struct: Any) -> None:
        nvml = self._nvml
        if not hasattr(nvml, fn):
            raise LimitsUnsupportedError("nvidia-ml-py is older than 13.615 (no per-cgroup memory-limit calls)")
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            getattr(nvml, fn)(handle, struct)
        except nvml.NVMLError as exc:
            reason = self._unsupported(exc)
            if reason:
                raise LimitsUnsupportedError(reason) from exc
            raise BackendError(f"NVML {fn} failed: {exc}") from exc

    def limits_unsupported(self, uuid: str, probe_cgroup: str) -> str:
        """"" if the GPU takes per-cgroup limits; else why not (MIG, old driver, no permission)."""
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            current, _ = nvml.nvmlDeviceGetMigMode(handle)
            if current == nvml.NVML_DEVICE_MIG_ENABLE:
                return "MIG is enabled (NVIDIA: memory partitioning does not support MIG)"
        except nvml.NVMLError_NotSupported:
            pass  # GPUs without MIG
        except nvml.NVMLError as exc:
            raise BackendError(f"NVML failed reading MIG mode: {exc}") from exc
        try:
            self.get_memory_limits(uuid, probe_cgroup)
        except LimitsUnsupportedError as exc:
            return str(exc)
        return ""

    def set_memory_limits(self, uuid: str, cgroup: str, soft: int, hard: int) -> None:
        """``nvmlDeviceSetMemoryLimits_v1`` for one cgroup."""
        nvml = self._nvml
        if not hasattr(nvml, "c_nvmlSetMemoryLimits_v1_t"):
            raise LimitsUnsupportedError("nvidia-ml-py is older than 13.615 (no per-cgroup memory-limit calls)")
        struct = nvml.c_nvmlSetMemoryLimits_v1_t()
        struct.nameSpace = cgroup.encode()
        struct.softLimit = soft
        struct.hardLimit = hard
        self._limits_call(uuid, "nvmlDeviceSetMemoryLimits_v1", struct)

    def get_memory_limits(self, uuid: str, cgroup: str) -> MemoryLimits:
        """``nvmlDeviceGetMemoryLimits_v1`` for one cgroup."""
        nvml = self._nvml
        if not hasattr(nvml, "c_nvmlGetMemoryLimits_v1_t"):
            raise LimitsUnsupportedError("nvidia-ml-py is older than 13.615 (no per-cgroup memory-limit calls)")
        struct = nvml.c_nvmlGetMemoryLimits_v1_t()
        struct.nameSpace = cgroup.encode()
        self._limits_call(uuid, "nvmlDeviceGetMemoryLimits_v1", struct)
        return MemoryLimits(soft=int(struct.softLimit), hard=int(struct.hardLimit), used=int(struct.currentUsed))

    def memory_used(self, uuid: str) -> int:
        """Memory in use on the GPU, as ``nvidia-smi`` shows it: without what the driver reserves.

        ``nvmlDeviceGetMemoryInfo_v2`` (``nvmlMemory_v2_t``, NVML API reference) splits ``reserved``
        (driver and firmware) from ``used``; the v1 call counts it as used, which on an idle H200
        with driver 580 read 615 MiB where nvidia-smi shows 0. Drivers without the v2 call (before
        r510) answer through v1.
        """
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            if self._memory_v2 is not False and hasattr(nvml, "nvmlMemory_v2"):
                try:
                    used = int(nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2).used)
                    self._memory_v2 = True
                    return used
                except (nvml.NVMLError_FunctionNotFound, nvml.NVMLError_NotSupported,
                        nvml.NVMLError_ArgumentVersionMismatch):
                    self._memory_v2 = False
            return int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
        except nvml.NVMLError as exc:
            raise BackendError(f"NVML failed reading memory of {uuid}: {exc}") from exc

    def processes(self, uuid: str) -> list[ProcessUsage]:
        """Compute and graphics processes (a pid in both lists counted once, the larger figure)."""
        nvml = self._nvml
        found: dict[int, int] = {}
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            listed = [*nvml.nvmlDeviceGetComputeRunningProcesses(handle),
                      *nvml.nvmlDeviceGetGraphicsRunningProcesses(handle)]
        except nvml.NVMLError as exc:
            raise BackendError(f"NVML failed listing processes of {uuid}: {exc}") from exc
        for proc in listed:
            used = proc.usedGpuMemory
            used = int(used) if isinstance(used, int) and 0 <= used < 2**63 else 0  # None: not available
            found[int(proc.pid)] = max(found.get(int(proc.pid), 0), used)
        return [ProcessUsage(pid, used) for pid, used in sorted(found.items())]

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
