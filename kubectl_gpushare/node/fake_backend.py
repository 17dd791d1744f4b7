"""``--fake-gpus``: GPUs described on the command line, for the sandbox, the demo and the tests.

A stand-in for NVML. Where it differs from real GPUs: there is no driver, memory is exactly what
the spec says (real cards report a little less than their label), UUIDs are derived from the node
name and index (stable across restarts, distinct across nodes), and health changes only when a
test or the demo injects them (`inject_xid`, `set_health`, `remove_gpu`, `add_gpu`).
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import threading

from kubectl_gpushare import protocol
from kubectl_gpushare.node.gpus import (
    MEMORY_LIMIT_MAX,
    BackendError,
    GpuDevice,
    HealthEvent,
    HealthSink,
    LimitsUnsupportedError,
    MemoryLimits,
    ProcessUsage,
)

_GROUP = re.compile(r"^\s*(?:(\d+)\s*[xX*]\s*)?(\d+)\s*(GiB|MiB|Gi|Mi|G|M)\s*(?::\s*(.+?))?\s*$")
_UNIT_BYTES = {"gib": 1 << 30, "gi": 1 << 30, "g": 1 << 30, "mib": 1 << 20, "mi": 1 << 20, "m": 1 << 20}
MAX_FAKE_GPUS = 64
_MAX_DIGITS = 9
"""Longest count or size read (under a billion GiB, within NVML's 64-bit byte counts); a longer number is
refused before ``int`` parses it (Python refuses past 4,300 digits with a traceback)."""


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
        shown = group.strip()[:64]  # a hostile spec is named, not echoed whole
        match = _GROUP.match(group)
        if match is None:
            raise FakeSpecError(
                f"invalid --fake-gpus group {shown!r}: expected [<count>x]<size>GiB|MiB[:<model>], "
                "e.g. 4x80GiB or 2x16GiB,1x24GiB"
            )
        count_text, size_text, unit, model = match.groups()
        if len(count_text or "") > _MAX_DIGITS or len(size_text) > _MAX_DIGITS:
            raise FakeSpecError(f"invalid --fake-gpus group {shown!r}: count or size too large")
        count, size = int(count_text or 1), int(size_text)
        if count < 1 or size < 1:
            raise FakeSpecError(f"invalid --fake-gpus group {shown!r}: count and size must be positive")
        if len(gpus) + count > MAX_FAKE_GPUS:  # before the list is built: a count of 10**9 must not fill memory
            raise FakeSpecError(
                f"--fake-gpus describes {len(gpus) + count} GPUs or more; at most {MAX_FAKE_GPUS} are supported"
            )
        memory = size * _UNIT_BYTES[unit.lower()]
        name = model or f"Fake GPU {size}{'GiB' if unit.lower().startswith('g') else 'MiB'}"
        gpus.extend((memory, name) for _ in range(count))
    return gpus


def fake_uuid(seed: str, index: int) -> str:
    """A stable, well-formed ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` for a node and index."""
    digest = hashlib.sha256(f"{seed}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class FakeOutOfMemoryError(BackendError):
    """An allocation the driver refuses: past the cgroup's hard limit, or past the GPU's memory.

    MPS v3 Memory Partitioning: the hard limit "is enforced at allocation time; an allocation that
    would exceed it fails with an out-of-memory error" (CUDA's ``cudaErrorMemoryAllocation``).
    """


class FakeBackend:
    """GPUs from a spec, with health events injected by the caller, and per-cgroup memory.

    Memory follows NVIDIA's MPS v3 Memory Partitioning page and NVML's ``nvmlSetMemoryLimits_v1_t``:
    limits are per (GPU, cgroup path); no limit is soft 0 / hard ``NVML_DEVICE_MEMORY_LIMIT_MAX``;
    an allocation past the hard limit fails out-of-memory, one past the soft limit succeeds (the
    "pressure zone": the cgroup borrows, and only real contention evicts it, which a fake GPU never
    has); ``currentUsed`` is what the cgroup holds; removing the cgroup clears its limits. A GPU marked
    with `set_limits_unsupported` answers like a pre-r615 driver or a MIG device (NVML_ERROR_NOT_SUPPORTED).
    Setting limits on a cgroup that does not exist is refused here; NVML does not document that case.
    """

    name = "fake"

    def __init__(self, gpus: list[GpuDevice], ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS) -> None:
        self._lock = threading.Lock()
        self._gpus = {gpu.uuid: gpu for gpu in gpus}
        self._events: queue.Queue[HealthEvent] = queue.Queue()
        self.ignored_xids = ignored_xids
        self._limits: dict[tuple[str, str], tuple[int, int]] = {}
        self._used: dict[tuple[str, str], int] = {}
        self._unsupported: dict[str, str] = {}
        self._failures: dict[str, int] = {}
        self._processes: dict[str, dict[int, int]] = {}
        self.limit_calls = 0
        """How many set calls reached the fake (tests count retries and idempotence with it)."""

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

    # --- per-cgroup memory (MemoryBackend) -------------------------------------------------------

    def _check(self, uuid: str) -> None:
        with self._lock:
            if uuid not in self._gpus:
                raise BackendError(f"NVML: GPU {uuid} not found")
            reason = self._unsupported.get(uuid)
            if self._failures.get(uuid, 0) > 0:
                self._failures[uuid] -= 1
                raise BackendError("NVML: Unknown Error (injected)")
        if reason:
            raise LimitsUnsupportedError(reason)

    def limits_unsupported(self, uuid: str, probe_cgroup: str) -> str:
        """The reason set by `set_limits_unsupported`, or ""."""
        try:
            self._check(uuid)
        except LimitsUnsupportedError as exc:
            return str(exc)
        return ""

    def set_memory_limits(self, uuid: str, cgroup: str, soft: int, hard: int) -> None:
        """Store one cgroup's limits; soft 0 and hard MAX clears them."""
        self._check(uuid)
        if not 0 <= soft <= MEMORY_LIMIT_MAX or not 0 <= hard <= MEMORY_LIMIT_MAX:
            raise BackendError("NVML: Invalid Argument")
        if not os.path.isdir(cgroup):
            raise BackendError(f"NVML: cgroup {cgroup} not found")
        with self._lock:
            self.limit_calls += 1
            if soft == 0 and hard == MEMORY_LIMIT_MAX:
                self._limits.pop((uuid, cgroup), None)
            else:
                self._limits[(uuid, cgroup)] = (soft, hard)

    def get_memory_limits(self, uuid: str, cgroup: str) -> MemoryLimits:
        """Limits and ``currentUsed`` of one cgroup (none once the cgroup is removed)."""
        self._check(uuid)
        with self._lock:
            if not os.path.isdir(cgroup):
                self._limits.pop((uuid, cgroup), None)
                self._used.pop((uuid, cgroup), None)
            soft, hard = self._limits.get((uuid, cgroup), (0, MEMORY_LIMIT_MAX))
            return MemoryLimits(soft=soft, hard=hard, used=self._used.get((uuid, cgroup), 0))

    def memory_used(self, uuid: str) -> int:
        """Everything allocated on the GPU, by any cgroup or process."""
        with self._lock:
            if uuid not in self._gpus:
                raise BackendError(f"NVML: GPU {uuid} not found")
            return sum(v for (u, _), v in self._used.items() if u == uuid) + sum(
                self._processes.get(uuid, {}).values()
            )

    def processes(self, uuid: str) -> list[ProcessUsage]:
        """Processes added with `add_process`."""
        with self._lock:
            return [ProcessUsage(pid, used) for pid, used in sorted(self._processes.get(uuid, {}).items())]

    # --- memory injection (tests, the sandbox's pods) -----------------------------------------------

    def allocate(self, index: int, cgroup: str, size: int) -> None:
        """Allocate ``size`` bytes on a GPU from a process in ``cgroup``, as cudaMalloc would.

        Raises:
            FakeOutOfMemoryError: past the cgroup's hard limit or the GPU's free memory.
        """
        uuid = self._uuid(index)
        with self._lock:
            gpu = self._gpus[uuid]
            held = self._used.get((uuid, cgroup), 0)
            _, hard = self._limits.get((uuid, cgroup), (0, MEMORY_LIMIT_MAX))
            total = sum(v for (u, _), v in self._used.items() if u == uuid)
            if held + size > hard:
                raise FakeOutOfMemoryError(f"out of memory: {held + size} bytes exceeds the cgroup's hard limit {hard}")
            if total + size > gpu.memory:
                raise FakeOutOfMemoryError(f"out of memory: {total + size} bytes exceeds the GPU's {gpu.memory}")
            self._used[(uuid, cgroup)] = held + size

    def release(self, index: int, cgroup: str) -> None:
        """Free everything ``cgroup`` holds on a GPU (its processes exited)."""
        uuid = self._uuid(index)
        with self._lock:
            self._used.pop((uuid, cgroup), None)

    def add_process(self, index: int, pid: int, used: int) -> None:
        """List a process on a GPU, for the NVML-process fallback of usage sampling."""
        uuid = self._uuid(index)
        with self._lock:
            self._processes.setdefault(uuid, {})[pid] = used

    def set_limits_unsupported(self, index: int, reason: str) -> None:
        """Make a GPU answer like a pre-r615 driver or a MIG device ("" makes it support limits)."""
        uuid = self._uuid(index)
        with self._lock:
            if reason:
                self._unsupported[uuid] = reason
            else:
                self._unsupported.pop(uuid, None)

    def fail_next(self, index: int, count: int = 1) -> None:
        """Make the next ``count`` limit calls on a GPU fail as an NVML error would."""
        uuid = self._uuid(index)
        with self._lock:
            self._failures[uuid] = count

    def limits(self, index: int) -> dict[str, tuple[int, int]]:
        """Map each cgroup path to the (soft, hard) limits set on a GPU now."""
        uuid = self._uuid(index)
        with self._lock:
            return {cg: lim for (u, cg), lim in self._limits.items() if u == uuid}
