"""serve-device-plugin with --enforce-memory: limits over a fake cgroup tree, usage over real HTTP,
Allocate over real gRPC untouched by NVML errors."""

from __future__ import annotations

import dataclasses
import json
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from node_agents import cgroup_tree
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.allocation import PodSource
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.deviceplugin.node_agent import NodeAgent
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.ledger import PodRecord
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.sandbox.server import Sandbox

GIB = 1 << 30
NODE = "gpu-node-1"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return cgroup_tree(tmp_path)


@pytest.fixture
def hard_plugin(kubelet: KubeletSim, start_plugin: Any, tree: Path) -> Callable[..., Any]:
    """Start the plugin enforcing hard limits over ``tree`` on ``gpus`` 16 GiB GPUs; return it once kubelet has them."""

    def start(gpus: int = 1, **options: Any) -> Any:
        running = start_plugin(f"{gpus}x16GiB", enforce_memory="hard", cgroup_root=str(tree), **options)
        assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 16 * gpus)
        return running

    return start


@pytest.fixture
def plugin_limiting(hard_plugin: Callable[..., Any], kubelet: KubeletSim, pods: Any,
                    tree: Path) -> Callable[..., tuple[Any, Path]]:
    """Start the plugin on ``gpus`` GPUs and make ``name``: a 2 GiB pod on GPU 0, admitted by kubelet, its
    cgroup made and its hard limit in force; return the plugin and the pod's cgroup."""

    def start(name: str, gpus: int = 1) -> tuple[Any, Path]:
        running = hard_plugin(gpus)
        body = pods.create(name, [2], gpu=0)
        kubelet.allocate_pod(body)  # its containers run on GPU 0 from now on, whatever the annotations say later
        cg = tree / cgroups.pod_path(body["metadata"]["uid"], "burstable", "cgroupfs")
        cg.mkdir()
        wait_for(lambda: running.backend.limits(0) == {str(cg): (2 * GIB, 2 * GIB)})
        return running, cg

    return start


def wait_cached(running: Any, name: str, edited: Callable[[PodRecord], bool]) -> None:
    """Wait until the plugin's pod cache shows the edit ``edited`` tells on pod ``name``."""
    wait_for(lambda: any(p.name == name and edited(p) for p in running.plugin.cluster.source.pods()))


def test_limits_follow_pods_and_usage_is_served(
    kubelet: KubeletSim, hard_plugin: Callable[..., Any], pods: Any, api: Client, sandbox: Sandbox, tree: Path
) -> None:
    running = hard_plugin(2, usage_port=0, usage_interval=0.1)
    backend = running.backend
    body = pods.create("train", [4], gpu=1)
    kubelet.allocate_pod(body)
    uid = body["metadata"]["uid"]
    cg = tree / cgroups.pod_path(uid, "burstable", "cgroupfs")
    cg.mkdir()  # kubelet creates the pod cgroup after Allocate
    wait_for(lambda: backend.limits(1) == {str(cg): (4 * GIB, 4 * GIB)})
    # the node says what is enforced
    node = wait_for(lambda: (n := sandbox.get("nodes", None, NODE)) and "enforcement" in
                    n["metadata"]["annotations"].get(protocol.ANN_NODE_GPUS, "") and n)
    entries = json.loads(node["metadata"]["annotations"][protocol.ANN_NODE_GPUS])
    assert [(e["enforcement"], e["enforcementReason"]) for e in entries] == [("hard", ""), ("hard", "")]
    assert protocol.parse_node_gpus(node["metadata"]["annotations"][protocol.ANN_NODE_GPUS]) is not None
    backend.allocate(1, str(cg), 3 * GIB)
    port = running.plugin.node.port

    def pod_used() -> int | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{protocol.USAGE_PATH}", timeout=10) as resp:
            report = protocol.decode_usage_report(resp.read())
        return next((p.used_bytes for p in report.pods if p.name == "train" and p.limit_bytes == 4 * GIB), None)

    assert wait_for(pod_used) == 3 * GIB
    api.delete(types.PODS, "train", "default")
    wait_for(lambda: backend.limits(1) == {})


