from __future__ import annotations

import threading

import pytest

from kubectl_gpushare.sandbox.resources import BY_PLURAL
from kubectl_gpushare.sandbox.selectors import parse_field_selector, parse_label_selector
from kubectl_gpushare.sandbox.store import ExpiredError, Store, object_key


def pod(namespace: str, name: str, node: str = "", labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
    }


def names(entries: list) -> list[str]:
    return [e.object()["metadata"]["namespace"] + "/" + e.object()["metadata"]["name"] for e in entries]


def test_list_follows_etcd_key_order_bytewise() -> None:
    store = Store()
    store.load([pod("a", "x"), pod("a-b", "y"), pod("a", "b"), pod("B", "z")])
    entries, _, _, _ = store.select("pods")
    # "/" sorts after "-" bytewise, so namespace "a-b" comes before "a"; upper case first.
    assert names(entries) == ["B/z", "a-b/y", "a/b", "a/x"]
    assert names(store.select("pods", namespace="a")[0]) == ["a/b", "a/x"]


def test_every_write_bumps_one_global_resource_version() -> None:
    store = Store()
    first = store.put("pods", "ns/p", pod("ns", "p"))
    second = store.put("nodes", "n", {"kind": "Node", "metadata": {"name": "n"}})
    assert int(second.object()["metadata"]["resourceVersion"]) == int(first.object()["metadata"]["resourceVersion"]) + 1
    deleted = store.remove("pods", "ns/p")
    assert deleted is not None and deleted.object()["metadata"]["resourceVersion"] == str(store.resource_version)
    assert store.remove("pods", "ns/p") is None


def test_pagination_with_limit_and_after_key() -> None:
    store = Store()
    store.load([pod("ns", f"p{i:02d}") for i in range(25)])
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        entries, _, last, remaining = store.select("pods", limit=10, after=after)
        seen += names(entries)
        pages += 1
        if not last:
            break
        assert remaining == 25 - len(seen)
        after = last
    assert pages == 3
    assert seen == [f"ns/p{i:02d}" for i in range(25)]


def test_select_applies_label_and_field_selectors() -> None:
    store = Store()
    store.load([pod("ns", "a", "n1", {"app": "x"}), pod("ns", "b", "n2", {"app": "x"}), pod("ns", "c", "n1")])
    fields = parse_field_selector("spec.nodeName=n1")
    assert names(store.select("pods", fields=fields)[0]) == ["ns/a", "ns/c"]
    labels = parse_label_selector("app=x")
    assert names(store.select("pods", labels=labels, fields=fields)[0]) == ["ns/a"]


def test_watch_cursor_sees_later_changes_and_expires_old_versions() -> None:
    store = Store(history=4)
    start = store.resource_version
    cursor = store.cursor_after(start)
    for i in range(3):
        store.put("pods", f"ns/p{i}", pod("ns", f"p{i}"))
    changes, cursor = store.changes_since(cursor, timeout=0)
    assert [c.type for c in changes] == ["ADDED"] * 3
    for i in range(10):
        store.put("pods", "ns/p0", pod("ns", "p0", labels={"i": str(i)}))
    with pytest.raises(ExpiredError):
        store.cursor_after(start)
    with pytest.raises(ExpiredError):
        store.changes_since(cursor, timeout=0)
    recent = store.resource_version - 1
    changes, _ = store.changes_since(store.cursor_after(recent), timeout=0)
    assert [c.rv for c in changes] == [store.resource_version]


def test_modified_change_carries_previous_object() -> None:
    store = Store()
    store.put("pods", "ns/p", pod("ns", "p", labels={"v": "1"}))
    cursor = store.cursor_after(store.resource_version)
    store.put("pods", "ns/p", pod("ns", "p", labels={"v": "2"}))
    (change,), _ = store.changes_since(cursor, timeout=0)
    assert change.type == "MODIFIED"
    assert change.previous is not None and change.previous.labels == {"v": "1"}


