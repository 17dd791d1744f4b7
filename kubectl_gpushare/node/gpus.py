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


class GpuBackend(Protocol):
    """Where GPUs and their health come from."""

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


class BackendError(RuntimeError):
    """The GPU backend could not start or enumerate devices; the message says why."""


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
