"""The sandbox over raw HTTP: Status codes and reasons, keep-alive, pagination, watch, auth, faults."""

from __future__ import annotations

import http.client
import inspect
import json
import socket
import sys
import threading
import time
from typing import Any

import pytest
from waiting import wait_for

from kubectl_gpushare.sandbox import errors, routes
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p1", "labels": {"app": "a"}},
    "spec": {"containers": [{"name": "c", "image": "cuda"}]},
}


class Client:
    """One keep-alive HTTP connection to the sandbox."""

    def __init__(self, sb: Sandbox, token: str | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=10)
        self.token = token

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, http.client.HTTPResponse]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = dict(headers or {})
        if content_type and data is not None:
            sent["Content-Type"] = content_type
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        self.conn.request(method, path, body=data, headers=sent)
        response = self.conn.getresponse()
        raw = response.read()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw
        return response.status, decoded, response


@pytest.fixture
def client(sandbox: Sandbox) -> Client:
    return Client(sandbox)


def assert_status(result: tuple[int, Any, Any], code: int, reason: str) -> dict[str, Any]:
    status, body, _ = result
    assert status == code, body
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return body


def test_discovery_version_and_unknown_paths(client: Client) -> None:
    status, version, _ = client.call("GET", "/version?timeout=5s")
    assert status == 200 and (version["major"], version["minor"]) == ("1", "32")
    _, api, _ = client.call("GET", "/api/v1")
    names = {r["name"] for r in api["resources"]}
    assert {
        "nodes",
        "nodes/status",
        "pods",
        "pods/status",
        "pods/binding",
        "bindings",
        "namespaces",
        "events",
        "configmaps",
    } <= names
    _, group, _ = client.call("GET", "/apis/coordination.k8s.io/v1")
    assert [r["name"] for r in group["resources"]] == ["leases"]
    _, groups, _ = client.call("GET", "/apis")
    assert groups["kind"] == "APIGroupList"
    _, openapi, _ = client.call("GET", "/openapi/v3")
    assert "api/v1" in openapi["paths"]
    _, doc, _ = client.call("GET", openapi["paths"]["api/v1"]["serverRelativeURL"])
    gvks = [op["patch"]["x-kubernetes-group-version-kind"]["kind"] for op in doc["paths"].values()]
    assert "Pod" in gvks and "Node" in gvks
    assert_status(client.call("GET", "/api/v1/widgets"), 404, "NotFound")
    assert_status(client.call("GET", "/nonsense/path"), 404, "NotFound")
    assert_status(client.call("GET", "/apis/example.com/v1"), 404, "NotFound")


