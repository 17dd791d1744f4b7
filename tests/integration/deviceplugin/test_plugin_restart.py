"""The device plugin restarted (a DaemonSet rollout) while kubelet admits pods: nothing lost, nothing twice.

A client creates pods as the extender leaves them (bound, annotated, ``ASSIGNED=false``) and has
the kubelet stand-in admit each one (GetPreferredAllocation, Allocate), while the plugin is stopped
and started again twice. An Allocate that fails while the plugin is away is retried, as kubelet
retries a pod whose admission failed (counted); none may fail for good. Afterwards every pod was
allocated once, on the GPU its annotation names, recorded ``ASSIGNED=true`` once, and no device
was handed to two pods at a time.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletAllocateError, KubeletSim
from kubectl_gpushare.kube import types

pytestmark = pytest.mark.integration

RETRIES = 200


def test_plugin_restarted_during_admissions_loses_no_allocate_and_assigns_no_pod_twice(
    kubelet: KubeletSim, start_plugin, pods, api  # type: ignore[no-untyped-def]
) -> None:
    plugin = start_plugin("2x16GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 32)
    stop = threading.Event()
    counts: Counter[str] = Counter()
    admitted: list[tuple[str, str, int, int]] = []  # name, uid, gpu, request

    def admit() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            if n > 6:  # the pod admitted 6 pods ago ends: its devices go back to kubelet
                name, uid, _, _ = admitted[n - 7]
                kubelet.release_pod(uid)
                api.delete(types.PODS, name, "default")
            gpu, request = n % 2, 1 + n % 3
            pod = pods.create(f"p{n:03d}", [request], gpu=gpu, assume_time=n)
            for attempt in range(RETRIES + 1):
                try:
                    env = kubelet.allocate_pod(pod)["main"]
                    assert env[protocol.ENV_IDX] == str(gpu), env
                    counts["admitted"] += 1
                    time.sleep(0.02)  # the pace of the load: the next pod arrives
                    break
                except KubeletAllocateError:
                    counts["retried"] += 1
                    if attempt == RETRIES:
                        counts["failed"] += 1
                    time.sleep(0.05)  # kubelet's retry pace for a pod whose admission failed
            admitted.append((pod["metadata"]["name"], pod["metadata"]["uid"], gpu, request))

    def admitted_more(target: int, timeout: float) -> None:
        wait_for(lambda: counts["admitted"] >= target or not client.is_alive(), timeout,
                 lambda: f"admissions: {counts}")
        assert counts["admitted"] >= target, f"the client stopped: {counts}"

    client = threading.Thread(target=admit)
    client.start()
    try:
        for _ in range(2):
            start = counts["admitted"]
            admitted_more(start + 5, 20)
            before = counts["admitted"]
            plugin.shutdown()
            plugin = start_plugin("2x16GiB", add_node=False)
            admitted_more(before + 5, 30)
    finally:
        stop.set()
        client.join(60)
    assert counts["failed"] == 0, counts
    assert counts["admitted"] == len(admitted), counts  # every pod admitted once, none lost
    # Every pod still present was assigned once, on its own GPU, and holds devices no other pod holds.
    held: Counter[str] = Counter()
    uuids = [gpu.uuid for gpu in plugin.backend.devices()]
    for name, uid, gpu, request in admitted[-6:]:
        ann = pods.annotations(name)
        assert ann[protocol.ANN_ASSIGNED] == "true" and ann[protocol.ANN_IDX] == str(gpu)
        devices = kubelet.allocations[uid]["main"]
        assert len(devices) == request
        assert {protocol.uuid_of_fake_device(d) for d in devices} == {uuids[gpu]}
        held.update(devices)
    assert all(count == 1 for count in held.values())
    print(f"admissions {counts['admitted']}, kubelet retries while the plugin restarted {counts['retried']}, "
          f"failed for good {counts['failed']}")
