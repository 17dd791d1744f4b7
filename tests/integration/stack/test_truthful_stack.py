"""The stack stands in for a real cluster honestly: NodeResourcesFit, Failed pods replaced, a clean seed."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import holds_for, wait_for

from kubectl_gpushare.cli.stack import StackAttachment, running_stack
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

from .conftest import Kubectl, StackCluster

pytestmark = pytest.mark.integration

ONE_T4 = "nodes: [{name: gpu-node, gpus: 1, gpuMemory: 14, gpushare: false}]"


def _pod(name: str, limits: dict[str, str]) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": limits}}]},
    })


def _failed_scheduling(cluster: StackCluster, name: str) -> str:
    def message() -> str:
        pod = cluster.sandbox.get("pods", "default", name) or {}
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message", ""))
        return ""

    cluster.wait(lambda: bool(message()), f"{name} marked unschedulable")
    return message()


def test_a_pod_asking_a_resource_no_node_advertises_stays_pending(
    stack_cluster: Callable[[str], StackCluster],
) -> None:
    cluster = stack_cluster(ONE_T4)
    cluster.label("gpu-node")
    cluster.kubectl("create", "-f", "-", input=_pod("cuda", {"nvidia.com/gpu": "1"}))
    cluster.kubectl("create", "-f", "-", input=_pod("plain", {"cpu": "1", "memory": "1Gi"}))
    cluster.wait_running(["plain"])  # scheduling goes on for pods that fit
    assert _failed_scheduling(cluster, "cuda") == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    events = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=cuda", "-o", "json").stdout
    reasons = {(e["reason"], e["message"]) for e in json.loads(events)["items"]}
    assert ("FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.") in reasons
    assert cluster.phases()["cuda"] == "Pending"
    assert not (cluster.sandbox.get("pods", "default", "cuda") or {})["spec"].get("nodeName")


def test_cpu_and_memory_over_requests_stay_pending(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)  # a spec node has 96 CPUs and about 1 TiB of memory
    cluster.label("gpu-node")
    cluster.kubectl("create", "-f", "-", input=_pod("cpu-hog", {"cpu": "97"}))
    cluster.kubectl("create", "-f", "-", input=_pod("memory-hog", {"memory": "2Ti"}))
    cluster.kubectl("create", "-f", "-", input=_pod("both", {"cpu": "200", "memory": "2Ti"}))
    assert _failed_scheduling(cluster, "cpu-hog") == "0/1 nodes are available: 1 Insufficient cpu."
    assert _failed_scheduling(cluster, "memory-hog") == "0/1 nodes are available: 1 Insufficient memory."
    assert _failed_scheduling(cluster, "both") == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")
    # What running pods request counts: two 60-CPU pods do not both fit on 96 CPUs.
    cluster.kubectl("create", "-f", "-", input=_pod("half-1", {"cpu": "60"}))
    cluster.wait_running(["half-1"])
    cluster.kubectl("create", "-f", "-", input=_pod("half-2", {"cpu": "60"}))
    assert _failed_scheduling(cluster, "half-2") == "0/1 nodes are available: 1 Insufficient cpu."
    assert {n: p for n, p in cluster.phases().items() if p != "Running"} == {
        "cpu-hog": "Pending", "memory-hog": "Pending", "both": "Pending", "half-2": "Pending"}


def _fail(cluster: StackCluster, name: str) -> None:
    """What kubelet writes when admission fails (the device plugin refused Allocate)."""
    body = {"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError",
                       "message": "Allocate failed due to a test, which is unexpected"}}
    cluster.kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p", json.dumps(body))


def _workload(kind: str, name: str) -> str:
    spec = {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "main", "image": "cheyang/gpu-player:v2",
                                                  "resources": {"limits": {"aliyun.com/gpu-mem": "2"}}}]}}}
    if kind == "StatefulSet":
        spec.update(serviceName=name, podManagementPolicy="Parallel")
    return json.dumps({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec})


def _pods_of(cluster: StackCluster, prefix: str) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["name"]: (p["metadata"]["uid"], (p.get("status") or {}).get("phase", ""))
            for p in cluster.sandbox.objects("pods") if p["metadata"]["name"].startswith(prefix)}


def test_a_failed_statefulset_pod_is_recreated_under_its_name(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)
    cluster.label("gpu-node")
    cluster.kubectl("apply", "-f", "-", input=_workload("StatefulSet", "db"))
    cluster.wait_running(["db-0", "db-1"], 60)
    old_uid = _pods_of(cluster, "db-")["db-1"][0]
    _fail(cluster, "db-1")
    cluster.wait(lambda: _pods_of(cluster, "db-").get("db-1", ("", ""))[0] not in ("", old_uid),
                 "db-1 recreated", 60)
    cluster.wait_running(["db-0", "db-1"], 60)
    assert set(_pods_of(cluster, "db-")) == {"db-0", "db-1"}


def test_a_failed_deployment_pod_is_replaced(stack_cluster: Callable[[str], StackCluster]) -> None:
    cluster = stack_cluster(ONE_T4)
    cluster.label("gpu-node")
    cluster.kubectl("apply", "-f", "-", input=_workload("Deployment", "web"))
    cluster.wait(lambda: [p for _, p in _pods_of(cluster, "web-").values()] == ["Running"] * 2, "2 Running", 60)
    victim = sorted(_pods_of(cluster, "web-"))[0]
    _fail(cluster, victim)

    def replaced() -> bool:
        pods = _pods_of(cluster, "web-")
        return pods[victim][1] == "Failed" and sorted(p for n, (_, p) in pods.items() if n != victim) == [
            "Running"] * 2

    cluster.wait(replaced, "a replacement Running", 60)


def test_the_default_seed_settles_with_no_failed_pod(
    sandbox: Sandbox, kubeconfig: Path, kubectl: Kubectl, caplog: pytest.LogCaptureFixture,
) -> None:
    """``sandbox --stack`` with its defaults: every pod Running, or Pending with the scheduler's reason; no warning."""
    caplog.set_level(logging.INFO, logger="kubectl_gpushare")
    attachment = StackAttachment()
    seed = attachment.prepare(generate_cluster(4, 8, 12, 0))
    already_failed = {p["metadata"]["name"] for p in seed
                      if p.get("kind") == "Pod" and p["status"].get("phase") == "Failed"}
    running_at_start = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in seed
                        if p.get("kind") == "Pod" and p["status"].get("phase") == "Running"}
    assert running_at_start
    sandbox.load(seed)
    with running_stack(sandbox, kubeconfig, attachment.hardware) as stack:

        def unsettled() -> list[str]:
            result = []
            for pod in sandbox.objects("pods"):
                status = pod.get("status") or {}
                phase = status.get("phase")
                scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
                stated = phase == "Pending" and scheduled.get("status") == "False" and scheduled.get("message")
                if phase not in ("Running", "Succeeded", "Failed") and not stated:
                    result.append(pod["metadata"]["name"])
            return result

        wait_for(lambda: not unsettled(), 30, lambda: f"every pod to settle; unsettled: {unsettled()}")

        def failed() -> dict[str, str]:
            return {p["metadata"]["name"]: p["status"].get("reason") for p in sandbox.objects("pods")
                    if p["status"].get("phase") == "Failed" and p["metadata"]["name"] not in already_failed}

        holds_for(lambda: not failed(), 1.0, lambda: f"no pod failed by a late Allocate: {failed()}")
        out = kubectl("get", "pods", "-A").stdout
        assert "UnexpectedAdmissionError" not in out, out
        # doctor sees the stack as a real install would show it: no extender-missing, no device-plugin-not-running.
        report = json.loads(kubectl("gpushare", "doctor", "-o", "json", check=False).stdout)
        assert report["findings"] == []
        assert report["summary"] == {"errors": 0, "warnings": 0}
        system = json.loads(kubectl("get", "pods", "-n", "kube-system", "-o", "json").stdout)["items"]
        plugins = {p["spec"]["nodeName"]: p for p in system
                   if p["metadata"]["labels"].get("component") == "gpushare-device-plugin"}
        labelled = sorted(n["metadata"]["name"] for n in sandbox.objects("nodes")
                          if n["metadata"].get("labels", {}).get("gpushare") == "true")
        assert sorted(plugins) == labelled and labelled
        for node, pod in plugins.items():
            assert pod["metadata"]["name"] == f"gpushare-device-plugin-{node}"
            assert pod["status"]["phase"] == "Running"
            assert {"name": "usage", "containerPort": 9445} in [
                {k: port[k] for k in ("name", "containerPort")} for port in pod["spec"]["containers"][0]["ports"]]
            assert stack.device_plugin_pod(node) == ("kube-system", pod["metadata"]["name"])
        for pod in sandbox.objects("pods"):  # every running GPU pod holds devices in its kubelet's book
            if pod["status"].get("phase") == "Running" and pod["metadata"].get("annotations", {}).get(
                    "ALIYUN_COM_GPU_MEM_IDX"):
                assert pod["metadata"]["uid"] in stack.nodes.agents[pod["spec"]["nodeName"]].kubelet.allocations
        lease = json.loads(kubectl("get", "lease", "-n", "kube-system", "gpushare-schd-extender", "-o", "json").stdout)
        assert lease["spec"]["holderIdentity"] == "gpushare-schd-extender-stack"
        kubectl("get", "service", "-n", "kube-system", "gpushare-schd-extender")
    noise = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert noise == []
    served = [r.getMessage() for r in caplog.records if r.getMessage().startswith("allocated GPU")]
    assert served and all(" to pod " in line for line in served)  # which pod each Allocate served, at info
    # Kubelet restores the devices of pods that were running already: no Allocate for them.
    pods = {line.split(" to pod ", 1)[1].split(" ", 1)[0] for line in served}
    assert pods and not pods & running_at_start


