"""Decoders skip what they do not read; records count what they can and warn once per problem."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import records, types


def pod_json(
    name: str = "p",
    namespace: str = "default",
    limits: list[Any] | None = None,
    annotations: dict[str, str] | None = None,
    node: str = "n1",
    phase: str = "Running",
    deleting: bool = False,
) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": "cuda", "resources": {"limits": {protocol.RESOURCE_MEM: mem}} if mem else {}}
        for i, mem in enumerate(limits or [])
    ]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "7",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": annotations or {},
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": containers, "volumes": [{"name": "x"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready"}]},
    }


def decode_pod(obj: dict[str, Any]) -> types.Pod:
    return types.POD_DECODER.decode(json.dumps(obj).encode())


def test_pod_list_decoder_reads_paging_metadata_and_ignores_unknown_fields() -> None:
    body = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3},
        "items": [pod_json("a", limits=["2"]), pod_json("b", limits=[None, "4"])],
    }
    page = types.POD_LIST_DECODER.decode(json.dumps(body).encode())
    assert page.metadata.resource_version == "42"
    assert page.metadata.continue_ == "tok"
    assert page.metadata.remaining_item_count == 3
    assert [p.metadata.name for p in page.items] == ["a", "b"]
    assert page.items[1].spec.containers[1].resources.limits == {protocol.RESOURCE_MEM: "4"}
    assert page.items[0].metadata.creation_timestamp == "2026-01-01T00:00:00Z"


def test_node_decoder_reads_status_addresses_and_taints() -> None:
    body = {
        "metadata": {"name": "n1", "labels": {"gpushare": "true"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
        "status": {
            "capacity": {protocol.RESOURCE_MEM: "32", protocol.RESOURCE_COUNT: "2"},
            "allocatable": {protocol.RESOURCE_MEM: "30", protocol.RESOURCE_COUNT: "2"},
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "images": [{"names": ["big"], "sizeBytes": 1}],
        },
    }
    node = types.NODE_DECODER.decode(json.dumps(body).encode())
    assert node.spec.unschedulable is True
    assert node.spec.taints[0].effect == "NoSchedule"
    rec = records.node_record(node, unhealthy=frozenset({1}))
    assert (rec.name, rec.ip, rec.alloc_mem, rec.alloc_count, rec.cap_mem, rec.cap_count) == (
        "n1",
        "10.0.0.5",
        30,
        2,
        32,
        2,
    )
    assert rec.unhealthy == frozenset({1})
    assert rec.labels == (("gpushare", "true"),)


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [([], True), ([{"type": "Ready", "status": "True"}], True), ([{"type": "Ready", "status": "Unknown"}], False)],
)
def test_node_ready(conditions: list[dict[str, str]], ready: bool) -> None:
    node = types.NODE_DECODER.decode(json.dumps({"status": {"conditions": conditions}}).encode())
    assert records.node_ready(node) is ready


def test_decoder_rejects_wrong_types_with_a_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError):
        types.POD_DECODER.decode(b'{"metadata": {"name": 5}}')


def test_status_and_watch_event_decode() -> None:
    status = types.STATUS_DECODER.decode(
        b'{"kind":"Status","status":"Failure","reason":"Expired","code":410,"message":"too old",'
        b'"details":{"retryAfterSeconds":2}}'
    )
    assert (status.code, status.reason, status.details and status.details.retry_after_seconds) == (410, "Expired", 2)
    raw = types.RAW_WATCH_EVENT_DECODER.decode(b'{"type":"ADDED","object":{"metadata":{"name":"x"}}}')
    assert raw.type == "ADDED"
    assert types.POD_DECODER.decode(raw.object).metadata.name == "x"


def test_kind_paths() -> None:
    assert types.PODS.path() == "/api/v1/pods"
    assert types.PODS.path("ns") == "/api/v1/namespaces/ns/pods"
    assert types.PODS.path("ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert types.NODES.path("ignored", "n1", "status") == "/api/v1/nodes/n1/status"
    assert types.LEASES.path("kube-system", "x") == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x"


def test_pod_record_reads_every_field() -> None:
    alloc = json.dumps({"0": {"1": 2}, "1": {"1": 1, "3": 4}})
    pod = decode_pod(
        pod_json(
            limits=["2", None, "1500m"],
            annotations={
                protocol.ANN_IDX: "1",
                protocol.ANN_ALLOCATION: alloc,
                protocol.ANN_ASSIGNED: "false",
                protocol.ANN_ASSUME_TIME: "1700000000000000000",
            },
            deleting=True,
        )
    )
    rec = records.pod_record(pod)
    assert rec.uid == "uid-p" and rec.node == "n1" and rec.phase == "Running"
    assert rec.request == 4 and rec.container_requests == (2, 0, 2)
    assert rec.gpu_index == 1
    assert rec.allocation == ((1, 3), (3, 4))
    assert rec.assigned == "false" and rec.assume_time == 1700000000000000000
    assert rec.terminating is True and rec.created == "2026-01-01T00:00:00Z"


def test_pod_record_ignores_init_containers_and_requests() -> None:
    obj = pod_json(limits=["2"])
    obj["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {protocol.RESOURCE_MEM: "8"}}}]
    obj["spec"]["containers"].append({"name": "r", "resources": {"requests": {protocol.RESOURCE_MEM: "8"}}})
    pod = decode_pod(obj)
    assert records.pod_record(pod).request == 2
    assert records.requests_gpu_memory(pod) is True
    assert records.requests_gpu_memory(decode_pod(pod_json(limits=[None]))) is False


@pytest.mark.parametrize(
    ("limits", "annotations", "expected_request", "gpu_index", "allocation", "warning"),
    [
        (["abc"], {}, 0, -1, None, "invalid quantity 'abc'"),
        (["2", "x1"], {protocol.ANN_IDX: "0"}, 2, 0, None, "invalid quantity 'x1'"),
        (["2"], {protocol.ANN_IDX: "zero"}, 2, -1, None, "is not a GPU index"),
        (["2"], {protocol.ANN_IDX: " 1"}, 2, -1, None, "is not a GPU index"),
        (["2"], {protocol.ANN_IDX: "-7"}, 2, -1, None, "is not a GPU index"),
        (["2"], {protocol.ANN_IDX: "1", protocol.ANN_ALLOCATION: "{not json"}, 2, 1, None, "is not JSON"),
        (["2"], {protocol.ANN_IDX: "1", protocol.ANN_ALLOCATION: '{"0":{"a":2}}'}, 2, 1, None, "not an integer"),
        (["2"], {protocol.ANN_ASSUME_TIME: "yesterday"}, 2, -1, None, "is not unix nanoseconds"),
        (["2"], {protocol.ANN_NODE_GPUS: "ignored on pods"}, 2, -1, None, None),
        (["2"], {protocol.ANN_ALLOCATION: "{}"}, 2, -1, None, None),
        (["1Gi"], {}, 1073741824, -1, None, None),
    ],
    ids=[
        "bad-limit",
        "one-bad-container",
        "idx-word",
        "idx-space",
        "idx-negative",
        "alloc-not-json",
        "alloc-bad-gpu-key",
        "assume-time-word",
        "unrelated-annotation",
        "empty-allocation",
        "binary-suffix",
    ],
)
def test_pod_record_malformed_values_count_what_they_can(
    limits: list[Any],
    annotations: dict[str, str],
    expected_request: int,
    gpu_index: int,
    allocation: tuple[tuple[int, int], ...] | None,
    warning: str | None,
) -> None:
    warnings = records.Warnings()
    rec = records.pod_record(decode_pod(pod_json(limits=limits, annotations=annotations)), warnings)
    assert (rec.request, rec.gpu_index, rec.allocation) == (expected_request, gpu_index, allocation)
    if warning is None:
        assert not warnings
    else:
        assert len(warnings) == 1
        assert warning in warnings.messages[0]
        assert "default/p" in warnings.messages[0]


def test_warnings_are_collected_once_per_distinct_problem() -> None:
    warnings = records.Warnings()
    pod = decode_pod(pod_json(limits=["bad"]))
    for _ in range(3):
        records.pod_record(pod, warnings)
    records.pod_record(decode_pod(pod_json(name="q", limits=["bad"])), warnings)
    assert len(warnings) == 2
    assert warnings.count(warnings.messages[0]) == 3
    assert warnings.summary(limit=1)[-1] == "... and 1 more warning(s)"


@pytest.mark.parametrize(
    ("allocatable", "annotation", "alloc_mem", "gpu_mems", "warned"),
    [
        ({protocol.RESOURCE_MEM: "16", protocol.RESOURCE_COUNT: "2"}, None, 16, None, False),
        ({protocol.RESOURCE_MEM: "lots", protocol.RESOURCE_COUNT: "2"}, None, 0, None, True),
        ({}, None, 0, None, False),
        (
            {protocol.RESOURCE_MEM: "24", protocol.RESOURCE_COUNT: "2"},
            '[{"index":0,"memory":16},{"index":1,"memory":8}]',
            24,
            (16, 8),
            False,
        ),
        ({protocol.RESOURCE_MEM: "24", protocol.RESOURCE_COUNT: "2"}, "[{oops", 24, None, True),
    ],
    ids=["plain", "bad-quantity", "not-gpushare", "heterogeneous", "bad-gpus-annotation"],
)
def test_node_record_table(
    allocatable: dict[str, str], annotation: str | None, alloc_mem: int, gpu_mems: tuple[int, ...] | None, warned: bool
) -> None:
    meta: dict[str, Any] = {"name": "n1"}
    if annotation is not None:
        meta["annotations"] = {protocol.ANN_NODE_GPUS: annotation}
    node = types.NODE_DECODER.decode(json.dumps({"metadata": meta, "status": {"allocatable": allocatable}}).encode())
    warnings = records.Warnings()
    rec = records.node_record(node, warnings=warnings)
    assert (rec.alloc_mem, rec.gpu_mems, rec.ip) == (alloc_mem, gpu_mems, "unknown")
    assert bool(warnings) is warned


def test_node_record_names_the_field_and_resource_of_each_bad_quantity() -> None:
    mem, count = protocol.RESOURCE_MEM, protocol.RESOURCE_COUNT
    too_many = str(protocol.MAX_GPUS_PER_NODE + 1)
    status = {"allocatable": {mem: "lots", count: "2"}, "capacity": {mem: "16", count: too_many}}
    node = types.NODE_DECODER.decode(json.dumps({"metadata": {"name": "n1"}, "status": status}).encode())
    warnings = records.Warnings()
    rec = records.node_record(node, warnings=warnings)
    assert (rec.alloc_mem, rec.alloc_count, rec.cap_mem, rec.cap_count) == (0, 2, 16, 0)
    assert warnings.messages == [
        f"node n1 allocatable {mem}: invalid quantity 'lots', counted as 0",
        f"node n1 capacity {count}: quantity '{too_many}' is outside [0, {protocol.MAX_GPUS_PER_NODE}], counted as 0",
    ]


def test_unhealthy_configmap_helpers() -> None:
    cm = types.CONFIGMAP_DECODER.decode(
        b'{"metadata":{"name":"unhealthy-gpu-n1","namespace":"kube-system"},"data":{"gpus":"0, 2,x"}}'
    )
    assert records.unhealthy_node_name(cm) == "n1"
    assert records.unhealthy_gpus(cm) == frozenset({0, 2})
    other = types.CONFIGMAP_DECODER.decode(b'{"metadata":{"name":"unhealthy-gpu-n1","namespace":"default"}}')
    assert records.unhealthy_node_name(other) is None
    assert records.unhealthy_gpus(None) == frozenset()


def test_malformed_pod_claim_fields_leave_the_pod_readable() -> None:
    from kubectl_gpushare.kube.types import POD_DECODER

    good = POD_DECODER.decode(b'{"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": "gpu", '
                              b'"resourceClaimTemplateName": "t"}]}, "status": {"resourceClaimStatuses": '
                              b'[{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}}')
    assert [c.resource_claim_template_name for c in good.spec.resource_claims] == ["t"]
    assert [s.resource_claim_name for s in good.status.resource_claim_statuses] == ["p-gpu-x"]
    for spec, status in [(b"5", b'"x"'), (b"[5]", b"[[1]]"), (b'{"a": 1}', b"[null]")]:
        pod = POD_DECODER.decode(b'{"metadata": {"name": "p"}, "spec": {"resourceClaims": ' + spec +
                                 b'}, "status": {"resourceClaimStatuses": ' + status + b"}}")
        assert pod.metadata.name == "p"
        assert pod.spec.resource_claims == () and pod.status.resource_claim_statuses == ()
