"""Allocate under hostile input and concurrency, over the real unix socket and the sandbox over HTTP."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from tcp_gate import TcpGate
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc
from kubectl_gpushare.deviceplugin.cluster import RECORD_BUDGET
from kubectl_gpushare.deviceplugin.kubelet import target
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletAllocateError, KubeletSim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.sandbox.builders import pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def ready(kubelet: KubeletSim, devices: int) -> None:
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == devices)


def cached(plugin: Any, name: str) -> bool:
    return any(pod.name == name for pod in plugin.plugin.cluster.source.pods())


def break_the_watch(plugin: Any, sandbox: Sandbox) -> None:
    """From now on the plugin sees new pods only through its direct re-read (the fallback path)."""
    sandbox.inject(method="GET", path=r"watch=", drop_watch=True)
    sandbox.drop_watches()
    wait_for(lambda: not plugin.plugin.cluster.pod_informer.watching)


def two_placed(
    kubelet: KubeletSim, start_plugin: Any, pods: Any, first: str, second: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A 2x16GiB plugin and two 4-unit pods the extender placed (``first`` on GPU 0, assumed first; ``second`` on
    GPU 1), both in the plugin's cache: a 4-unit Allocate matches either, oldest first."""
    plugin = start_plugin("2x16GiB")
    ready(kubelet, 32)
    one = pods.create(first, [4], gpu=0, assume_time=1)
    two = pods.create(second, [4], gpu=1, assume_time=2)
    wait_for(lambda: cached(plugin, first) and cached(plugin, second))
    return one, two


def allocate_ids(kubelet: KubeletSim, ids: list[str], timeout: float = 10) -> api.AllocateResponse:
    plugin = kubelet.plugin()
    assert plugin is not None
    request = api.AllocateRequest(container_requests=[api.ContainerAllocateRequest(devices_ids=ids)])
    return plugin.stub.Allocate(request, timeout=timeout)


# --- adoption only with room by the ledger -----------------------------------------------------


def test_adoption_never_over_commits_the_gpu_by_the_ledger(kubelet: KubeletSim, start_plugin, pods) -> None:
    start_plugin("1x16GiB")
    ready(kubelet, 16)
    pods.create("placed", [8], gpu=0, assume_time=1)  # the extender's, not yet admitted by kubelet
    stray = pods.create("stray", [10], gpu=None)
    with pytest.raises(KubeletAllocateError) as info:
        kubelet.allocate_pod(stray)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "pod default/stray asks for 10 GiB" in info.value.details
    assert "GPU 0 of node gpu-node-1 has 8 GiB free by the ledger" in info.value.details
    assert protocol.ANN_ASSIGNED not in pods.annotations("stray")
    # A stray that fits is still adopted, and then counts: the next one finds no room.
    small = pods.create("small", [6], gpu=None)
    assert kubelet.allocate_pod(small)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"
    assert pods.annotations("small")[protocol.ANN_IDX] == "0"
    tiny = pods.create("tiny", [3], gpu=None)
    with pytest.raises(KubeletAllocateError) as info:
        kubelet.allocate_pod(tiny)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "has 2 GiB free" in info.value.details


# --- the assignment patch is conditional on the UID --------------------------------------------


def test_a_pod_re_created_under_the_same_name_is_not_marked_by_the_old_ones_patch(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox, api: Client
) -> None:
    plugin = start_plugin("2x16GiB")
    ready(kubelet, 32)
    old = pods.create("reborn", [2], gpu=1, assume_time=1)
    wait_for(lambda: cached(plugin, "reborn"))
    break_the_watch(plugin, sandbox)  # the cache keeps the old pod
    api.delete(types.PODS, "reborn", "default", uid=old["metadata"]["uid"])
    new = pods.create("reborn", [2], gpu=0, assume_time=2)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    env = kubelet.allocate_pod(new)["main"]
    assert env["ALIYUN_COM_GPU_MEM_IDX"] == "0"  # the new pod's GPU, found by the re-read
    patches = [r for r in sandbox.requests if r.verb == "patch" and r.resource == "pods" and r.name == "reborn"]
    assert [r.status for r in patches] == [409, 200]  # the old UID's patch was refused, not applied
    recorded = sandbox.get("pods", "default", "reborn")
    assert recorded["metadata"]["uid"] == new["metadata"]["uid"]
    assert recorded["metadata"]["annotations"][protocol.ANN_ASSIGNED] == "true"


