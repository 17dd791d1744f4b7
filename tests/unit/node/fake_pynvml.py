# ruff: noqa: N802  (the fake mirrors pynvml's camelCase names)
"""A fake ``pynvml`` module over a canned machine, reusing the real module's error classes.

Differs from NVML: handles are plain ints, only the calls the NVML backend makes exist, and events
come from a queue the test fills (``nvmlEventSetWait`` raises the real ``NVMLError_Timeout`` when it
is empty, as NVML does).
"""

from __future__ import annotations

import queue
import types
from dataclasses import dataclass, field

import pynvml as real


@dataclass
class FakeGpu:
    uuid: str
    name: str
    memory: int
    minor: int
    events_supported: bool = True
    lost: bool = False
    mig: bool = False
    limits_error: int | None = None
    """An NVML error code the memory-limit calls answer (e.g. FUNCTION_NOT_FOUND on a pre-r615 driver)."""
    limits: dict[str, tuple[int, int]] = field(default_factory=dict)
    processes: list[tuple[int, int]] = field(default_factory=list)
    """(pid, used bytes) of the compute processes on it (``nvmlDeviceGetComputeRunningProcesses``)."""
    used: int = 0
    reserved: int = 0
    """Memory the driver keeps (``nvmlMemory_v2_t.reserved``): v1's ``used`` counts it, v2's does not."""


@dataclass
class Machine:
    gpus: list[FakeGpu]
    init_error: int | None = None
    wait_error: int | None = None
    events: queue.Queue[types.SimpleNamespace] = field(default_factory=queue.Queue)
    registered: list[tuple[int, int]] = field(default_factory=list)
    shutdowns: int = 0
    driver: str = "615.00"
    """``nvmlSystemGetDriverVersion``; set limits_error on each GPU to model a driver older than r615."""
    memory_v2: bool = True
    """Whether ``nvmlDeviceGetMemoryInfo_v2`` exists (from r510; older drivers: FUNCTION_NOT_FOUND)."""

    def xid(self, index: int | None, xid: int) -> None:
        """Queue an Xid event (index None: the event carries no device)."""
        self.events.put(
            types.SimpleNamespace(device=index, eventType=real.nvmlEventTypeXidCriticalError, eventData=xid)
        )

    def other_event(self, index: int) -> None:
        self.events.put(types.SimpleNamespace(device=index, eventType=real.nvmlEventTypeSingleBitEccError, eventData=0))


def _raise(code: int) -> None:
    raise real.NVMLError(code)