def test_each_pod_gets_the_gpu_the_extender_chose_for_it(stack_cluster: Callable[[str], StackCluster]) -> None:
    """Kubelet admits one pod at a time, in order: no Allocate serves one pod with another's GPU.

    Three 20 GiB pods on 23 GiB GPUs go on three GPUs; a kubelet that admitted them concurrently let the
    device plugin hand a pod the assignment of another of the same size (and fail the last one).
    """
    from kubectl_gpushare import protocol

    cluster = stack_cluster("nodes: [{name: gpu-node, gpus: 4, gpuMemory: 23, gpushare: false}]")
    cluster.label("gpu-node")
    names = ["wide-0", "wide-1", "wide-2"]
    cluster.create_pods(names, 20)
    cluster.wait_running(names)
    chosen = {}
    for name in names:
        pod = cluster.sandbox.get("pods", "default", name) or {}
        annotations = pod["metadata"]["annotations"]
        assert annotations[protocol.ANN_ASSIGNED] == protocol.ASSIGNED_TRUE
        env = next(iter(cluster.stack.nodes.envs[pod["metadata"]["uid"]].values()))
        assert env[protocol.ENV_IDX] == annotations[protocol.ANN_IDX], name
        chosen[name] = annotations[protocol.ANN_IDX]
    assert len(set(chosen.values())) == 3
