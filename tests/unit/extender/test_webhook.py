"""The admission webhook's pure rule, and that no input makes it raise or answer other than 200/400."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.extender import webhook
from kubectl_gpushare.extender.app import ExtenderApp
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube.types import Pod


def pod(**spec: Any) -> Pod:
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec}, Pod)


GPU = {"containers": [{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": "2"}}}]}


def test_rule_routes_gpu_pods_whose_scheduler_is_unset_or_default() -> None:
    routed = [{"op": "add", "path": "/spec/schedulerName", "value": "gpushare-scheduler"}]
    assert webhook.scheduler_patch(pod(**GPU)) == routed
    assert webhook.scheduler_patch(pod(**GPU, schedulerName="default-scheduler")) == routed
    assert webhook.scheduler_patch(pod(**GPU, schedulerName="gpushare-scheduler")) == []
    assert webhook.scheduler_patch(pod(**GPU, schedulerName="my-scheduler")) == []
    assert webhook.scheduler_patch(pod(containers=[{"name": "c"}])) == []
    opted = msgspec.convert({"metadata": {"labels": {"gpushare.kubectl-gpushare.io/webhook": "disabled"}},
                             "spec": GPU}, Pod)
    assert webhook.scheduler_patch(opted) == []


def test_the_route_answers_without_state_or_leadership() -> None:
    class NoBinder:
        def bind(self, args: object) -> object:
            raise AssertionError("not called")

    app = ExtenderApp(ExtenderState(), NoBinder(), ready=lambda: False,  # type: ignore[arg-type]
                      unavailable=lambda: "not synced")
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": "CREATE", "resource": {"version": "v1", "resource": "pods"},
                        "object": {"spec": GPU}}}
    reply = app.handle("POST", "/mutate", json.dumps(body).encode())
    assert reply.status == 200
    response = json.loads(reply.body)["response"]
    assert response["uid"] == "u-1" and json.loads(base64.b64decode(response["patch"]))[0]["value"] == (
        "gpushare-scheduler")
    assert app.handle("GET", "/mutate").status == 405


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
reviews = st.fixed_dictionaries(
    {"apiVersion": st.just("admission.k8s.io/v1"), "kind": st.just("AdmissionReview")},
    optional={"request": st.fixed_dictionaries(
        {"uid": json_values}, optional={"operation": st.sampled_from(["CREATE", "UPDATE", 3]),
                                        "resource": json_values | st.just({"resource": "pods"}),
                                        "object": json_values | st.just({"spec": GPU})})},
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | reviews.map(lambda r: json.dumps(r).encode()))
def test_any_body_gets_200_or_400_and_never_raises(body: bytes) -> None:
    status, reply = webhook.mutate(body)
    decoded = json.loads(reply)
    if status == 200:
        assert decoded["response"]["allowed"] is True and decoded["response"]["uid"]
    else:
        assert status == 400 and decoded["Error"]
