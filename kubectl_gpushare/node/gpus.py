"""The seam between the device plugin and the GPUs: the `GpuBackend` protocol and its records.

Three backends implement it: `nvml_backend.NvmlBackend` (real GPUs through nvidia-ml-py),
`fake_backend.FakeBackend` (``--fake-gpus``, for the sandbox, the demo and the tests) and
`NullBackend` below (no GPUs: the degrade path when NVML cannot start). Everything above this
seam (device lists, allocation, the gRPC servicer) is written against the protocol only.

This module holds types only; it must not import pynvml or grpc.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class GpuDevice:
    """One physical GPU as the backend sees it.

    Attributes:
        index: the NVML index (what ``nvidia-smi`` shows and what ``NVIDIA_VISIBLE_DEVICES``
            numbers mean); gpushare's ``ALIYUN_COM_GPU_MEM_IDX`` refers to this.
        uuid: ``GPU-...``; the prefix of every fake device id of this GPU.
        name: the model, e.g. ``NVIDIA A100-SXM4-80GB``.
        memory: total memory in bytes.
        minor: the ``/dev/nvidia<minor>`` number (the original plugin's "index"; usually equal).
    """

    index: int
    uuid: str
    name: str
    memory: int
    minor: int


@dataclass(frozen=True)
class HealthEvent:
    """A change in one GPU's health, or in every GPU's when ``uuid`` is None.

    ``removed`` means the GPU is gone (fallen off the bus, or no longer enumerated): its devices
    leave the list instead of being reported unhealthy.
    """

    uuid: str | None
    healthy: bool
    reason: str
    removed: bool = False


HealthSink = Callable[[HealthEvent], None]


class BackendError(RuntimeError):
    """The GPU backend could not start or enumerate devices; the message says why."""


MEMORY_LIMIT_MAX = 0xFFFFFFFFFFFFFFFF
"""``NVML_DEVICE_MEMORY_LIMIT_MAX`` (nvidia-ml-py 13.615): a hard limit of this value means none.
NVML's ``nvmlSetMemoryLimits_v1_t`` page: "To clear the limits, set softLimit to 0, and hardLimit to
NVML_DEVICE_MEMORY_LIMIT_MAX. Removing the cgroup will also clear any limits."."""


@dataclass(frozen=True)
class MemoryLimits:
    """``nvmlGetMemoryLimits_v1_t`` for one cgroup on one GPU: bytes; no limit is soft 0, hard MAX."""

    soft: int
    hard: int
    used: int
    """``currentUsed``: what the cgroup's processes hold on the GPU now."""

    @property
    def limited(self) -> bool:
        """Whether any limit is set (NVML: none when soft is 0 and hard is the maximum)."""
        return self.soft != 0 or self.hard != MEMORY_LIMIT_MAX


class LimitsUnsupportedError(BackendError):
    """This GPU cannot hold cgroups to memory limits (driver older than r615, MIG, no cgroup v2).

    Permanent for the life of the driver: the caller stops asking and reports the reason.
    """


@dataclass(frozen=True)
class ProcessUsage:
    """A process holding memory on a GPU, as NVML's running-process lists report it."""

    pid: int
    used: int
    """Bytes; 0 where NVML does not know (``NVML_VALUE_NOT_AVAILABLE``)."""


class MemoryBackend(Protocol):
    """Per-cgroup memory limits and usage of GPUs (MPS v3 memory partitioning, driver r615+).

    NVIDIA: "MPS v3 Memory Partitioning" (docs.nvidia.com/deploy/mps/.../mpsv3-memory-partitioning.html):
    cgroup v2 at /sys/fs/cgroup, CUDA 13.4 or newer, not MIG; the hard limit fails allocations past it
    with out-of-memory, the soft limit is what the cgroup is guaranteed (crossing it makes a client an
    eviction candidate under real memory pressure). ``cgroup`` is the cgroup's full sysfs path.
    """

    def limits_unsupported(self, uuid: str, probe_cgroup: str) -> str:
        """Why this GPU cannot enforce limits ("" when it can); ``probe_cgroup`` is one that exists.

        Raises:
            BackendError: a transient NVML error; ask again later.
        """
        ...

    def set_memory_limits(self, uuid: str, cgroup: str, soft: int, hard: int) -> None:
        """Set one cgroup's limits on one GPU (soft 0 / hard `MEMORY_LIMIT_MAX` clears them).

        Raises:
            LimitsUnsupportedError: the GPU or driver cannot; BackendError: NVML failed (retry later).
        """
        ...

    def get_memory_limits(self, uuid: str, cgroup: str) -> MemoryLimits:
        """Read one cgroup's limits and current use on one GPU.

        Raises:
            LimitsUnsupportedError, BackendError: as `set_memory_limits`.
        """
        ...

    def memory_used(self, uuid: str) -> int:
        """Bytes in use on the GPU, every process counted, the driver's own reserve not (as nvidia-smi).

        Raises:
            BackendError: NVML failed.
        """
        ...

    def processes(self, uuid: str) -> list[ProcessUsage]:
        """Processes holding memory on the GPU, compute and graphics (a pid in both counted once).

        Raises:
            BackendError: NVML failed.
        """
        ...


class GpuBackend(MemoryBackend, Protocol):
    """Where GPUs, their health, and their per-cgroup memory limits come from."""

    name: str

    def devices(self) -> list[GpuDevice]:
        """Enumerate the GPUs now present, ordered by index.

        Raises:
            BackendError: the GPUs cannot be enumerated (driver missing, NVML error).
        """
        ...

    def watch_health(self, stop: threading.Event, sink: HealthSink) -> None:
        """Block until ``stop`` is set, passing every health change to ``sink``.

        Runs on its own thread. Must return within about a second of ``stop`` being set and must
        not raise: failures are reported as events.
        """
        ...

    def close(self) -> None:
        """Release the backend's resources (NVML handles); idempotent."""
        ...


class NullBackend:
    """A backend with no GPUs, used when NVML cannot start and the user asked not to fail.

    Advertising nothing keeps kubelet's view honest (capacity 0) while the pod stays up for logs,
    instead of the original's silent block-forever.
    """

    name = "null"

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def devices(self) -> list[GpuDevice]:
        """No GPUs."""
        return []

    def watch_health(self, stop: threading.Event, sink: HealthSink) -> None:
        """Nothing to watch; wait for stop."""
        stop.wait()

    def close(self) -> None:
        """Nothing to release."""

    def limits_unsupported(self, uuid: str, probe_cgroup: str) -> str:
        """No GPUs, nothing to limit."""
        return "no GPU backend"

    def set_memory_limits(self, uuid: str, cgroup: str, soft: int, hard: int) -> None:
        """Never called: every GPU is unsupported."""
        raise LimitsUnsupportedError("no GPU backend")

    def get_memory_limits(self, uuid: str, cgroup: str) -> MemoryLimits:
        """Never called: every GPU is unsupported."""
        raise LimitsUnsupportedError("no GPU backend")

    def memory_used(self, uuid: str) -> int:
        """No GPUs."""
        raise BackendError("no GPU backend")

    def processes(self, uuid: str) -> list[ProcessUsage]:
        """No GPUs."""
        return []
