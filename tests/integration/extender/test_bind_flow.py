"""Filter, prioritize and bind through the kube-scheduler stand-in, against the sandbox."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import golden_files
import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.schedsim import ExtenderCallError, schedule_one
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

ANNOTATIONS = (protocol.ANN_IDX, protocol.ANN_DEV, protocol.ANN_POD, protocol.ANN_ASSIGNED, protocol.ANN_ASSUME_TIME)


def pod(sandbox: Sandbox, name: str, namespace: str = "default") -> dict[str, Any]:
    obj = sandbox.get("pods", namespace, name)
    assert obj is not None
    return obj


def node(sandbox: Sandbox, name: str) -> dict[str, Any]:
    obj = sandbox.get("nodes", None, name)
    assert obj is not None
    return obj


def pod_writes(sandbox: Sandbox, name: str) -> list[str]:
    return [r.verb + ("/" + r.subresource if r.subresource else "") for r in sandbox.requests
            if r.resource == "pods" and r.name == name and r.verb in ("patch", "create", "update")]


@pytest.fixture
def cluster(sandbox: Sandbox, extender_factory):  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16, 16], ip="10.0.0.1"), node_object("cpu-1", [], ip="10.0.0.2"),
                  pod_object("busy", "default", [10], node="gpu-1", gpu=1, gpu_memory=16)])
    ext = extender_factory()
    ext.wait_synced()
    return ext


def test_schedule_and_bind_writes_the_five_annotations_then_binds(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object("job", "default", [3, 1])])
    assert schedule_one(cluster.scheduler(), pod(sandbox, "job"), [node(sandbox, "gpu-1"), node(sandbox, "cpu-1")]) \
        == "gpu-1"
    bound = pod(sandbox, "job")
    ann = bound["metadata"]["annotations"]
    assert bound["spec"]["nodeName"] == "gpu-1"
    assert ann[protocol.ANN_IDX] == "1"  # best fit: GPU 1 has 6 free, GPU 0 has 16
    assert (ann[protocol.ANN_POD], ann[protocol.ANN_DEV], ann[protocol.ANN_ASSIGNED]) == ("4", "16", "false")
    assert ann[protocol.ANN_ASSUME_TIME].isdigit() and int(ann[protocol.ANN_ASSUME_TIME]) > 1.7e18
    assert pod_writes(sandbox, "job") == ["patch", "create/binding"]  # annotations strictly before the Binding
    wait_for(lambda: cluster.running.state.ledger.used("gpu-1") == {1: 14})


def test_both_node_cache_modes_and_spread_policy(sandbox: Sandbox, extender_factory) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object(f"gpu-{i}", [8], ip=f"10.0.0.{i}") for i in range(3)]
                 + [pod_object(f"p{i}", "default", [2]) for i in range(3)])
    ext = extender_factory(policy="spread")
    ext.wait_synced()
    nodes = [node(sandbox, f"gpu-{i}") for i in range(3)]
    chosen = [schedule_one(ext.scheduler(node_cache_capable=False), pod(sandbox, "p0"), nodes)]
    wait_for(lambda: ext.running.state.ledger.used(chosen[0]) == {0: 2})
    for name in ("p1", "p2"):
        chosen.append(schedule_one(ext.scheduler(node_cache_capable=True), pod(sandbox, name), nodes))
        wait_for(lambda: sum(sum(ext.running.state.ledger.used(n).values()) for n in set(chosen)) == 2 * len(chosen))
    assert sorted(chosen) == ["gpu-0", "gpu-1", "gpu-2"]  # spread scores send each pod to an empty node


def test_filter_failures_reach_the_scheduler_with_the_original_reasons(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object("huge", "default", [17])])
    with pytest.raises(ExtenderCallError, match=r"0/2 nodes are available: 1 Insufficient GPU Memory in one device, "
                                                r"1 The node cpu-1 is not for GPU share, need skip\."):
        schedule_one(cluster.scheduler(), pod(sandbox, "huge"), [node(sandbox, "gpu-1"), node(sandbox, "cpu-1")])


@pytest.mark.parametrize(
    ("setup", "message", "reason"),
    [
        ("no-gpu", "requests no aliyun.com/gpu-mem", "no_request"),
        ("too-big", "Insufficient GPU Memory in one device", "no_fit"),
        ("uid", "'s uid is", "uid_mismatch"),
        ("missing", 'pods "ghost" not found', "not_found"),
        ("bound-elsewhere", "already assigned to node gpu-1", "already_bound"),
        ("unknown-node", 'node "nowhere" not found', "unknown_node"),
        ("cpu-node", "is not for GPU share", "no_fit"),
    ],
)
def test_bind_refusals_write_nothing_and_keep_serving(
    sandbox: Sandbox, cluster, setup: str, message: str, reason: str  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([pod_object("cpu-job", "default", [0]), pod_object("big", "default", [17]),
                  pod_object("ok", "default", [2]),
                  pod_object("placed", "default", [2], node="gpu-1", gpu=0, gpu_memory=16)])
    name, uid, target = {
        "no-gpu": ("cpu-job", None, "gpu-1"), "too-big": ("big", None, "gpu-1"), "uid": ("ok", "other-uid", "gpu-1"),
        "missing": ("ghost", "x", "gpu-1"), "bound-elsewhere": ("placed", None, "gpu-2"),
        "unknown-node": ("ok", None, "nowhere"), "cpu-node": ("ok", None, "cpu-1"),
    }[setup]
    obj = sandbox.get("pods", "default", name) or {"metadata": {"name": name, "namespace": "default", "uid": uid}}
    if uid:
        obj = {**obj, "metadata": {**obj["metadata"], "uid": uid}}
    sandbox.clear_requests()
    with pytest.raises(ExtenderCallError, match=message):
        cluster.scheduler().bind(obj, target)
    assert pod_writes(sandbox, name) == []
    metrics = cluster.running.app.handle("GET", "/metrics").body.decode()
    assert f'gpushare_extender_bind_failures_total{{reason="{reason}"}} 1.0' in metrics
    assert schedule_one(cluster.scheduler(), pod(sandbox, "ok"), [node(sandbox, "gpu-1")]) == "gpu-1"


def test_retried_bind_of_a_pod_we_bound_succeeds_without_writing(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object("job", "default", [2])])
    sched = cluster.scheduler()
    job = pod(sandbox, "job")
    sched.bind(job, "gpu-1")
    annotations = pod(sandbox, "job")["metadata"]["annotations"]
    sandbox.clear_requests()
    sched.bind(job, "gpu-1")  # kube-scheduler retrying after a lost reply
    assert pod_writes(sandbox, "job") == []
    assert pod(sandbox, "job")["metadata"]["annotations"] == annotations


def test_failed_binding_rolls_back_annotations_and_reservation(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object("job", "default", [5])])
    fault = sandbox.inject("POST", r"/pods/job/binding", status=403)
    with pytest.raises(ExtenderCallError, match="bind default/job to gpu-1"):
        cluster.scheduler().bind(pod(sandbox, "job"), "gpu-1")
    assert fault.hits == 1
    after = pod(sandbox, "job")
    assert "nodeName" not in after["spec"]
    assert not set(ANNOTATIONS) & set(after["metadata"].get("annotations") or {})
    # The reservation and the ledger follow the watch, which may still deliver the annotated pod
    # after the rollback (counted a moment longer: conservative); both then settle without the pod.
    wait_for(lambda: not cluster.running.state.reserved(after["metadata"]["uid"]),
             what="the reservation of the refused pod to end")
    wait_for(lambda: cluster.running.state.ledger.used("gpu-1") == {1: 10},
             what=lambda: f"the ledger to drop the rolled-back pod: {cluster.running.state.ledger.used('gpu-1')}")
    sandbox.clear_faults()
    cluster.scheduler().bind(pod(sandbox, "job"), "gpu-1")
    assert pod(sandbox, "job")["spec"]["nodeName"] == "gpu-1"


def test_throttled_binding_keeps_annotations_and_reservation(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    """A 429 on the Binding is not a refusal: the outcome is unknown (`kube.errors.refused`), nothing rolls back."""
    sandbox.load([pod_object("job", "default", [5])])
    fault = sandbox.inject("POST", r"/pods/job/binding", status=429, retry_after=1, times=1)
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        cluster.scheduler().bind(pod(sandbox, "job"), "gpu-1")
    assert fault.hits == 1
    after = pod(sandbox, "job")
    assert "nodeName" not in after["spec"]
    assert set(ANNOTATIONS) <= set(after["metadata"]["annotations"])
    assert cluster.running.state.reserved(after["metadata"]["uid"])
    cluster.scheduler().bind(pod(sandbox, "job"), "gpu-1")  # kube-scheduler's retry re-sends the same Binding
    assert pod(sandbox, "job")["spec"]["nodeName"] == "gpu-1"


def test_transient_faults_are_retried(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object("job", "default", [5])])
    faults = [
        sandbox.inject("GET", r"/pods/job(\?|$)", status=429, retry_after=1, times=1),
        sandbox.inject("PATCH", r"/pods/job(\?|$)", status=500, times=1),
        sandbox.inject("PATCH", r"/pods/job(\?|$)", status=409, times=1),
    ]
    started = time.monotonic()
    cluster.scheduler(http_timeout=30).bind(pod(sandbox, "job"), "gpu-1")
    assert time.monotonic() - started >= 1.0  # Retry-After was honoured
    assert [f.hits for f in faults] == [1, 1, 1]
    assert pod(sandbox, "job")["spec"]["nodeName"] == "gpu-1"


def test_binding_whose_reply_is_lost_is_recognised_as_done(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object("job", "default", [5])])
    # The Binding is applied but the reply is a 500 ("the server may have acted"): read back, not rolled back.
    original = sandbox.api.handle

    def bind_then_fail(request, target):  # type: ignore[no-untyped-def]
        response = original(request, target)
        if target.subresource == "binding":
            from kubectl_gpushare.sandbox import errors as sandbox_errors
            from kubectl_gpushare.sandbox.routes import error_response
            return error_response(sandbox_errors.ApiError(500, "InternalError", "lost reply"))
        return response

    sandbox.api.handle = bind_then_fail  # type: ignore[method-assign]
    try:
        cluster.scheduler().bind(pod(sandbox, "job"), "gpu-1")
    finally:
        sandbox.api.handle = original  # type: ignore[method-assign]
    after = pod(sandbox, "job")
    assert after["spec"]["nodeName"] == "gpu-1" and after["metadata"]["annotations"][protocol.ANN_IDX] == "1"


def test_concurrent_binds_onto_one_node_never_overcommit(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([pod_object(f"j{i}", "default", [3]) for i in range(12)])
    sched = cluster.scheduler()
    results: dict[str, str] = {}

    def bind(name: str) -> None:
        try:
            sched.bind(pod(sandbox, name), "gpu-1")
            results[name] = "ok"
        except ExtenderCallError as exc:
            results[name] = str(exc)

    threads = [threading.Thread(target=bind, args=(f"j{i}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # GPU 0: 16 free -> 5 pods of 3; GPU 1: 6 free -> 2 pods of 3.
    assert list(results.values()).count("ok") == 7
    assert all("Insufficient GPU Memory" in r for r in results.values() if r != "ok")
    pods = [p for p in sandbox.objects("pods") if p["spec"].get("nodeName") == "gpu-1"]
    used: dict[str, int] = {}
    for p in pods:
        gpu = p["metadata"]["annotations"][protocol.ANN_IDX]
        used[gpu] = used.get(gpu, 0) + int(p["metadata"]["annotations"][protocol.ANN_POD])
    assert used == {"0": 15, "1": 16}


def test_watch_keeps_capacity_index_changes_and_health_current(sandbox: Sandbox, cluster, kubeconfig) -> None:  # type: ignore[no-untyped-def]
    state = cluster.running.state
    client = Client(load_config(str(kubeconfig)), component="test")
    client.patch_node_status("gpu-1", {"status": {"capacity": {protocol.RESOURCE_MEM: "48"}}})  # capacity grows
    wait_for(lambda: state.ledger.gpu_totals("gpu-1") == (24, 24))
    client.patch_pod("default", "busy", {"metadata": {"annotations": {protocol.ANN_IDX: "0"}}})
    wait_for(lambda: state.ledger.used("gpu-1") == {0: 10})  # moved, not counted twice
    client.create(types.CONFIGMAPS, unhealthy_configmap("gpu-1", [1]), protocol.UNHEALTHY_CM_NAMESPACE)
    wait_for(lambda: state.filter(["gpu-1"], 15)[0] == [])
    assert state.filter(["gpu-1"], 14)[0] == ["gpu-1"]
    client.delete(types.CONFIGMAPS, "unhealthy-gpu-gpu-1", protocol.UNHEALTHY_CM_NAMESPACE)
    wait_for(lambda: state.filter(["gpu-1"], 15)[0] == ["gpu-1"])
    sandbox.drop_watches()
    client.create(types.PODS, pod_object("late", "default", [4], node="gpu-1", gpu=0, gpu_memory=24), "default")
    wait_for(lambda: state.ledger.used("gpu-1") == {0: 14})
    client.delete(types.PODS, "busy", "default")
    wait_for(lambda: state.ledger.used("gpu-1") == {0: 4})
    client.close()


def test_extender_started_while_the_api_fails_syncs_once_it_recovers(sandbox: Sandbox, extender_factory) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1"), pod_object("job", "default", [2])])
    fault = sandbox.inject("GET", r"^/api/v1/pods(\?|$)", status=500, times=2)
    ext = extender_factory()
    reply = ext.running.app.handle("POST", "/gpushare-scheduler/filter", json.dumps(
        {"Pod": pod(sandbox, "job"), "NodeNames": ["gpu-1"]}).encode())
    if not ext.running.cache.synced.is_set():
        assert "not synced" in json.loads(reply.body)["Error"]
        assert ext.running.app.handle("GET", "/readyz").status == 503
    ext.wait_synced(20)
    assert fault.hits == 2
    assert schedule_one(ext.scheduler(), pod(sandbox, "job"), [node(sandbox, "gpu-1")]) == "gpu-1"


def test_bind_reply_bytes_match_golden(sandbox: Sandbox, cluster) -> None:  # type: ignore[no-untyped-def]
    import http.client

    sandbox.load([pod_object("ok", "default", [2]), pod_object("big", "default", [17])])
    for name, expected in (("ok", "bind_success.json"), ("big", "bind_failure.json")):
        args = {"PodName": name, "PodNamespace": "default", "PodUID": pod(sandbox, name)["metadata"]["uid"],
                "Node": "gpu-1"}
        conn = http.client.HTTPConnection("127.0.0.1", cluster.running.port, timeout=10)
        conn.request("POST", "/gpushare-scheduler/bind", body=json.dumps(args).encode(),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert (response.status, response.getheader("Content-Type")) == (200, "application/json")
        golden_files.golden(f"extender/{expected}", response.read())
        conn.close()


def test_api_timeouts_are_retried(
    sandbox: Sandbox, extender_factory, caplog: pytest.LogCaptureFixture  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1"), pod_object("job", "default", [2])])
    ext = extender_factory(request_timeout=0.5)
    ext.wait_synced()
    # in transit: the client's own timeout, not the API server's 504 at the deadline it was told
    slow = sandbox.inject("GET", r"/namespaces/default/pods/job(\?|$)", latency=1.0, times=1, in_transit=True)
    with caplog.at_level("DEBUG", logger="kubectl_gpushare.kube.retry"):
        ext.scheduler(http_timeout=30).bind(pod(sandbox, "job"), "gpu-1")
    assert slow.hits == 1
    assert any("did not answer" in r.getMessage() and "retrying" in r.getMessage() for r in caplog.records)
    assert pod(sandbox, "job")["spec"]["nodeName"] == "gpu-1"


def test_pod_bound_elsewhere_during_our_bind_loses_our_annotations(sandbox: Sandbox, cluster, kubeconfig) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-2", [16], ip="10.0.0.3"), pod_object("job", "default", [2])])
    other = Client(load_config(str(kubeconfig)), component="other-scheduler")
    original = sandbox.api.handle

    def race(request, target):  # type: ignore[no-untyped-def]
        response = original(request, target)
        if request.method == "PATCH" and target.name == "job" and "(extender)" in request.headers.get("User-Agent", ""):
            uid = pod(sandbox, "job")["metadata"]["uid"]
            other.bind_pod("default", "job", uid, "gpu-2")  # another scheduler wins between patch and Binding
        return response

    sandbox.api.handle = race  # type: ignore[method-assign]
    try:
        with pytest.raises(ExtenderCallError, match="already assigned"):
            cluster.scheduler().bind(pod(sandbox, "job"), "gpu-1")
    finally:
        sandbox.api.handle = original  # type: ignore[method-assign]
        other.close()
    after = pod(sandbox, "job")
    assert after["spec"]["nodeName"] == "gpu-2"
    assert not set(ANNOTATIONS) & set(after["metadata"].get("annotations") or {})
    assert cluster.running.state.ledger.used("gpu-1") == {1: 10}


@pytest.mark.parametrize(("name", "namespace"), [("ok/status", "default"), ("ok", "default/pods/ok/.."),
                                                 ("..", "default"), ("ok%2Fstatus", "default")],
                         ids=["subresource-in-name", "path-in-namespace", "dot-dot", "percent"])
def test_bind_names_that_are_not_path_segments_reach_no_api_path(
    sandbox: Sandbox, cluster, name: str, namespace: str  # type: ignore[no-untyped-def]
) -> None:
    # client-go's Request.Name/Namespace refuse "." and "..", "/" and "%" (apimachinery IsValidPathSegmentName),
    # so "ok/status" must not read, patch and bind through the pod's status subresource.
    sandbox.load([pod_object("ok", "default", [2])])
    victim = pod(sandbox, "ok")
    sandbox.clear_requests()
    with pytest.raises(ExtenderCallError, match="invalid"):
        cluster.scheduler().bind({"metadata": {**victim["metadata"], "name": name, "namespace": namespace}}, "gpu-1")
    assert [r.path for r in sandbox.requests if "/namespaces/" in r.path and "/pods" in r.path] == []
    assert pod(sandbox, "ok")["metadata"]["resourceVersion"] == victim["metadata"]["resourceVersion"]
    assert not cluster.running.state.reserved(victim["metadata"]["uid"])