def test_allocate_keeps_working_when_nvml_fails(
    kubelet: KubeletSim, hard_plugin: Callable[..., Any], pods: Any, tree: Path
) -> None:
    running = hard_plugin()
    running.backend.fail_next(0, 1000)
    body = pods.create("a", [2], gpu=0)
    envs = kubelet.allocate_pod(body)
    assert next(iter(envs.values()))[protocol.ENV_POD] == "2"
    (tree / cgroups.pod_path(body["metadata"]["uid"], "guaranteed", "cgroupfs")).mkdir()
    running.backend.fail_next(0, 0)
    running.plugin.node.enforcer.wake()
    wait_for(lambda: running.backend.limits(0) != {}, timeout=20)


def test_a_restarted_plugin_limits_what_it_missed_and_clears_what_went_stale(
    plugin_limiting: Callable[..., tuple[Any, Path]], pods: Any, api: Client, tree: Path
) -> None:
    first, _ = plugin_limiting("old")
    backend = first.backend
    first.shutdown()
    # while the plugin is down: the old pod is deleted (its cgroup lingers), a new one is bound and started
    api.delete(types.PODS, "old", "default")
    new = pods.create("new", [3], gpu=0)
    new_cg = tree / cgroups.pod_path(new["metadata"]["uid"], "besteffort", "cgroupfs")
    new_cg.mkdir()
    second = type(first)(first.cfg, backend).start()  # the same driver: limits outlive the plugin
    try:
        wait_for(lambda: backend.limits(0) == {str(new_cg): (3 * GIB, 3 * GIB)})
    finally:
        second.shutdown()


def test_hostile_pods_never_get_a_limit(kubelet: KubeletSim, hard_plugin: Callable[..., Any], pods: Any, tree: Path,
                                        sandbox: Sandbox) -> None:
    running = hard_plugin()
    hostile = [
        pods.create("other-gpu", [2], gpu=7),  # a GPU this node does not have
        pods.create("too-big", [40], gpu=0),  # more than the GPU's memory
        pods.create("bad-index", [2], gpu=0, annotations={protocol.ANN_IDX: "-3"}),
        pods.create("bad-mem", [10**30], gpu=0),  # a request no quantity parser accepts
        pods.create("negative", [-4], gpu=0),
    ]
    for body in hostile:
        (tree / cgroups.pod_path(body["metadata"]["uid"], "burstable", "cgroupfs")).mkdir()
    good = pods.create("good", [1], gpu=0)
    good_cg = tree / cgroups.pod_path(good["metadata"]["uid"], "burstable", "cgroupfs")
    good_cg.mkdir()
    # the good pod's limit proves passes ran over every pod; no hostile pod got one
    wait_for(lambda: str(good_cg) in running.backend.limits(0))
    running.plugin.node.enforcer.reconcile()
    assert running.backend.limits(0) == {str(good_cg): (GIB, GIB)}


def test_a_pod_cannot_raise_its_own_limit_past_its_request_by_annotation(
    plugin_limiting: Callable[..., tuple[Any, Path]], api: Client
) -> None:
    running, cg = plugin_limiting("greedy")
    backend = running.backend
    # Annotations are the pod owner's to edit: a gpushare 2.0 allocation claiming the whole GPU must not
    # lift the pod's hard limit past the 2 GiB its containers asked for (other pods hold the rest).
    api.patch_pod("default", "greedy", {"metadata": {"annotations": {protocol.ANN_ALLOCATION: '{"0":{"0":16}}'}}})
    wait_cached(running, "greedy", lambda p: bool(p.allocation))
    running.plugin.node.enforcer.reconcile()
    assert backend.limits(0) == {str(cg): (2 * GIB, 2 * GIB)}


