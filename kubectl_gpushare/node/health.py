"""Which GPUs a node has and whether each is healthy, kept current from the backend's health events.

`apply` is the one rule for a `gpus.HealthEvent`, whatever keeps the GPUs (the DRA driver's
`HealthBook`, the device plugin's advertised inventory): a removed GPU leaves; a healthy event for
a GPU not kept re-reads the backend (a GPU that came back); any other event sets the health of one
GPU (or of all, for ``uuid`` None). It says what changed, so the caller republishes only then.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubectl_gpushare.node.gpus import BackendError, GpuDevice, HealthEvent

log = logging.getLogger(__name__)


class Change(enum.Enum):
    """What one health event changed."""

    NONE = "none"
    HEALTH = "health"
    """A GPU's health (the same GPUs are present)."""
    GPUS = "gpus"
    """A GPU left or came back."""


class HealthKeeper(Protocol):
    """The GPUs an agent keeps, each call atomic on its own (`apply` makes no compound promise)."""

    def knows(self, uuid: str) -> bool:
        """Whether a GPU is kept."""
        ...

    def remove(self, uuid: str) -> GpuDevice | None:
        """Drop a GPU; the one dropped, or None if it was not kept."""
        ...

    def add(self, gpu: GpuDevice) -> bool:
        """Keep a GPU that (re)appeared, healthy; whether it is new."""
        ...

    def set_health(self, uuid: str | None, healthy: bool, reason: str) -> bool:
        """Set one GPU's health (all, for None); whether anything changed."""
        ...


def apply(event: HealthEvent, keeper: HealthKeeper, reread: Callable[[], list[GpuDevice]]) -> Change:
    """Apply one health event to ``keeper``; ``reread`` lists the backend's GPUs (only for a GPU come back)."""
    if event.removed and event.uuid is not None:
        gone = keeper.remove(event.uuid)
        if gone is None:
            return Change.NONE
        log.error("GPU %d (%s) removed: %s", gone.index, event.uuid, event.reason)
        return Change.GPUS
    if event.healthy and event.uuid is not None and not keeper.knows(event.uuid):
        try:
            gpu = next((g for g in reread() if g.uuid == event.uuid), None)
        except BackendError as exc:
            log.warning("cannot re-read GPUs: %s", exc)
            return Change.NONE
        if gpu is None or not keeper.add(gpu):
            return Change.NONE
        log.info("GPU %d (%s) is back", gpu.index, gpu.uuid)
        return Change.GPUS
    if not keeper.set_health(event.uuid, event.healthy, "" if event.healthy else event.reason):
        return Change.NONE
    log.warning("GPU %s is now %s: %s", event.uuid or "(all)", "healthy" if event.healthy else "unhealthy",
                event.reason)
    return Change.HEALTH


@dataclass(frozen=True)
class GpuState:
    """One GPU and its health as last reported."""

    gpu: GpuDevice
    healthy: bool = True
    reason: str = ""


class HealthBook:
    """The node's GPUs by UUID, with health; versioned so readers can tell a change. Thread-safe."""

    def __init__(self, gpus: list[GpuDevice], reread: Callable[[], list[GpuDevice]]) -> None:
        self._lock = threading.Lock()
        self._states = {gpu.uuid: GpuState(gpu) for gpu in gpus}
        self._reread = reread
        self.version = 0

    def states(self) -> list[GpuState]:
        """Every GPU present, by index."""
        with self._lock:
            return sorted(self._states.values(), key=lambda state: state.gpu.index)

    def healthy(self) -> list[GpuDevice]:
        """The healthy GPUs, by index."""
        return [state.gpu for state in self.states() if state.healthy]

    def apply(self, event: HealthEvent) -> bool:
        """Apply one health event (`apply`); True if the book changed."""
        return apply(event, self, self._reread) is not Change.NONE

    def knows(self, uuid: str) -> bool:
        """Whether a GPU is in the book."""
        with self._lock:
            return uuid in self._states

    def remove(self, uuid: str) -> GpuDevice | None:
        """Drop a GPU that disappeared (`HealthKeeper.remove`)."""
        with self._lock:
            gone = self._states.pop(uuid, None)
            self.version += gone is not None
        return gone.gpu if gone is not None else None

    def add(self, gpu: GpuDevice) -> bool:
        """Keep a GPU that came back, healthy (`HealthKeeper.add`)."""
        with self._lock:
            if gpu.uuid in self._states:
                return False
            self._states[gpu.uuid] = GpuState(gpu)
            self.version += 1
        return True

    def set_health(self, uuid: str | None, healthy: bool, reason: str) -> bool:
        """Set health (`HealthKeeper.set_health`)."""
        changed = False
        with self._lock:
            for key, state in self._states.items():
                if (uuid is None or key == uuid) and state.healthy != healthy:
                    self._states[key] = GpuState(state.gpu, healthy, reason)
                    changed = True
            self.version += changed
        return changed
