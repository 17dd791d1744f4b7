"""The REST client against the sandbox over real HTTP: pagination, errors, writes, watches, retries."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Final

import pytest
from api_relay import relay
from waiting import poll

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import errors, types
from kubectl_gpushare.kube.client import Client, default_user_agent
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.deadlines import MILLISECOND, parse_duration
from kubectl_gpushare.kube.lenient import Undecodable
from kubectl_gpushare.kube.retry import RetryPolicy, call_with_retry
from kubectl_gpushare.kube.types import LeaseSpec
from kubectl_gpushare.kube.watch import UndecodableEventError
from kubectl_gpushare.sandbox.server import Sandbox
from tests.loopback_kubeconfig import loopback_client

pytestmark = pytest.mark.integration


def node(name: str, mem: str = "16", count: str = "2") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpushare": "true"}},
        "status": {
            "capacity": {protocol.RESOURCE_MEM: mem, protocol.RESOURCE_COUNT: count},
            "allocatable": {protocol.RESOURCE_MEM: mem, protocol.RESOURCE_COUNT: count},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }


def pod(name: str, node_name: str = "", mem: str = "1", namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {protocol.RESOURCE_MEM: mem}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client(load_config(str(kubeconfig)), component="test")
    yield c
    c.close()


def test_paginated_pod_list_reads_every_page(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([node("n1")] + [pod(f"p{i:03d}", "n1") for i in range(25)])
    sandbox.clear_requests()
    names = [p.metadata.name for p in client.iter_pods(page_size=10)]
    assert names == [f"p{i:03d}" for i in range(25)]
    lists = [r for r in sandbox.requests if r.verb == "list" and r.resource == "pods"]
    assert [r.query.get("limit") for r in lists] == ["10", "10", "10"]
    assert "continue" not in lists[0].query and all("continue" in r.query for r in lists[1:])
    assert all(r.user_agent == default_user_agent("test") for r in lists)


def test_delete_collection_of_a_namespaced_kind_needs_a_namespace(sandbox: Sandbox, client: Client) -> None:
    # kube-apiserver serves DeleteCollection of a namespaced kind at its namespaced path alone
    # (k8s.io/apiserver/pkg/endpoints/installer.go, registerResourceHandlers): refused before sending.
    sandbox.load([node("n1"), pod("a", "n1"), pod("b", "n1", namespace="other")])
    sandbox.clear_requests()
    with pytest.raises(errors.KubeError, match="pods are namespaced: a namespace is required"):
        client.delete_collection(types.PODS, field_selector="spec.nodeName=n1")
    assert sandbox.requests == [] and len(client.list(types.PODS)) == 2
    client.delete_collection(types.PODS, "other", field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in client.list(types.PODS)] == ["a"]


def test_selectors_are_passed_through(sandbox: Sandbox, client: Client) -> None:
    plain = node("n2")
    plain["metadata"]["labels"] = {}
    sandbox.load([node("n1"), plain, pod("a", "n1"), pod("b", "n2")])
    assert [n.metadata.name for n in client.list_nodes(label_selector="gpushare=true")] == ["n1"]
    assert [p.metadata.name for p in client.iter_pods(field_selector="spec.nodeName=n2")] == ["b"]


@pytest.fixture
def short_history(tmp_path: Path) -> Iterator[tuple[Sandbox, Client]]:
    """A sandbox that keeps only a few changes, so old versions and continue tokens expire soon."""
    with Sandbox(port=0, history=2) as sb:
        c = Client(load_config(str(sb.write_kubeconfig(tmp_path / "short"))), prefetch=False)
        yield sb, c
        c.close()


def churn(client: Client, count: int = 6) -> None:
    """Enough writes to push older resourceVersions out of a short history (like etcd compaction)."""
    for _ in range(count):
        client.create("configmaps", {"metadata": {"generateName": "churn-"}, "data": {}}, "default")


def test_expired_continue_token_raises_clearly_and_list_all_starts_over(short_history: tuple[Sandbox, Client]) -> None:
    sandbox, client = short_history
    sandbox.load([pod(f"p{i}") for i in range(6)])
    pages = client.list_pages("pods", page_size=2)
    next(pages)
    churn(client)
    with pytest.raises(errors.Expired, match="changed too much while paging"):
        list(pages)
    items, version = client.list_all("pods", page_size=2)
    assert len(items) == 6 and version


def test_list_raw_keeps_every_item_as_its_json_across_pages_and_starts_over_when_paging_expires(
        sandbox: Sandbox, client: Client) -> None:
    sandbox.load([node("n1")] + [pod(f"p{i:03d}", "n1") for i in range(25)])
    raws = client.list_raw(types.PODS, page_size=10)
    assert [json.loads(bytes(raw))["metadata"]["name"] for raw in raws] == [f"p{i:03d}" for i in range(25)]
    assert json.loads(bytes(raws[0])) == sandbox.get("pods", "default", "p000")
    # A continue token that expired mid-list (410) starts the list over, as list_all does.
    fault = sandbox.inject(method="GET", path=r"/api/v1/pods\?.*continue=", status=410, times=1)
    assert len(client.list_raw(types.PODS, page_size=10)) == 25 and fault.hits == 1


def test_error_replies_map_to_error_classes(sandbox: Sandbox, client: Client) -> None:
    with pytest.raises(errors.NotFound) as missing:
        client.get_pod("default", "ghost")
    assert missing.value.status == 404 and missing.value.reason == "NotFound"
    assert "ghost" in str(missing.value)
    client.create("pods", pod("dup"), "default")
    with pytest.raises(errors.Conflict) as dup:
        client.create("pods", pod("dup"), "default")
    assert dup.value.reason == "AlreadyExists"
    with pytest.raises(errors.Invalid):
        client.create("pods", {"metadata": {"name": "noimage"}, "spec": {"containers": [{"name": "c"}]}}, "default")


def test_namespaced_objects_need_a_namespace(client: Client) -> None:
    with pytest.raises(errors.KubeError, match="namespace is required"):
        client.get("pods", "p")
    with pytest.raises(errors.KubeError, match="unknown resource"):
        client.get("gadgets", "g")


def test_auth_errors_and_readonly_tokens(tmp_path: Path) -> None:
    with Sandbox(port=0, auth=True) as sb:
        anonymous = Client(load_config(str(sb.write_kubeconfig(tmp_path / "anon", token="wrong"))))
        with pytest.raises(errors.Unauthorized) as unauthorized:
            anonymous.list_nodes()
        assert unauthorized.value.exit_code == errors.EXIT_AUTH
        viewer = Client(load_config(str(sb.write_kubeconfig(tmp_path / "ro", token=sb.READONLY_TOKEN))))
        assert viewer.list(types.PODS) == []
        with pytest.raises(errors.Forbidden):
            viewer.list_nodes()  # view grants no nodes
        with pytest.raises(errors.Forbidden):
            viewer.create("pods", pod("x"), "default")
        admin = Client(load_config(str(sb.write_kubeconfig(tmp_path / "admin"))))
        assert admin.create("pods", pod("x"), "default").metadata.name == "x"


def test_429_is_retried_after_retry_after(sandbox: Sandbox, client: Client) -> None:
    fault = sandbox.inject(method="GET", path=r"/api/v1/nodes", status=429, retry_after=1, times=1)
    started = time.monotonic()
    assert client.list_nodes() == []
    assert fault.hits == 1
    assert time.monotonic() - started >= 1.0


def test_5xx_gives_up_after_the_policy_and_other_4xx_never_retry(sandbox: Sandbox, kubeconfig: Path) -> None:
    fast = RetryPolicy(attempts=3, base=0.01, cap=0.02)
    c = Client(load_config(str(kubeconfig)), retry=fast)
    fault = sandbox.inject(method="GET", path=r"/api/v1/nodes", status=503)
    with pytest.raises(errors.ServerError):
        c.list_nodes()
    assert fault.hits == 3
    sandbox.clear_faults()
    forbidden = sandbox.inject(method="GET", path=r"/api/v1/nodes", status=403)
    with pytest.raises(errors.Forbidden):
        c.list_nodes()
    assert forbidden.hits == 1


def test_writes_are_not_retried_unless_asked(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("p")])
    fault = sandbox.inject(method="PATCH", status=500, times=2)
    with pytest.raises(errors.ServerError):
        client.patch_pod("default", "p", {"metadata": {"labels": {"a": "b"}}})
    assert fault.hits == 1
    patched = call_with_retry(
        lambda: client.patch_pod("default", "p", {"metadata": {"labels": {"a": "b"}}}),
        RetryPolicy(attempts=3, base=0.01),
    )
    assert fault.hits == 2 and patched.metadata.labels == {"a": "b"}


def test_dropped_keepalive_connection_is_reopened(sandbox: Sandbox, client: Client) -> None:
    assert client.list_nodes() == []
    sandbox.inject(method="GET", path=r"/api/v1/nodes", drop_watch=True, times=1)
    assert client.list_nodes() == []


def test_unreachable_server_is_reported_with_the_url(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sb = Sandbox(port=0)
    path = sb.write_kubeconfig(tmp_path / "cfg")
    text = path.read_text().replace("http://127.0.0.1:0", f"http://127.0.0.1:{port}")
    path.write_text(text)
    c = Client(load_config(str(path), request_timeout="2s"))
    started = time.monotonic()
    with pytest.raises(errors.Unreachable) as info:
        c.list_nodes()
    assert time.monotonic() - started < 2
    assert f"127.0.0.1:{port}" in str(info.value) and info.value.exit_code == errors.EXIT_UNREACHABLE
    # a refused connection (a stopped sandbox, the wrong context) says what to check
    assert "is it running" in str(info.value) and "current context" in str(info.value)


def test_slow_server_times_out_within_the_request_timeout(sandbox: Sandbox, kubeconfig: Path) -> None:
    # in transit: the server, which answers 504 at its deadline, never sees it in time (a slow network)
    sandbox.inject(method="GET", path=r"/api/v1/nodes", latency=3.0, times=1, in_transit=True)
    c = Client(load_config(str(kubeconfig), request_timeout="500ms"), retry=None)
    started = time.monotonic()
    with pytest.raises(errors.Unreachable) as info:
        c.list_nodes()
    assert info.value.timeout is True
    assert time.monotonic() - started < 2.5


def test_a_deadline_bounds_a_read_and_leaves_the_pooled_connection_as_the_client_waits(
        sandbox: Sandbox, client: Client) -> None:
    sandbox.load([node("n1")])
    # in transit, so the server's 504 at the deadline it was told cannot race the client's own timeout
    sandbox.inject(method="GET", path=r"/api/v1/nodes/n1(\?|$)", latency=3.0, times=1, in_transit=True)
    started = time.monotonic()
    with pytest.raises(errors.Unreachable) as info:  # the client's own timeout is 30 s
        client.get(types.NODES, "n1", deadline=started + 0.5)
    # (the message names the time the read had left: 0.5 s, or a hair less on a loaded machine)
    assert info.value.timeout is True and re.search(r"did not answer after 0\.[45]\d*s", str(info.value))
    assert time.monotonic() - started < 2.5
    with pytest.raises(errors.Unreachable, match="no time left"):  # nothing is sent past the deadline
        client.get(types.NODES, "n1", deadline=time.monotonic() - 1)
    # A read that made its deadline returns its connection to the pool with the client's timeout,
    # so a later reply slower than that deadline, without a deadline of its own, is waited for.
    # (2.5 s leaves a loaded 2-core machine room to answer; a 1 s deadline failed there once.)
    assert client.get(types.NODES, "n1", deadline=time.monotonic() + 2.5).metadata.name == "n1"
    sandbox.inject(method="GET", path=r"/api/v1/nodes/n1(\?|$)", latency=3.5, times=1)
    assert client.get(types.NODES, "n1").metadata.name == "n1"


def test_requests_tell_the_server_their_budget_as_client_go_does_and_watches_do_not(
        sandbox: Sandbox, kubeconfig: Path) -> None:
    # client-go's Request.URL adds timeout=<Duration.String()> when the request has a timeout;
    # kube-apiserver's watch handler ignores it and ends a watch at timeoutSeconds.
    sandbox.load([node("n1")])
    c = Client(load_config(str(kubeconfig), request_timeout="1m30s"), retry=None)
    c.get(types.NODES, "n1")
    c.patch_node("n1", {"metadata": {"labels": {"checked": "yes"}}})
    c.get(types.NODES, "n1", deadline=time.monotonic() + 2.5)
    c.watch(types.NODES, timeout_seconds=1).close()
    untimed = Client(load_config(str(kubeconfig), request_timeout="0"), retry=None)  # no timeout of its own
    untimed.get(types.NODES, "n1")
    get, patch, bounded, watch, unbounded = [r for r in sandbox.requests if r.resource == "nodes"]
    assert (get.verb, get.query) == ("get", {"timeout": "1m30s"})
    assert (patch.verb, patch.query) == ("patch", {"timeout": "1m30s"})
    left = parse_duration(bounded.query["timeout"])  # what was left of the deadline, in whole milliseconds
    assert 0 < left <= 2500 * MILLISECOND and left % MILLISECOND == 0 and bounded.status == 200
    assert watch.verb == "watch" and "timeout" not in watch.query and watch.query["timeoutSeconds"] == "1"
    assert unbounded.verb == "get" and unbounded.query == {}
    c.close()
    untimed.close()


def test_a_fault_pattern_ending_in_dollar_misses_our_clients_requests_as_docs_sandbox_md_warns(
        sandbox: Sandbox, kubeconfig: Path) -> None:
    # Every request carries timeout=, and a fault's pattern is searched in path and query: the
    # pattern docs/sandbox.md shows, (\?|$), fires; one ending in $ never does.
    sandbox.load([node("n1")])
    client = Client(load_config(str(kubeconfig)), retry=None)
    missed = sandbox.inject("GET", r"/nodes/n1$", status=500, times=1)
    assert client.get(types.NODES, "n1").metadata.name == "n1" and missed.hits == 0
    sandbox.clear_faults()
    documented = sandbox.inject("GET", r"/nodes/n1(\?|$)", status=500, times=1)
    with pytest.raises(errors.ServerError):
        client.get(types.NODES, "n1")
    assert documented.hits == 1
    client.close()


def test_a_server_answering_504_timeout_is_an_api_error_of_unknown_outcome(
        sandbox: Sandbox, kubeconfig: Path) -> None:
    sandbox.request_timeout = 0.5  # the server gives up before the client (30 s)
    sandbox.inject("POST", r"/configmaps\?", latency=0.8, after=True, times=1)  # lands 0.3 s after the 504
    c = Client(load_config(str(kubeconfig)), retry=None)
    with pytest.raises(errors.ServerError) as info:
        c.create(types.CONFIGMAPS, {"metadata": {"name": "late"}, "data": {"k": "v"}}, "default")
    assert (info.value.status, info.value.reason) == (504, "Timeout")
    assert not errors.refused(info.value)  # not a refusal: the write may land, and here it does
    assert poll(lambda: sandbox.get("configmaps", "default", "late"), 10), "the write landed after its 504"
    c.close()


@pytest.mark.parametrize("far", [math.inf, 9.223372035059116e18])  # the second: a gRPC call without a deadline
def test_a_far_deadline_on_a_client_without_timeout_is_no_socket_wait_and_nan_leaves_no_time(
        sandbox: Sandbox, kubeconfig: Path, far: float) -> None:
    sandbox.load([node("n1")])
    c = Client(load_config(str(kubeconfig), request_timeout="0"))  # "0": no timeout of its own
    assert c.get(types.NODES, "n1", deadline=time.monotonic() + far).metadata.name == "n1"
    with pytest.raises(errors.Unreachable, match="no time left"):
        c.get(types.NODES, "n1", deadline=math.nan)


@pytest.mark.parametrize("patch_type", ["strategic", "merge", "json"])
def test_patch_types(sandbox: Sandbox, client: Client, patch_type: Any) -> None:
    sandbox.load([pod("p")])
    body: Any = {"metadata": {"annotations": {protocol.ANN_IDX: "1"}}}
    if patch_type == "json":
        body = [{"op": "add", "path": "/metadata/annotations", "value": {protocol.ANN_IDX: "1"}}]
    patched = client.patch_pod("default", "p", body, patch_type)
    assert patched.metadata.annotations[protocol.ANN_IDX] == "1"
    stored = sandbox.get("pods", "default", "p")
    assert stored is not None and stored["metadata"]["annotations"][protocol.ANN_IDX] == "1"


def test_conditional_patch_conflicts_on_stale_resource_version(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("p")])
    current = client.get_pod("default", "p")
    client.patch_pod("default", "p", {"metadata": {"labels": {"x": "1"}}})
    stale = types.annotations_patch({protocol.ANN_IDX: "1"}, current.metadata.resource_version)
    with pytest.raises(errors.Conflict):
        client.patch_pod("default", "p", stale)
    fresh = client.get_pod("default", "p")
    patched = client.patch_pod(
        "default", "p", types.annotations_patch({protocol.ANN_IDX: "1"}, fresh.metadata.resource_version)
    )
    assert patched.metadata.annotations[protocol.ANN_IDX] == "1"
    removed = client.patch_pod("default", "p", types.annotations_patch({protocol.ANN_IDX: None}), "merge")
    assert protocol.ANN_IDX not in removed.metadata.annotations


def test_bind_pod_checks_uid_and_refuses_a_second_bind(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([node("n1")])
    created = client.create("pods", pod("p"), "default")
    with pytest.raises(errors.Conflict):
        client.bind_pod("default", "p", "some-other-uid", "n1")
    client.bind_pod("default", "p", created.metadata.uid, "n1")
    assert client.get_pod("default", "p").spec.node_name == "n1"
    with pytest.raises(errors.Conflict):
        client.bind_pod("default", "p", created.metadata.uid, "n1")


def test_node_status_patch_and_configmap(sandbox: Sandbox, client: Client) -> None:
    sandbox.load(
        [
            node("n1"),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "unhealthy-gpu-n1", "namespace": "kube-system"},
                "data": {"gpus": "1"},
            },
        ]
    )
    updated = client.patch_node_status("n1", {"status": {"capacity": {protocol.RESOURCE_COUNT: "4"}}})
    assert updated.status.capacity[protocol.RESOURCE_COUNT] == "4"
    assert client.get_node("n1").status.capacity[protocol.RESOURCE_MEM] == "16"
    assert client.get_configmap("kube-system", "unhealthy-gpu-n1").data == {"gpus": "1"}


def test_lease_create_update_and_conflict(client: Client) -> None:
    spec = LeaseSpec(holder_identity="a", lease_duration_seconds=15, lease_transitions=0)
    lease = client.create_lease("kube-system", "gpushare", spec)
    assert lease.spec.holder_identity == "a" and lease.metadata.resource_version
    with pytest.raises(errors.Conflict):
        client.create_lease("kube-system", "gpushare", spec)
    renewal = LeaseSpec(holder_identity="a", lease_duration_seconds=15, renew_time="2026-01-01T00:00:05.000000Z")
    renewed = client.update_lease(lease, renewal)
    assert renewed.metadata.resource_version != lease.metadata.resource_version
    with pytest.raises(errors.Conflict):
        client.update_lease(lease, LeaseSpec(holder_identity="b", lease_transitions=1))
    assert client.get_lease("kube-system", "gpushare").metadata.resource_version == renewed.metadata.resource_version


def test_create_event_about_a_pod(sandbox: Sandbox, client: Client) -> None:
    created = client.create("pods", pod("p"), "default")
    event = client.create_event(created, "GPUAssigned", "GPU 1 of n1", component="gpushare-extender")
    assert event.metadata.name.startswith("p.")
    assert event.involved_object.uid == created.metadata.uid
    assert [e.reason for e in client.list("events", "default")] == ["GPUAssigned"]


def test_watch_streams_typed_events_and_close_unblocks(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([pod("p")])
    _, version = client.list_all("pods")
    seen: list[tuple[str, str]] = []
    with client.watch(types.PODS, version, timeout_seconds=30) as watch:

        def consume() -> None:
            for event in watch:
                seen.append((event.type, event.object.metadata.name))

        thread = threading.Thread(target=consume)
        thread.start()
        client.patch_pod("default", "p", {"metadata": {"labels": {"a": "b"}}})
        client.create("pods", pod("q"), "default")
        client.delete("pods", "p", "default")
        poll(lambda: len(seen) >= 3, 5)  # then closed either way; the assertion below names what came
        watch.close()
        thread.join(5)
    assert not thread.is_alive()
    assert seen == [("MODIFIED", "p"), ("ADDED", "q"), ("DELETED", "p")]


def test_watch_from_a_compacted_version_raises_expired(short_history: tuple[Sandbox, Client]) -> None:
    sandbox, client = short_history
    sandbox.load([pod("p")])
    _, version = client.list_all("pods")
    churn(client)
    with pytest.raises(errors.Expired):
        for _ in client.watch(types.PODS, version, timeout_seconds=5):
            pass


def test_client_is_thread_safe(sandbox: Sandbox, client: Client) -> None:
    sandbox.load([node(f"n{i}") for i in range(5)] + [pod(f"p{i}", "n0") for i in range(20)])
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                assert len(client.list_nodes()) == 5
                assert len(list(client.iter_pods(page_size=7))) == 20
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to count open files")
def test_short_lived_threads_do_not_leak_connections(sandbox: Sandbox, client: Client) -> None:
    # The extender serves each HTTP request on a new thread; connections must be pooled, not per thread.
    client.list_nodes()
    before = len(list(Path("/proc/self/fd").iterdir()))
    for _ in range(40):
        thread = threading.Thread(target=client.list_nodes)
        thread.start()
        thread.join(10)
    assert len(list(Path("/proc/self/fd").iterdir())) <= before + 2


@pytest.mark.parametrize("call", ["list", "watch"])
def test_exec_credential_is_refreshed_after_a_401(tmp_path: Path, call: str) -> None:
    """The plugin's first token is stale; the client re-runs it once on 401 and succeeds (a request or a stream)."""
    import stat
    import sys

    import yaml

    counter = tmp_path / "runs"
    script = tmp_path / "cred-plugin"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os\n"
        f"path = {str(counter)!r}\n"
        "runs = int(open(path).read()) if os.path.exists(path) else 0\n"
        "open(path, 'w').write(str(runs + 1))\n"
        f"token = 'stale' if runs == 0 else {Sandbox.ADMIN_TOKEN!r}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',"
        " 'status': {'token': token}}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with Sandbox(port=0, auth=True) as sb:
        path = sb.write_kubeconfig(tmp_path / "cfg")
        doc = yaml.safe_load(path.read_text())
        doc["users"][0]["user"] = {
            "exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}
        }
        path.write_text(yaml.safe_dump(doc))
        c = Client(load_config(str(path)))
        if call == "list":
            assert c.list_nodes() == []
        else:
            c.watch(types.NODES, timeout_seconds=1).close()
        assert counter.read_text() == "2"
        assert [r.status for r in sb.requests if r.resource == "nodes"] == [401, 200]


