from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import grpc
import pytest
from waiting import holds_for, wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.daemon import DaemonError
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletAllocateError, KubeletSim
from kubectl_gpushare.node.sockets import socket_identity
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NODE = "gpu-node-1"


def per_gpu(devices: dict[str, str], health: str | None = None) -> list[int]:
    counts: dict[str, int] = {}
    for device, state in devices.items():
        if health is None or state == health:
            uuid = protocol.uuid_of_fake_device(device)
            counts[uuid] = counts.get(uuid, 0) + 1
    return sorted(counts.values())


def test_registers_and_advertises_each_gpus_own_memory(kubelet: KubeletSim, start_plugin, sandbox: Sandbox) -> None:
    plugin = start_plugin("2x16GiB,1x24GiB")
    assert kubelet.wait_registered(1)
    request = kubelet.registrations[0]
    assert (request.version, request.endpoint, request.resource_name) == (
        "v1beta1",
        "aliyungpushare.sock",
        "aliyun.com/gpu-mem",
    )
    assert kubelet.plugin().options.get_preferred_allocation_available
    devices = kubelet.wait_devices(lambda d: len(d) == 56)
    assert per_gpu(devices, "Healthy") == [16, 16, 24]
    uuids = [gpu.uuid for gpu in plugin.backend.devices()]
    assert f"{uuids[2]}-_-23" in devices

    def published() -> bool:
        node = sandbox.get("nodes", None, NODE)
        return node is not None and node["status"]["capacity"].get(protocol.RESOURCE_COUNT) == "3"

    wait_for(published, what="the node published")
    node = sandbox.get("nodes", None, NODE)
    assert node["status"]["allocatable"][protocol.RESOURCE_COUNT] == "3"
    gpus = json.loads(node["metadata"]["annotations"][protocol.ANN_NODE_GPUS])
    assert [(g["index"], g["memory"], g["uuid"]) for g in gpus] == [
        (0, 16, uuids[0]),
        (1, 16, uuids[1]),
        (2, 24, uuids[2]),
    ]
    assert protocol.parse_node_gpus(node["metadata"]["annotations"][protocol.ANN_NODE_GPUS]) == (16, 16, 24)


def test_allocate_pins_each_pod_to_its_annotated_gpu_and_records_it(kubelet: KubeletSim, start_plugin, pods) -> None:
    plugin = start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    a = pods.create("same-a", [4], gpu=1, assume_time=100)
    b = pods.create("same-b", [4], gpu=0, assume_time=200)
    env_a = kubelet.allocate_pod(a)["main"]
    env_b = kubelet.allocate_pod(b)["main"]
    assert env_a == {
        "NVIDIA_VISIBLE_DEVICES": "1",
        "ALIYUN_COM_GPU_MEM_IDX": "1",
        "ALIYUN_COM_GPU_MEM_POD": "4",
        "ALIYUN_COM_GPU_MEM_CONTAINER": "4",
        "ALIYUN_COM_GPU_MEM_DEV": "16",
    }
    assert (env_b["NVIDIA_VISIBLE_DEVICES"], env_b["ALIYUN_COM_GPU_MEM_IDX"]) == ("0", "0")
    for name in ("same-a", "same-b"):
        recorded = pods.annotations(name)
        assert recorded[protocol.ANN_ASSIGNED] == "true"
        assert int(recorded[protocol.ANN_ASSIGN_TIME]) > 0
    # GetPreferredAllocation steered kubelet to fake devices of each pod's own GPU.
    uuids = [gpu.uuid for gpu in plugin.backend.devices()]
    assert kubelet.preferred_calls == 2
    assert {protocol.uuid_of_fake_device(d) for d in kubelet.allocations[a["metadata"]["uid"]]["main"]} == {uuids[1]}
    assert {protocol.uuid_of_fake_device(d) for d in kubelet.allocations[b["metadata"]["uid"]]["main"]} == {uuids[0]}


def test_multi_container_pod_gets_one_gpu_for_every_gpu_container(kubelet: KubeletSim, start_plugin, pods) -> None:
    start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    pod = pods.create("multi", [2, 0, 3], gpu=1, assume_time=5)
    envs = kubelet.allocate_pod(pod)
    assert sorted(envs) == ["main", "sidecar-2"]
    assert {env["ALIYUN_COM_GPU_MEM_IDX"] for env in envs.values()} == {"1"}
    assert [envs[c]["ALIYUN_COM_GPU_MEM_CONTAINER"] for c in ("main", "sidecar-2")] == ["2", "3"]
    assert {env["ALIYUN_COM_GPU_MEM_POD"] for env in envs.values()} == {"5"}
    assert pods.annotations("multi")[protocol.ANN_ASSIGNED] == "true"


def test_no_matching_pod_fails_allocate_with_a_clear_error(kubelet: KubeletSim, start_plugin, pods) -> None:
    start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    stray = pods.create("no-extender", [3], gpu=None)
    with pytest.raises(KubeletAllocateError) as info:
        kubelet.allocate_pod(stray)
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "no pending pod on node gpu-node-1" in info.value.details
    assert "3 GiB of aliyun.com/gpu-mem" in info.value.details
    assert "no-gpu-has" not in info.value.details