# --- the write happens outside the lock --------------------------------------------------------


def test_a_slow_patch_holds_up_no_other_allocate_and_no_pod_is_picked_twice(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox
) -> None:
    slow, quick = two_placed(kubelet, start_plugin, pods, "slow", "quick")
    fault = sandbox.inject(method="PATCH", path=r"/pods/slow", latency=4.0, times=1)
    results: dict[str, Any] = {}

    def admit_slow() -> None:
        results["slow"] = kubelet.allocate_pod(slow)["main"]

    first = threading.Thread(target=admit_slow, daemon=True)
    first.start()
    wait_for(lambda: fault.hits >= 1)  # the slow pod's patch is in flight
    started = time.monotonic()
    env = kubelet.allocate_pod(quick)["main"]
    took = time.monotonic() - started
    assert first.is_alive(), "the second Allocate waited for the first one's patch"
    assert took < 3.5
    assert env["ALIYUN_COM_GPU_MEM_IDX"] == "1"  # the quick pod, not the slow one picked twice
    first.join(15)
    assert results["slow"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"
    assert pods.annotations("slow")[protocol.ANN_ASSIGNED] == "true"
    assert pods.annotations("quick")[protocol.ANN_ASSIGNED] == "true"


# --- hostile pods on the fallback path ---------------------------------------------------------


def hostile(name: str, requests: list[int], **kwargs: Any) -> dict[str, Any]:
    return pod_object(name, "default", requests, node="gpu-node-1", phase="Pending", assigned=False, **kwargs)


def test_hostile_pods_on_the_fallback_path_never_break_allocate_for_others(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox, api: Client
) -> None:
    plugin = start_plugin("2x16GiB")
    ready(kubelet, 32)
    break_the_watch(plugin, sandbox)
    huge = "1" + "0" * 4999
    bad_index = hostile("bad-index", [4], gpu=0, assume_time=1)
    bad_index["metadata"]["annotations"][protocol.ANN_IDX] = huge
    bad_limit = hostile("bad-limit", [4], gpu=0, assume_time=1)
    bad_limit["spec"]["containers"][0]["resources"]["limits"][protocol.RESOURCE_MEM] = huge
    deep = hostile("deep-json", [3], gpu=0, assume_time=1)
    deep["metadata"]["annotations"][protocol.ANN_ALLOCATION] = "[" * 100_000
    # Seeded as stored objects: the API would now refuse the 5,000-digit limit (canonical quantities),
    # but an object already in etcd, or written by an older server, can still carry one.
    sandbox.load([bad_index, bad_limit, deep])
    good = pods.create("good", [4], gpu=1, assume_time=2)
    assert kubelet.allocate_pod(good)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
    assert pods.annotations("good")[protocol.ANN_ASSIGNED] == "true"
    # Nothing left for 4 units but hostile pods: a clear refusal, never UNKNOWN.
    uuid = plugin.backend.devices()[0].uuid
    with pytest.raises(grpc.RpcError) as info:
        allocate_ids(kubelet, [protocol.fake_device_id(uuid, j) for j in range(4)])
    assert info.value.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "gpushare device plugin" in (info.value.details() or "")
    assert len(info.value.details() or "") < 1000
    for name in ("bad-index", "bad-limit"):
        assert pods.annotations(name)[protocol.ANN_ASSIGNED] == "false"
    # The pod with the unreadable allocation JSON is served by its index or refused clearly, never UNKNOWN.
    try:
        allocate_ids(kubelet, [protocol.fake_device_id(uuid, j) for j in range(3)])
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED)


# --- device ids and streams ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "ids", [["garbage-1"], [""], ["GPU-nope-_-0"], ["x" * 5000]], ids=["garbage", "empty", "unknown-gpu", "long"]
)
def test_allocate_refuses_device_ids_it_never_advertised(
    ids: list[str], kubelet: KubeletSim, start_plugin, pods
) -> None:
    start_plugin("2x16GiB")
    ready(kubelet, 32)
    pods.create("one", [1], gpu=0, assume_time=1)
    with pytest.raises(grpc.RpcError) as info:
        allocate_ids(kubelet, ids)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "never advertised" in (info.value.details() or "")
    assert pods.annotations("one")[protocol.ANN_ASSIGNED] == "false"