def test_create_get_conflicts_and_not_found(client: Client) -> None:
    status, created, _ = client.call(
        "POST", "/api/v1/namespaces/default/pods?fieldManager=kubectl-create", POD, content_type=None
    )
    assert status == 201
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"].isdigit()
    assert created["apiVersion"] == "v1" and created["kind"] == "Pod"
    assert_status(client.call("POST", "/api/v1/namespaces/default/pods", POD), 409, "AlreadyExists")
    body = assert_status(client.call("GET", "/api/v1/namespaces/default/pods/nope"), 404, "NotFound")
    assert body["message"] == 'pods "nope" not found' and body["details"]["name"] == "nope"
    stale = {**created, "metadata": {**meta, "resourceVersion": "1", "labels": {"x": "y"}}}
    status, _, _ = client.call(
        "PUT", "/api/v1/namespaces/default/pods/p1", {**created, "metadata": {**meta, "labels": {"x": "y"}}}
    )
    assert status == 200
    body = assert_status(client.call("PUT", "/api/v1/namespaces/default/pods/p1", stale), 409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert_status(client.call("POST", "/api/v1/pods", POD), 405, "MethodNotAllowed")
    assert_status(client.call("PUT", "/api/v1/namespaces/default/pods/p1/binding", {}), 405, "MethodNotAllowed")


def test_bad_input_gets_the_right_status_and_server_keeps_serving(sandbox: Sandbox, client: Client) -> None:
    assert_status(client.call("POST", "/api/v1/namespaces/default/pods", b'{"metadata": '), 400, "BadRequest")
    assert_status(
        client.call("POST", "/api/v1/namespaces/default/pods", POD, content_type="text/csv"),
        415,
        "UnsupportedMediaType",
    )
    assert_status(
        client.call("POST", "/api/v1/namespaces/default/pods", POD, content_type="application/vnd.kubernetes.protobuf"),
        415,
        "UnsupportedMediaType",
    )
    assert_status(
        client.call("POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "x"}, "spec": {}}), 422, "Invalid"
    )
    assert_status(client.call("GET", "/api/v1/pods?labelSelector=app%20in%20(a"), 400, "BadRequest")
    body = assert_status(client.call("GET", "/api/v1/pods?fieldSelector=spec.colour%3Dred"), 400, "BadRequest")
    assert "field label not supported" in body["message"]
    assert_status(client.call("GET", "/api/v1/pods?limit=x"), 400, "BadRequest")
    assert_status(client.call("GET", "/api/v1/pods?limit=1&continue=garbage!"), 400, "BadRequest")
    assert_status(
        client.call("PATCH", "/api/v1/nodes/n", {"a": 1}, content_type="application/apply-patch+yaml"),
        415,
        "UnsupportedMediaType",
    )
    huge = json.dumps({**POD, "metadata": {"name": "big", "annotations": {"a": "x" * (4 * 1024 * 1024)}}}).encode()
    assert_status(client.call("POST", "/api/v1/namespaces/default/pods", huge), 413, "RequestEntityTooLarge")
    fresh = client
    status, _, _ = fresh.call("POST", "/api/v1/namespaces/default/pods", POD)
    assert status == 201
    status, listed, _ = fresh.call("GET", "/api/v1/namespaces/default/pods")
    assert status == 200 and [p["metadata"]["name"] for p in listed["items"]] == ["p1"]
    assert_status(
        fresh.call("GET", "/api/v1/pods", headers={"Accept": "application/vnd.kubernetes.protobuf"}),
        406,
        "NotAcceptable",
    )


def test_yaml_body_is_accepted(client: Client) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  gpus: '0,1'\n"
    status, created, _ = client.call(
        "POST", "/api/v1/namespaces/kube-system/configmaps", body, content_type="application/yaml"
    )
    assert status == 201 and created["data"] == {"gpus": "0,1"}


def test_keep_alive_survives_delete_with_a_body(client: Client) -> None:
    client.call("POST", "/api/v1/namespaces/default/pods", POD)
    status, deleted, response = client.call(
        "DELETE",
        "/api/v1/namespaces/default/pods/p1",
        {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
    )
    assert status == 200 and deleted["metadata"]["name"] == "p1" and not response.will_close
    assert_status(client.call("GET", "/api/v1/namespaces/default/pods/p1"), 404, "NotFound")
    client.call("POST", "/api/v1/namespaces/default/pods", POD)
    body = assert_status(
        client.call("DELETE", "/api/v1/namespaces/default/pods/p1", {"preconditions": {"uid": "not-the-uid"}}),
        409,
        "Conflict",
    )
    assert "the UID in the precondition (not-the-uid) does not match the UID in record" in body["message"]


def test_patch_types_and_resource_version_precondition(client: Client) -> None:
    client.call("POST", "/api/v1/namespaces/default/pods", POD)
    path = "/api/v1/namespaces/default/pods/p1"
    _, merged, _ = client.call(
        "PATCH",
        path,
        {"metadata": {"annotations": {"ALIYUN_COM_GPU_MEM_IDX": "1"}}},
        content_type="application/merge-patch+json",
    )
    assert merged["metadata"]["annotations"] == {"ALIYUN_COM_GPU_MEM_IDX": "1"}
    _, smp, _ = client.call(
        "PATCH",
        path,
        {"spec": {"containers": [{"name": "c", "image": "cuda:2"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert smp["spec"]["containers"][0]["image"] == "cuda:2"
    assert smp["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    _, jp, _ = client.call(
        "PATCH",
        path,
        [{"op": "replace", "path": "/metadata/labels/app", "value": "b"}],
        content_type="application/json-patch+json",
    )
    assert jp["metadata"]["labels"] == {"app": "b"}
    rv = jp["metadata"]["resourceVersion"]
    _, same, _ = client.call(
        "PATCH", path, {"metadata": {"labels": {"app": "b"}}}, content_type="application/merge-patch+json"
    )
    assert same["metadata"]["resourceVersion"] == rv, "a no-op patch must not write"
    assert_status(
        client.call(
            "PATCH",
            path,
            {"metadata": {"resourceVersion": "1", "labels": {"z": "1"}}},
            content_type="application/merge-patch+json",
        ),
        409,
        "Conflict",
    )
    assert_status(
        client.call(
            "PATCH",
            path,
            [{"op": "test", "path": "/metadata/name", "value": "x"}],
            content_type="application/json-patch+json",
        ),
        422,
        "Invalid",
    )
    assert_status(
        client.call("PATCH", path, b"[not json", content_type="application/json-patch+json"), 400, "BadRequest"
    )
    assert_status(
        client.call("PATCH", path, {"spec": {"nodeName": "n1"}}, content_type="application/merge-patch+json"),
        422,
        "Invalid",
    )
    assert_status(
        client.call("PATCH", "/api/v1/nodes/absent", {"a": 1}, content_type="application/merge-patch+json"),
        404,
        "NotFound",
    )


def test_status_subresource_splits_spec_and_status(client: Client) -> None:
    client.call("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "1"}}})
    _, node, _ = client.call(
        "PATCH",
        "/api/v1/nodes/n1/status",
        {"status": {"capacity": {"aliyun.com/gpu-mem": "80"}}, "metadata": {"labels": {"x": "y"}}},
        content_type="application/strategic-merge-patch+json",
    )
    assert node["status"]["capacity"] == {"cpu": "1", "aliyun.com/gpu-mem": "80"}
    assert "labels" not in node["metadata"]
    _, node, _ = client.call(
        "PATCH",
        "/api/v1/nodes/n1",
        {"status": {"capacity": {}}, "metadata": {"labels": {"a": "b"}}},
        content_type="application/merge-patch+json",
    )
    assert node["status"]["capacity"]["aliyun.com/gpu-mem"] == "80" and node["metadata"]["labels"] == {"a": "b"}


def test_binding_sets_node_name_once(sandbox: Sandbox, client: Client) -> None:
    _, pod, _ = client.call("POST", "/api/v1/namespaces/default/pods", POD)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1", "uid": "wrong", "annotations": {"ALIYUN_COM_GPU_MEM_IDX": "2"}},
        "target": {"kind": "Node", "name": "n1"},
    }
    assert_status(client.call("POST", "/api/v1/namespaces/default/pods/p1/binding", binding), 409, "Conflict")
    binding["metadata"]["uid"] = pod["metadata"]["uid"]
    status, body, _ = client.call("POST", "/api/v1/namespaces/default/pods/p1/binding", binding)
    assert status == 201 and body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    bound = sandbox.get("pods", "default", "p1")
    assert bound is not None and bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {"ALIYUN_COM_GPU_MEM_IDX": "2"}
    body = assert_status(client.call("POST", "/api/v1/namespaces/default/bindings", binding), 409, "Conflict")
    assert "already assigned" in body["message"]
    assert_status(
        client.call(
            "POST", "/api/v1/namespaces/default/pods/ghost/binding", {**binding, "metadata": {"name": "ghost"}}
        ),
        404,
        "NotFound",
    )


def test_list_pagination_and_resource_version_zero(sandbox: Sandbox, client: Client) -> None:
    sandbox.load(generate_cluster(nodes=2, gpus_per_node=2, pods=25, seed=3, gpu_memory=80))
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        _, page, _ = client.call("GET", f"/api/v1/pods?limit=10&continue={token}")
        assert page["kind"] == "PodList" and page["apiVersion"] == "v1"
        seen += [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in page["items"]]
        pages += 1
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] == 25 - len(seen)
    assert pages == 3 and len(seen) == 25 and seen == sorted(seen, key=lambda k: k.encode())
    _, everything, _ = client.call("GET", "/api/v1/pods?limit=10&resourceVersion=0")
    assert len(everything["items"]) == 25 and "continue" not in everything["metadata"]
    _, selected, _ = client.call("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning&labelSelector=app")
    assert selected["items"] and all(p["status"]["phase"] == "Running" for p in selected["items"])


def test_table_negotiation(sandbox: Sandbox, client: Client) -> None:
    sandbox.load(generate_cluster(nodes=1, gpus_per_node=1, pods=1, seed=1, pending_fraction=0))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    _, result, _ = client.call("GET", "/api/v1/nodes", headers={"Accept": accept})
    assert result["kind"] == "Table" and result["rows"][0]["cells"][0] == "gpu-node-000"
    _, result, _ = client.call("GET", "/api/v1/pods?includeObject=Object", headers={"Accept": accept})
    assert result["rows"][0]["object"]["kind"] == "Pod"
    _, result, _ = client.call("GET", "/api/v1/pods", headers={"Accept": "application/json"})
    assert result["kind"] == "PodList"


def _watch_lines(sb: Sandbox, query: str, count: int, timeout: float = 5) -> list[dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=timeout)
    conn.request("GET", f"/api/v1/pods?watch=true&{query}")
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Transfer-Encoding") == "chunked"
    events = []
    while len(events) < count:
        line = response.readline()
        if not line:
            break
        events.append(json.loads(line))
    conn.close()
    return events


def test_watch_streams_events_with_selectors_and_resume(sandbox: Sandbox, client: Client) -> None:
    _, created, _ = client.call("POST", "/api/v1/namespaces/default/pods", POD)
    start = created["metadata"]["resourceVersion"]
    got: list[dict[str, Any]] = []
    watcher = threading.Thread(
        target=lambda: got.extend(_watch_lines(sandbox, f"resourceVersion={start}&labelSelector=app%3Da", 3))
    )
    watcher.start()
    wait_for(sandbox.open_watches, what="the watch to be served")
    path = "/api/v1/namespaces/default/pods/p1"
    client.call("PATCH", path, {"metadata": {"annotations": {"k": "v"}}}, content_type="application/merge-patch+json")
    client.call("PATCH", path, {"metadata": {"labels": {"app": "other"}}}, content_type="application/merge-patch+json")
    client.call("POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": "p2", "labels": {"app": "a"}}})
    client.call("POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": "p3"}})
    watcher.join(timeout=10)
    # The label change takes p1 out of the selector: a DELETED for that watcher, as kube-apiserver sends.
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
        ("ADDED", "p2"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
    assert rvs == sorted(rvs) and rvs[0] > int(start)
    initial = _watch_lines(sandbox, "resourceVersion=0&timeoutSeconds=1", 10, timeout=5)
    assert sorted(e["object"]["metadata"]["name"] for e in initial) == ["p1", "p2", "p3"]
    assert {e["type"] for e in initial} == {"ADDED"}


def test_watch_timeout_bookmarks_and_initial_events_end(sandbox: Sandbox, client: Client) -> None:
    sandbox.api.bookmark_interval = 0.2
    client.call("POST", "/api/v1/namespaces/default/pods", POD)
    began = time.monotonic()
    events = _watch_lines(
        sandbox,
        "timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        100,
    )
    assert 0.9 < time.monotonic() - began < 4
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert sum(1 for e in events if e["type"] == "BOOKMARK") >= 3


def test_watch_from_compacted_version_gets_410(sandbox: Sandbox, client: Client) -> None:
    small = Sandbox(history=3).start()
    try:
        other = Client(small)
        _, first, _ = other.call("POST", "/api/v1/namespaces/default/pods", POD)
        for i in range(10):
            other.call("POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": f"q{i}"}})
        (event,) = _watch_lines(small, f"resourceVersion={first['metadata']['resourceVersion']}", 1)
        assert event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
        _, page, _ = other.call("GET", "/api/v1/pods?limit=2")
        small.load([{"kind": "Pod", "metadata": {"name": f"seeded-{i}"}} for i in range(2)])  # a bulk load compacts
        assert_status(
            other.call("GET", f"/api/v1/pods?limit=2&continue={page['metadata']['continue']}"), 410, "Expired"
        )
    finally:
        small.stop()


def test_auth_tokens_and_forbidden_writes(tmp_path: Any) -> None:
    with Sandbox(auth=True) as sb:
        assert_status(Client(sb).call("GET", "/api/v1/nodes"), 401, "Unauthorized")
        assert_status(Client(sb, "bogus").call("GET", "/api/v1/nodes"), 401, "Unauthorized")
        reader = Client(sb, sb.READONLY_TOKEN)
        assert reader.call("GET", "/api/v1/pods")[0] == 200
        # view lists no nodes (bootstrappolicy/policy.go, system:aggregate-to-view): RBAC's 403
        body = assert_status(reader.call("GET", "/api/v1/nodes"), 403, "Forbidden")
        assert body["message"] == ('nodes is forbidden: User "sandbox-viewer" cannot list resource "nodes" in API '
                                   'group "" at the cluster scope')  # fmt: skip
        sb.add_token("more", "sandbox-viewer", readonly=True, rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])  # fmt: skip
        assert Client(sb, "more").call("GET", "/api/v1/nodes")[0] == 200
        assert_status(Client(sb, "more").call("GET", "/api/v1/nodes/n"), 403, "Forbidden")  # list, not get
        assert Client(sb, "more").call("GET", "/api/v1/pods")[0] == 200
        body = assert_status(reader.call("POST", "/api/v1/nodes", {"metadata": {"name": "n"}}), 403, "Forbidden")
        assert 'User "sandbox-viewer" cannot create resource "nodes"' in body["message"]
        assert Client(sb, sb.ADMIN_TOKEN).call("POST", "/api/v1/nodes", {"metadata": {"name": "n"}})[0] == 201
        sb.add_token("extender-token", "system:serviceaccount:kube-system:gpushare-extender")
        Client(sb, "extender-token").call("GET", "/api/v1/nodes/n")
        assert sb.requests[-1].user == "system:serviceaccount:kube-system:gpushare-extender"
        kubeconfig = sb.write_kubeconfig(tmp_path / "kc")
        assert sb.ADMIN_TOKEN in kubeconfig.read_text()


def test_fault_injection_and_request_log(sandbox: Sandbox, client: Client) -> None:
    fault = sandbox.inject(method="GET", path=r"/api/v1/nodes$", status=429, retry_after=3, times=1)
    status, body, response = client.call(
        "GET", "/api/v1/nodes", headers={"User-Agent": "kubectl-gpushare/0.1.0 (test)"}
    )
    assert status == 429 and response.getheader("Retry-After") == "3" and body["reason"] == "TooManyRequests"
    assert client.call("GET", "/api/v1/nodes")[0] == 200 and fault.hits == 1
    sandbox.inject(path=r"/pods", status=500, times=1)
    assert_status(client.call("GET", "/api/v1/pods"), 500, "InternalError")
    sandbox.inject(method="POST", path=r"/binding", status=409, times=1)
    assert_status(client.call("POST", "/api/v1/namespaces/d/pods/p/binding", {}), 409, "Conflict")
    sandbox.inject(path=r"/api/v1/namespaces$", latency=0.3, times=1)
    began = time.monotonic()
    client.call("GET", "/api/v1/namespaces")
    assert time.monotonic() - began >= 0.3
    sandbox.inject(path=r"/api/v1/configmaps", drop_watch=True, times=1)
    with pytest.raises((http.client.HTTPException, ConnectionError, socket.timeout)):
        Client(sandbox).call("GET", "/api/v1/configmaps")
    sandbox.clear_faults()
    records = sandbox.requests
    first = records[0]
    assert (first.method, first.verb, first.resource, first.status) == ("GET", "list", "nodes", 429)
    assert first.user_agent == "kubectl-gpushare/0.1.0 (test)" and first.user == "system:anonymous"
    assert any(r.verb == "create" and r.subresource == "binding" and r.status == 409 for r in records)
    sandbox.clear_requests()
    assert sandbox.requests == []


def test_dropped_watch_breaks_the_stream(sandbox: Sandbox) -> None:
    sandbox.inject(path=r"watch=true", drop_watch=True, times=1)
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=5)
    conn.request("GET", "/api/v1/pods?watch=true")
    response = conn.getresponse()
    assert response.status == 200
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    # A watch in progress can be broken off too.
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=5)
    conn.request("GET", "/api/v1/pods?watch=true&timeoutSeconds=30")
    response = conn.getresponse()
    threading.Timer(0.3, sandbox.drop_watches).start()
    began = time.monotonic()
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    assert time.monotonic() - began < 5


