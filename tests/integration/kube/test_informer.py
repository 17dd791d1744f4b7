"""The informer against the sandbox: initial sync, live events, resume after a drop, re-list on 410."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import errors, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.informer import Informer
from kubectl_gpushare.kube.types import Pod
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def pod(name: str, node_name: str = "n1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {protocol.RESOURCE_MEM: "1"}}}],
        },
    }


class Recorder:
    """Collects callback calls as (event, name) pairs, thread-safely."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, obj: Pod) -> None:
        with self._lock:
            self.calls.append(("add", obj.metadata.name))

    def update(self, old: Pod, new: Pod) -> None:
        assert old.metadata.resource_version != new.metadata.resource_version
        with self._lock:
            self.calls.append(("update", new.metadata.name))

    def delete(self, obj: Pod) -> None:
        with self._lock:
            self.calls.append(("delete", obj.metadata.name))

    def snapshot(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.calls)

    def wait_for(self, predicate: Callable[[list[tuple[str, str]]], bool], timeout: float = 10) -> None:
        wait_for(lambda: predicate(self.snapshot()), timeout, lambda: f"the callbacks; calls: {self.snapshot()}")


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client(load_config(str(kubeconfig)), component="informer-test")
    yield c
    c.close()


def wait_watching(informer: Informer[Any], timeout: float = 10) -> None:
    wait_for(lambda: informer.watching, timeout, "the informer to watch")


def start(client: Client, recorder: Recorder, **options: Any) -> Informer[Pod]:
    informer = Informer(
        client,
        types.PODS,
        on_add=recorder.add,
        on_update=recorder.update,
        on_delete=recorder.delete,
        page_size=3,
        watch_timeout=30,
        **options,
    ).start()
    assert informer.wait_synced(10)
    return informer


def test_initial_sync_then_live_events(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod(f"p{i}") for i in range(7)])
    recorder = Recorder()
    informer = start(client, recorder)
    try:
        assert sorted(recorder.calls) == sorted(("add", f"p{i}") for i in range(7))
        assert len(informer) == 7 and informer.get("default/p3") is not None
        client.patch_pod("default", "p1", {"metadata": {"annotations": {protocol.ANN_IDX: "0"}}})
        client.create("pods", pod("new"), "default")
        client.delete("pods", "p2", "default")
        recorder.wait_for(lambda calls: ("delete", "p2") in calls)
        assert recorder.calls[7:] == [("update", "p1"), ("add", "new"), ("delete", "p2")]
        cached = informer.get("default/p1")
        assert cached is not None and cached.metadata.annotations[protocol.ANN_IDX] == "0"
        assert informer.get("default/p2") is None
        assert informer.lists == 1
    finally:
        informer.stop()
    assert not informer.running


def test_field_selector_limits_the_cache(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("mine", "n1"), pod("theirs", "n2")])
    recorder = Recorder()
    informer = start(client, recorder, field_selector="spec.nodeName=n1")
    try:
        assert recorder.calls == [("add", "mine")]
        client.create("pods", pod("other", "n2"), "default")
        client.create("pods", pod("also-mine", "n1"), "default")
        recorder.wait_for(lambda calls: ("add", "also-mine") in calls)
        assert ("add", "other") not in recorder.calls
    finally:
        informer.stop()


def test_dropped_watch_resumes_without_relisting(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("a")])
    recorder = Recorder()
    informer = start(client, recorder)
    try:
        wait_watching(informer)
        # The informer is watching once it sent the request; wait for the server to hold it.
        wait_for(sandbox.open_watches, what="the watch to reach the server")
        sandbox.drop_watches()
        client.create("pods", pod("b"), "default")
        recorder.wait_for(lambda calls: ("add", "b") in calls)
        assert informer.lists == 1
        watches = [r for r in sandbox.requests if r.verb == "watch"]
        assert len(watches) >= 2
        assert all(r.query.get("resourceVersion") for r in watches)
    finally:
        informer.stop()


def test_expired_watch_relists_and_emits_deletes_for_vanished_objects(tmp_path: Path) -> None:
    with Sandbox(port=0, history=2) as sandbox:
        client = Client(load_config(str(sandbox.write_kubeconfig(tmp_path / "cfg"))))
        expired_watch_scenario(sandbox, client)


