from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.patch import (
    PatchConflictError,
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

POD = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "cuda:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "busybox"},
        ],
        "tolerations": [{"key": "t1"}],
    },
}


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists() -> None:
    result = merge_patch(POD, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"tolerations": []}})
    assert result["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert result["spec"]["tolerations"] == []
    assert POD["metadata"]["labels"] == {"a": "1", "b": "2"}, "input must not change"


def test_merge_patch_replaces_containers_wholesale() -> None:
    result = merge_patch(POD, {"spec": {"containers": [{"name": "main", "image": "cuda:2"}]}})
    assert result["spec"]["containers"] == [{"name": "main", "image": "cuda:2"}]


def test_strategic_merge_patch_merges_containers_by_name() -> None:
    result = strategic_merge_patch(POD, {"spec": {"containers": [{"name": "main", "image": "cuda:2"}]}})
    containers = result["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "sidecar"]
    assert containers[0]["image"] == "cuda:2"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}]


def test_strategic_merge_patch_appends_new_container_and_merges_nested_env() -> None:
    patch = {
        "spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}, {"name": "new", "image": "x"}]}
    }
    result = strategic_merge_patch(POD, patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["main", "sidecar", "new"]
    assert result["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


def test_strategic_merge_patch_delete_directive_removes_element() -> None:
    result = strategic_merge_patch(POD, {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}})
    assert [c["name"] for c in result["spec"]["containers"]] == ["main"]


def test_strategic_merge_patch_replace_directive_on_map_and_list() -> None:
    result = strategic_merge_patch(POD, {"metadata": {"labels": {"$patch": "replace", "z": "9"}}})
    assert result["metadata"]["labels"] == {"z": "9"}
    result = strategic_merge_patch(
        POD, {"spec": {"containers": [{"name": "only", "image": "i"}, {"$patch": "replace"}]}}
    )
    assert result["spec"]["containers"] == [{"name": "only", "image": "i"}]


def test_strategic_merge_patch_unions_finalizers_and_deletes_from_primitive_list() -> None:
    result = strategic_merge_patch(POD, {"metadata": {"finalizers": ["y", "x"]}})
    assert result["metadata"]["finalizers"] == ["x", "y"]
    result = strategic_merge_patch(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})
    assert result["metadata"]["finalizers"] == []


def test_strategic_merge_patch_ignores_set_element_order_and_honours_retain_keys() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "main"}]}}
    assert strategic_merge_patch(POD, patch)["spec"]["containers"] == POD["spec"]["containers"]
    result = strategic_merge_patch({"s": {"a": 1, "b": 2}}, {"s": {"$retainKeys": ["a", "c"], "c": 3}})
    assert result == {"s": {"a": 1, "c": 3}}


def test_strategic_merge_patch_lists_without_merge_key_are_replaced() -> None:
    result = strategic_merge_patch(POD, {"spec": {"tolerations": [{"key": "t2"}]}})
    assert result["spec"]["tolerations"] == [{"key": "t2"}]


def test_strategic_merge_patch_conditions_merge_by_type() -> None:
    node = {
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}
    }
    result = strategic_merge_patch(node, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "False"},
        {"type": "DiskPressure", "status": "False"},
    ]


@pytest.mark.parametrize("body", [[], "x", {"$patch": "explode"}])
def test_strategic_merge_patch_rejects_malformed_patches(body: object) -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch(POD, body)


def test_json_patch_operations() -> None:
    ops = [
        {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "cuda:3"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "t2"}},
        {"op": "copy", "from": "/metadata/labels/b", "path": "/metadata/labels/c"},
        {"op": "move", "from": "/metadata/labels/b", "path": "/metadata/labels/d"},
        {"op": "test", "path": "/metadata/labels/d", "value": "2"},
        {"op": "add", "path": "/metadata/annotations/a~1b", "value": "slash"},
    ]
    result = json_patch(POD, ops)
    assert result["metadata"]["annotations"] == {"k": "v", "a/b": "slash"}
    assert result["spec"]["containers"][0]["image"] == "cuda:3"
    assert result["metadata"]["labels"] == {"c": "2", "d": "2"}
    assert result["spec"]["tolerations"] == [{"key": "t1"}, {"key": "t2"}]
    assert POD["spec"]["containers"][0]["image"] == "cuda:1"


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/metadata/name", "value": "other"}],
        [{"op": "remove", "path": "/metadata/nothing"}],
        [{"op": "replace", "path": "/spec/containers/9/image", "value": "x"}],
        [{"op": "add", "path": "/missing/deeper", "value": 1}],
        [{"op": "replace", "path": "/spec/containers/\u00b2/image", "value": "x"}],
        [{"op": "replace", "path": "/spec/containers/\u0661/image", "value": "x"}],
        [{"op": "remove", "path": "/spec/containers/" + "9" * 5000}],
        [{"op": "copy", "from": "/spec/containers/\u00b2", "path": "/spec/x"}],
    ],
    ids=["failed-test", "remove-missing", "index-out-of-range", "missing-parent", "superscript-index",
         "arabic-indic-index", "5000-digit-index", "superscript-from"],
)
def test_json_patch_conflicts(ops: list[dict[str, object]]) -> None:
    with pytest.raises(PatchConflictError):
        json_patch(POD, ops)


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add"},
        [{"op": "add", "path": "/x"}],
        [{"path": "/x"}],
        [{"op": "jump", "path": "/x"}],
        [{"op": "add", "path": "x", "value": 1}],
    ],
    ids=["not-a-list", "missing-value", "missing-op", "unknown-op", "bad-pointer"],
)
def test_json_patch_malformed(ops: object) -> None:
    with pytest.raises(PatchError):
        json_patch(POD, ops)
