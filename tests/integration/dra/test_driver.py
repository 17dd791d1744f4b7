"""The DRA driver over real unix sockets: registration, the slice it publishes, prepare and unprepare
through the kubelet stand-in (v1 and v1beta1), against claims in the sandbox API server."""

from __future__ import annotations

import json
import os

import grpc
import pytest
from dra_helpers import NODE, Claims, Dirs, RunningDriver
from waiting import wait_for

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.dra._api import dra_v1_pb2, dra_v1beta1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2 as reg
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra.kubeletsim import KubeletPrepareError, KubeletSim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.sockets import target
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def test_get_info_names_the_driver_its_socket_and_both_services(start_driver, dirs: Dirs) -> None:
    driver = start_driver()
    path = os.path.join(dirs.registration, protocol.DRA_REGISTRATION_SOCKET)
    with grpc.insecure_channel(target(path)) as channel:
        info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=5)
        assert info.type == "DRAPlugin"
        assert info.name == "gpu-mem.kubectl-gpushare.io"
        assert info.endpoint == os.path.join(dirs.plugin, "dra.sock")
        assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error="test says no"), timeout=5)
    assert driver.driver is not None and driver.driver.registration.notifications == 1
    assert not driver.driver.registration.registered.is_set()


def test_kubelet_registers_the_driver_with_v1(start_driver, kubelet: KubeletSim) -> None:
    driver = start_driver()
    plugin = kubelet.wait_registered()
    assert plugin is not None and plugin.service == "v1.DRAPlugin"
    wait_for(lambda: driver.driver.registration.registered.is_set(), what="NotifyRegistrationStatus")


def _slice(api: Client) -> dra_objects.WireResourceSlice:
    found = wait_for(lambda: api.list(types.DRA_SLICES, field_selector=f"spec.nodeName={NODE}"),
                     what="the node's ResourceSlice")
    assert len(found) == 1
    return found[0]


def test_slice_lists_one_shareable_device_per_gpu_with_upstream_field_names(
    start_driver, api: Client, sandbox: Sandbox
) -> None:
    start_driver("2x16GiB,1x24GiB:NVIDIA L4")
    published = _slice(api)
    raw = sandbox.get("resourceslices", None, published.metadata.name)
    assert raw is not None
    assert published.metadata.name.startswith(f"00000-gpu-mem.kubectl-gpushare.io-{NODE}-")
    node = sandbox.get("nodes", None, NODE)
    assert raw["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"], "controller": True}]
    spec = raw["spec"]
    assert spec["driver"] == "gpu-mem.kubectl-gpushare.io"
    assert spec["nodeName"] == NODE
    assert spec["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    gpu2 = spec["devices"][2]
    assert gpu2["allowMultipleAllocations"] is True
    assert gpu2["attributes"]["index"] == {"int": 2}
    assert gpu2["attributes"]["model"] == {"string": "NVIDIA L4"}
    assert gpu2["attributes"]["uuid"]["string"].startswith("GPU-")
    assert gpu2["capacity"] == {"memory": {
        "value": "24Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}


def test_mib_unit_gives_one_mib_steps(start_driver, api: Client) -> None:
    start_driver("1x16GiB", memory_unit="MiB")
    capacity = _slice(api).spec.devices[0].capacity["memory"]
    assert capacity.value == "16Gi"
    assert capacity.request_policy is not None and capacity.request_policy.default == "1Mi"
    assert capacity.request_policy.valid_range is not None and capacity.request_policy.valid_range.step == "1Mi"


@pytest.mark.parametrize("services", [("v1.DRAPlugin", "v1beta1.DRAPlugin"), ("v1beta1.DRAPlugin",)],
                         ids=["v1", "v1beta1-only-kubelet"])
def test_prepare_writes_a_cdi_spec_and_unprepare_removes_it(
    start_driver, api: Client, dirs: Dirs, claims: Claims, services: tuple[str, ...]
) -> None:
    start_driver("2x16GiB")
    pod = claims.pod("trainer", {"gpu": "c1"})
    claim = claims.claim("c1", device="gpu-1", memory="4Gi", pods=[pod])
    uid = claim.metadata.uid
    with KubeletSim(dirs.registration, api, services=services) as kubelet:
        plugin = kubelet.wait_registered()
        assert plugin is not None and plugin.service == services[0]
        prepared = kubelet.prepare(pod)
        assert prepared == {uid: [f"k8s.gpu-mem.kubectl-gpushare.io/claim={uid}-gpu-1"]}
        spec = json.loads(dirs.cdi_spec(uid).read_text())
        assert spec == {
            "cdiVersion": "0.5.0",
            "kind": "k8s.gpu-mem.kubectl-gpushare.io/claim",
            "devices": [{"name": f"{uid}-gpu-1", "containerEdits": {"env": [
                "ALIYUN_COM_GPU_MEM_CONTAINER=4", "ALIYUN_COM_GPU_MEM_DEV=16", "ALIYUN_COM_GPU_MEM_IDX=1",
                "ALIYUN_COM_GPU_MEM_POD=4", "NVIDIA_VISIBLE_DEVICES=1"]}}],
        }
        assert oct(dirs.cdi_spec(uid).stat().st_mode & 0o777) == "0o644"
        assert kubelet.unprepare(pod) == [uid]
        assert not dirs.cdi_spec(uid).exists()
        assert not [n for n in os.listdir(dirs.cdi) if n.endswith(".tmp")]


def test_v1_reports_the_share_id_and_v1beta1_cannot(start_driver, dirs: Dirs, claims: Claims) -> None:
    start_driver()
    claim = claims.claim("c1")
    uid = claim.metadata.uid
    socket = os.path.join(dirs.plugin, "dra.sock")
    with grpc.insecure_channel(target(socket)) as channel:
        request = dra_v1_pb2.NodePrepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace="default", name="c1", uid=uid)])
        answer = v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=5)
        device = answer.claims[uid].devices[0]
        assert (device.pool_name, device.device_name, list(device.request_names)) == (NODE, "gpu-0", ["gpu"])
        assert device.share_id == claim.status.allocation.devices.results[0].share_id
        old = channel.unary_unary(
            "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
            request_serializer=dra_v1beta1_pb2.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=dra_v1beta1_pb2.NodePrepareResourcesResponse.FromString,
        )(dra_v1beta1_pb2.NodePrepareResourcesRequest(
            claims=[dra_v1beta1_pb2.Claim(namespace="default", name="c1", uid=uid)]), timeout=5)
        assert list(old.claims[uid].devices[0].cdi_device_ids) == list(device.cdi_device_ids)