def test_allocate_is_answered_while_many_list_and_watch_streams_are_open(
    kubelet: KubeletSim, start_plugin, pods
) -> None:
    plugin = start_plugin("1x8GiB")
    ready(kubelet, 8)
    channel = grpc.insecure_channel(target(plugin.socket))
    stub = api_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
    streams = [stub.ListAndWatch(api.Empty(), timeout=30) for _ in range(8)]
    try:
        outcomes = []
        for stream in streams:
            try:
                outcomes.append(len(next(stream).devices))
            except grpc.RpcError as exc:
                outcomes.append(exc.code())
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in outcomes and 8 in outcomes
        pod = pods.create("busy", [2], gpu=0, assume_time=1)
        started = time.monotonic()
        assert kubelet.allocate_pod(pod)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"
        assert time.monotonic() - started < 5
        assert kubelet.devices()  # kubelet's own stream was never displaced
    finally:
        for stream in streams:
            stream.cancel()
        channel.close()


def test_an_unanswered_patch_fails_allocate_within_its_budget_and_the_pod_stays_claimed(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox
) -> None:
    late, other = two_placed(kubelet, start_plugin, pods, "late", "other")
    sandbox.inject(method="PATCH", path=r"/pods/late", latency=8.0, after=True)  # lands after the client gave up
    started = time.monotonic()
    with pytest.raises(KubeletAllocateError) as info:
        kubelet.allocate_pod(late)
    assert time.monotonic() - started < RECORD_BUDGET + 2 < 30  # kubelet's stand-in waits 30 s
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "no answer recording GPU 0 on pod default/late" in info.value.details
    assert "may have been recorded" in info.value.details
    kubelet.release_pod(late["metadata"]["uid"])
    # The write may still land, so "late" stays claimed: the next 4-unit call is "other"'s.
    assert kubelet.allocate_pod(other)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
    wait_for(lambda: pods.annotations("late").get(protocol.ANN_ASSIGNED) == "true", timeout=20)
    sandbox.clear_faults()


def test_a_patch_never_sent_fails_allocate_and_frees_the_pod_at_once(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox, kubeconfig: Path
) -> None:
    first = pods.create("first", [4], gpu=0, assume_time=1)  # created through the sandbox's own port
    pods.create("second", [4], gpu=1, assume_time=2)
    with TcpGate(sandbox.port) as gate:
        kubeconfig.write_text(kubeconfig.read_text().replace(f":{sandbox.port}", f":{gate.port}"))
        plugin = start_plugin("2x16GiB")  # the plugin talks to the API through the gate
        ready(kubelet, 32)
        wait_for(lambda: cached(plugin, "first") and cached(plugin, "second"))
        gate.shut()  # every connect refused: the patch cannot be sent
        with pytest.raises(KubeletAllocateError) as info:
            kubelet.allocate_pod(first)
        assert info.value.code == grpc.StatusCode.UNAVAILABLE
        assert "could not record GPU 0 on pod default/first" in info.value.details
        assert "Connection refused" in info.value.details and "may have been recorded" not in info.value.details
        gate.open()
        kubelet.release_pod(first["metadata"]["uid"])
        # Nothing can land, so "first" is free again at once: the next 4-unit call is its own, not "second"'s.
        assert kubelet.allocate_pod(first)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"
        assert pods.annotations("first").get(protocol.ANN_ASSIGNED) == "true"
        assert pods.annotations("second").get(protocol.ANN_ASSIGNED) == "false"


@pytest.mark.parametrize("status", [500, 503])
def test_a_patch_answered_5xx_after_it_landed_keeps_the_pod_claimed(
    kubelet: KubeletSim, start_plugin, pods, sandbox: Sandbox, status: int
) -> None:
    # A 5xx (or a 429) is not a refusal: the patch may have been applied, as here, where the sandbox
    # applies it and then answers 503 (`kube.errors.did_not_happen`, the rule every writer keeps).
    landed, other = two_placed(kubelet, start_plugin, pods, "landed", "other")
    fault = sandbox.inject(method="PATCH", path=r"/pods/landed", status=status, after=True)
    with pytest.raises(KubeletAllocateError) as info:
        kubelet.allocate_pod(landed)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "may have been recorded" in info.value.details, info.value.details
    assert fault.hits >= 2  # retried before giving up
    assert pods.annotations("landed").get(protocol.ANN_ASSIGNED) == "true"
    sandbox.clear_faults()
    kubelet.release_pod(landed["metadata"]["uid"])
    # "landed" stays claimed (its patch did land): the next 4-unit call is "other"'s, on GPU 1.
    assert kubelet.allocate_pod(other)["main"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
