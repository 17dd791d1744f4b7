"""The admission webhook at POST /mutate, over real HTTP and HTTPS to a running extender."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

import pytest
from certificates import self_signed_pair
from waiting import holds_for, wait_for

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def review(pod: dict[str, Any] | None, *, operation: str = "CREATE", uid: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()) if uid is None else uid,
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "default", "operation": operation, "object": pod},
    }


def post(port: int, body: bytes, context: ssl.SSLContext | None = None) -> tuple[int, dict[str, Any]]:
    conn = (http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context) if context
            else http.client.HTTPConnection("127.0.0.1", port, timeout=10))
    try:
        # The API server appends ?timeout=...; the route must ignore it.
        conn.request("POST", "/mutate?timeout=10s", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def patch_of(reply: dict[str, Any]) -> list[dict[str, Any]] | None:
    response = reply["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        assert "patchType" not in response
        return None
    assert response["patchType"] == "JSONPatch"
    return list(json.loads(base64.b64decode(response["patch"])))


ROUTED = [{"op": "add", "path": "/spec/schedulerName", "value": "gpushare-scheduler"}]


def cases() -> list[tuple[str, dict[str, Any], list[dict[str, Any]] | None]]:
    gpu = pod_object("gpu", "default", [2])
    init = pod_object("init", "default", [0])
    init["spec"]["initContainers"] = [{"name": "warm", "image": "busybox",
                                       "resources": {"limits": {"aliyun.com/gpu-mem": "1"}}}]
    cpu = pod_object("cpu", "default", [0])
    opted_out = pod_object("opt", "default", [2], labels={"gpushare.kubectl-gpushare.io/webhook": "disabled"})
    named = pod_object("named", "default", [2])
    named["spec"]["schedulerName"] = "volcano"
    default = pod_object("default", "default", [2])
    default["spec"]["schedulerName"] = "default-scheduler"
    requests_only = pod_object("req", "default", [0])
    requests_only["spec"]["containers"][0]["resources"] = {"requests": {"aliyun.com/gpu-mem": "3"}}
    return [("gpu", gpu, ROUTED), ("init-container", init, ROUTED), ("cpu", cpu, None),
            ("opt-out-label", opted_out, None), ("named-scheduler", named, None),
            ("default-scheduler", default, ROUTED), ("requests-only", requests_only, ROUTED)]


def check_all(port: int, context: ssl.SSLContext | None = None) -> None:
    for name, pod, expected in cases():
        body = review(pod)
        status, reply = post(port, json.dumps(body).encode(), context)
        assert status == 200, name
        assert reply["apiVersion"] == "admission.k8s.io/v1" and reply["kind"] == "AdmissionReview"
        assert reply["response"]["uid"] == body["request"]["uid"], name
        assert patch_of(reply) == expected, name


@pytest.fixture
def ext(sandbox: Sandbox, extender_factory):  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    return extender_factory(max_request_bytes=64 * 1024)


def test_webhook_over_http_patches_gpu_pods_only(ext) -> None:  # type: ignore[no-untyped-def]
    check_all(ext.running.port)


def test_update_and_other_resources_are_allowed_without_a_patch(ext) -> None:  # type: ignore[no-untyped-def]
    status, reply = post(ext.running.port, json.dumps(review(pod_object("gpu", "default", [2]),
                                                             operation="UPDATE")).encode())
    assert status == 200 and patch_of(reply) is None


@pytest.mark.parametrize(
    "body",
    [b"", b"{bad", b"[]", json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                                      "request": {"uid": "x"}}).encode(),
     json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
     json.dumps(review(pod_object("gpu", "default", [2]), uid="")).encode(),
     json.dumps(review(None)).encode(),
     json.dumps(review({"spec": {"containers": "nope"}})).encode()],
    ids=["empty", "bad-json", "array", "v1beta1", "no-request", "no-uid", "no-object", "not-a-pod"],
)
def test_malformed_review_gets_400_and_the_server_keeps_serving(ext, body: bytes) -> None:  # type: ignore[no-untyped-def]
    status, reply = post(ext.running.port, body)
    assert status == 400 and reply["Error"]
    status, reply = post(ext.running.port, json.dumps(review(pod_object("gpu", "default", [2]))).encode())
    assert status == 200 and patch_of(reply) == ROUTED


def test_oversized_review_gets_413(ext) -> None:  # type: ignore[no-untyped-def]
    pod = pod_object("big", "default", [2], annotations={"filler": "x" * 70_000})
    status, reply = post(ext.running.port, json.dumps(review(pod)).encode())
    assert status == 413 and "exceeds the limit" in reply["Error"]


def test_webhook_over_https(sandbox: Sandbox, extender_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cert, key = self_signed_pair(tmp_path)
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory(tls_cert_file=str(cert), tls_private_key_file=str(key))
    check_all(ext.running.port, ssl.create_default_context(cafile=str(cert)))


def test_every_replica_answers_while_another_leads(sandbox: Sandbox, extender_factory) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    election = {"leader_elect": True, "lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.2}
    leader = extender_factory(identity="a", **election)
    wait_for(lambda: leader.running.app.handle("GET", "/readyz").status == 200, 15, "the first replica to lead")
    follower = extender_factory(identity="b", **election)
    follower.wait_synced()
    assert follower.running.elector is not None
    holds_for(lambda: not follower.running.elector.is_leader(), 0.5, "b does not lead, through several election rounds")
    assert follower.running.app.handle("GET", "/readyz").status == 503
    check_all(follower.running.port)