def test_changes_since_wakes_a_waiting_watcher() -> None:
    store = Store()
    cursor = store.cursor_after(store.resource_version)
    got: list[str] = []

    def wait() -> None:
        changes, _ = store.changes_since(cursor, timeout=5)
        got.extend(c.type for c in changes)

    thread = threading.Thread(target=wait)
    thread.start()
    store.put("pods", "ns/p", pod("ns", "p"))
    thread.join(timeout=5)
    assert got == ["ADDED"]


def test_small_load_reaches_watchers_as_ordinary_events() -> None:
    store = Store(history=10)
    cursor = store.cursor_after(store.resource_version)
    store.load([pod("ns", "a"), pod("ns", "b")])
    store.load([pod("ns", "a", "n1")])
    changes, _ = store.changes_since(cursor, timeout=0)
    assert [(c.type, c.entry.object()["metadata"]["name"]) for c in changes] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("MODIFIED", "a"),
    ]


def test_bulk_load_compacts_history_and_expires_open_watches() -> None:
    store = Store(history=4)
    before = store.resource_version
    cursor = store.cursor_after(before)
    store.load([pod("ns", f"p{i}") for i in range(3)])
    assert store.count("pods") == 3
    with pytest.raises(ExpiredError):
        store.cursor_after(before)
    with pytest.raises(ExpiredError):
        store.changes_since(cursor, timeout=0)
    fresh = store.cursor_after(store.resource_version)
    store.put("pods", "ns/p9", pod("ns", "p9"))
    assert [c.type for c in store.changes_since(fresh, timeout=0)[0]] == ["ADDED"]


def test_load_checks_every_object_before_storing_any() -> None:
    store = Store()
    with pytest.raises(ValueError, match="kind"):
        store.load([pod("ns", "ok"), {"kind": "Widget", "metadata": {"name": "w"}}])
    with pytest.raises(ValueError, match="metadata.name"):
        store.load([pod("ns", "ok"), {"kind": "Pod", "metadata": {}}])
    assert store.count("pods") == 0 and store.resource_version == 0


def test_load_refuses_a_name_that_is_not_a_string() -> None:
    """A TypeError out of the key order (str against int) was the answer to a seeded Node named 5."""
    store = Store()
    with pytest.raises(ValueError, match="metadata.name"):
        store.load([pod("ns", "ok"), {"kind": "Node", "metadata": {"name": 5}}])
    assert store.count("pods") == 0 and store.count("nodes") == 0


def test_loaded_objects_get_system_fields() -> None:
    store = Store()
    store.load(
        [{"kind": "Pod", "metadata": {"name": "p"}}, {"kind": "Node", "metadata": {"name": "n", "namespace": "x"}}]
    )
    loaded = store.get("pods", object_key("default", "p"))
    assert loaded is not None
    meta = loaded.object()["metadata"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"]
    assert loaded.object()["apiVersion"] == "v1"
    node = store.get("nodes", "n")
    assert node is not None and "namespace" not in node.object()["metadata"]
    assert BY_PLURAL["nodes"].field_values(node.object())["metadata.namespace"] == ""


def test_node_name_index_follows_writes_and_deletes() -> None:
    store = Store()
    store.load([pod("a", "p1", "n1"), pod("b", "p2", "n1"), pod("a", "p3", "")])
    on_n1 = parse_field_selector("spec.nodeName=n1")
    unbound = parse_field_selector("spec.nodeName=")
    assert names(store.select("pods", fields=on_n1)[0]) == ["a/p1", "b/p2"]
    store.put("pods", "a/p3", pod("a", "p3", "n1"))  # bound, as a binding does
    store.remove("pods", "b/p2")
    assert names(store.select("pods", fields=on_n1)[0]) == ["a/p1", "a/p3"]
    assert names(store.select("pods", namespace="a", fields=on_n1, limit=1)[0]) == ["a/p1"]
    assert store.select("pods", namespace="a", fields=on_n1, after="a/p1")[0][0].raw == store.get("pods", "a/p3").raw
    assert store.select("pods", fields=unbound)[0] == []