def make_module(machine: Machine) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    for name in dir(real):
        if name.startswith("NVMLError") or name.startswith("NVML_ERROR") or name.startswith("nvmlEventType"):
            setattr(module, name, getattr(real, name))

    def check(handle: int) -> FakeGpu:
        if handle is None or not 0 <= handle < len(machine.gpus):
            _raise(real.NVML_ERROR_INVALID_ARGUMENT)
        gpu = machine.gpus[handle]
        if gpu.lost:
            _raise(real.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlInit() -> None:
        if machine.init_error is not None:
            _raise(machine.init_error)

    def nvmlShutdown() -> None:
        machine.shutdowns += 1

    def nvmlDeviceGetHandleByUUID(uuid: str) -> int:
        for index, gpu in enumerate(machine.gpus):
            if gpu.uuid == uuid:
                return index
        _raise(real.NVML_ERROR_NOT_FOUND)
        return -1

    def nvmlEventSetWait(event_set: object, timeout_ms: int) -> types.SimpleNamespace:
        if machine.wait_error is not None:
            _raise(machine.wait_error)
        try:
            return machine.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            _raise(real.NVML_ERROR_TIMEOUT)
            raise

    def register(handle: int, mask: int, event_set: object) -> None:
        gpu = check(handle)
        if not gpu.events_supported:
            _raise(real.NVML_ERROR_NOT_SUPPORTED)
        machine.registered.append((handle, mask))

    def set_limits(handle: int, limits: object) -> None:
        gpu = check(handle)
        if gpu.limits_error is not None:
            _raise(gpu.limits_error)
        gpu.limits[limits.nameSpace] = (limits.softLimit, limits.hardLimit)  # type: ignore[attr-defined]

    def get_limits(handle: int, limits: object) -> None:
        gpu = check(handle)
        if gpu.limits_error is not None:
            _raise(gpu.limits_error)
        soft, hard = gpu.limits.get(limits.nameSpace, (0, real.NVML_DEVICE_MEMORY_LIMIT_MAX))  # type: ignore[attr-defined]
        limits.softLimit, limits.hardLimit, limits.currentUsed = soft, hard, 0  # type: ignore[attr-defined]

    def mig_mode(handle: int) -> tuple[int, int]:
        gpu = check(handle)
        state = real.NVML_DEVICE_MIG_ENABLE if gpu.mig else real.NVML_DEVICE_MIG_DISABLE
        return state, state

    def processes(handle: int) -> list[types.SimpleNamespace]:
        # pynvml's wrappers return one object per process with ``pid`` and ``usedGpuMemory`` (None where
        # NVML reports NVML_VALUE_NOT_AVAILABLE); NVML lists no process twice in one call.
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in check(handle).processes]

    # the real structs (ctypes) and constants, so a wrong field name fails here as it would on a GPU
    module.c_nvmlSetMemoryLimits_v1_t = real.c_nvmlSetMemoryLimits_v1_t
    module.c_nvmlGetMemoryLimits_v1_t = real.c_nvmlGetMemoryLimits_v1_t
    module.NVML_DEVICE_MEMORY_LIMIT_MAX = real.NVML_DEVICE_MEMORY_LIMIT_MAX
    module.NVML_DEVICE_MIG_ENABLE = real.NVML_DEVICE_MIG_ENABLE
    module.nvmlDeviceSetMemoryLimits_v1 = set_limits
    module.nvmlDeviceGetMemoryLimits_v1 = get_limits
    module.nvmlDeviceGetMigMode = mig_mode
    module.nvmlInit = nvmlInit
    module.nvmlSystemGetDriverVersion = lambda: machine.driver
    module.nvmlDeviceGetComputeRunningProcesses = processes
    module.nvmlDeviceGetGraphicsRunningProcesses = lambda handle: (check(handle), [])[1]
    module.nvmlShutdown = nvmlShutdown
    module.nvmlDeviceGetCount = lambda: len(machine.gpus)
    module.nvmlDeviceGetHandleByIndex = lambda index: (
        index if 0 <= index < len(machine.gpus) else _raise(real.NVML_ERROR_INVALID_ARGUMENT)
    )
    module.nvmlDeviceGetHandleByUUID = nvmlDeviceGetHandleByUUID
    module.nvmlDeviceGetUUID = lambda handle: check(handle).uuid
    module.nvmlDeviceGetName = lambda handle: check(handle).name
    module.nvmlDeviceGetMinorNumber = lambda handle: check(handle).minor
    def memory_info(handle: int, version: int | None = None) -> types.SimpleNamespace:
        # NVML API reference: nvmlDeviceGetMemoryInfo (v1: reserved memory counts as used) and
        # nvmlDeviceGetMemoryInfo_v2 / nvmlMemory_v2_t (total, reserved, free, used apart).
        gpu = check(handle)
        if version is None:
            return types.SimpleNamespace(total=gpu.memory, free=gpu.memory - gpu.used - gpu.reserved,
                                         used=gpu.used + gpu.reserved)
        if not machine.memory_v2:
            _raise(real.NVML_ERROR_FUNCTION_NOT_FOUND)
        if version != real.nvmlMemory_v2:
            _raise(real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return types.SimpleNamespace(version=version, total=gpu.memory, reserved=gpu.reserved,
                                     free=gpu.memory - gpu.used - gpu.reserved, used=gpu.used)

    module.nvmlMemory_v2 = real.nvmlMemory_v2
    module.nvmlDeviceGetMemoryInfo = memory_info
    module.nvmlDeviceGetSupportedEventTypes = lambda handle: (check(handle), real.nvmlEventTypeAll)[1]
    module.nvmlDeviceRegisterEvents = register
    module.nvmlEventSetCreate = lambda: object()
    module.nvmlEventSetFree = lambda event_set: None
    module.nvmlEventSetWait = nvmlEventSetWait
    return module
