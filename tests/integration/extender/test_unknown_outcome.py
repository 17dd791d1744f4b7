"""Binds whose Binding has an unknown outcome (lost reply, late Binding, reset) never over-commit a GPU.

Each test drives the real extender over HTTP against the sandbox, with the sandbox's faults making
the Binding's reply a 500 (or a 504 Timeout) after it took effect, making it land after the
client's timeout, or breaking the connection off before it is handled; reads of the pod fail and
the pods watch lags meanwhile. The invariant is read from the API objects: no GPU holds more than its memory.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.schedsim import ExtenderCallError, HTTPExtender
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

ANNOTATIONS = (protocol.ANN_IDX, protocol.ANN_DEV, protocol.ANN_POD, protocol.ANN_ASSIGNED, protocol.ANN_ASSUME_TIME,
               protocol.ANN_ASSUMED_NODE)
PODS_WATCH = r"^/api/v1/pods\?watch=true"


def pod(sandbox: Sandbox, name: str) -> dict[str, Any]:
    obj = sandbox.get("pods", "default", name)
    assert obj is not None
    return obj


def gpu_use(sandbox: Sandbox) -> Counter[tuple[str, str]]:
    """Memory per (node, GPU) from the bound pods' annotations, as the device plugin would see it."""
    used: Counter[tuple[str, str]] = Counter()
    for p in sandbox.objects("pods"):
        ann = p["metadata"].get("annotations") or {}
        if p["spec"].get("nodeName") and protocol.ANN_IDX in ann:
            used[(p["spec"]["nodeName"], ann[protocol.ANN_IDX])] += int(ann[protocol.ANN_POD])
    return used


def assert_within_memory(sandbox: Sandbox, total: int = 16) -> None:
    used = gpu_use(sandbox)
    assert all(amount <= total for amount in used.values()), f"over-committed: {dict(used)}"


def lag_pods_watch(sandbox: Sandbox) -> None:
    """The pods watch breaks off and every attempt to resume it fails until the faults are cleared."""
    sandbox.inject("GET", PODS_WATCH, drop_watch=True)
    sandbox.drop_watches()


def synced(extender_factory: Callable[..., Any], **options: Any) -> tuple[Any, HTTPExtender]:
    """A started extender whose cache has synced, and kube-scheduler calling it with the 30 s httpTimeout
    of the stack's scheduler configuration (longer than any bind: each bind's own answer is heard)."""
    ext = extender_factory(**options)
    ext.wait_synced()
    return ext, ext.scheduler(http_timeout=30)


@pytest.fixture
def two_pods(sandbox: Sandbox) -> None:
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1"), pod_object("a", "default", [10]),
                  pod_object("b", "default", [10])])