def test_gzip_and_no_prefetch_options_read_the_same_pages(sandbox: Sandbox, kubeconfig: Path) -> None:
    sandbox.load([pod(f"p{i}") for i in range(9)])
    plain = Client(load_config(str(kubeconfig)))
    other = Client(load_config(str(kubeconfig)), gzip=True, prefetch=False)
    assert [p.metadata.name for p in plain.iter_pods(page_size=4)] == [
        p.metadata.name for p in other.iter_pods(page_size=4)
    ]


class _ListPages(BaseHTTPRequestHandler):
    """Answers every GET and write with the class's ``body``: replies no sandbox serves (Python's json cannot nest)."""

    body = b""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def do_write(self) -> None:
        """A write: its body read (so the connection stays usable), answered as a GET is."""
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.do_GET()

    do_POST = do_PUT = do_PATCH = do_write  # noqa: N815


@contextmanager
def _serving(tmp_path: Path, body: bytes) -> Iterator[Client]:
    """A client of a loopback server that answers every GET and write with ``body``."""
    _ListPages.body = body
    with loopback_client(tmp_path, _ListPages) as client:
        yield client


@pytest.mark.parametrize(("body", "reason"), [
    (b'{"metadata":{},"items":5}', "Expected `array`, got `int`"),
    (b"<html>proxy error</html>", "JSON is malformed"),
    (b'{"metadata":{"x":' + b"[" * 5000 + b"]" * 5000 + b'},"items":[]}', "nested too deeply"),  # its own metadata
], ids=["items-not-a-list", "not-json", "deep-page"])
def test_a_list_page_that_cannot_be_read_is_one_clear_error_on_every_list_path(
        tmp_path: Path, body: bytes, reason: str) -> None:
    with _serving(tmp_path, body) as client:
        for read in (lambda: client.list_raw(types.DRA_CLAIMS), lambda: client.list_all(types.DRA_CLAIMS)):
            with pytest.raises(errors.KubeError) as info:
                read()
            assert str(info.value).startswith("the API server's list of resourceclaims cannot be read: ")
            assert reason in str(info.value) and "\n" not in str(info.value)


