"""The `kubernetes` Python client against the sandbox, unchanged."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_for

from kubectl_gpushare.sandbox.builders import pod_object
from kubectl_gpushare.sandbox.rbac import rules_from_requests, uncovered_requests
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def core(api_client: client.ApiClient, sandbox: Sandbox) -> client.CoreV1Api:
    sandbox.load(generate_cluster(nodes=3, gpus_per_node=2, pods=30, seed=5, gpu_memory=16, namespaces=2))
    return client.CoreV1Api(api_client)


def test_list_with_selectors_and_pagination(core: client.CoreV1Api) -> None:
    nodes = core.list_node(label_selector="gpushare=true,nvidia.com/gpu.count in (2)")
    assert [n.metadata.name for n in nodes.items] == ["gpu-node-000", "gpu-node-001", "gpu-node-002"]
    assert nodes.items[0].status.allocatable["aliyun.com/gpu-mem"] == "32"
    on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-001,status.phase!=Succeeded")
    assert on_node.items and all(p.spec.node_name == "gpu-node-001" for p in on_node.items)
    assert all(p.status.phase != "Succeeded" for p in on_node.items)
    names: list[str] = []
    token = None
    while True:
        page = core.list_pod_for_all_namespaces(limit=7, _continue=token)
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert len(names) == 30 == len(set(names))
    with pytest.raises(ApiException) as caught:
        core.list_pod_for_all_namespaces(label_selector="a in (b")
    assert caught.value.status == 400


def test_watch_with_label_selector_from_resource_version(core: client.CoreV1Api, sandbox: Sandbox) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        stream = watch.Watch().stream(
            core.list_namespaced_pod, "default", label_selector="team=a", resource_version=start, timeout_seconds=3
        )
        for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 3:
                break

    thread = threading.Thread(target=consume)
    thread.start()
    wait_for(sandbox.open_watches, what="the watch to be served")
    core.create_namespaced_pod("default", pod_object("watched", "default", [2], labels={"team": "a"}))
    core.create_namespaced_pod("default", pod_object("ignored", "default", [2], labels={"team": "b"}))
    core.patch_namespaced_pod("watched", "default", {"metadata": {"annotations": {"x": "1"}}})
    core.delete_namespaced_pod("watched", "default")
    thread.join(timeout=10)
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")]


def test_three_patch_types(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_object("target", "default", [4]))
    smp = core.patch_namespaced_pod(
        "target", "default", {"spec": {"containers": [{"name": "main", "image": "cuda:next"}]}}
    )
    assert smp.spec.containers[0].image == "cuda:next"
    assert smp.spec.containers[0].resources.limits == {"aliyun.com/gpu-mem": "4"}
    jp = core.patch_namespaced_pod(
        "target", "default", [{"op": "add", "path": "/metadata/annotations", "value": {"ALIYUN_COM_GPU_MEM_IDX": "0"}}]
    )
    assert jp.metadata.annotations == {"ALIYUN_COM_GPU_MEM_IDX": "0"}
    merged = core.patch_namespaced_pod(
        "target",
        "default",
        {"metadata": {"annotations": {"ALIYUN_COM_GPU_MEM_IDX": None, "b": "2"}}},
        _content_type="application/merge-patch+json",
    )
    assert merged.metadata.annotations == {"b": "2"}
    status = core.patch_node_status("gpu-node-000", {"status": {"allocatable": {"aliyun.com/gpu-count": "1"}}})
    assert status.status.allocatable["aliyun.com/gpu-count"] == "1"
    assert status.status.allocatable["aliyun.com/gpu-mem"] == "32"


def test_binding_and_conflict(core: client.CoreV1Api, sandbox: Sandbox) -> None:
    pod = core.create_namespaced_pod("default", pod_object("to-bind", "default", [4]))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="to-bind", uid=pod.metadata.uid),
        target=client.V1ObjectReference(kind="Node", name="gpu-node-002"),
    )
    response = core.create_namespaced_pod_binding("to-bind", "default", body, _preload_content=False)
    assert response.status == 201 and json.loads(response.data)["status"] == "Success"
    assert core.read_namespaced_pod("to-bind", "default").spec.node_name == "gpu-node-002"
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_binding("default", body, _preload_content=False)
    assert caught.value.status == 409
    assert [r.subresource for r in sandbox.requests if r.verb == "create" and r.resource == "pods"][-1] == "binding"
    rules = rules_from_requests(sandbox.requests)
    assert {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]} in rules
    assert uncovered_requests(sandbox.requests, rules) == []


def test_events_with_generate_name(core: client.CoreV1Api) -> None:
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="train.", namespace="default"),
        involved_object=client.V1ObjectReference(kind="Pod", name="train", namespace="default", uid="u-1"),
        reason="GPUShareAllocated",
        message="GPU 0",
        type="Normal",
        source=client.V1EventSource(component="gpushare-device-plugin"),
    )
    first = core.create_namespaced_event("default", event)
    second = core.create_namespaced_event("default", event)
    assert first.metadata.name.startswith("train.") and first.metadata.name != second.metadata.name
    found = core.list_namespaced_event(
        "default", field_selector="involvedObject.name=train,involvedObject.kind=Pod,reason=GPUShareAllocated"
    )
    assert len(found.items) == 2


def test_lease_create_update_and_conflict(api_client: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api_client)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="gpushare-extender"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )
    created = leases.create_namespaced_lease("kube-system", lease)
    with pytest.raises(ApiException) as caught:
        leases.create_namespaced_lease("kube-system", lease)
    assert caught.value.status == 409 and json.loads(caught.value.body)["reason"] == "AlreadyExists"
    created.spec.holder_identity = "b"
    updated = leases.replace_namespaced_lease("gpushare-extender", "kube-system", created)
    assert updated.spec.holder_identity == "b"
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    created.spec.holder_identity = "c"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as caught:
        leases.replace_namespaced_lease("gpushare-extender", "kube-system", created)
    assert caught.value.status == 409 and json.loads(caught.value.body)["reason"] == "Conflict"
    assert leases.read_namespaced_lease("gpushare-extender", "kube-system").spec.holder_identity == "b"