def test_lost_binding_reply_with_failing_reads_and_lagging_watch_keeps_the_gpu_reserved(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    ext, sched = synced(extender_factory)
    state = ext.running.state
    lag_pods_watch(sandbox)
    lost = sandbox.inject("POST", r"/pods/a/binding", status=500, after=True, times=1)
    first_read = sandbox.inject("GET", r"/namespaces/default/pods/a(\?|$)", times=1)  # the bind's own read passes
    reads = sandbox.inject("GET", r"/namespaces/default/pods/a(\?|$)", status=500)  # every read after it fails
    a = pod(sandbox, "a")
    with pytest.raises(ExtenderCallError, match="bind default/a to gpu-1: .*outcome is unknown"):
        sched.bind(a, "gpu-1")
    assert (first_read.hits, lost.hits) == (1, 1) and reads.hits >= 2
    assert pod(sandbox, "a")["spec"]["nodeName"] == "gpu-1"  # the Binding took effect
    # kube-scheduler moves on to the next pod at once, long before the lagging watch shows a as bound.
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")
    assert state.reserved(a["metadata"]["uid"])
    assert_within_memory(sandbox)
    assert "nodeName" not in pod(sandbox, "b")["spec"]
    # kube-scheduler's retry while reads still fail: an error, nothing released. The binder's sweep may be
    # settling a (reading it, failing) at that moment: then the retry is told a bind of a is in progress.
    with pytest.raises(ExtenderCallError, match="bind default/a|a bind of pod default/a is already in progress"):
        sched.bind(a, "gpu-1")
    assert state.reserved(a["metadata"]["uid"])
    sandbox.clear_faults()
    # The watch catches up: a is counted from its annotations, the reservation has ended, nothing twice.
    wait_for(lambda: state.counted_on(a["metadata"]["uid"]) == "gpu-1")
    assert not state.reserved(a["metadata"]["uid"]) and not state.unsettled()
    assert state.ledger.used("gpu-1") == {0: 10}
    sched.bind(pod(sandbox, "a"), "gpu-1")  # kube-scheduler's retry of a finds it done
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")
    assert_within_memory(sandbox)


def test_binding_landing_after_the_request_timeout_is_not_rolled_back(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    ext, sched = synced(extender_factory, request_timeout=2)
    state = ext.running.state
    # The Binding commits after 3 s; the client, and the server it told timeout=2s, give up at 2 s.
    late = sandbox.inject("POST", r"/pods/a/binding", latency=3.0, after=True, times=1)
    a = pod(sandbox, "a")
    with pytest.raises(ExtenderCallError, match="bind default/a to gpu-1: .*outcome is unknown"):
        sched.bind(a, "gpu-1")
    assert late.hits == 1
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")
    assert set(ANNOTATIONS) <= set(pod(sandbox, "a")["metadata"]["annotations"])  # not rolled back
    wait_for(lambda: pod(sandbox, "a")["spec"].get("nodeName") == "gpu-1", 10)
    after = pod(sandbox, "a")
    assert after["metadata"]["annotations"][protocol.ANN_IDX] == "0"  # bound, with its GPU on record
    wait_for(lambda: state.counted_on(a["metadata"]["uid"]) == "gpu-1")
    assert not state.unsettled() and state.ledger.used("gpu-1") == {0: 10}
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")
    assert_within_memory(sandbox)


def test_binding_answered_504_timeout_while_it_lands_keeps_the_gpu_until_the_api_shows_it_bound(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    # kube-apiserver answers a write whose deadline passed 504 Timeout while its storage call may
    # still complete (asyncFinisher). The server's request timeout (2 s) is shorter than the
    # extender's, so the extender hears the 504, not its own timeout; the Binding lands 3.5 s after
    # it was sent, after the bind's read-back found the pod unbound. The pods watch lags meanwhile.
    sandbox.request_timeout = 2.0
    ext, sched = synced(extender_factory)
    state = ext.running.state
    lag_pods_watch(sandbox)
    slow = sandbox.inject("POST", r"/pods/a/binding", latency=3.5, after=True, times=1)
    a = pod(sandbox, "a")
    uid = a["metadata"]["uid"]
    with pytest.raises(ExtenderCallError, match="bind default/a to gpu-1: Timeout: .*outcome is unknown"):
        sched.bind(a, "gpu-1")  # "unknown": the read-back after the 504 found a unbound, and nothing was rolled back
    assert slow.hits == 1 and [r.status for r in sandbox.requests if r.subresource == "binding"] == [504]
    assert set(ANNOTATIONS) <= set(pod(sandbox, "a")["metadata"]["annotations"])
    assert state.reserved(uid) and state.unsettled(uid)
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")
    wait_for(lambda: pod(sandbox, "a")["spec"].get("nodeName") == "gpu-1", 10)  # the Binding lands
    assert state.reserved(uid)  # the watch has not shown it yet
    sandbox.clear_faults()
    wait_for(lambda: state.counted_on(uid) == "gpu-1")
    assert not state.reserved(uid) and not state.unsettled() and state.ledger.used("gpu-1") == {0: 10}
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")
    assert_within_memory(sandbox)


def test_retried_bind_resends_the_same_binding_and_another_node_waits(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object("gpu-2", [16], ip="10.0.0.2")])
    ext, sched = synced(extender_factory)
    reset = sandbox.inject("POST", r"/pods/a/binding", drop_watch=True)  # connection reset, never applied
    a = pod(sandbox, "a")
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        sched.bind(a, "gpu-1")
    assert reset.hits >= 1 and "nodeName" not in pod(sandbox, "a")["spec"]
    with pytest.raises(ExtenderCallError, match="not known yet"):
        sched.bind(pod(sandbox, "a"), "gpu-2")  # elsewhere: the first Binding may still land
    sandbox.clear_faults()
    annotations = pod(sandbox, "a")["metadata"]["annotations"]
    sched.bind(pod(sandbox, "a"), "gpu-1")  # the same Binding again
    after = pod(sandbox, "a")
    assert after["spec"]["nodeName"] == "gpu-1" and after["metadata"]["annotations"] == annotations
    wait_for(lambda: not ext.running.state.unsettled())
    assert_within_memory(sandbox)


def test_sweep_releases_a_binding_the_api_shows_was_lost_after_the_grace(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    ext, sched = synced(extender_factory, unknown_grace=2.0)
    state = ext.running.state
    sandbox.inject("POST", r"/pods/a/binding", drop_watch=True)
    a = pod(sandbox, "a")
    uid = a["metadata"]["uid"]
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        sched.bind(a, "gpu-1")
    sandbox.clear_faults()
    assert state.unsettled(uid)
    assert "gpushare_extender_unsettled_binds 1.0" in ext.running.app.handle("GET", "/metrics").body.decode()
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "b"), "gpu-1")  # within the grace the GPU stays reserved
    wait_for(lambda: not state.unsettled(), 10)
    assert "gpushare_extender_unsettled_binds 0.0" in ext.running.app.handle("GET", "/metrics").body.decode()
    wait_for(lambda: not state.reserved(uid))  # the claim ends when the watch shows the annotations removed
    assert not set(ANNOTATIONS) & set(pod(sandbox, "a")["metadata"].get("annotations") or {})
    sched.bind(pod(sandbox, "b"), "gpu-1")
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        sched.bind(pod(sandbox, "a"), "gpu-1")
    assert_within_memory(sandbox)


def test_deleted_pod_ends_an_unsettled_reservation(
    sandbox: Sandbox, extender_factory, kubeconfig, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    ext = extender_factory()
    ext.wait_synced()
    state = ext.running.state
    sandbox.inject("POST", r"/pods/a/binding", status=503)
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        ext.scheduler().bind(pod(sandbox, "a"), "gpu-1")
    sandbox.clear_faults()
    assert state.unsettled()
    client = Client(load_config(str(kubeconfig)), component="test")
    client.delete(types.PODS, "a", "default")
    client.close()
    wait_for(lambda: not state.unsettled() and state.ledger.used("gpu-1") == {})
    ext.scheduler().bind(pod(sandbox, "b"), "gpu-1")


@pytest.mark.parametrize("fault", [{"status": 503}, {"latency": 2.0}], ids=["failing", "hanging"])
def test_bind_answers_within_its_deadline_while_reads_keep_failing(
    sandbox: Sandbox, extender_factory, two_pods: None, fault: dict[str, Any]  # type: ignore[no-untyped-def]
) -> None:
    ext = extender_factory(bind_deadline=3.0)
    ext.wait_synced()
    sandbox.inject("GET", r"/namespaces/default/pods/a(\?|$)", **fault)
    started = time.monotonic()
    with pytest.raises(ExtenderCallError, match="bind default/a"):
        ext.scheduler(http_timeout=30).bind(pod(sandbox, "a"), "gpu-1")
    took = time.monotonic() - started
    assert took < 3.0 + 0.75 + 2.0, took  # the deadline, one request timeout (3 / 4), room for a slow CI
    assert not ext.running.state.reserved(pod(sandbox, "a")["metadata"]["uid"])


# --- what a replica writes before a Binding is enough for any other replica ---------------------------


def test_binding_in_flight_when_the_leader_dies_is_counted_by_the_next_replica(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    first = extender_factory(request_timeout=1)
    first.wait_synced()
    late = sandbox.inject("POST", r"/pods/a/binding", latency=4.0, after=True, times=1)  # commits 4 s after it was sent
    a = pod(sandbox, "a")
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        first.scheduler(http_timeout=30).bind(a, "gpu-1")
    assert late.hits == 1 and "nodeName" not in pod(sandbox, "a")["spec"]
    assert pod(sandbox, "a")["metadata"]["annotations"][protocol.ANN_ASSUMED_NODE] == "gpu-1"
    # The leader is gone; a replica that never saw the bind starts and lists the unbound, annotated pod.
    nxt = extender_factory()
    nxt.wait_synced()
    assert nxt.running.state.ledger.used("gpu-1") == {0: 10}
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        nxt.scheduler(http_timeout=30).bind(pod(sandbox, "b"), "gpu-1")
    wait_for(lambda: pod(sandbox, "a")["spec"].get("nodeName") == "gpu-1", 10)  # the Binding lands
    wait_for(lambda: nxt.running.state.counted_on(a["metadata"]["uid"]) == "gpu-1")
    assert not nxt.running.state.reserved(a["metadata"]["uid"]) and nxt.running.state.ledger.used("gpu-1") == {0: 10}
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        nxt.scheduler(http_timeout=30).bind(pod(sandbox, "b"), "gpu-1")
    assert_within_memory(sandbox)


def test_claim_whose_binding_never_lands_is_removed_by_the_next_replica_after_its_lifetime(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    first = extender_factory()
    first.wait_synced()
    sandbox.inject("POST", r"/pods/a/binding", drop_watch=True)  # reset: never applied
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        first.scheduler(http_timeout=30).bind(pod(sandbox, "a"), "gpu-1")
    sandbox.clear_faults()
    # The next replica counts the claim for bind deadline + one request + the grace (2 + 0.5 + 1 s) ...
    nxt = extender_factory(bind_deadline=2.0, unknown_grace=1.0)
    nxt.wait_synced()
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        nxt.scheduler(http_timeout=30).bind(pod(sandbox, "b"), "gpu-1")
    # ... then removes it from the still unbound pod, and the GPU is free again.
    wait_for(lambda: not set(ANNOTATIONS) & set(pod(sandbox, "a")["metadata"].get("annotations") or {}), 15)
    wait_for(lambda: nxt.running.state.ledger.used("gpu-1") == {})
    nxt.scheduler(http_timeout=30).bind(pod(sandbox, "b"), "gpu-1")
    assert pod(sandbox, "b")["spec"]["nodeName"] == "gpu-1"
    assert_within_memory(sandbox)


def test_refused_binding_whose_read_back_fails_keeps_its_gpu_until_the_annotations_are_removed(
    sandbox: Sandbox, extender_factory, two_pods: None  # type: ignore[no-untyped-def]
) -> None:
    ext = extender_factory()
    ext.wait_synced()
    state = ext.running.state
    sandbox.inject("POST", r"/pods/a/binding", status=422, times=1)  # refused: it did not happen
    sandbox.inject("GET", r"/namespaces/default/pods/a(\?|$)", times=1)  # the bind's own read passes
    reads = sandbox.inject("GET", r"/namespaces/default/pods/a(\?|$)", status=500)  # the read-back fails
    a = pod(sandbox, "a")
    with pytest.raises(ExtenderCallError, match="bind default/a to gpu-1"):
        ext.scheduler(http_timeout=30).bind(a, "gpu-1")
    assert reads.hits >= 1
    assert pod(sandbox, "a")["metadata"]["annotations"][protocol.ANN_ASSUMED_NODE] == "gpu-1"  # left behind
    assert state.reserved(a["metadata"]["uid"])
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        ext.scheduler(http_timeout=30).bind(pod(sandbox, "b"), "gpu-1")
    other = extender_factory()  # a replica that never saw the bind counts the annotations too
    other.wait_synced()
    assert other.running.state.ledger.used("gpu-1") == {0: 10}
    sandbox.clear_faults()
    wait_for(lambda: not set(ANNOTATIONS) & set(pod(sandbox, "a")["metadata"].get("annotations") or {}), 10)
    wait_for(lambda: not state.reserved(a["metadata"]["uid"]) and not other.running.state.ledger.used("gpu-1"))
    ext.scheduler(http_timeout=30).bind(pod(sandbox, "b"), "gpu-1")
    assert "nodeName" not in pod(sandbox, "a")["spec"]
    assert_within_memory(sandbox)
