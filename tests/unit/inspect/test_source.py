from __future__ import annotations

import json
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import source
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.errors import NotFound
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.selectors import SelectorError


def node(name: str, mem: str | None = "16", count: str = "2", labels: dict[str, str] | None = None) -> dict:
    allocatable = {"aliyun.com/gpu-count": count}
    if mem is not None:
        allocatable["aliyun.com/gpu-mem"] = mem
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": allocatable, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
    }


def pod(name: str, node_name: str, limit: str, idx: str | None = "0", phase: str = "Running") -> dict:
    annotations = {"ALIYUN_COM_GPU_MEM_IDX": idx} if idx is not None else {}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name, "annotations": annotations},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": limit}}}],
        },
        "status": {"phase": phase},
    }


def as_list(*items: dict) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}).encode()


def test_json_list_builds_ledger_of_gpu_nodes_sorted_by_name() -> None:
    snapshot = source.from_documents(as_list(node("b"), node("a"), node("cpu", mem=None), pod("p", "b", "3")))
    assert snapshot.names == ["a", "b"]
    assert snapshot.ledger.used("b") == {0: 3}


def test_completed_pods_do_not_count() -> None:
    snapshot = source.from_documents(
        as_list(node("a"), pod("done", "a", "3", phase="Succeeded"), pod("bad", "a", "2", phase="Failed"))
    )
    assert snapshot.ledger.used("a") == {}


def test_yaml_multi_document_and_unquoted_scalars() -> None:
    text = b"""
kind: Node
metadata: {name: a, creationTimestamp: 2024-01-01T00:00:00Z}
status:
  allocatable: {aliyun.com/gpu-mem: 16, aliyun.com/gpu-count: 2}
---
kind: PodList
items:
- metadata: {name: p, namespace: default, uid: u1, annotations: {ALIYUN_COM_GPU_MEM_IDX: 1}}
  spec: {nodeName: a, containers: [{name: c, resources: {limits: {aliyun.com/gpu-mem: 4}}}]}
  status: {phase: Running}
"""
    snapshot = source.from_documents(text)
    assert snapshot.names == ["a"]
    assert snapshot.ledger.used("a") == {1: 4}


def test_named_nodes_are_kept_even_without_memory_and_missing_ones_fail() -> None:
    data = as_list(node("a"), node("cpu", mem=None))
    assert source.from_documents(data, ["cpu", "a"]).names == ["a", "cpu"]
    with pytest.raises(NotFound, match='nodes "zzz" not found'):
        source.from_documents(data, ["a", "zzz"])


def test_selector_filters_nodes_offline() -> None:
    data = as_list(node("a", labels={"pool": "x"}), node("b", labels={"pool": "y"}))
    assert source.from_documents(data, selector="pool=y").names == ["b"]
    assert source.from_documents(data, selector="pool in (x, y),!missing").names == ["a", "b"]


def test_selector_grammar_offline_is_the_servers() -> None:
    data = as_list(node("a", labels={"rank": "3"}), node("b", labels={"rank": "7"}))
    assert source.from_documents(data, selector="rank>5").names == ["b"]
    with pytest.raises(SelectorError, match='Invalid value: "-bad": name part'):
        source.from_documents(data, selector="-bad=x")


def test_live_selector_is_checked_before_any_request() -> None:
    class NoClient:
        def __getattr__(self, name: str) -> None:
            raise AssertionError(f"client.{name} called for a malformed selector")

    with pytest.raises(SelectorError, match='Invalid value: "-bad": name part'):
        source.from_api(NoClient(), selector="-bad=x")