def expired_watch_scenario(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("keep"), pod("doomed")])
    recorder = Recorder()
    informer = start(client, recorder)
    try:
        # Keep the informer's watch down while objects change and the history is compacted.
        wait_watching(informer)
        blocker = sandbox.inject(method="GET", path=r"watch=true", status=500)
        sandbox.drop_watches()
        wait_for(lambda: blocker.hits >= 1, what="the informer to try to watch again")
        client.delete("pods", "doomed", "default")
        client.create("pods", pod("arrived"), "default")
        for _ in range(4):  # push the informer's resourceVersion out of the short history
            client.create("configmaps", {"metadata": {"generateName": "churn-"}}, "default")
        sandbox.clear_faults()
        recorder.wait_for(lambda calls: ("delete", "doomed") in calls and ("add", "arrived") in calls, timeout=15)
        assert blocker.hits >= 1
        assert informer.lists >= 2
        assert sorted(informer.keys()) == ["default/arrived", "default/keep"]
        assert ("delete", "keep") not in recorder.calls
    finally:
        informer.stop()


def test_api_errors_back_off_and_recover(sandbox: Sandbox, client: Client) -> None:
    fault = sandbox.inject(method="GET", path=r"/api/v1/pods", status=503, times=5)
    sandbox.load([pod("a")])
    recorder = Recorder()
    informer = Informer(client, types.PODS, on_add=recorder.add, watch_timeout=30).start()
    try:
        assert informer.wait_synced(15)
        assert fault.hits == 5
        assert recorder.calls == [("add", "a")]
        assert informer.last_error is not None
    finally:
        informer.stop()


def test_failing_callback_does_not_stop_the_informer(sandbox: Sandbox, client: Client) -> None:
    seen: list[str] = []

    def flaky(obj: Pod) -> None:
        seen.append(obj.metadata.name)
        if obj.metadata.name == "bad":
            raise RuntimeError("boom")

    informer = Informer(client, types.PODS, on_add=flaky, watch_timeout=30).start()
    try:
        assert informer.wait_synced(10)
        client.create("pods", pod("bad"), "default")
        client.create("pods", pod("good"), "default")
        wait_for(lambda: "good" in seen, what=lambda: f"the callback for good; seen: {seen}")
        assert seen == ["bad", "good"]
    finally:
        informer.stop()


def test_stop_is_prompt_while_watching(sandbox: Sandbox, client: Client) -> None:
    informer = Informer(client, types.NODES, watch_timeout=300).start()
    assert informer.wait_synced(10)
    wait_watching(informer)  # stopped while blocked reading the stream the server holds open
    wait_for(sandbox.open_watches, what="the watch to reach the server")
    started = time.monotonic()
    informer.stop()
    assert not informer.running
    assert time.monotonic() - started < 2


def test_bookmarks_advance_the_resource_version_without_callbacks(tmp_path: Path) -> None:
    with Sandbox(port=0, bookmark_interval=0.2) as sandbox:
        client = Client(load_config(str(sandbox.write_kubeconfig(tmp_path / "cfg"))))
        sandbox.load([pod("a")])
        recorder = Recorder()
        informer = start(client, recorder)
        try:
            listed = int(informer.resource_version)
            for _ in range(3):  # writes to another kind move the global resourceVersion only
                client.create("configmaps", {"metadata": {"generateName": "other-"}}, "default")
            wait_for(lambda: int(informer.resource_version) > listed, what="a bookmark to advance the version")
            assert recorder.calls == [("add", "a")]
        finally:
            informer.stop()


def test_informer_survives_an_api_server_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = Sandbox(port=0, state_file=state).start()
    port = first.port
    client = Client(load_config(str(first.write_kubeconfig(tmp_path / "cfg"))))
    first.load([pod("before")])
    recorder = Recorder()
    informer = start(client, recorder)
    try:
        wait_watching(informer)
        first.stop()  # saves the state and ends the watch; reconnects are refused until the restart
        wait_for(lambda: isinstance(informer.last_error, errors.Unreachable), 20, "a refused reconnect")
        second = Sandbox(port=port, state_file=state).start()
        try:
            client.create("pods", pod("after"), "default")
            recorder.wait_for(lambda calls: ("add", "after") in calls, timeout=20)
            # Resumed (or re-listed) across the restart: the unchanged object is not reported twice.
            assert recorder.calls.count(("add", "before")) == 1
            assert isinstance(informer.last_error, errors.Unreachable)
        finally:
            second.stop()
    finally:
        informer.stop()