DEEP_CLAIM: Final = (b'{"metadata":{"name":"deep","namespace":"ns"},"spec":{"devices":{"config":[{"opaque":'
                     b'{"driver":"d","parameters":' + b"[" * 5000 + b"]" * 5000 + b"}}]}}}")
"""A claim whose opaque parameters nest 5,000 deep: kube-apiserver takes it (10 KiB, OpaqueParametersMaxLength;
Go's decoder follows 10,000 levels), msgspec follows about 1,000."""


def test_one_claim_nested_past_the_decoder_is_skipped_alone_on_every_list_path(tmp_path: Path) -> None:
    good = b'{"metadata":{"name":"%s","namespace":"ns"}}'
    body = b'{"metadata":{"resourceVersion":"9"},"items":[' + b",".join([good % b"a", DEEP_CLAIM, good % b"b"]) + b"]}"
    with _serving(tmp_path, body) as client:
        skipped: list[str] = []
        items, version = client.list_all(types.DRA_CLAIMS, on_skip=skipped.append)
        assert [c.metadata.name for c in items] == ["a", "b"] and version == "9"
        assert skipped == ["resourceclaim ns/deep: cannot be decoded (nested too deeply); skipped"]
        assert [bytes(raw)[:40] for raw in client.list_raw(types.DRA_CLAIMS)] == [
            (good % b"a")[:40], DEEP_CLAIM[:40], (good % b"b")[:40]]