def test_malformed_values_warn_and_count_the_rest() -> None:
    snapshot = source.from_documents(as_list(node("a"), pod("p", "a", "lots"), pod("q", "a", "2", idx="x")))
    assert snapshot.ledger.used("a") == {-1: 2}
    assert len(snapshot.warnings) == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"", "empty", id="empty"),
        pytest.param(b"{not json", "not a Kubernetes JSON list", id="bad-json"),
        pytest.param(b"a: [unclosed", "not valid YAML", id="bad-yaml"),
        pytest.param(b"- 1\n- 2\n", "not a Kubernetes object", id="yaml-sequence"),
        pytest.param(b'{"kind": "List", "items": [{"kind": "Service"}]}', "no Node and no Pod", id="no-nodes"),
        pytest.param(b'{"kind": "Node", "metadata": {"name": 5}}', "not a Kubernetes JSON list", id="wrong-type"),
        pytest.param(b"\xff\xfe", "not a Kubernetes object", id="binary"),
        pytest.param(b'{"items":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply", id="deep-json"),
        pytest.param(b"kind: List\nitems:\n- " + b"[" * 100_000 + b"]" * 100_000, "nested too deeply", id="deep-yaml"),
        pytest.param(b"a: " + b"{a: " * 5000 + b"1" + b"}" * 5000, "nested too deeply", id="deep-yaml-mapping"),
    ],
)
def test_unreadable_input_is_an_input_error(data: bytes, message: str) -> None:
    with pytest.raises(source.InputError, match=message):
        source.from_documents(data)


def test_pods_waiting_for_a_node_are_kept_apart_in_cluster_wide_views_only() -> None:
    waiting = pod("w", "", "3")
    data = as_list(node("a", labels={"pool": "x"}), waiting, pod("nogpu", "", "0"))
    assert [p.name for p in source.from_documents(data).unscheduled] == ["w"]
    assert source.from_documents(data, ["a"]).unscheduled == []
    assert source.from_documents(data, selector="pool=x").unscheduled == []


def test_one_named_node_reads_only_its_pods_as_the_api_field_selector_does() -> None:
    """A HAMi pod still binding (no nodeName) counts on its vgpu-node cluster-wide, not in a one-node view.

    `from_api` lists one named node's pods with ``spec.nodeName=<node>``; a file is read the same way.
    """
    from golden.inspect import cases

    data = as_list(*cases.cluster_objects("mixed-stacks"))

    def names(snapshot: source.Snapshot) -> list[str]:
        return sorted(claim.name for claim in snapshot.stack_claims.get("hami-a", []))

    everywhere = names(source.from_documents(data))
    assert "hami-a-binding" in everywhere
    assert names(source.from_documents(data, ["hami-a"])) == [n for n in everywhere if n != "hami-a-binding"]
    assert names(source.from_documents(data, ["hami-a", "share-node"])) == everywhere


def test_dra_listing_rules_are_the_same_for_any_listing() -> None:
    """404 on slices: not served, nothing said; 403: one warning; claims listed only for a relevant slice."""
    from kubectl_gpushare.kube.errors import Forbidden

    def refuse(error: Exception) -> object:
        def listing() -> list[object]:
            raise error
        return listing

    asked: list[str] = []

    def claims() -> list[object]:
        asked.append("claims")
        return []

    warnings = Warnings()
    objects = source.dra_of_lists(refuse(NotFound(404, "NotFound", "")), claims, warnings)  # type: ignore[arg-type]
    assert not objects.served and warnings.messages == [] and asked == []
    objects = source.dra_of_lists(refuse(Forbidden(403, "Forbidden", "")), claims, warnings)  # type: ignore[arg-type]
    assert objects.served and not objects and asked == []
    assert warnings.messages == ["cannot list resourceslices.resource.k8s.io: GPUs shared through DRA are not shown"]
    objects = source.dra_of_lists(lambda: [], claims, Warnings())
    assert objects.served and asked == [], "no slice of a driver read here: claims are not asked for"


def collected(data: bytes, *kinds: str) -> dict[str, list[Any]]:
    """The raw items of ``kinds`` that `parse_documents` collects in its one pass over ``data``."""
    others: dict[str, list[Any]] = {kind: [] for kind in kinds}
    source.parse_documents(data, None, others)
    return others


