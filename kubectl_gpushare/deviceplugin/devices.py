"""What the plugin advertises to kubelet: memory units, fake device ids and the message budget.

Kubelet counts devices, so gpushare advertises one fake device per memory unit of every GPU, with
the original's ids (``<GPU UUID>-_-<j>``). Each GPU advertises its own memory (the original gives
every GPU the first GPU's size). Kubelet refuses a ListAndWatch message over 4 MiB, and an id costs
about 50 bytes, so the whole list is sized exactly before serving and refused with a suggestion
when it cannot fit.

Pure: no I/O, no threads, no clock. `Inventory` is mutable; its owner serialises access.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from kubectl_gpushare import protocol
from kubectl_gpushare.node.gpus import GpuDevice

HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"
KUBELET_MAX_MESSAGE: Final = 4 * 1024 * 1024
"""kubelet's gRPC receive limit for one ListAndWatch message (grpc's default MaxCallRecvMsgSize)."""
MESSAGE_BUDGET: Final = KUBELET_MAX_MESSAGE - 4096
"""What we allow ourselves: the limit less a margin for framing."""
MAX_DEVICE_ID: Final = 63
_UNIT_BYTES: Final = {protocol.UNIT_GIB: 1 << 30, protocol.UNIT_MIB: 1 << 20}

UnitName = Literal["GiB", "MiB"]


class DeviceConfigError(ValueError):
    """The advertised device list cannot be built as configured; the message says what to change."""


@dataclass(frozen=True)
class MemoryUnit:
    """The amount of GPU memory one fake device (one ``aliyun.com/gpu-mem``) stands for.

    ``size`` multiplies the unit: ``MemoryUnit("MiB", 64)`` means one device per 64 MiB, which is
    how a node of large GPUs can count in MiB-scale steps and still fit kubelet's message limit.
    """

    name: UnitName = "GiB"
    size: int = 1

    @property
    def bytes(self) -> int:
        """Bytes per device."""
        return _UNIT_BYTES[self.name] * self.size

    @property
    def label(self) -> str:
        """Human form: ``GiB``, or ``64MiB`` for sized units."""
        return self.name if self.size == 1 else f"{self.size}{self.name}"

    def units_of(self, memory_bytes: int) -> int:
        """Whole units in ``memory_bytes`` (floored, as the original does: 16160 MiB is 15 GiB)."""
        return max(0, memory_bytes) // self.bytes


def parse_memory_unit(name: str, size: int = 1) -> MemoryUnit:
    """Validate ``--memory-unit`` and ``--unit-size``.

    Raises:
        DeviceConfigError: unknown unit or a size below 1 (the original silently fell back to GiB).
    """
    for known in _UNIT_BYTES:
        if name.lower() == known.lower():
            if size < 1:
                raise DeviceConfigError(f"--unit-size must be 1 or more, got {size}")
            return MemoryUnit(known, size)  # type: ignore[arg-type]
    raise DeviceConfigError(f"--memory-unit must be GiB or MiB, got {name!r}")


def _varint_len(value: int) -> int:
    length = 1
    while value >= 0x80:
        value >>= 7
        length += 1
    return length


def _device_entry_size(id_len: int, health: str = UNHEALTHY) -> int:
    """Bytes one Device takes inside ListAndWatchResponse (field 1, length-delimited)."""
    inner = 1 + _varint_len(id_len) + id_len + 1 + _varint_len(len(health)) + len(health)
    return 1 + _varint_len(inner) + inner


def gpu_message_size(uuid: str, units: int) -> int:
    """Exact encoded bytes of one GPU's ``units`` fake devices, all marked Unhealthy (the worst case)."""
    prefix = len(uuid) + len(protocol.FAKE_ID_SEPARATOR)
    total = 0
    digits, low = 1, 0
    while low < units:
        high = min(units, 10**digits)
        total += (high - low) * _device_entry_size(prefix + digits)
        digits, low = digits + 1, high
    return total


def list_message_size(gpus: Iterable[tuple[str, int]]) -> int:
    """Exact encoded bytes of a ListAndWatchResponse for ``(uuid, units)`` pairs."""
    return sum(gpu_message_size(uuid, units) for uuid, units in gpus)


