"""`node.health.apply`, the one health rule, over both of its keepers: the DRA driver's `HealthBook`
and the device plugin's `Advertisement` (the GPUs kubelet is told about)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubectl_gpushare.deviceplugin.devices import Inventory, parse_memory_unit
from kubectl_gpushare.deviceplugin.servicer import Advertisement
from kubectl_gpushare.node import health
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.node.gpus import BackendError, GpuDevice, HealthEvent
from kubectl_gpushare.node.health import Change, HealthBook


def book(backend: FakeBackend) -> HealthBook:
    return HealthBook(backend.devices(), backend.devices)


def advertisement(backend: FakeBackend) -> Advertisement:
    return Advertisement(Inventory.of(backend.devices(), parse_memory_unit("GiB")))


def healthy_of(keeper: HealthBook | Advertisement) -> dict[str, bool]:
    if isinstance(keeper, HealthBook):
        return {state.gpu.uuid: state.healthy for state in keeper.states()}
    return {gpu.uuid: keeper.inventory.healthy(gpu.uuid) for gpu in keeper.inventory.gpus()}


KEEPERS: list[Callable[[FakeBackend], HealthBook | Advertisement]] = [book, advertisement]


@pytest.mark.parametrize("make", KEEPERS, ids=["dra-book", "device-plugin"])
def test_one_rule_for_both_keepers(make: Callable[[FakeBackend], HealthBook | Advertisement]) -> None:
    backend = FakeBackend.from_spec("3x16GiB", seed="n")
    gpu0, gpu1, gpu2 = backend.devices()
    keeper = make(backend)

    def apply(event: HealthEvent) -> Change:
        return health.apply(event, keeper, backend.devices)

    assert apply(HealthEvent(gpu1.uuid, healthy=False, reason="Xid 79")) is Change.HEALTH
    assert apply(HealthEvent(gpu1.uuid, healthy=False, reason="Xid 79")) is Change.NONE  # already so
    assert healthy_of(keeper) == {gpu0.uuid: True, gpu1.uuid: False, gpu2.uuid: True}
    assert apply(HealthEvent(None, healthy=False, reason="Xid 48")) is Change.HEALTH  # every GPU
    assert set(healthy_of(keeper).values()) == {False}
    assert apply(HealthEvent(None, healthy=True, reason="recovered")) is Change.HEALTH
    assert apply(HealthEvent(gpu2.uuid, healthy=False, reason="GPU is lost", removed=True)) is Change.GPUS
    assert apply(HealthEvent(gpu2.uuid, healthy=False, reason="GPU is lost", removed=True)) is Change.NONE
    assert list(healthy_of(keeper)) == [gpu0.uuid, gpu1.uuid]
    back = HealthEvent(gpu2.uuid, healthy=True, reason="recovered")
    assert apply(back) is Change.GPUS  # re-read from the backend
    assert healthy_of(keeper) == {gpu0.uuid: True, gpu1.uuid: True, gpu2.uuid: True}


@pytest.mark.parametrize("make", KEEPERS, ids=["dra-book", "device-plugin"])
def test_a_gpu_back_only_when_the_backend_lists_it(make: Callable[[FakeBackend], HealthBook | Advertisement]) -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed="n")
    keeper = make(backend)
    stranger = GpuDevice(5, "GPU-not-on-this-node", "NVIDIA L4", 16 << 30, 5)
    unknown = HealthEvent(stranger.uuid, healthy=True, reason="recovered")
    assert health.apply(unknown, keeper, backend.devices) is Change.NONE

    def failing() -> list[GpuDevice]:
        raise BackendError("NVML: driver not loaded")

    gone = backend.devices()[1]
    lost = HealthEvent(gone.uuid, healthy=False, reason="GPU is lost", removed=True)
    assert health.apply(lost, keeper, backend.devices) is Change.GPUS
    back = HealthEvent(gone.uuid, healthy=True, reason="recovered")
    assert health.apply(back, keeper, failing) is Change.NONE  # warned, kept out
    assert len(healthy_of(keeper)) == 1


def test_the_advertisement_wakes_its_streams_on_every_change() -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed="n")
    keeper = advertisement(backend)
    versions = [keeper.message()[0]]
    for event in (HealthEvent(backend.devices()[0].uuid, healthy=False, reason="Xid 79"),
                  HealthEvent(backend.devices()[1].uuid, healthy=False, reason="GPU is lost", removed=True),
                  HealthEvent(backend.devices()[1].uuid, healthy=True, reason="recovered")):
        health.apply(event, keeper, backend.devices)
        versions.append(keeper.message()[0])
    assert versions == sorted(set(versions))  # a new ListAndWatch message after each of the three


@pytest.mark.parametrize("make", KEEPERS, ids=["dra-book", "device-plugin"])
def test_knows_a_gpu_by_its_uuid_alone(make: Callable[[FakeBackend], HealthBook | Advertisement]) -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed="n")
    gpu0, gpu1 = backend.devices()
    keeper = make(backend)
    assert keeper.knows(gpu0.uuid) and keeper.knows(gpu1.uuid)
    for stranger in ("", gpu0.uuid[:-1], f"{gpu0.uuid}-_-0", "GPU-not-on-this-node"):
        assert not keeper.knows(stranger), stranger
    health.apply(HealthEvent(gpu1.uuid, healthy=False, reason="GPU is lost", removed=True), keeper, backend.devices)
    assert keeper.knows(gpu0.uuid) and not keeper.knows(gpu1.uuid)


def test_the_inventory_looks_a_gpu_up_by_uuid() -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed="n")
    gpu0, gpu1 = backend.devices()
    inventory = Inventory.of(backend.devices(), parse_memory_unit("GiB"))
    assert inventory.has(gpu0.uuid) and inventory.has(gpu1.uuid) and not inventory.has(f"{gpu0.uuid}-_-0")
    inventory.remove(gpu1.uuid)
    assert not inventory.has(gpu1.uuid)
    inventory.add(gpu1)
    assert inventory.has(gpu1.uuid)
