"""Deployments, ReplicaSets, StatefulSets and Jobs through the real kubectl: pods, scale, status, cascade."""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sandbox_http import send
from waiting import holds_for, wait_for

from kubectl_gpushare.sandbox.controller import pod_ready
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
Kubectl = Callable[..., subprocess.CompletedProcess[str]]

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: binpack-1, labels: {app: binpack-1}}
spec:
  replicas: 3
  selector: {matchLabels: {app: binpack-1}}
  template:
    metadata: {labels: {app: binpack-1}}
    spec:
      containers:
      - name: binpack-1
        image: cheyang/gpu-player:v2
        resources: {limits: {aliyun.com/gpu-mem: 1}}
"""

STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: binpack-3}
spec:
  serviceName: binpack-3
  podManagementPolicy: POLICY
  replicas: 3
  selector: {matchLabels: {app: binpack-3}}
  template:
    metadata: {labels: {app: binpack-3}}
    spec:
      containers:
      - {name: binpack-3, image: cheyang/gpu-player:v2, resources: {limits: {aliyun.com/gpu-mem: 3}}}
"""

JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
"""


def pods(sandbox: Sandbox, prefix: str) -> list[dict[str, Any]]:
    return [p for p in sandbox.objects("pods") if p["metadata"]["name"].startswith(prefix)]


def run_pods(kubectl: Kubectl, sandbox: Sandbox, prefix: str, phase: str = "Running") -> int:
    """Play the kubelet: report every pending pod of ``prefix`` Running and Ready (or another phase)."""
    count = 0
    for pod in pods(sandbox, prefix):
        if pod_ready(pod) or pod["status"].get("phase") == phase:
            continue
        status = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False"}],
        }
        name = pod["metadata"]["name"]
        kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))
        count += 1
    return count


def test_deployment_scales_reports_status_and_cascades(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=DEPLOYMENT)
    created = wait_for(lambda: len(pods(sandbox, "binpack-1-")) == 3 and pods(sandbox, "binpack-1-"))
    rs = sandbox.objects("replicasets")
    assert len(rs) == 1 and rs[0]["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    for pod in created:
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet" and owner["uid"] == rs[0]["metadata"]["uid"] and owner["controller"]
        assert pod["metadata"]["labels"]["app"] == "binpack-1" and "pod-template-hash" in pod["metadata"]["labels"]
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"aliyun.com/gpu-mem": "1"}
    pending = kubectl("rollout", "status", "deployment/binpack-1", "--timeout=1s", check=False)
    assert pending.returncode != 0
    run_pods(kubectl, sandbox, "binpack-1-")
    assert "successfully rolled out" in kubectl("rollout", "status", "deployment/binpack-1", "--timeout=20s").stdout
    kubectl("wait", "--for=condition=Available", "deployment/binpack-1", "--timeout=20s")
    table = kubectl("get", "deployments").stdout.splitlines()
    assert table[0].split()[:2] == ["NAME", "READY"] and table[1].split()[:2] == ["binpack-1", "3/3"]

    kubectl("scale", "deployment/binpack-1", "--replicas=1")
    wait_for(lambda: len(pods(sandbox, "binpack-1-")) == 1)
    deploy = json.loads(kubectl("get", "deployment", "binpack-1", "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 1
    assert wait_for(
        lambda: (sandbox.get("deployments", "default", "binpack-1") or {}).get("status", {}).get("replicas") == 1
    )

    everything = kubectl("get", "all").stdout
    assert "deployment.apps/binpack-1" in everything and "replicaset.apps/binpack-1-" in everything

    kubectl("set", "image", "deployment/binpack-1", "binpack-1=cheyang/gpu-player:v3")
    wait_for(lambda: len(sandbox.objects("replicasets")) == 2)
    newest = wait_for(
        lambda: [p for p in pods(sandbox, "binpack-1-") if p["spec"]["containers"][0]["image"].endswith(":v3")]
    )
    wait_for(lambda: len(pods(sandbox, "binpack-1-")) == 1)
    run_pods(kubectl, sandbox, "binpack-1-")
    assert "successfully rolled out" in kubectl("rollout", "status", "deployment/binpack-1", "--timeout=20s").stdout
    assert [p["metadata"]["name"] for p in pods(sandbox, "binpack-1-")] == [newest[0]["metadata"]["name"]]
    deploy = json.loads(kubectl("get", "deployment", "binpack-1", "-o", "json").stdout)
    assert deploy["metadata"]["generation"] == 3 and deploy["status"]["observedGeneration"] == 3

    kubectl("delete", "deployment", "binpack-1")
    wait_for(lambda: not pods(sandbox, "binpack-1-") and not sandbox.objects("replicasets"))


@pytest.mark.parametrize("policy", ["Parallel", "OrderedReady"])
def test_statefulset_pods_are_ordinal_and_scale_down_from_the_top(
    sandbox: Sandbox, kubectl: Kubectl, policy: str
) -> None:
    kubectl("apply", "-f", "-", input=STATEFULSET.replace("POLICY", policy))
    names = {"binpack-3-0", "binpack-3-1", "binpack-3-2"}
    if policy == "OrderedReady":  # one at a time, each after the previous one is Ready
        wait_for(lambda: {p["metadata"]["name"] for p in pods(sandbox, "binpack-3-")} == {"binpack-3-0"})
        for _ in range(3):
            wait_for(lambda: run_pods(kubectl, sandbox, "binpack-3-") or len(pods(sandbox, "binpack-3-")) == 3)
    wait_for(lambda: {p["metadata"]["name"] for p in pods(sandbox, "binpack-3-")} == names)
    run_pods(kubectl, sandbox, "binpack-3-")
    kubectl("rollout", "status", "statefulset/binpack-3", "--timeout=20s")
    assert kubectl("get", "sts", "binpack-3", "-o", "jsonpath={.status.readyReplicas}").stdout == "3"
    kubectl("scale", "statefulset/binpack-3", "--replicas=1")
    wait_for(lambda: {p["metadata"]["name"] for p in pods(sandbox, "binpack-3-")} == {"binpack-3-0"})
    kubectl("delete", "statefulset", "binpack-3")
    wait_for(lambda: not pods(sandbox, "binpack-3-"))


def test_job_completes_when_its_pod_succeeds(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=JOB)
    wait_for(lambda: len(pods(sandbox, "once-")) == 1)
    run_pods(kubectl, sandbox, "once-", phase="Succeeded")
    kubectl("wait", "--for=condition=complete", "job/once", "--timeout=20s")
    assert len(pods(sandbox, "once-")) == 1


def test_invalid_workloads_are_refused_and_nothing_runs_without_them(sandbox: Sandbox, kubectl: Kubectl) -> None:
    bad = DEPLOYMENT.replace("matchLabels: {app: binpack-1}", "matchLabels: {app: other}")
    result = kubectl("apply", "-f", "-", input=bad, check=False)
    assert result.returncode == 1 and "selector` does not match template `labels`" in result.stderr
    no_image = kubectl(
        "apply", "-f", "-", input=DEPLOYMENT.replace("image: cheyang/gpu-player:v2", "image: ''"), check=False
    )
    assert no_image.returncode == 1 and "spec.template.spec.containers[0].image: Required value" in no_image.stderr
    assert sandbox.objects("deployments") == [] and sandbox.objects("pods") == []


def test_a_hostile_loaded_workload_is_warned_about_and_the_others_still_run(
    sandbox: Sandbox, kubectl: Kubectl, caplog: pytest.LogCaptureFixture
) -> None:
    broken = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "broken", "namespace": "default"},
        "spec": {"replicas": "many", "template": "not a template"},
    }
    sandbox.load([broken])
    kubectl("apply", "-f", "-", input=DEPLOYMENT)
    wait_for(lambda: len(pods(sandbox, "binpack-1-")) == 3)
    assert not pods(sandbox, "broken")
    assert [r for r in caplog.records if "cannot reconcile replicasets/default/broken" in r.getMessage()]


def test_scale_and_rollout_status_with_both_kubectls(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    for number, binary in enumerate(kubectl_binaries):
        kubectl = functools.partial(_kubectl, binary, {**kube_env, "KUBECACHEDIR": str(tmp_path / f"cache-{number}")})
        name = f"d{number}"
        kubectl("apply", "-f", "-", input=DEPLOYMENT.replace("binpack-1", name))
        wait_for(lambda name=name: len(pods(sandbox, f"{name}-")) == 3)
        run_pods(kubectl, sandbox, f"{name}-")
        kubectl("rollout", "status", f"deployment/{name}", "--timeout=20s")
        kubectl("scale", f"deployment/{name}", "--replicas=5")
        wait_for(lambda name=name: len(pods(sandbox, f"{name}-")) == 5)
        run_pods(kubectl, sandbox, f"{name}-")
        kubectl("rollout", "status", f"deployment/{name}", "--timeout=20s")
        row = kubectl("get", "deployment", name, "--no-headers").stdout.split()
        assert row[:4] == [name, "5/5", "5", "5"]
        kubectl("delete", "deployment", name)
        wait_for(lambda name=name: not pods(sandbox, f"{name}-"))


def _kubectl(
    binary: str, env: dict[str, str], *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([binary, *args], env=env, input=input, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result


def test_a_job_whose_pods_fail_stops_at_its_backoff_limit(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=JOB.replace("spec:\n  template:", "spec:\n  backoffLimit: 1\n  template:", 1))
    for attempt in range(1, 3):
        wait_for(lambda attempt=attempt: len(pods(sandbox, "once-")) == attempt)
        run_pods(kubectl, sandbox, "once-", phase="Failed")
    kubectl("wait", "--for=condition=Failed", "job/once", "--timeout=20s")
    # Would a third pod appear? (the controller reacts within milliseconds)
    holds_for(lambda: len(pods(sandbox, "once-")) == 2, 0.3, "no third pod after the backoff limit")


def test_the_garbage_collector_follows_an_owner_chain_deeper_than_python_recursion(sandbox: Sandbox) -> None:
    """Any client may write a chain of ReplicaSets each controlled by the one before; deleting its head
    deletes every link, as kube-controller-manager's garbage collector walks its graph without a depth bound."""
    template = {"metadata": {"labels": {"app": "chain"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    chain: list[dict[str, Any]] = []
    for i in range(1100):  # past CPython's default recursion limit of 1000
        meta: dict[str, Any] = {"name": f"link-{i}", "namespace": "default", "uid": f"uid-{i}"}
        if i:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"link-{i - 1}",
                                        "uid": f"uid-{i - 1}", "controller": True}]
        chain.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
                      "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "chain"}}, "template": template}})
    sandbox.load(chain)
    status, _ = send(sandbox, "DELETE", "/apis/apps/v1/namespaces/default/replicasets/link-0")
    assert status == 200
    wait_for(lambda: sandbox.get("replicasets", "default", "link-1099") is None, what="the chain's last link gone")
    status, left = send(sandbox, "GET", "/apis/apps/v1/namespaces/default/replicasets")
    assert status == 200 and left["items"] == []
