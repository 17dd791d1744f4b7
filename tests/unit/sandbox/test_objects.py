from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.objects import prepare_create, prepare_update
from kubectl_gpushare.sandbox.resources import BY_PLURAL, Resource

PODS = BY_PLURAL["pods"]
NODES = BY_PLURAL["nodes"]


def body(**meta: object) -> dict[str, object]:
    return {
        "metadata": dict(meta),
        "spec": {
            "containers": [{"name": "c", "image": "cuda:12", "resources": {"limits": {"aliyun.com/gpu-mem": "4"}}}]
        },
        "status": {"phase": "Running"},
    }


def test_create_defaults_requests_from_limits_and_resets_status() -> None:
    pod = prepare_create(PODS, body(name="p"), "ns")
    container = pod["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"aliyun.com/gpu-mem": "4"}
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert pod["metadata"]["namespace"] == "ns" and pod["metadata"]["uid"]
    assert list(pod)[:2] == ["apiVersion", "kind"]


def test_create_generate_name() -> None:
    pod = prepare_create(PODS, body(generateName="job-"), "ns")
    assert pod["metadata"]["name"].startswith("job-") and len(pod["metadata"]["name"]) == 9


@pytest.mark.parametrize(
    ("obj", "code"),
    [
        (body(), 422),
        (body(name="Bad_Name"), 422),
        ({"metadata": {"name": "p"}, "spec": {"containers": []}}, 422),
        (body(name="p", namespace="other"), 400),
        (body(name="p", labels={"a": 1}), 400),
        (body(name="p", resourceVersion="5"), 400),  # kube-apiserver: 500 (unconverted); never for bad input here
        ({"kind": "Node", "metadata": {"name": "p"}}, 400),
        ([1, 2], 400),
    ],
    ids=[
        "no-name",
        "invalid-name",
        "no-containers",
        "namespace-mismatch",
        "label-not-string",
        "rv-on-create",
        "wrong-kind",
        "not-an-object",
    ],
)
def test_create_rejects_bad_objects_with_the_real_codes(obj: object, code: int) -> None:
    with pytest.raises(ApiError) as caught:
        prepare_create(PODS, obj, "ns")
    assert caught.value.code == code


def test_update_main_resource_keeps_status_and_status_subresource_keeps_spec() -> None:
    old = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "uid": "u", "resourceVersion": "3", "creationTimestamp": "t"},
        "spec": {"unschedulable": False},
        "status": {"capacity": {"cpu": "1"}},
    }
    main = prepare_update(
        NODES, old, {"metadata": {"name": "n", "labels": {"a": "b"}}, "status": {"capacity": {}}}, "n", ""
    )
    assert main["status"] == {"capacity": {"cpu": "1"}}
    assert main["metadata"]["labels"] == {"a": "b"} and main["metadata"]["uid"] == "u"
    status = prepare_update(
        NODES,
        old,
        {
            "metadata": {"name": "n", "labels": {"x": "y"}},
            "spec": {"unschedulable": True},
            "status": {"capacity": {"cpu": "2"}},
        },
        "n",
        "status",
    )
    assert status["status"] == {"capacity": {"cpu": "2"}}
    assert status["spec"] == {"unschedulable": False} and "labels" not in status["metadata"]


def test_update_with_stale_resource_version_conflicts() -> None:
    old = {"metadata": {"name": "n", "resourceVersion": "3"}}
    with pytest.raises(ApiError) as caught:
        prepare_update(NODES, old, {"metadata": {"name": "n", "resourceVersion": "2"}}, "n", "")
    assert caught.value.code == 409 and caught.value.reason == "Conflict"
    with pytest.raises(ApiError) as caught:
        prepare_update(NODES, old, {"metadata": {"name": "other"}}, "n", "")
    assert caught.value.code == 400


def test_pod_spec_is_immutable_except_images() -> None:
    old = prepare_create(PODS, body(name="p"), "ns")
    old["metadata"]["resourceVersion"] = "1"
    new = {**old, "spec": {**old["spec"], "containers": [{**old["spec"]["containers"][0], "image": "cuda:13"}]}}
    assert prepare_update(PODS, old, new, "p", "")["spec"]["containers"][0]["image"] == "cuda:13"
    moved = {**old, "spec": {**old["spec"], "nodeName": "n1"}}
    with pytest.raises(ApiError) as caught:
        prepare_update(PODS, old, moved, "p", "")
    assert caught.value.code == 422


def test_a_uid_in_the_body_is_a_precondition() -> None:
    pods = BY_PLURAL["pods"]
    old = prepare_create(pods, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "ns")
    old["metadata"]["resourceVersion"] = "5"
    new = {**old, "metadata": {**old["metadata"], "uid": "someone-else"}}
    with pytest.raises(ApiError) as caught:
        prepare_update(pods, old, new, "p", "")
    assert caught.value.code == 409
    assert "UID in precondition: someone-else" in str(caught.value)


def test_a_null_element_or_map_value_is_the_zero_value_go_decodes_and_a_null_field_is_dropped() -> None:
    # encoding/json: null into a string or struct leaves the zero value; a slice element or map
    # value is still there (a nodeSelector {"rack": null} asks for rack=""), a struct field is absent.
    pod = body(name="p")
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [None]}]}, None]
    pod["spec"].update(nodeSelector={"rack": None}, tolerations=[None, {"key": "k", "value": None}],
                       affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                           "nodeSelectorTerms": terms}}})
    spec = prepare_create(PODS, pod, "ns")["spec"]
    assert spec["nodeSelector"] == {"rack": ""}
    assert spec["tolerations"] == [{}, {"key": "k"}]
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [""]}]}, {}]


def test_a_null_metadata_string_is_absent_and_a_null_label_value_is_empty_as_go_decodes_them() -> None:
    # encoding/json: null into ObjectMeta's string fields leaves "" (the request's namespace then
    # applies); into a map[string]string value, "". They were refused as strings of the wrong type.
    pod = prepare_create(PODS, body(name="p", namespace=None, uid=None, labels={"a": None, "b": "x"}), "ns")
    assert pod["metadata"]["namespace"] == "ns" and pod["metadata"]["uid"]
    assert pod["metadata"]["labels"] == {"a": "", "b": "x"}
    with pytest.raises(ApiError) as caught:
        prepare_create(PODS, body(name=None), "ns")
    assert caught.value.code == 422  # no name: required, as for an absent one


@pytest.mark.parametrize(
    ("resource", "name"), [(PODS, "p\n"), (BY_PLURAL["namespaces"], "n\n")], ids=["pod", "namespace"]
)
def test_a_name_with_a_trailing_newline_is_invalid(resource: Resource, name: str) -> None:
    # Go's regexp anchors "$" at the end of the text alone (IsDNS1123Subdomain/Label); Python's before a last "\n" too.
    with pytest.raises(ApiError) as caught:
        prepare_create(resource, {**body(name=name), "kind": resource.kind}, "ns")
    assert caught.value.code == 422 and "metadata.name: Invalid value" in caught.value.message