def test_single_gpu_node_adopts_and_records_a_pod_the_extender_never_saw(
    kubelet: KubeletSim, start_plugin, pods
) -> None:
    start_plugin("1x24GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 24)
    pod = pods.create("plain", [6], gpu=None)
    env = kubelet.allocate_pod(pod)["main"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "0" and env["ALIYUN_COM_GPU_MEM_DEV"] == "24"
    recorded = pods.annotations("plain")
    assert recorded[protocol.ANN_IDX] == "0" and recorded[protocol.ANN_ASSIGNED] == "true"
    assert recorded[protocol.ANN_POD] == "6"


def test_a_refused_patch_fails_allocate_and_nothing_is_recorded(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox
) -> None:
    # A 4xx other than 429 is the API saying the patch did not happen: the pod is free again at once.
    # (A 5xx or a 429 may have landed: the pod stays claimed, test_allocate_guards.)
    start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    pod = pods.create("unlucky", [2], gpu=0, assume_time=1)
    fault = sandbox.inject(method="PATCH", path=r"/pods/unlucky", status=422)
    with pytest.raises(KubeletAllocateError) as info:
        kubelet.allocate_pod(pod)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "could not record GPU 0 on pod default/unlucky" in info.value.details
    assert fault.hits == 1  # a refusal is not retried
    assert pods.annotations("unlucky")[protocol.ANN_ASSIGNED] == "false"
    sandbox.clear_faults()
    kubelet.release_pod(pod["metadata"]["uid"])
    assert kubelet.allocate_pod(pod)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"
    assert pods.annotations("unlucky")[protocol.ANN_ASSIGNED] == "true"


def test_kubelet_restart_is_noticed_and_the_plugin_registers_again(kubelet: KubeletSim, start_plugin) -> None:
    plugin = start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    kubelet.restart()
    started = time.monotonic()
    assert kubelet.wait_registered(2, timeout=5), "no registration within 5 s of kubelet.sock being re-created"
    assert time.monotonic() - started < 5
    assert kubelet.wait_devices(lambda d: len(d) == 32, timeout=5)
    # The plugin counts the registrations it saw answered: kubelet's stop may cancel the reply to the
    # first one (kubelet kept it), so after the restart the count is 1 or 2.
    wait_for(lambda: plugin.plugin is not None and plugin.plugin.registered.is_set()
             and plugin.plugin.registrations >= 1, what="the plugin registered after the restart")


def test_kubelet_restarting_again_while_the_plugin_registers_is_served_and_registered_with(
    kubelet: KubeletSim, start_plugin, plugin_dir: str
) -> None:
    plugin = start_plugin("2x16GiB")
    wait_for(lambda: plugin.plugin is not None and plugin.plugin.registered.is_set(), what="the plugin registered")
    first = socket_identity(plugin.socket)
    kubelet.stop()
    # kubelet comes back but dies before it serves: a new kubelet.sock nobody answers, so the plugin,
    # which serves again for it, keeps failing to register ...
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(os.path.join(plugin_dir, protocol.KUBELET_SOCKET))
    try:
        wait_for(lambda: socket_identity(plugin.socket) not in (None, first), what="the plugin serving again")
        # ... until kubelet restarts again, deleting every socket (the plugin's new one too)
        kubelet.restart()
        assert kubelet.wait_registered(2, timeout=15), "the plugin registered an endpoint that is gone"
        assert kubelet.wait_devices(lambda d: len(d) == 32)
    finally:
        dead.close()


def test_kubelet_absent_at_start_is_retried_until_it_appears(plugin_dir: str, start_plugin) -> None:
    plugin = start_plugin("2x16GiB")
    holds_for(lambda: plugin.plugin is not None and plugin.plugin.registrations == 0, 1.0,
              "no registration while kubelet is absent (its attempts fail and are retried)")
    with KubeletSim(plugin_dir) as kubelet:
        assert kubelet.wait_registered(1, timeout=5)
        assert kubelet.wait_devices(lambda d: len(d) == 32)


def test_xid_marks_only_its_gpu_unhealthy_and_a_lost_gpu_leaves_the_list(kubelet: KubeletSim, start_plugin) -> None:
    plugin = start_plugin("3x8GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 24)
    assert not plugin.backend.inject_xid(2, 43)  # an application Xid: ignored
    assert plugin.backend.inject_xid(1, 79)
    devices = kubelet.wait_devices(lambda d: sum(h == "Unhealthy" for h in d.values()) == 8)
    uuids = [gpu.uuid for gpu in plugin.backend.devices()]
    assert {protocol.uuid_of_fake_device(d) for d, h in devices.items() if h == "Unhealthy"} == {uuids[1]}
    assert kubelet.capacity() == (24, 16)
    plugin.backend.set_health(1, True, "recovered")
    assert kubelet.wait_devices(lambda d: all(h == "Healthy" for h in d.values()))
    plugin.backend.remove_gpu(0)
    devices = kubelet.wait_devices(lambda d: len(d) == 16)
    assert uuids[0] not in {protocol.uuid_of_fake_device(d) for d in devices}


def test_eight_80gib_gpus_in_mib_are_refused_at_start_or_served_with_a_unit_size(
    kubelet: KubeletSim, start_plugin
) -> None:
    with pytest.raises(DaemonError) as info:
        start_plugin("8x80GiB", memory_unit="MiB")
    assert info.value.exit_code == 2
    assert "kubelet accepts at most 4 MiB" in info.value.message and "--unit-size" in info.value.message
    assert not kubelet.registrations
    start_plugin("8x80GiB", memory_unit="MiB", unit_size=16)
    assert kubelet.wait_registered(1)
    devices = kubelet.wait_devices(lambda d: len(d) == 8 * 80 * 1024 // 16)
    assert per_gpu(devices) == [5120] * 8


def test_deleted_plugin_socket_is_served_again_and_re_registered(kubelet: KubeletSim, start_plugin) -> None:
    plugin = start_plugin("1x8GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 8)
    os.unlink(plugin.socket)
    assert kubelet.wait_registered(2, timeout=5)
    wait_for(lambda: os.path.exists(plugin.socket), what="the plugin socket served again")
    assert kubelet.wait_devices(lambda d: len(d) == 8)


def test_cgpu_label_and_uuid_mode_shape_the_env(kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox) -> None:
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", labels={"gpushare": "true", "cgpu.disable.isolation": "true"})])
    plugin = start_plugin("2x16GiB", visible_devices="uuid")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    env = kubelet.allocate_pod(pods.create("cgpu", [1], gpu=1, assume_time=1))["main"]
    assert env["CGPU_DISABLE"] == "true"
    assert env["NVIDIA_VISIBLE_DEVICES"] == plugin.backend.devices()[1].uuid
    assert env["ALIYUN_COM_GPU_MEM_IDX"] == "1"


def test_api_server_down_at_start_does_not_stop_serving_and_the_node_is_published_later(
    kubelet: KubeletSim, start_plugin, sandbox: Sandbox
) -> None:
    sandbox.load([node_object(NODE, [], ip="10.0.0.1", labels={"gpushare": "true"})])
    sandbox.inject(path=r"/api/v1/", status=503)
    started = time.monotonic()
    start_plugin("2x16GiB", sync_timeout=1)
    assert kubelet.wait_registered(1, timeout=10)
    assert time.monotonic() - started < 8
    sandbox.clear_faults()

    def published() -> bool:
        node = sandbox.get("nodes", None, NODE)
        return node is not None and node["status"]["capacity"].get(protocol.RESOURCE_COUNT) == "2"

    wait_for(published, 15, "the node published")


def test_pod_seen_by_kubelet_before_the_plugins_watch_is_found_by_a_direct_read(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox
) -> None:
    start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    broken = sandbox.inject(method="GET", path=r"watch=", drop_watch=True)
    sandbox.drop_watches()
    wait_for(lambda: broken.hits >= 1, what="the plugin's watch to reconnect into the broken one")
    pod = pods.create("early", [2], gpu=1, assume_time=1)
    assert kubelet.allocate_pod(pod)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
    assert pods.annotations("early")[protocol.ANN_ASSIGNED] == "true"
    direct = [
        r for r in sandbox.requests if r.verb == "list" and "status.phase=Pending" in r.query.get("fieldSelector", "")
    ]
    assert direct, "the pod should have been found by a direct list, not the (broken) watch"


def test_racing_binds_do_not_swap_gpus_between_same_size_pods(kubelet: KubeletSim, start_plugin, pods) -> None:
    plugin = start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)

    def arrived(pod: dict[str, Any]) -> bool:  # the plugin's watch has seen it (its arrival order is recorded)
        return plugin.plugin is not None and pod["metadata"]["uid"] in plugin.plugin.cluster.arrivals()

    # Extender replicas stamped the assume times in one order and the binds landed in the other.
    bound_first = pods.create("bound-first", [4], gpu=1, assume_time=2_000)
    wait_for(lambda: arrived(bound_first), what="bound-first to arrive")
    bound_second = pods.create("bound-second", [4], gpu=0, assume_time=1_000)
    wait_for(lambda: arrived(bound_second), what="bound-second to arrive")
    # Kubelet admits in arrival order, so "bound-first" is allocated first.
    assert kubelet.allocate_pod(bound_first)["main"]["NVIDIA_VISIBLE_DEVICES"] == "1"
    assert kubelet.allocate_pod(bound_second)["main"]["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert pods.annotations("bound-first")[protocol.ANN_ASSIGNED] == "true"
    assert pods.annotations("bound-second")[protocol.ANN_ASSIGNED] == "true"