def test_a_watch_event_nested_past_the_decoder_arrives_undecodable_and_the_stream_goes_on(tmp_path: Path) -> None:
    lines = [b'{"type":"MODIFIED","object":' + DEEP_CLAIM + b"}",
             b'{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"ns"}}}']
    with _serving(tmp_path, b"\n".join(lines) + b"\n") as client:
        events = list(client.watch(types.DRA_CLAIMS, "1"))
    assert [e.type for e in events] == ["MODIFIED", "ADDED"]
    bad = events[0].object
    assert isinstance(bad, Undecodable) and (bad.key, bad.error) == ("ns/deep", "nested too deeply")
    assert not isinstance(events[1].object, Undecodable) and events[1].object.metadata.name == "a"


def test_pages_after_the_first_send_no_resource_version_beside_the_continue_token(
        sandbox: Sandbox, client: Client) -> None:
    # kube-apiserver refuses a continue token with a resourceVersion (400); client-go's pager drops it.
    sandbox.load([pod(f"p{i}") for i in range(5)])
    version = str(sandbox.store.resource_version)
    pages = list(client.list_pages("pods", page_size=2, resource_version=version))
    assert [len(page.items) for page in pages] == [2, 2, 1]
    assert {page.metadata.resource_version for page in pages} == {version}