def test_second_prepare_is_answered_from_the_record(start_driver, dirs: Dirs, claims: Claims) -> None:
    running: RunningDriver = start_driver()
    claim = claims.claim("c1")
    uid = claim.metadata.uid
    socket = os.path.join(dirs.plugin, "dra.sock")
    request = dra_v1_pb2.NodePrepareResourcesRequest(claims=[dra_v1_pb2.Claim(namespace="default", name="c1", uid=uid)])
    with grpc.insecure_channel(target(socket)) as channel:
        stub = v1_grpc.DRAPluginStub(channel)
        first = stub.NodePrepareResources(request, timeout=5)
        written = dirs.cdi_spec(uid).stat().st_mtime_ns
        second = stub.NodePrepareResources(request, timeout=5)
    assert first == second and not first.claims[uid].error
    preparer = running.driver.preparer
    assert preparer.reads == 1 and preparer.checkpoint.saves + preparer.checkpoint.records == 1
    assert dirs.cdi_spec(uid).stat().st_mtime_ns == written


def test_a_restarted_driver_neither_loses_nor_repeats_a_preparation(
    start_driver, dirs: Dirs, claims: Claims, api: Client, sandbox: Sandbox
) -> None:
    first = start_driver()
    pod = claims.pod("p", {"gpu": "c1"})
    claim = claims.claim("c1", pods=[pod])
    uid = claim.metadata.uid
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        ids = kubelet.prepare(pod)
    first.shutdown()
    dirs.cdi_spec(uid).unlink()  # and the runtime's spec went missing meanwhile
    second = start_driver()
    assert second.driver.preparer.prepared()[uid].cdi_ids == tuple(ids[uid])
    assert dirs.cdi_spec(uid).exists(), "the missing CDI spec is rewritten from the checkpoint"
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        socket = os.path.join(dirs.plugin, "dra.sock")
        with grpc.insecure_channel(target(socket)) as channel:
            again = v1_grpc.DRAPluginStub(channel).NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(
                claims=[dra_v1_pb2.Claim(namespace="default", name="c1", uid=uid)]), timeout=5)
    assert list(again.claims[uid].devices[0].cdi_device_ids) == ids[uid]
    assert second.driver.preparer.reads == 0, "answered from the checkpoint, without reading the claim"


def test_kubelet_refuses_a_pod_the_claim_is_not_reserved_for(start_driver, kubelet: KubeletSim,
                                                            claims: Claims) -> None:
    start_driver()
    kubelet.wait_registered()
    pod = claims.pod("stranger", {"gpu": "c1"})
    claims.claim("c1", pods=[])
    with pytest.raises(KubeletPrepareError, match="is not allowed to use resource claim c1"):
        kubelet.prepare(pod)
