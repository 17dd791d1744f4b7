"""The public gpushare tutorials, replayed through the real kubectl against ``sandbox --stack``."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.builders import node_object

from .conftest import StackCluster

pytestmark = pytest.mark.integration

ONE_T4 = "nodes: [{name: gpu-node, gpus: 1, gpuMemory: 14, gpushare: false}]"
EIGHT_GPUS = "nodes: [{name: gpu-node, gpus: 8, gpuMemory: 23, gpushare: false}]"


def test_binpack_tutorial_three_pods_share_one_14gib_gpu(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)
    assert cluster.node_gpu_mem("gpu-node") is None  # no plugin, no gpu-mem, until the node is labelled
    cluster.label("gpu-node")
    names = ["binpack-1", "binpack-2", "binpack-3"]
    cluster.create_pods(names, 1)
    cluster.wait_running(names)
    pods = json.loads(cluster.kubectl("get", "pods", "-o", "json").stdout)["items"]
    for pod in pods:
        assert pod["spec"]["nodeName"] == "gpu-node"
        assert {"type": "Ready", "status": "True"}.items() <= next(
            c for c in pod["status"]["conditions"] if c["type"] == "Ready").items()
    out = cluster.kubectl("inspect", "gpushare").stdout
    assert "3/14" in out and "3/14 (21%)" in out

    # (d) deleting pods frees their memory.
    cluster.kubectl("delete", "pod", "binpack-1", "binpack-2")
    assert "1/14 (7%)" in cluster.kubectl("inspect", "gpushare").stdout


def test_three_3gib_pods_pack_on_one_of_eight_gpus(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(EIGHT_GPUS)
    cluster.label("gpu-node")
    names = ["app-0", "app-1", "app-2"]
    cluster.create_pods(names, 3)
    cluster.wait_running(names)
    out = cluster.kubectl("inspect", "gpushare").stdout
    assert "9/23" in out and "9/184 (4%)" in out


def test_a_pod_no_single_gpu_fits_stays_pending_with_the_extenders_reason(
    stack_cluster: Callable[[str], StackCluster],
) -> None:
    cluster = stack_cluster(EIGHT_GPUS)
    cluster.label("gpu-node")
    cluster.create_pods(["too-big"], 30)  # 30 GiB: the node has 184 in all, but no GPU has more than 23
    cluster.create_pods(["fits"], 20)  # scheduling goes on for the others
    cluster.wait_running(["fits"])

    def described() -> str:
        return cluster.kubectl("describe", "pod", "too-big").stdout

    cluster.wait(lambda: "FailedScheduling" in described(), "a FailedScheduling event")
    out = described()
    assert "Pending" in out.split("\nStatus:", 1)[1].splitlines()[0]
    reason = next(line for line in out.splitlines() if "FailedScheduling" in line)
    assert f"0/1 nodes are available: 1 {protocol.REASON_INSUFFICIENT}." in reason, reason
    assert cluster.phases()["too-big"] == "Pending"


def test_removing_the_label_stops_the_nodes_plugin(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)
    cluster.label("gpu-node")
    agent = cluster.stack.nodes.agents["gpu-node"]
    cluster.kubectl("label", "node", "gpu-node", "gpushare-")
    cluster.wait(lambda: cluster.node_gpu_mem("gpu-node") is None, "gpu-mem to go")
    node = json.loads(cluster.kubectl("get", "node", "gpu-node", "-o", "json").stdout)
    assert "aliyun.com/gpu-mem" not in node["status"]["capacity"]
    assert "aliyun.com/gpu-count" not in node["status"]["capacity"]
    assert "gpu-node" not in cluster.stack.nodes.agents
    assert not agent.thread.is_alive()
    # A GPU pod bound by hand to the node kubelet has no plugin for fails admission, as on kubelet.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "direct"},
           "spec": {"nodeName": "gpu-node", "containers": [
               {"name": "c", "image": "x", "resources": {"limits": {"aliyun.com/gpu-mem": "1"}}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
    cluster.wait(lambda: cluster.phases().get("direct") == "Failed", "the pod to fail admission")
    assert "UnexpectedAdmissionError" in cluster.kubectl("describe", "pod", "direct").stdout


def test_selectors_taints_and_other_schedulers_are_honoured(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(
        "nodes: [{name: tainted, gpus: 1, gpuMemory: 16, taints: [{key: dedicated, value: ml}]},"
        " {name: plain, gpus: 1, gpuMemory: 16, labels: {zone: a}}]"
    )
    cluster.wait(lambda: cluster.node_gpu_mem("tainted") == "16" and cluster.node_gpu_mem("plain") == "16",
                 "both plugins")
    limits = {"limits": {"aliyun.com/gpu-mem": "2"}}
    pods = [
        {"metadata": {"name": "tolerant"}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "tainted"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "x", "resources": limits}]}},
        {"metadata": {"name": "intolerant"}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "tainted"},
            "containers": [{"name": "c", "image": "x", "resources": limits}]}},
        {"metadata": {"name": "elsewhere"}, "spec": {
            "schedulerName": "my-scheduler", "containers": [{"name": "c", "image": "x", "resources": limits}]}},
        {"metadata": {"name": "cpu-only"}, "spec": {
            "nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "x"}]}},
    ]
    cluster.kubectl("create", "-f", "-", input="\n".join(json.dumps({"apiVersion": "v1", "kind": "Pod", **p})
                                                         for p in pods))
    cluster.wait_running(["tolerant", "cpu-only"])
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in cluster.sandbox.objects("pods")}
    assert placed["tolerant"] == "tainted" and placed["cpu-only"] == "plain"
    cluster.wait(lambda: "FailedScheduling" in cluster.kubectl("describe", "pod", "intolerant").stdout,
                 "intolerant to fail scheduling")
    assert "untolerated taint {dedicated: ml}" in cluster.kubectl("describe", "pod", "intolerant").stdout
    assert placed["elsewhere"] is None and "FailedScheduling" not in cluster.kubectl(
        "describe", "pod", "elsewhere").stdout


def test_a_deployment_of_three_replicas(stack_cluster: Callable[[str], StackCluster]) -> None:
    """The tutorial verbatim (integer quantities, as tutorials write them)."""
    cluster = stack_cluster(ONE_T4)
    cluster.label("gpu-node")
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "binpack-1"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "binpack-1"}},
                 "template": {"metadata": {"labels": {"app": "binpack-1"}},
                              "spec": {"containers": [{"name": "binpack-1", "image": "cheyang/gpu-player:v2",
                                                       "resources": {"limits": {"aliyun.com/gpu-mem": 1}}}]}}},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(deployment))
    cluster.wait(lambda: sorted(cluster.phases().values()) == ["Running"] * 3, "3 replicas Running", 60)
    assert "successfully rolled out" in cluster.kubectl(
        "rollout", "status", "deployment/binpack-1", "--timeout=60s").stdout
    out = cluster.kubectl("inspect", "gpushare").stdout
    assert "3/14" in out and "3/14 (21%)" in out


def test_a_statefulset_packs_on_one_gpu_and_scaling_down_frees_memory(
    stack_cluster: Callable[[str], StackCluster],
) -> None:
    """(b) and (d) as the tutorials write them: a Parallel StatefulSet of three 3 GiB replicas, then scale down."""
    cluster = stack_cluster(EIGHT_GPUS)
    cluster.label("gpu-node")
    statefulset = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "app"},
        "spec": {"replicas": 3, "serviceName": "app", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}},
                              "spec": {"containers": [{"name": "app", "image": "cheyang/gpu-player:v2",
                                                       "resources": {"limits": {"aliyun.com/gpu-mem": 3}}}]}}},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(statefulset))
    cluster.wait(lambda: sorted(cluster.phases().items()) == [(f"app-{i}", "Running") for i in range(3)],
                 "app-0..2 Running", 60)
    out = cluster.kubectl("inspect", "gpushare").stdout
    assert "9/23" in out and "9/184 (4%)" in out, out

    cluster.kubectl("scale", "statefulset/app", "--replicas=1")
    cluster.wait(lambda: list(cluster.phases()) == ["app-0"], "scaled down to app-0", 60)
    out = cluster.kubectl("inspect", "gpushare").stdout
    assert "3/23" in out and "3/184 (1%)" in out, out


def test_a_pending_pod_is_retried_when_a_node_is_labelled(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)
    cluster.create_pods(["early"], 2)
    cluster.wait(lambda: "FailedScheduling" in cluster.kubectl("describe", "pod", "early").stdout,
                 "FailedScheduling before any node has a device plugin")
    cluster.label("gpu-node")
    cluster.wait_running(["early"])


def test_a_malformed_pod_does_not_stop_scheduling(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)
    cluster.label("gpu-node")
    bad = {"metadata": {"name": "bad", "namespace": "default", "uid": "bad-uid"},
           "spec": {"nodeSelector": "not-a-map", "containers": [
               {"name": "c", "image": "x", "resources": {"limits": {"aliyun.com/gpu-mem": "lots"}}}]},
           "status": {"phase": "Pending"}}
    cluster.sandbox.load([{"apiVersion": "v1", "kind": "Pod", **bad}])  # past the API's validation
    cluster.create_pods(["good"], 1)
    cluster.wait_running(["good"])
    assert cluster.phases()["bad"] == "Pending"


def test_gpu_resources_left_on_an_unlabelled_node_are_removed(
    stack_cluster: Callable[[str], StackCluster],
) -> None:
    """As after a restart from --state: only a running device plugin publishes gpu-mem and gpu-count."""
    cluster = stack_cluster(ONE_T4)
    stale = node_object("stale-node", [16, 16], ip="10.0.0.9", gpushare=False)
    cluster.sandbox.load([stale])
    cluster.wait(lambda: cluster.node_gpu_mem("stale-node") is None, "stale gpu-mem to be removed")
    node = cluster.sandbox.get("nodes", None, "stale-node") or {}
    assert "aliyun.com/gpu-count" not in node["status"]["capacity"]
    cluster.label("stale-node")  # its hardware comes from its nvidia.com/gpu.* labels
    assert cluster.node_gpu_mem("stale-node") == "32"
