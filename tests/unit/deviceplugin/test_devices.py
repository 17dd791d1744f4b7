from __future__ import annotations

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin.devices import (
    HEALTHY,
    KUBELET_MAX_MESSAGE,
    UNHEALTHY,
    DeviceConfigError,
    Inventory,
    MemoryUnit,
    check_budget,
    gpu_message_size,
    parse_memory_unit,
    smallest_fitting_size,
)
from kubectl_gpushare.node.fake_backend import fake_uuid
from kubectl_gpushare.node.gpus import GpuDevice

GIB = 1 << 30
MIB = 1 << 20


def gpu(index: int, mem_gib: float, name: str = "Fake") -> GpuDevice:
    return GpuDevice(index=index, uuid=fake_uuid("node", index), name=name, memory=int(mem_gib * GIB), minor=index)


@pytest.mark.parametrize(
    ("unit", "memory", "expected"),
    [
        (MemoryUnit("GiB"), 16160 * MIB, 15),
        (MemoryUnit("GiB"), 81920 * MIB, 80),
        (MemoryUnit("MiB"), 15109 * MIB, 15109),
        (MemoryUnit("MiB", 64), 80 * GIB, 1280),
        (MemoryUnit("GiB", 2), 15 * GIB, 7),
    ],
    ids=["v100-floors-to-15", "a100-80", "t4-mib", "mib-64-steps", "sized-gib-floors"],
)
def test_units_of_floors_like_the_original(unit: MemoryUnit, memory: int, expected: int) -> None:
    assert unit.units_of(memory) == expected


@pytest.mark.parametrize(
    ("name", "size", "label"),
    [("GiB", 1, "GiB"), ("mib", 1, "MiB"), ("MiB", 64, "64MiB")],
    ids=["gib", "case", "sized"],
)
def test_parse_memory_unit_accepts_gib_and_mib(name: str, size: int, label: str) -> None:
    assert parse_memory_unit(name, size).label == label


@pytest.mark.parametrize(
    ("name", "size"), [("Gi", 1), ("KiB", 1), ("", 1), ("MiB", 0)], ids=["gi", "kib", "empty", "size0"]
)
def test_parse_memory_unit_refuses_unknown_units_instead_of_falling_back(name: str, size: int) -> None:
    with pytest.raises(DeviceConfigError, match="--memory-unit|--unit-size"):
        parse_memory_unit(name, size)


@pytest.mark.parametrize("units", [0, 1, 9, 10, 11, 99, 100, 1234])
@pytest.mark.parametrize("health", [HEALTHY, UNHEALTHY])
def test_message_size_matches_protobuf_encoding_exactly(units: int, health: str) -> None:
    uuid = fake_uuid("n", 0)
    message = api.ListAndWatchResponse(
        devices=[api.Device(ID=protocol.fake_device_id(uuid, j), health=UNHEALTHY) for j in range(units)]
    )
    assert gpu_message_size(uuid, units) == message.ByteSize()
    healthy = api.ListAndWatchResponse(
        devices=[api.Device(ID=protocol.fake_device_id(uuid, j), health=health) for j in range(units)]
    )
    assert healthy.ByteSize() <= gpu_message_size(uuid, units)


def test_eight_80gib_gpus_in_plain_mib_are_refused_with_the_unit_size_that_fits() -> None:
    gpus = [gpu(i, 80) for i in range(8)]
    with pytest.raises(DeviceConfigError) as info:
        check_budget(gpus, MemoryUnit("MiB"))
    message = str(info.value)
    assert "655360 devices" in message and "4 MiB" in message
    hint = smallest_fitting_size(gpus, MemoryUnit("MiB"))
    assert hint is not None and f"--unit-size {hint} " in message
    assert check_budget(gpus, MemoryUnit("MiB", hint)) <= KUBELET_MAX_MESSAGE
    with pytest.raises(DeviceConfigError):
        check_budget(gpus, MemoryUnit("MiB", hint - 1))


def test_eight_80gib_gpus_in_gib_fit_easily() -> None:
    assert check_budget([gpu(i, 80) for i in range(8)], MemoryUnit("GiB")) < 64 * 1024