WRITES: Final[dict[str, Callable[[Client], object]]] = {
    "get": lambda client: client.get(types.DRA_CLAIMS, "a", "ns"),
    "create": lambda client: client.create(types.DRA_CLAIMS, {"metadata": {"name": "a"}}, "ns"),
    "replace": lambda client: client.replace(types.DRA_CLAIMS, "a", {"metadata": {"name": "a"}}, "ns"),
    "patch": lambda client: client.patch(types.DRA_CLAIMS, "a", {"metadata": {"labels": {"x": "y"}}}, "ns"),
}
"""Every verb that answers one object, by what it sends."""


@pytest.mark.parametrize("verb", WRITES)
@pytest.mark.parametrize(("reply", "reason"), [
    (b'{"metadata":{"name":"a\xff","namespace":"ns"}}', "a string is not UTF-8"),
    (DEEP_CLAIM, "nested too deeply"),
], ids=["not-utf8", "deep"])
def test_a_reply_with_a_string_not_utf8_or_nested_past_the_decoder_is_an_undecodable_reply(
        verb: str, reply: bytes, reason: str, tmp_path: Path) -> None:
    # The binder and the other writers sort a reply they cannot read as an UndecodableReply (never a traceback).
    # A create names no object: it is named by the reply's metadata where that can be read (not in "a\xff").
    named = "a resourceclaim" if verb == "create" and b"\xff" in reply else (
        "resourceclaim ns/deep" if verb == "create" else "resourceclaim ns/a")
    with _serving(tmp_path, reply) as client, pytest.raises(errors.UndecodableReply) as info:
        WRITES[verb](client)
    assert str(info.value) == f"{named} does not decode as a resource.k8s.io/v1.ResourceClaim ({reason})"


