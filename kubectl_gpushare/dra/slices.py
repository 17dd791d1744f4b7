"""What this node's ResourceSlice says: one device per GPU, its memory a capacity claims share.

Pure: GPU states and the operator's choices in, a `dra_objects.WireSliceSpec` out (the wire structs
the readers decode with, so field names are k8s.io/api resource/v1's). Each GPU is a device named ``gpu-<index>`` with
``allowMultipleAllocations: true`` and a ``memory`` capacity of its whole units (the memory is
rounded down to the unit, as the device plugin counts it), whose request policy rounds every claim
up to a whole unit (KEP-5075: ``validRange`` min and step, ``default`` for a claim that asks
nothing). An unhealthy GPU leaves the slice (``remove``) or stays with a ``NoSchedule`` device taint
(``taint``: needs the DRADeviceTaints feature gate, or the API server drops the taint).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from kubectl_gpushare import dra_objects as wire
from kubectl_gpushare import protocol
from kubectl_gpushare.node.health import GpuState

UnhealthyMode = Literal["remove", "taint"]
Devices = tuple[wire.WireDevice, ...]
"""The slice's devices, as written and as read back."""
MAX_ATTRIBUTE_LENGTH = 64
"""``DeviceAttributeMaxValueLength``: longer model names are cut."""


@dataclass(frozen=True)
class PublishedGpu:
    """A GPU as the slice offers it: what a claim may be allocated on and checked against."""

    index: int
    uuid: str
    model: str
    units: int
    """Whole memory units the capacity advertises."""
    unit_bytes: int

    @property
    def device(self) -> str:
        """The device name (``gpu-<index>``)."""
        return protocol.dra_device_name(self.index)

    @property
    def memory(self) -> int:
        """The advertised capacity in bytes."""
        return self.units * self.unit_bytes

    @property
    def capacity(self) -> str:
        """The advertised capacity as the slice writes it (``16Gi``)."""
        unit = protocol.UNIT_MIB if self.unit_bytes == protocol.UNIT_BYTES[protocol.UNIT_MIB] else protocol.UNIT_GIB
        return protocol.dra_memory_quantity(self.units, unit)


def published(states: Iterable[GpuState], unit: str, mode: UnhealthyMode) -> list[PublishedGpu]:
    """The GPUs the slice lists: healthy ones (all, with ``taint``), with at least one unit of memory."""
    unit_bytes = protocol.UNIT_BYTES[unit]
    gpus = []
    for state in states:
        if not state.healthy and mode == "remove":
            continue
        units = state.gpu.memory // unit_bytes
        if units < 1 or not protocol.valid_gpu_index(state.gpu.index):
            continue
        gpus.append(PublishedGpu(state.gpu.index, state.gpu.uuid, state.gpu.name, units, unit_bytes))
    return gpus


def _policy(units: int, unit: str) -> wire.WireRequestPolicy:
    one = protocol.DRA_UNIT_QUANTITY[unit]
    # types.go: "Min + Step must be less than or equal to the capacity value", so a one-unit GPU has no step.
    step = one if units >= 2 else None
    return wire.WireRequestPolicy(default=one, valid_range=wire.WireRange(min=one, step=step))


def device(gpu: PublishedGpu, unit: str, unhealthy: bool) -> wire.WireDevice:
    """One GPU as a device of the slice."""
    taints = [wire.WireTaint(key=protocol.DRA_TAINT_UNHEALTHY, effect=wire.EFFECT_NO_SCHEDULE)] if unhealthy else []
    return wire.WireDevice(
        name=gpu.device,
        attributes={
            protocol.DRA_ATTR_INDEX: wire.WireAttribute(int_=gpu.index),
            protocol.DRA_ATTR_UUID: wire.WireAttribute(string=gpu.uuid[:MAX_ATTRIBUTE_LENGTH]),
            protocol.DRA_ATTR_MODEL: wire.WireAttribute(string=gpu.model[:MAX_ATTRIBUTE_LENGTH]),
        },
        capacity={
            protocol.DRA_CAPACITY_MEMORY: wire.WireCapacity(
                value=protocol.dra_memory_quantity(gpu.units, unit), request_policy=_policy(gpu.units, unit)
            )
        },
        allow_multiple_allocations=True,
        taints=taints,
    )


def devices(states: Sequence[GpuState], unit: str, mode: UnhealthyMode) -> Devices:
    """The slice's devices, by GPU index."""
    health = {state.gpu.uuid: state.healthy for state in states}
    return tuple(device(gpu, unit, not health[gpu.uuid]) for gpu in published(states, unit, mode))


def spec(node: str, devices: Sequence[wire.WireDevice], generation: int) -> wire.WireSliceSpec:
    """The whole spec: our driver, the node's pool (one slice), the node."""
    return wire.WireSliceSpec(
        driver=protocol.DRA_DRIVER,
        pool=wire.WirePool(name=node, generation=generation, resource_slice_count=1),
        node_name=node,
        devices=list(devices),
    )


def comparable(devices: Iterable[wire.WireDevice]) -> Devices:
    """Devices with only the fields this driver writes, for change detection.

    The API server's additions (a taint's ``timeAdded``) are not declared by the wire structs; fields of
    features this driver never sets are dropped here.
    """
    return tuple(
        wire.WireDevice(
            name=d.name, attributes=d.attributes, capacity=d.capacity,
            allow_multiple_allocations=d.allow_multiple_allocations, taints=d.taints,
        )
        for d in devices
    )


def dropped_features(desired: Sequence[wire.WireDevice], stored: Sequence[wire.WireDevice]) -> list[str]:
    """Feature gates the API server lacks, told by the fields it dropped (the resourceslice controller's test)."""
    found = []
    pairs = list(zip(desired, stored, strict=False))
    if any(d.allow_multiple_allocations is not None and s.allow_multiple_allocations is None for d, s in pairs):
        found.append("DRAConsumableCapacity")
    if any(len(d.taints) > len(s.taints) for d, s in pairs):
        found.append("DRADeviceTaints")
    return found