def test_overlong_uuid_is_refused() -> None:
    odd = GpuDevice(index=0, uuid="GPU-" + "x" * 60, name="odd", memory=GIB, minor=0)
    with pytest.raises(DeviceConfigError, match="63"):
        check_budget([odd], MemoryUnit("GiB"))


def test_heterogeneous_gpus_each_advertise_their_own_memory() -> None:
    inventory = Inventory.of([gpu(0, 16), gpu(1, 16), gpu(2, 24)], MemoryUnit("GiB"))
    advertised = inventory.advertised()
    per_gpu = {
        g.uuid: sum(1 for d, _ in advertised if protocol.uuid_of_fake_device(d) == g.uuid) for g in inventory.gpus()
    }
    assert list(per_gpu.values()) == [16, 16, 24]
    assert advertised[0] == (protocol.fake_device_id(fake_uuid("node", 0), 0), HEALTHY)
    assert [entry["memory"] for entry in inventory.node_annotation()] == [16, 16, 24]
    assert protocol.parse_node_gpus(protocol.format_node_gpus(inventory.node_annotation())) == (16, 16, 24)


def test_health_changes_bump_the_version_and_can_recover() -> None:
    inventory = Inventory.of([gpu(0, 2), gpu(1, 2)], MemoryUnit("GiB"))
    start = inventory.version
    target = inventory.gpus()[1].uuid
    assert inventory.set_health(target, False, "Xid 79")
    assert not inventory.set_health(target, False, "Xid 79 again")
    assert inventory.version == start + 1
    assert [h for d, h in inventory.advertised() if d.startswith(target)] == [UNHEALTHY, UNHEALTHY]
    assert [h for d, h in inventory.advertised() if not d.startswith(target)] == [HEALTHY, HEALTHY]
    assert inventory.set_health(target, True)
    assert all(h == HEALTHY for _, h in inventory.advertised())
    assert inventory.set_health(None, False, "NVML failed")
    assert all(h == UNHEALTHY for _, h in inventory.advertised())


def test_removed_gpu_leaves_the_list_and_can_return() -> None:
    gone = gpu(1, 2)
    inventory = Inventory.of([gpu(0, 2), gone], MemoryUnit("GiB"))
    assert inventory.remove(gone.uuid)
    assert not inventory.remove(gone.uuid)
    assert len(inventory.advertised()) == 2 and inventory.gpu_of(protocol.fake_device_id(gone.uuid, 0)) is None
    assert inventory.add(gone) and len(inventory.advertised()) == 4
    assert inventory.by_index(1) == gone


def test_cached_segments_encode_the_same_list_as_building_every_device() -> None:
    from kubectl_gpushare.deviceplugin.servicer import Advertisement

    inventory = Inventory.of([gpu(0, 3), gpu(1, 2), gpu(2, 4)], MemoryUnit("GiB"))
    advertisement = Advertisement(inventory)
    for change in (None, (1, False), (None, False), (1, True)):
        if change is not None:
            index, healthy = change
            target = None if index is None else inventory.gpus()[index].uuid
            advertisement.change(lambda inv, t=target, h=healthy: inv.set_health(t, h))
        version, message = advertisement.message()
        expected = api.ListAndWatchResponse(devices=[api.Device(ID=i, health=h) for i, h in inventory.advertised()])
        assert message == expected and version == inventory.version


@pytest.mark.parametrize(
    ("suffix", "advertised"),
    [("0", True), ("15", True), ("16", False), ("01", False), ("+1", False), ("-1", False), ("", False),
     ("1" * 5000, False), ("١", False)],
    ids=["first", "last", "past-the-end", "leading-zero", "plus", "negative", "empty", "huge", "arabic-digit"],
)
def test_only_ids_in_the_advertised_list_are_recognised(suffix: str, advertised: bool) -> None:
    inventory = Inventory.of([gpu(0, 16)], MemoryUnit("GiB"))
    uuid = inventory.gpus()[0].uuid
    assert inventory.advertises(f"{uuid}{protocol.FAKE_ID_SEPARATOR}{suffix}") is advertised
    assert not inventory.advertises(f"GPU-other{protocol.FAKE_ID_SEPARATOR}0")
    assert not inventory.advertises(uuid)