def test_a_create_reply_named_by_its_hostile_metadata_is_still_one_printable_line(tmp_path: Path) -> None:
    # A create names no object: the reply's own name is used; its newlines, ESC and length must not reach the message.
    hostile = json.dumps({"metadata": {"name": "a\nb\x1b[31m" + "x" * 1_000_000, "namespace": "ns"}, "spec": 5})
    with _serving(tmp_path, hostile.encode()) as client, pytest.raises(errors.UndecodableReply) as info:
        WRITES["create"](client)
    key = ("ns/a b [31m" + "x" * 253)[:253]
    assert str(info.value) == (f"resourceclaim {key} does not decode as a resource.k8s.io/v1.ResourceClaim "
                               "(Expected `object`, got `int` - at `$.spec`)")


def _mistyped_pod(name: str) -> dict[str, Any]:
    """A pod whose annotation value is a JSON object: valid JSON that the sandbox serves, not a v1.Pod."""
    bad = pod(name)
    bad["metadata"]["annotations"] = {"hostile": {"not": "a string"}}
    return bad


def test_get_of_an_object_with_a_field_of_the_wrong_type_is_one_line_undecodable_reply(
        sandbox: Sandbox, client: Client) -> None:
    bad_node = node("bad")
    bad_node["status"]["addresses"] = "not a list"
    sandbox.load([_mistyped_pod("bad"), bad_node])
    with pytest.raises(errors.UndecodableReply) as pod_error:
        client.get_pod("default", "bad")
    with pytest.raises(errors.UndecodableReply) as node_error:
        client.get(types.NODES, "bad")
    assert str(pod_error.value) == ("pod default/bad does not decode as a v1.Pod "
                                    "(Expected `str`, got `object` - at `$.metadata.annotations[...]`)")
    assert str(node_error.value) == "node bad does not decode as a v1.Node (Expected `array`, got `str` - at " \
                                    "`$.status.addresses`)"
    # A KubeError like any other API failure: callers that report those report it (exit 1), no traceback.
    assert isinstance(pod_error.value, errors.KubeError) and pod_error.value.exit_code == errors.EXIT_API


