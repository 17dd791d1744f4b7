"""The DRA contract's names: device names read back strictly, quantities in kube-apiserver's form."""

from __future__ import annotations

import pytest

from kubectl_gpushare import protocol


@pytest.mark.parametrize(("name", "index"), [
    ("gpu-0", 0), ("gpu-7", 7), ("gpu-63", 63), ("gpu-64", None), ("gpu-07", None), ("gpu--1", None),
    ("gpu-", None), ("GPU-1", None), ("gpu-1 ", None), ("gpu-1/x", None), ("mig-1", None), (7, None), (None, None),
    ("gpu-" + "9" * 500, None),
])
def test_device_names_read_back_only_as_we_write_them(name: object, index: int | None) -> None:
    assert protocol.parse_dra_device_name(name) == index


@pytest.mark.parametrize("index", range(protocol.MAX_GPUS_PER_NODE))
def test_every_gpu_index_round_trips_through_its_device_name(index: int) -> None:
    assert protocol.parse_dra_device_name(protocol.dra_device_name(index)) == index


@pytest.mark.parametrize(("units", "unit", "quantity"), [
    (16, "GiB", "16Gi"), (80, "GiB", "80Gi"), (1024, "GiB", "1Ti"), (81920, "MiB", "80Gi"), (81559, "MiB", "81559Mi"),
])
def test_memory_quantities_are_canonical(units: int, unit: str, quantity: str) -> None:
    assert protocol.dra_memory_quantity(units, unit) == quantity
    assert protocol.canonical_quantity(quantity) == quantity


def test_cdi_ids_are_kind_equals_claim_uid_and_device() -> None:
    uid = "0b6ef1a3-3c5f-4ad6-9d0b-5f1f0e8c9a10"
    assert protocol.dra_cdi_id(uid, 3) == f"k8s.gpu-mem.kubectl-gpushare.io/claim={uid}-gpu-3"


def test_slice_name_prefix_follows_the_resourceslice_controller() -> None:
    assert protocol.dra_slice_generate_name("n1") == "00000-gpu-mem.kubectl-gpushare.io-n1-"
