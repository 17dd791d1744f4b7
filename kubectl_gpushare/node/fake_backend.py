"""``--fake-gpus``: GPUs described on the command line, for the sandbox, the demo and the tests.

A stand-in for NVML. Where it differs from real GPUs: there is no driver, memory is exactly what
the spec says (real cards report a little less than their label), UUIDs are derived from the node
name and index (stable across restarts, distinct across nodes), and health changes only when a
test or the demo injects them (`inject_xid`, `set_health`, `remove_gpu`, `add_gpu`).
"""

from __future__ import annotations

import hashlib
import queue
import re
import threading

from kubectl_gpushare import protocol
from kubectl_gpushare.node.gpus import BackendError, GpuDevice, HealthEvent, HealthSink

_GROUP = re.compile(r"^\s*(?:(\d+)\s*[xX*]\s*)?(\d+)\s*(GiB|MiB|Gi|Mi|G|M)\s*(?::\s*(.+?))?\s*$")
_UNIT_BYTES = {"gib": 1 << 30, "gi": 1 << 30, "g": 1 << 30, "mib": 1 << 20, "mi": 1 << 20, "m": 1 << 20}
MAX_FAKE_GPUS = 64


class FakeSpecError(ValueError):
    """A ``--fake-gpus`` value that cannot be read; the message shows the expected form."""


def parse_fake_gpus(spec: str) -> list[tuple[int, str]]:
    """Read ``4x80GiB`` or ``2x16GiB,1x24GiB:NVIDIA L4`` into ``(memory bytes, model)`` per GPU.

    Each comma-separated group is ``[<count>x]<size><GiB|MiB>[:<model>]``.

    Raises:
        FakeSpecError: a malformed group, a zero count or size, or more than 64 GPUs.
    """
    gpus: list[tuple[int, str]] = []
    for group in spec.split(","):
        match = _GROUP.match(group)
        if match is None:
            raise FakeSpecError(
                f"invalid --fake-gpus group {group.strip()!r}: expected [<count>x]<size>GiB|MiB[:<model>], "
                "e.g. 4x80GiB or 2x16GiB,1x24GiB"
            )
        count_text, size_text, unit, model = match.groups()
        count, size = int(count_text or 1), int(size_text)
        if count < 1 or size < 1:
            raise FakeSpecError(f"invalid --fake-gpus group {group.strip()!r}: count and size must be positive")
        memory = size * _UNIT_BYTES[unit.lower()]
        name = model or f"Fake GPU {size}{'GiB' if unit.lower().startswith('g') else 'MiB'}"
        gpus.extend((memory, name) for _ in range(count))
    if len(gpus) > MAX_FAKE_GPUS:
        raise FakeSpecError(f"--fake-gpus describes {len(gpus)} GPUs; at most {MAX_FAKE_GPUS} are supported")
    return gpus


def fake_uuid(seed: str, index: int) -> str:
    """A stable, well-formed ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` for a node and index."""
    digest = hashlib.sha256(f"{seed}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class FakeBackend:
    """GPUs from a spec, with health events injected by the caller."""

    name = "fake"

    def __init__(self, gpus: list[GpuDevice], ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS) -> None:
        self._lock = threading.Lock()
        self._gpus = {gpu.uuid: gpu for gpu in gpus}
        self._events: queue.Queue[HealthEvent] = queue.Queue()
        self.ignored_xids = ignored_xids

    @classmethod
    def from_spec(
        cls, spec: str, seed: str = "", ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS
    ) -> FakeBackend:
        """Build from a ``--fake-gpus`` value; ``seed`` (the node name) keeps UUIDs distinct per node."""
        try:
            parsed = parse_fake_gpus(spec)
        except FakeSpecError as exc:
            raise BackendError(str(exc)) from exc
        gpus = [
            GpuDevice(index=i, uuid=fake_uuid(seed, i), name=name, memory=memory, minor=i)
            for i, (memory, name) in enumerate(parsed)
        ]
        return cls(gpus, ignored_xids)

    def devices(self) -> list[GpuDevice]:
        """The GPUs present now, by index."""
        with self._lock:
            return sorted(self._gpus.values(), key=lambda gpu: gpu.index)

    def watch_health(self, stop: threading.Event, sink: HealthSink) -> None:
        """Forward injected events until ``stop``."""
        while not stop.is_set():
            try:
                event = self._events.get(timeout=0.1)
            except queue.Empty:
                continue
            sink(event)

    def close(self) -> None:
        """Nothing to release."""

    # --- injection (tests and the demo) --------------------------------------------------------

    def _uuid(self, index: int) -> str:
        with self._lock:
            for gpu in self._gpus.values():
                if gpu.index == index:
                    return gpu.uuid
        raise KeyError(f"no fake GPU with index {index}")

    def inject_xid(self, index: int, xid: int) -> bool:
        """Raise an Xid on a GPU as NVML would; return whether it marks the GPU unhealthy."""
        if xid in self.ignored_xids:
            return False
        self._events.put(HealthEvent(self._uuid(index), healthy=False, reason=f"Xid {xid}"))
        return True

    def set_health(self, index: int | None, healthy: bool, reason: str = "injected") -> None:
        """Mark one GPU (or every GPU, for None) healthy or unhealthy."""
        uuid = None if index is None else self._uuid(index)
        self._events.put(HealthEvent(uuid, healthy=healthy, reason=reason))

    def remove_gpu(self, index: int) -> GpuDevice:
        """Make a GPU disappear (as if it fell off the bus)."""
        uuid = self._uuid(index)
        with self._lock:
            gpu = self._gpus.pop(uuid)
        self._events.put(HealthEvent(uuid, healthy=False, reason="GPU is lost", removed=True))
        return gpu

    def add_gpu(self, gpu: GpuDevice) -> None:
        """Make a GPU (re)appear; it is advertised healthy again."""
        with self._lock:
            self._gpus[gpu.uuid] = gpu
        self._events.put(HealthEvent(gpu.uuid, healthy=True, reason="GPU present"))