def test_a_status_write_whose_reply_does_not_decode_landed_and_says_so_in_one_line(
        sandbox: Sandbox, kubeconfig: Path) -> None:
    sandbox.load([node("n1")])
    mistyped = node("n1")
    mistyped["status"]["addresses"] = "not a list"

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        return json.dumps(mistyped).encode() if method == "PATCH" else None

    with relay(sandbox, rewrite) as port:
        config = dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}")
        with Client(config, retry=None) as client, pytest.raises(errors.UndecodableReply) as info:
            client.patch_node_status("n1", {"status": {"capacity": {"example.com/x": "1"}}}, "merge")
    assert str(info.value) == ("node n1 does not decode as a v1.Node "
                               "(Expected `array`, got `str` - at `$.status.addresses`)")
    assert sandbox.get("nodes", "", "n1")["status"]["capacity"]["example.com/x"] == "1"  # the write landed


def test_a_watch_error_event_nested_past_the_decoder_is_an_undecodable_event(tmp_path: Path) -> None:
    line = b'{"type":"ERROR","object":{"code":500,"extra":' + b"[" * 5000 + b"]" * 5000 + b"}}\n"
    with _serving(tmp_path, line) as client, pytest.raises(UndecodableEventError, match="undecodable event"):
        list(client.watch(types.DRA_CLAIMS, "1"))