def test_relist_on_demand_reconciles_objects_changed_behind_its_back(tmp_path: Path) -> None:
    with Sandbox(port=0) as sandbox:
        client = Client(load_config(str(sandbox.write_kubeconfig(tmp_path / "cfg"))))
        sandbox.load([pod("keep"), pod("doomed")])
        recorder = Recorder()
        informer = start(client, recorder)
        try:
            wait_watching(informer)
            # Take the watch down so the deletion below reaches the informer only through the list.
            blocker = sandbox.inject(method="GET", path=r"watch=true", status=500)
            sandbox.drop_watches()
            wait_for(lambda: blocker.hits >= 1, what="the informer to try to watch again")
            client.delete("pods", "doomed", "default")
            assert ("delete", "doomed") not in recorder.calls
            assert informer.relist(timeout=10)
            sandbox.clear_faults()
            assert ("delete", "doomed") in recorder.calls
            assert sorted(informer.keys()) == ["default/keep"]
            assert informer.lists == 2
            assert informer.relist(timeout=10) and informer.lists == 3
        finally:
            informer.stop()


def test_relist_is_answered_even_when_its_first_list_fails(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("a")])
    recorder = Recorder()
    informer = start(client, recorder)
    try:
        wait_watching(informer)
        lists = sandbox.inject(method="GET", path=r"^/api/v1/pods\?(?!.*watch=true)", status=500)
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(informer.relist(timeout=30)), daemon=True)
        waiter.start()
        # The client tries 4 times per list: a fifth request is the informer listing again.
        wait_for(lambda: lists.hits >= 5, 20, "the informer to list again after a failed list")
        client.create("pods", pod("b"), "default")
        sandbox.clear_faults()
        waiter.join(30)
        assert result == [True]
        assert informer.get("default/b") is not None  # the list that answered ran after the failure
    finally:
        informer.stop()


def test_relist_without_timeout_returns_when_the_informer_stops(sandbox: Sandbox, client: Client) -> None:
    informer = start(client, Recorder())
    fault = sandbox.inject(method="GET", path=r"^/api/v1/pods", status=500)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(informer.relist()), daemon=True)
    waiter.start()
    wait_for(lambda: fault.hits >= 1, what="the relist to reach its failing list")
    informer.stop()
    waiter.join(10)
    assert result == [False]


def test_resource_k8s_io_kinds_cluster_scoped_and_across_namespaces(sandbox: Sandbox, client: Client) -> None:
    """ResourceSlices (cluster-scoped) and ResourceClaims of every namespace: list, then watch (inspect -w)."""
    seen: dict[str, list[tuple[str, str]]] = {"slices": [], "claims": []}
    lock = threading.Lock()

    def record(kind: str, event: str) -> Callable[..., None]:
        def call(*objects: Any) -> None:
            meta = objects[-1].metadata
            with lock:
                seen[kind].append((event, f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name))
        return call

    def body(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        meta = {"name": name, **({"namespace": namespace} if namespace else {})}
        if kind == "ResourceSlice":
            spec: dict[str, Any] = {"driver": protocol.DRA_DRIVER, "nodeName": "n1",
                                    "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}
        else:
            request = {"name": "gpu", "exactly": {"deviceClassName": protocol.DRA_DEVICE_CLASS}}
            spec = {"devices": {"requests": [request]}}
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": meta, "spec": spec}

    client.create(types.DRA_SLICES, body("ResourceSlice", "s1"))
    client.create(types.DRA_CLAIMS, body("ResourceClaim", "c1", "default"), "default")
    informers = [
        Informer(client, kind, on_add=record(name, "add"), on_update=record(name, "update"),
                 on_delete=record(name, "delete"), name=name).start()
        for name, kind in (("slices", types.DRA_SLICES), ("claims", types.DRA_CLAIMS))
    ]
    try:
        for informer in informers:
            assert informer.wait_synced(10)
            wait_watching(informer)
        client.create(types.DRA_SLICES, body("ResourceSlice", "s2"))
        client.create(types.DRA_CLAIMS, body("ResourceClaim", "c2", "kube-system"), "kube-system")
        client.delete(types.DRA_CLAIMS, "c1", "default")
        wait_for(lambda: len(seen["claims"]) == 3 and len(seen["slices"]) == 2, 10, lambda: f"events: {seen}")
        assert seen == {"slices": [("add", "s1"), ("add", "s2")],
                        "claims": [("add", "default/c1"), ("add", "kube-system/c2"), ("delete", "default/c1")]}
        assert sorted(informers[1].keys()) == ["kube-system/c2"] and sorted(informers[0].keys()) == ["s1", "s2"]
    finally:
        for informer in informers:
            informer.stop()