@pytest.mark.parametrize("index", ["garbage", "1"], ids=["unreadable", "another-gpu"])
def test_a_pod_cannot_lift_its_own_limit_by_editing_its_gpu_index(
    plugin_limiting: Callable[..., tuple[Any, Path]], api: Client, index: str
) -> None:
    running, cg = plugin_limiting("sly", gpus=2)
    backend = running.backend
    api.patch_pod("default", "sly", {"metadata": {"annotations": {protocol.ANN_IDX: index}}})
    wait_cached(running, "sly", lambda p: p.gpu_index != 0)
    running.plugin.node.enforcer.reconcile()
    assert backend.limits(0) == {str(cg): (2 * GIB, 2 * GIB)}  # the GPU it runs on keeps its limit
    api.delete(types.PODS, "sly", "default")  # a pod that ends still gives its limits back
    wait_for(lambda: backend.limits(0) == {} and backend.limits(1) == {})


class CountedSource:
    """The plugin's own pod cache, counting how often it is read (the seam the node agent reads through)."""

    def __init__(self, inner: PodSource) -> None:
        self.inner = inner
        self.reads = 0

    def pods(self) -> list[PodRecord]:
        self.reads += 1
        return self.inner.pods()

    def refresh(self) -> list[PodRecord]:
        return self.inner.refresh()

    def arrivals(self) -> Mapping[str, int]:
        return self.inner.arrivals()

    def synced(self) -> bool:
        return self.inner.synced()


def test_an_enforcement_pass_reads_the_nodes_pods_once_and_lists_nothing(
    plugin_limiting: Callable[..., tuple[Any, Path]], api: Client, sandbox: Sandbox, tree: Path
) -> None:
    running, cg = plugin_limiting("kept")
    backend = running.backend
    counted = CountedSource(running.plugin.cluster.source)
    agent = NodeAgent(NODE, backend, running.plugin.advertisement, counted, running.plugin.unit.bytes,
                      lambda: None, enforce="hard", layout=cgroups.Layout.mounted(str(tree), None), interval=1,
                      port=None)
    # an edit of its GPU index drops the pod's share: only its being alive, from the same read, keeps its limit
    api.patch_pod("default", "kept", {"metadata": {"annotations": {protocol.ANN_IDX: "garbage"}}})
    wait_cached(running, "kept", lambda p: p.gpu_index != 0)
    sandbox.clear_requests()
    passes = 3
    for _ in range(passes):
        agent.enforcer.reconcile()
    assert counted.reads == passes, "each pass reads the node's pods once"
    # the pod cache answers: a pass sends the API server no list of pods at all
    assert [r for r in sandbox.requests if r.resource == "pods" and r.verb == "list"] == []
    assert backend.limits(0) == {str(cg): (2 * GIB, 2 * GIB)}, "the pod, alive, keeps its limit"


def test_a_plugin_restarted_while_pods_cannot_be_listed_keeps_the_limits_in_force(
    plugin_limiting: Callable[..., tuple[Any, Path]], sandbox: Sandbox
) -> None:
    first, cg = plugin_limiting("running")
    backend = first.backend
    first.shutdown()
    # the plugin comes back while the API server refuses to list pods: nothing says the pod ended
    refused = sandbox.inject(method="GET", path=r"/pods\?", status=500)
    second = type(first)(dataclasses.replace(first.cfg, sync_timeout=0.2), backend).start()
    try:
        wait_for(lambda: refused.hits >= 1 and second.plugin.node.enforcer.passes >= 1)
        second.plugin.node.enforcer.reconcile()
        assert backend.limits(0) == {str(cg): (2 * GIB, 2 * GIB)}, "an unknown list lifted a limit"
        sandbox.clear_faults()
        assert second.plugin.cluster.wait_synced(20)
        second.plugin.node.enforcer.reconcile()
        assert backend.limits(0) == {str(cg): (2 * GIB, 2 * GIB)}
    finally:
        second.shutdown()
