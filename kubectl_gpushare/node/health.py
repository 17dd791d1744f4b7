"""Which GPUs a node has and whether each is healthy, kept current from the backend's health events.

`HealthBook.apply` is the rule for one `gpus.HealthEvent`: a removed GPU leaves the book; a healthy
event for a GPU the book does not know re-reads the backend (a GPU that came back); any other event
sets the health of one GPU (or of all, for ``uuid`` None). It returns whether anything changed, so
the caller republishes only then. Thread-safe; no I/O beyond the backend's ``devices()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubectl_gpushare.node.gpus import BackendError, GpuDevice, HealthEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuState:
    """One GPU and its health as last reported."""

    gpu: GpuDevice
    healthy: bool = True
    reason: str = ""


class HealthBook:
    """The node's GPUs by UUID, with health; versioned so readers can tell a change."""

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
        """Apply one health event; True if the book changed."""
        if event.removed and event.uuid is not None:
            with self._lock:
                gone = self._states.pop(event.uuid, None)
                self.version += gone is not None
            if gone is not None:
                log.error("GPU %d (%s) removed: %s", gone.gpu.index, event.uuid, event.reason)
            return gone is not None
        if event.healthy and event.uuid is not None:
            with self._lock:
                known = event.uuid in self._states
            if not known:
                return self._readd(event.uuid)
        changed = False
        with self._lock:
            for uuid, state in self._states.items():
                if (event.uuid is None or uuid == event.uuid) and state.healthy != event.healthy:
                    self._states[uuid] = GpuState(state.gpu, event.healthy, "" if event.healthy else event.reason)
                    changed = True
            self.version += changed
        if changed:
            log.warning("GPU %s is now %s: %s", event.uuid or "(all)", "healthy" if event.healthy else "unhealthy",
                        event.reason)
        return changed

    def _readd(self, uuid: str) -> bool:
        try:
            gpu = next((g for g in self._reread() if g.uuid == uuid), None)
        except BackendError as exc:
            log.warning("cannot re-read GPUs: %s", exc)
            return False
        if gpu is None:
            return False
        with self._lock:
            self._states[uuid] = GpuState(gpu)
            self.version += 1
        log.info("GPU %d (%s) is back", gpu.index, uuid)
        return True
