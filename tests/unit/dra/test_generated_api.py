"""The generated DRA and registration modules match their protos and kubelet's wire names."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from kubectl_gpushare.dra._api import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_v1_pb2, regen
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc


def test_generated_modules_match_the_protos(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    tools = importlib.metadata.version("grpcio-tools")
    if v1_grpc.GRPC_GENERATED_VERSION != tools:
        pytest.skip(f"generated with grpcio-tools {v1_grpc.GRPC_GENERATED_VERSION}, installed {tools}")
    fresh = regen.generate(tmp_path)
    assert len(fresh) == 9
    for path in fresh:
        committed = Path(regen.__file__).with_name(path.name)
        assert path.read_bytes() == committed.read_bytes(), f"{path.name} is stale: run python -m {regen.__name__}"


@pytest.mark.parametrize("module", [dra_v1_pb2, dra_v1beta1_pb2])
def test_dra_services_have_kubelets_method_paths(module: object) -> None:
    descriptor = module.DESCRIPTOR  # type: ignore[attr-defined]
    service = descriptor.services_by_name["DRAPlugin"]
    version = "v1" if module is dra_v1_pb2 else "v1beta1"
    assert service.full_name == f"k8s.io.kubelet.pkg.apis.dra.{version}.DRAPlugin"
    assert [m.name for m in service.methods] == ["NodePrepareResources", "NodeUnprepareResources"]


@pytest.mark.parametrize(("message", "field", "number"), [
    ("Claim", "namespace", 1), ("Claim", "uid", 2), ("Claim", "name", 3),
    ("Device", "request_names", 1), ("Device", "pool_name", 2), ("Device", "device_name", 3),
    ("Device", "cdi_device_ids", 4), ("NodePrepareResourceResponse", "devices", 1),
    ("NodePrepareResourceResponse", "error", 2), ("NodeUnprepareResourceResponse", "error", 1),
])
def test_dra_field_numbers_are_kubelets(message: str, field: str, number: int) -> None:
    for module in (dra_v1_pb2, dra_v1beta1_pb2):
        assert module.DESCRIPTOR.message_types_by_name[message].fields_by_name[field].number == number


def test_share_id_is_v1_only() -> None:
    assert dra_v1_pb2.DESCRIPTOR.message_types_by_name["Device"].fields_by_name["share_id"].number == 5
    assert "share_id" not in dra_v1beta1_pb2.DESCRIPTOR.message_types_by_name["Device"].fields_by_name


def test_registration_service_keeps_its_historic_package() -> None:
    descriptor = pluginregistration_v1_pb2.DESCRIPTOR
    assert descriptor.services_by_name["Registration"].full_name == "pluginregistration.Registration"
    info = descriptor.message_types_by_name["PluginInfo"]
    assert [(f.name, f.number) for f in info.fields] == [
        ("type", 1), ("name", 2), ("endpoint", 3), ("supported_versions", 4)
    ]