def test_parse_documents_collects_an_item_nested_too_deeply_and_keeps_its_neighbours() -> None:
    deep = b'{"kind":"ResourceSlice","spec":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    kept = b'{"kind":"ResourceSlice","metadata":{"name":"s2"}}'
    policy = b'{"kind":"ValidatingAdmissionPolicy","metadata":{"name":"p"}}'
    data = b'{"kind":"List","items":[' + b",".join([deep, kept, policy, json.dumps(node("a")).encode()]) + b"]}"
    found = collected(data, "ResourceSlice", "ValidatingAdmissionPolicy")
    assert [bytes(raw) for raw in found["ResourceSlice"]] == [deep, kept]  # the deep one is refused where decoded
    assert [bytes(raw) for raw in found["ValidatingAdmissionPolicy"]] == [policy]
    with pytest.raises(source.InputError, match="nested too deeply"):
        collected(b'{"items":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "Pod")


@pytest.mark.parametrize("kind", ["ConfigMap", "ValidatingAdmissionPolicy", "ResourceQuota"])
def test_an_item_of_another_kind_nested_too_deeply_is_skipped_alone(kind: str) -> None:
    """The flat scan saved its neighbours (`_document`); decoding it is a skip, not a RecursionError traceback."""
    deep = b'{"kind":"%s","metadata":{"name":"deep"},"x":' % kind.encode() + b"[" * 5000 + b"]" * 5000 + b"}"
    kept = b'{"kind":"%s","metadata":{"name":"kept"}}' % kind.encode()
    data = as_list(node("a"), pod("fine", "a", "3")).replace(b'"items": [', b'"items": [' + deep + b"," + kept + b",")
    found = collected(data, kind, *source.CONFINEMENT_KINDS)
    read = {
        "ConfigMap": lambda: source.configmaps_of(found, Warnings()),
        "ValidatingAdmissionPolicy": lambda: source.confinement_of(found, Warnings()).policies,  # type: ignore[union-attr]
        "ResourceQuota": lambda: source.from_documents(data, quotas=True).quotas,
    }[kind]
    assert [item.metadata.name for item in read()] == ["kept"]
    assert source.from_documents(data).ledger.used("a") == {0: 3}


@pytest.mark.parametrize(
    ("kind", "noun"),
    [
        ("ConfigMap", "configmap ml/bad"),
        ("ResourceQuota", "resourcequota ml/bad"),
        ("ValidatingAdmissionPolicy", "validatingadmissionpolicy ml/bad"),
        ("Device", "device ml/bad"),
    ],
)
def test_an_item_of_another_kind_that_does_not_decode_is_one_warning_in_the_api_paths_words(
    kind: str, noun: str
) -> None:
    """As `client.list`'s ``on_skip`` says it for the same object (`lenient.skipped`): a file and a cluster alike."""
    bad = b'{"kind":"%s","metadata":{"name":"bad","namespace":"ml","labels":5}}' % kind.encode()
    kept = b'{"kind":"%s","metadata":{"name":"kept","namespace":"ml"}}' % kind.encode()
    koord = node("a", labels={"node.koordinator.sh/gpu-model": "A100"})
    data = as_list(koord, pod("fine", "a", "3")).replace(b'"items": [', b'"items": [' + bad + b"," + kept + b",")
    found = collected(data, kind, *source.CONFINEMENT_KINDS)
    warnings = Warnings()
    read = {
        "ConfigMap": lambda: source.configmaps_of(found, warnings),
        "ResourceQuota": lambda: source.decoded_of(found, types.RESOURCEQUOTAS, warnings),
        "ValidatingAdmissionPolicy": lambda: source.confinement_of(found, warnings).policies,  # type: ignore[union-attr]
        "Device": lambda: source.devices_found(
            found, source.parse_documents(data)[0], warnings, protocol.STACK_KOORDINATOR
        ),
    }[kind]
    assert [item.metadata.name for item in read()] == ["kept"]
    assert [message.split(" (")[0] for message in warnings] == [f"{noun}: cannot be decoded"]
    assert list(warnings)[0].endswith("; skipped")


@pytest.mark.parametrize("kind", [types.CONFIGMAPS, types.RESOURCEQUOTAS, types.ADMISSION_POLICIES])
def test_an_item_of_another_kind_not_in_utf8_is_read_with_the_warning_nodes_and_pods_get(
    kind: types.Kind[types.ItemT],
) -> None:
    latin1 = b'{"kind":"%s","metadata":{"name":"g\xf6d","namespace":"ml"}}' % kind.kind.encode()
    data = as_list(node("a")).replace(b'"items": [', b'"items": [' + latin1 + b",")
    found = collected(data, kind.kind)
    warnings = Warnings()
    assert [item.metadata.name for item in source.decoded_of(found, kind, warnings)] == ["g\ufffdd"]
    assert list(warnings) == ["the input is not valid UTF-8; invalid bytes were read as U+FFFD"]


def test_parse_documents_collects_items_as_it_tells_them_apart() -> None:
    plain = b'{"metadata":{"name":"p","namespace":"ml"}}'
    unkinded = b'{"kind":5,"metadata":{"name":"q","namespace":"ml"}}'
    pod_list = b'{"kind":"PodList","items":[' + plain + b"," + unkinded + b"]}"
    assert [bytes(raw) for raw in collected(pod_list, "Pod")["Pod"]] == [plain, unkinded]
    assert [pod.metadata.name for pod in source.parse_documents(pod_list)[1]] == ["p", "q"]
    with pytest.raises(source.InputError, match="no Node and no Pod"):
        collected(pod_list.replace(b"PodList", b"List"), "Pod")


def test_parse_documents_collects_a_kind_not_in_utf8_as_it_reads_it() -> None:
    kept = b'{"kind":"ResourceSlice","metadata":{"name":"s"}}'
    a_node = json.dumps(node("a")).encode()
    data = b'{"kind":"Li\xffst","items":[{"kind":"Resource\xffSlice"},' + kept + b"," + a_node + b"]}"
    assert [bytes(raw) for raw in collected(data, "ResourceSlice")["ResourceSlice"]] == [kept]
    pods = b'{"kind":"PodList","items":[{"kind":"P\xffd","metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}'
    assert [bytes(raw) for raw in collected(pods, "Pod")["Pod"]] == [b'{"metadata":{"name":"b"}}']
    assert [pod.metadata.name for pod in source.parse_documents(pods)[1]] == ["b"]



def _mistyped(item: dict) -> dict:
    item["metadata"]["annotations" if item["kind"] == "Pod" else "labels"] = {"k": ["a list where a string goes"]}
    return item


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_a_listed_node_or_pod_that_does_not_decode_is_skipped_alone_with_one_warning(form: str) -> None:
    """As from the API (`lenient.decode_page`): the neighbours are counted, nothing is credited from the bad one."""
    import yaml

    items = [node("a"), _mistyped(pod("mistyped", "a", "5")), pod("fine", "a", "3"), _mistyped(node("b"))]
    data = as_list(*items) if form == "json" else yaml.safe_dump({"kind": "List", "items": items}).encode()
    snapshot = source.from_documents(data)
    assert snapshot.names == ["a"]
    assert snapshot.ledger.used("a") == {0: 3}
    assert [message.split(" (")[0] for message in snapshot.warnings.messages] == [
        "pod default/mistyped: cannot be decoded", "node b: cannot be decoded"
    ]
    assert all(message.endswith("; skipped") for message in snapshot.warnings.messages)


def test_a_listed_node_nested_too_deeply_is_skipped_alone() -> None:
    deep = b'{"kind":"Node","metadata":{"name":"deep"},"spec":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}"
    data = as_list(node("a"), pod("fine", "a", "3")).replace(b'"items": [', b'"items": [' + deep + b",", 1)
    snapshot = source.from_documents(data)
    assert snapshot.names == ["a"] and snapshot.ledger.used("a") == {0: 3}
    assert snapshot.warnings.messages == ["node deep: cannot be decoded (nested too deeply); skipped"]


def test_pods_that_share_a_uid_are_all_counted_and_a_pod_listed_twice_once() -> None:
    """A merged dump can repeat a uid: the later pod must not replace the first and free its memory."""
    first, second, elsewhere = pod("a", "n", "4"), pod("b", "n", "4"), pod("c", "n", "2", idx="1")
    second["metadata"]["uid"] = elsewhere["metadata"]["uid"] = first["metadata"]["uid"]
    elsewhere["metadata"]["namespace"] = "other"
    snapshot = source.from_documents(as_list(node("n"), first, second, elsewhere, pod("a", "n", "4")))
    assert snapshot.ledger.used("n") == {0: 8, 1: 2}, "a listed twice is one pod; b and c count beside it"
    assert [m for m in snapshot.warnings.messages if "uid" in m] == [
        "pod default/b: uid 'a' is another pod's too; both are counted",
        "pod other/c: uid 'a' is another pod's too; both are counted",
    ]