def smallest_fitting_size(gpus: Sequence[GpuDevice], unit: MemoryUnit) -> int | None:
    """The smallest ``--unit-size`` for ``unit.name`` that fits the budget, or None if none does."""
    def fits(size: int) -> bool:
        sized = MemoryUnit(unit.name, size)
        return list_message_size((gpu.uuid, sized.units_of(gpu.memory)) for gpu in gpus) <= MESSAGE_BUDGET

    low, high = 1, max((gpu.memory // _UNIT_BYTES[unit.name] for gpu in gpus), default=1) or 1
    if not fits(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def check_budget(gpus: Sequence[GpuDevice], unit: MemoryUnit) -> int:
    """Refuse a device list kubelet would reject; return its encoded size in bytes.

    Raises:
        DeviceConfigError: an id longer than kubelet's 63 characters, or a list over the budget,
            with the smallest unit size that would fit.
    """
    for gpu in gpus:
        longest = protocol.fake_device_id(gpu.uuid, max(unit.units_of(gpu.memory) - 1, 0))
        if len(longest) > MAX_DEVICE_ID:
            raise DeviceConfigError(
                f"GPU {gpu.index} UUID {gpu.uuid!r} makes device ids of {len(longest)} characters; "
                f"kubelet accepts at most {MAX_DEVICE_ID}"
            )
    size = list_message_size((gpu.uuid, unit.units_of(gpu.memory)) for gpu in gpus)
    if size <= MESSAGE_BUDGET:
        return size
    count = sum(unit.units_of(gpu.memory) for gpu in gpus)
    hint = smallest_fitting_size(gpus, unit)
    advice = f"use --unit-size {hint} or more, or --memory-unit GiB" if hint else "use --memory-unit GiB"
    raise DeviceConfigError(
        f"{len(gpus)} GPU(s) in units of {unit.label} make {count} devices, {size / 2**20:.1f} MiB in one "
        f"ListAndWatch message; kubelet accepts at most {KUBELET_MAX_MESSAGE // 2**20} MiB: {advice}"
    )


@dataclass
class _GpuState:
    gpu: GpuDevice
    units: int
    healthy: bool = True
    reason: str = ""


@dataclass
class Inventory:
    """The GPUs being advertised, their health, and the fake-device id -> GPU mapping.

    Health goes both ways (a GPU can recover), unlike the original's one-way Unhealthy. A removed
    GPU leaves the list. Every change bumps ``version`` so streams know to resend.
    """

    unit: MemoryUnit
    _gpus: dict[str, _GpuState] = field(default_factory=dict)
    version: int = 0
    enforcement: dict[str, tuple[str, str]] = field(default_factory=dict)
    """GPU uuid -> (memory enforcement in force: off|soft|hard, why not); published on the node."""

    @classmethod
    def of(cls, gpus: Iterable[GpuDevice], unit: MemoryUnit) -> Inventory:
        """An inventory of ``gpus``, all healthy."""
        inventory = cls(unit)
        for gpu in gpus:
            inventory._gpus[gpu.uuid] = _GpuState(gpu, unit.units_of(gpu.memory))
        return inventory

    def gpus(self) -> list[GpuDevice]:
        """Advertised GPUs, by index."""
        return sorted((state.gpu for state in self._gpus.values()), key=lambda gpu: gpu.index)

    def has(self, uuid: str) -> bool:
        """Whether a GPU is advertised (a lookup by UUID, as `node.health.HealthBook` keeps its GPUs)."""
        return uuid in self._gpus

    def units(self, uuid: str) -> int:
        """Devices advertised for one GPU (0 if unknown)."""
        state = self._gpus.get(uuid)
        return state.units if state else 0

    def healthy(self, uuid: str) -> bool:
        """Whether a GPU is advertised and healthy."""
        state = self._gpus.get(uuid)
        return state is not None and state.healthy

    def by_index(self, index: int) -> GpuDevice | None:
        """The GPU with this NVML index, if advertised."""
        return next((state.gpu for state in self._gpus.values() if state.gpu.index == index), None)

    def gpu_of(self, device_id: str) -> GpuDevice | None:
        """The GPU a fake device id belongs to, if advertised."""
        state = self._gpus.get(protocol.uuid_of_fake_device(device_id))
        return state.gpu if state else None

    def advertises(self, device_id: str) -> bool:
        """Whether ``device_id`` is one of the fake devices in the list (``<uuid>-_-<j>``, j < units)."""
        uuid, separator, unit = device_id.rpartition(protocol.FAKE_ID_SEPARATOR)
        state = self._gpus.get(uuid) if separator else None
        if state is None or not (unit.isascii() and unit.isdigit()) or len(unit) > 9 or str(int(unit)) != unit:
            return False
        return int(unit) < state.units

    def set_health(self, uuid: str | None, healthy: bool, reason: str = "") -> bool:
        """Mark one GPU (or all, for None); return whether anything changed."""
        targets = list(self._gpus.values()) if uuid is None else [s for s in (self._gpus.get(uuid),) if s]
        changed = False
        for state in targets:
            if state.healthy != healthy:
                state.healthy, state.reason, changed = healthy, reason, True
        if changed:
            self.version += 1
        return changed

    def remove(self, uuid: str) -> GpuDevice | None:
        """Stop advertising a GPU that disappeared; the GPU, or None if it was not advertised."""
        state = self._gpus.pop(uuid, None)
        if state is None:
            return None
        self.version += 1
        return state.gpu

    def add(self, gpu: GpuDevice) -> bool:
        """Advertise a GPU that (re)appeared, healthy; return whether it is new."""
        if gpu.uuid in self._gpus:
            return False
        self._gpus[gpu.uuid] = _GpuState(gpu, self.unit.units_of(gpu.memory))
        self.version += 1
        return True

    def states(self) -> list[tuple[GpuDevice, int, str]]:
        """Each advertised GPU with its device count and health, by index."""
        return [
            (gpu, self._gpus[gpu.uuid].units, HEALTHY if self._gpus[gpu.uuid].healthy else UNHEALTHY)
            for gpu in self.gpus()
        ]

    def advertised(self) -> list[tuple[str, str]]:
        """Every fake device as ``(id, health)``, GPUs by index, units in order."""
        result: list[tuple[str, str]] = []
        for gpu in self.gpus():
            state = self._gpus[gpu.uuid]
            health = HEALTHY if state.healthy else UNHEALTHY
            result.extend((protocol.fake_device_id(gpu.uuid, j), health) for j in range(state.units))
        return result

    def node_annotation(self) -> list[dict[str, object]]:
        """Per-GPU entries for `protocol.ANN_NODE_GPUS` (memory in this plugin's units)."""
        return [
            {
                "index": gpu.index,
                "memory": self._gpus[gpu.uuid].units,
                "model": gpu.name,
                "uuid": gpu.uuid,
                "minor": gpu.minor,
                "memoryBytes": gpu.memory,
                "unit": self.unit.label,
                "enforcement": self.enforcement.get(gpu.uuid, (protocol.ENFORCE_OFF, ""))[0],
                "enforcementReason": self.enforcement.get(gpu.uuid, (protocol.ENFORCE_OFF, ""))[1],
            }
            for gpu in self.gpus()
        ]