def test_namespace_delete_removes_its_objects(sandbox: Sandbox, client: Client) -> None:
    client.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
    client.call("POST", "/api/v1/namespaces/team/pods", POD)
    client.call("POST", "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "c"}})
    status, body, _ = client.call("DELETE", "/api/v1/namespaces/team")
    assert status == 200 and body["status"]["phase"] == "Terminating"
    assert sandbox.objects("pods") == [] and sandbox.objects("configmaps") == []
    status, body, _ = client.call("DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=x")
    assert status == 200 and body["items"] == []


def test_fault_after_handling_commits_the_write_but_fails_the_reply(sandbox: Sandbox, client: Client) -> None:
    client.call("POST", "/api/v1/namespaces/default/pods", POD)
    fault = sandbox.inject("POST", r"/binding$", status=500, after=True, times=1)
    binding = {"metadata": {"name": "p1"}, "target": {"name": "n1"}}
    assert_status(client.call("POST", "/api/v1/namespaces/default/pods/p1/binding", binding), 500, "InternalError")
    bound = sandbox.get("pods", "default", "p1")
    assert fault.hits == 1 and bound is not None and bound["spec"]["nodeName"] == "n1"
    sandbox.inject("PATCH", r"/pods/p1$", drop_watch=True, after=True, times=1)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        Client(sandbox).call(
            "PATCH",
            "/api/v1/namespaces/default/pods/p1",
            {"metadata": {"labels": {"lost": "reply"}}},
            content_type="application/merge-patch+json",
        )
    patched = sandbox.get("pods", "default", "p1")
    assert patched is not None and patched["metadata"]["labels"]["lost"] == "reply"


def test_concurrent_writers_and_watchers_lose_nothing(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "counter", "namespace": "default"}, "data": {"n": "0"}}])
    start = sandbox.store.resource_version
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=30)
    conn.request("GET", f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={start}&timeoutSeconds=20")
    stream = conn.getresponse()
    wait_for(sandbox.open_watches, what="the watch to be served")
    conflicts = [0]
    lock = threading.Lock()

    def increment(times: int) -> None:
        client = Client(sandbox)
        done = 0
        while done < times:
            _, current, _ = client.call("GET", "/api/v1/namespaces/default/configmaps/counter")
            current["data"]["n"] = str(int(current["data"]["n"]) + 1)
            status, _, _ = client.call("PUT", "/api/v1/namespaces/default/configmaps/counter", current)
            if status == 409:
                with lock:
                    conflicts[0] += 1
                continue
            assert status == 200
            done += 1

    def create(prefix: str) -> None:
        client = Client(sandbox)
        for i in range(25):
            assert (
                client.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"{prefix}-{i}"}})[0]
                == 201
            )

    threads = [threading.Thread(target=increment, args=(20,)) for _ in range(4)]
    threads += [threading.Thread(target=create, args=(f"c{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    counter = sandbox.get("configmaps", "default", "counter")
    assert counter is not None and counter["data"]["n"] == "80", "optimistic concurrency lost an update"
    assert len(sandbox.objects("configmaps")) == 101
    expected = 80 + 100
    events = [json.loads(stream.readline()) for _ in range(expected)]
    conn.close()
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == expected, "one global, strictly increasing resourceVersion"
    assert rvs[-1] == sandbox.store.resource_version
    assert [int(e["object"]["data"]["n"]) for e in events if e["object"]["metadata"]["name"] == "counter"] == list(
        range(1, 81)
    )


def test_legacy_watch_path(sandbox: Sandbox, client: Client) -> None:
    client.call("POST", "/api/v1/namespaces/default/pods", POD)
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=5)
    conn.request("GET", "/api/v1/watch/namespaces/default/pods?timeoutSeconds=1")
    response = conn.getresponse()
    lines = [json.loads(line) for line in response.read().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "p1")]
    assert sandbox.requests[-1].verb == "watch"


def test_state_is_saved_periodically_and_atomically(tmp_path: Any) -> None:
    state = tmp_path / "state.json"
    with Sandbox(state_file=state, save_interval=0.1) as sb:
        sb.load([{"kind": "Node", "metadata": {"name": "n1"}}])
        wait_for(lambda: state.exists() and b'"n1"' in state.read_bytes(), what="a periodic save")
        Client(sb).call("POST", "/api/v1/nodes", {"metadata": {"name": "n2"}})
    saved = json.loads(state.read_text())
    assert sorted(o["metadata"]["name"] for o in saved["items"]) == ["n1", "n2"]
    assert saved["resourceVersion"] >= 2
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"], "no temporary files left behind"
    with Sandbox(state_file=state) as again:
        restored = again.get("nodes", None, "n2")
        assert (
            restored is not None
            and restored["metadata"]["resourceVersion"] == saved["items"][1]["metadata"]["resourceVersion"]
        )
        assert again.store.resource_version == saved["resourceVersion"]


def test_stop_closes_keep_alive_connections_and_a_restart_on_the_same_port_serves() -> None:
    sb = Sandbox().start()
    port = sb.port
    client = Client(sb)
    assert client.call("GET", "/api/v1/nodes")[0] == 200
    sb.stop()
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        client.call("GET", "/api/v1/nodes")
    with Sandbox(port=port) as again:
        assert Client(again).call("GET", "/api/v1/nodes")[0] == 200


def test_continued_pages_report_the_first_pages_version_so_a_watch_misses_nothing(
    sandbox: Sandbox, client: Client
) -> None:
    for i in range(4):
        client.call("POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"name": f"p{i}"}})
    _, first, _ = client.call("GET", "/api/v1/pods?limit=2")
    client.call(
        "PATCH",
        "/api/v1/namespaces/default/pods/p0",
        {"metadata": {"labels": {"changed": "while-paging"}}},
        content_type="application/merge-patch+json",
    )
    _, second, _ = client.call("GET", f"/api/v1/pods?limit=2&continue={first['metadata']['continue']}")
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    (event,) = _watch_lines(sandbox, f"resourceVersion={second['metadata']['resourceVersion']}", 1)
    assert event["type"] == "MODIFIED" and event["object"]["metadata"]["labels"]["changed"] == "while-paging"


def test_a_request_held_past_the_request_timeout_is_abandoned_without_effect() -> None:
    # kube-apiserver answers 504 Timeout at --request-timeout and the write never reaches storage
    # (here shortened to half a second; only an injected latency makes a request that slow). A
    # watch is long-running: no request timeout applies to it.
    with Sandbox(port=0, request_timeout=0.5) as sb:
        client = Client(sb)
        configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
        held = sb.inject("POST", r"/configmaps$", latency=1.0, times=1)
        # The timeout filter's 504 (server/filters/timeout.go): a bare Status, no kind, sniffed as text/plain.
        status, body, response = client.call("POST", "/api/v1/namespaces/default/configmaps", configmap)
        assert (status, body["reason"], body["message"]) == (504, "Timeout", errors.ALLOTTED_TIMEOUT_MESSAGE), body
        assert response.getheader("Content-Type") == errors.HANDLER_TIMEOUT_CONTENT_TYPE
        assert held.hits == 1 and not sb.objects("configmaps")
        assert client.call("POST", "/api/v1/namespaces/default/configmaps", configmap)[0] == 201
        slow_watch = sb.inject("GET", r"watch=true", latency=1.0, times=1)
        status, events, _ = client.call("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1")
        assert status == 200 and slow_watch.hits == 1 and events["type"] == "ADDED", events


class _WriteInTheGap:
    """A clock for the watch code that lands one write at the exact point the bookmark race needs.

    The watch loop reads the clock to decide on a bookmark right after a wait came back empty; once
    armed, that read (and only that one, found by its source line) first writes a ConfigMap from the
    watcher's own thread, so the write falls after the wait and before the bookmark's version is read.
    """

    def __init__(self, sb: Sandbox) -> None:
        source, first = inspect.getsourcelines(routes.Api._stream)
        check = "time.monotonic() - last_bookmark >= self.bookmark_interval"
        self.line = first + next(i for i, text in enumerate(source) if check in text)
        self.sb = sb
        self.armed = threading.Event()
        self.fired = threading.Event()

    def monotonic(self) -> float:
        caller = sys._getframe(1)
        if (self.armed.is_set() and caller.f_lineno == self.line and caller.f_locals.get("changes") == []
                and not self.fired.is_set()):
            self.fired.set()
            self.sb.load([{"kind": "ConfigMap", "metadata": {"name": "in-the-gap", "namespace": "default"}}])
        return time.monotonic()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_a_bookmark_never_announces_a_write_before_its_event(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    # A client resuming from a bookmark's resourceVersion would miss for good an event sent after it.
    clock = _WriteInTheGap(sandbox)
    monkeypatch.setattr(routes, "time", clock)
    sandbox.api.bookmark_interval = 0.0  # a bookmark after every wait
    start = sandbox.store.resource_version
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=30)
    conn.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true"
                        f"&resourceVersion={start}&timeoutSeconds=60")
    response = conn.getresponse()
    seen: list[tuple[str, int]] = []
    try:
        while len(seen) < 2 or seen[-1][0] != "BOOKMARK":  # idle: the watch bookmarks its start
            event = json.loads(response.readline())
            seen.append((event["type"], int(event["object"]["metadata"]["resourceVersion"])))
        clock.armed.set()
        while not seen or seen[-1][0] != "ADDED":
            event = json.loads(response.readline())
            seen.append((event["type"], int(event["object"]["metadata"]["resourceVersion"])))
    finally:
        conn.close()
    assert clock.fired.is_set()
    written = start + 1
    assert seen[-1] == ("ADDED", written)
    assert all(rv < written for kind, rv in seen if kind == "BOOKMARK"), seen
