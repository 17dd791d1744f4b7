from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc
from kubectl_gpushare.deviceplugin._api import regen


def test_generated_modules_match_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    tools = importlib.metadata.version("grpcio-tools")
    if api_grpc.GRPC_GENERATED_VERSION != tools:
        pytest.skip(f"generated with grpcio-tools {api_grpc.GRPC_GENERATED_VERSION}, installed {tools}")
    for fresh in regen.generate(tmp_path):
        committed = Path(regen.__file__).with_name(fresh.name)
        assert fresh.read_bytes() == committed.read_bytes(), f"{fresh.name} is stale: run python -m {regen.__name__}"


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        ("RegisterRequest", "version", 1),
        ("RegisterRequest", "endpoint", 2),
        ("RegisterRequest", "resource_name", 3),
        ("RegisterRequest", "options", 4),
        ("DevicePluginOptions", "pre_start_required", 1),
        ("DevicePluginOptions", "get_preferred_allocation_available", 2),
        ("Device", "ID", 1),
        ("Device", "health", 2),
        ("Device", "topology", 3),
        ("ContainerPreferredAllocationRequest", "available_deviceIDs", 1),
        ("ContainerPreferredAllocationRequest", "must_include_deviceIDs", 2),
        ("ContainerPreferredAllocationRequest", "allocation_size", 3),
        ("ContainerAllocateResponse", "envs", 1),
        ("ContainerAllocateResponse", "mounts", 2),
        ("ContainerAllocateResponse", "devices", 3),
        ("ContainerAllocateResponse", "annotations", 4),
        ("ContainerAllocateResponse", "cdi_devices", 5),
        ("DeviceSpec", "permissions", 3),
    ],
)
def test_field_numbers_are_kubelets(message: str, field: str, number: int) -> None:
    assert api.DESCRIPTOR.message_types_by_name[message].fields_by_name[field].number == number


def test_services_have_kubelets_method_paths() -> None:
    plugin = api.DESCRIPTOR.services_by_name["DevicePlugin"]
    assert api.DESCRIPTOR.package == "v1beta1"
    assert [m.name for m in plugin.methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    assert plugin.methods_by_name["ListAndWatch"].server_streaming
    assert api.DESCRIPTOR.services_by_name["Registration"].full_name == "v1beta1.Registration"
