"""Finalizers hold a deletion in the sandbox as in kube-apiserver's generic registry (store.go).

Over HTTP and through the real kubectl: DELETE marks and keeps, the update that takes the last
finalizer away deletes, no new finalizer joins an object being deleted, and the sandbox's own
controllers (garbage collector, claim controller, namespace finalization) wait on finalizers too.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

import pytest
from sandbox_http import send
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

Kubectl = Callable[..., Any]
HOLD = "example.com/hold"
CM = "/api/v1/namespaces/default/configmaps"
MERGE = "application/merge-patch+json"


def events_since(sandbox: Sandbox, path: str, rv: str) -> list[tuple[str, str]]:
    """(type, name) of every watch event after ``rv``: the history replays, then a 1 s timeout ends it."""
    connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=10)
    try:
        connection.request("GET", f"{path}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
        reply = connection.getresponse()
        return [(e["type"], e["object"]["metadata"]["name"])
                for e in (json.loads(line) for line in reply.read().splitlines() if line.strip())]
    finally:
        connection.close()


def configmap(name: str, *finalizers: str, namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def test_a_delete_is_held_by_a_finalizer_until_an_update_removes_the_last_one(sandbox: Sandbox) -> None:
    status, created = send(sandbox, "POST", CM, configmap("held", HOLD, "example.com/other"))
    assert status == 201
    start = created["metadata"]["resourceVersion"]

    status, reply = send(sandbox, "DELETE", f"{CM}/held")
    assert status == 200 and reply["kind"] == "ConfigMap"  # the object, not a Status, as store.go returns it
    marked = reply["metadata"]
    assert marked["deletionTimestamp"] and marked["deletionGracePeriodSeconds"] == 0
    assert marked["finalizers"] == [HOLD, "example.com/other"]
    status, got = send(sandbox, "GET", f"{CM}/held")
    assert status == 200 and got["metadata"]["deletionTimestamp"] == marked["deletionTimestamp"]
    assert [i["metadata"]["name"] for i in send(sandbox, "GET", CM)[1]["items"]] == ["held"]

    status, again = send(sandbox, "DELETE", f"{CM}/held")  # a second DELETE changes nothing
    assert status == 200 and again["metadata"]["resourceVersion"] == marked["resourceVersion"]

    # No new finalizer joins an object being deleted (objectmeta.go ValidateNoNewFinalizers): 422.
    body = {**got, "metadata": {**got["metadata"], "finalizers": [HOLD, "example.com/other", "b.io/x", "a.io/y"]}}
    status, refused = send(sandbox, "PUT", f"{CM}/held", body)
    assert status == 422 and refused["reason"] == "Invalid"
    assert refused["message"] == (
        'ConfigMap "held" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object '
        'is being deleted, found new finalizers []string{"a.io/y", "b.io/x"}')
    assert refused["details"]["causes"][0]["field"] == "metadata.finalizers"
    # An update can neither clear nor move the deletion timestamp (rest.BeforeUpdate).
    status, kept = send(sandbox, "PATCH", f"{CM}/held",
                        {"metadata": {"deletionTimestamp": None, "deletionGracePeriodSeconds": None}}, MERGE)
    assert status == 200 and kept["metadata"]["deletionTimestamp"] == marked["deletionTimestamp"]
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 0
    status, kept = send(sandbox, "PATCH", f"{CM}/held",
                        {"metadata": {"deletionTimestamp": "2001-01-01T00:00:00Z"}}, MERGE)
    assert status == 200 and kept["metadata"]["deletionTimestamp"] == marked["deletionTimestamp"]

    status, partly = send(sandbox, "PATCH", f"{CM}/held", {"metadata": {"finalizers": ["example.com/other"]}}, MERGE)
    assert status == 200 and send(sandbox, "GET", f"{CM}/held")[0] == 200  # one finalizer left: still held
    status, last = send(sandbox, "PATCH", f"{CM}/held", {"metadata": {"finalizers": None}}, MERGE)
    assert status == 200 and "finalizers" not in last["metadata"]  # the updated object, as deleteWithoutFinalizers
    assert send(sandbox, "GET", f"{CM}/held")[0] == 404
    assert events_since(sandbox, CM, start) == [("MODIFIED", "held"), ("MODIFIED", "held"), ("DELETED", "held")]


def test_a_put_that_empties_the_finalizers_deletes_and_a_dry_run_keeps(sandbox: Sandbox) -> None:
    send(sandbox, "POST", CM, configmap("held", HOLD))
    _, marked = send(sandbox, "DELETE", f"{CM}/held")
    emptied = {**marked, "metadata": {**marked["metadata"], "finalizers": []}}
    assert send(sandbox, "PUT", f"{CM}/held?dryRun=All", emptied)[0] == 200
    assert send(sandbox, "GET", f"{CM}/held")[0] == 200
    assert send(sandbox, "PUT", f"{CM}/held", emptied)[0] == 200
    assert send(sandbox, "GET", f"{CM}/held")[0] == 404


def test_orphan_dependents_false_on_a_held_delete_is_202(sandbox: Sandbox) -> None:
    send(sandbox, "POST", CM, configmap("held", HOLD))
    status, reply = send(sandbox, "DELETE", f"{CM}/held", {"orphanDependents": False})
    assert status == 202 and reply["metadata"]["deletionTimestamp"]  # handlers/delete.go


def test_a_collection_delete_holds_each_object_by_its_own_finalizers(sandbox: Sandbox) -> None:
    for body in (configmap("free"), configmap("held", HOLD)):
        send(sandbox, "POST", CM, body)
    status, listed = send(sandbox, "DELETE", CM)
    assert status == 200 and sorted(i["metadata"]["name"] for i in listed["items"]) == ["free", "held"]
    assert send(sandbox, "GET", f"{CM}/free")[0] == 404
    status, held = send(sandbox, "GET", f"{CM}/held")
    assert status == 200 and held["metadata"]["deletionTimestamp"]


def test_a_pod_with_a_finalizer_stays_terminating(sandbox: Sandbox, kubectl: Kubectl) -> None:
    pods = "/api/v1/namespaces/default/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": [HOLD]},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    send(sandbox, "POST", pods, pod)
    kubectl("delete", "pod", "p", "--wait=false")
    held = sandbox.get("pods", "default", "p")
    assert held is not None and held["metadata"]["deletionGracePeriodSeconds"] == 0
    assert kubectl("get", "pod", "p", "--no-headers").stdout.split()[2] == "Terminating"
    kubectl("patch", "pod", "p", "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    assert sandbox.get("pods", "default", "p") is None


def test_kubectl_delete_wait_false_leaves_it_and_kubectl_patch_completes_it(sandbox: Sandbox,
                                                                             kubectl: Kubectl) -> None:
    sandbox.load([configmap("held", HOLD)])
    out = kubectl("delete", "configmap", "held", "--wait=false").stdout
    assert out.strip() == 'configmap "held" deleted'
    held = sandbox.get("configmaps", "default", "held")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    refused = kubectl("patch", "configmap", "held", "--type=merge", "-p",
                      '{"metadata":{"finalizers":["example.com/hold","example.com/more"]}}', check=False)
    assert refused.returncode == 1
    assert "no new finalizers can be added if the object is being deleted" in refused.stderr
    kubectl("patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert sandbox.get("configmaps", "default", "held") is None


def test_a_namespace_waits_for_its_held_content_and_its_own_finalizers(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team")
    send(sandbox, "POST", "/api/v1/namespaces/team/configmaps", configmap("held", HOLD, namespace="team"))
    send(sandbox, "POST", "/api/v1/namespaces/team/configmaps", configmap("free", namespace="team"))
    send(sandbox, "PATCH", "/api/v1/namespaces/team", {"metadata": {"finalizers": [HOLD]}}, MERGE)
    status, namespace = send(sandbox, "DELETE", "/api/v1/namespaces/team")
    assert status == 200 and namespace["status"]["phase"] == "Terminating"
    assert namespace["spec"]["finalizers"] == ["kubernetes"]  # content remains: not finalized yet
    assert sandbox.get("configmaps", "team", "free") is None
    held = sandbox.get("configmaps", "team", "held")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    kubectl("patch", "configmap", "held", "-n", "team", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert sandbox.get("configmaps", "team", "held") is None
    namespace = sandbox.get("namespaces", None, "team")
    assert namespace is not None and "finalizers" not in namespace["spec"]  # emptied: its own finalizer remains
    kubectl("patch", "namespace", "team", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert sandbox.get("namespaces", None, "team") is None


@pytest.mark.parametrize("finalizers", [[], None, ["example.com/cleanup"]])
def test_a_namespace_created_without_the_kubernetes_finalizer_gets_it_and_still_waits_for_its_content(
        sandbox: Sandbox, finalizers: list[str] | None) -> None:
    """pkg/registry/core/namespace/strategy.go PrepareForCreate: "kubernetes" is always added.

    Without it, any update of the Terminating namespace would delete it under its held content.
    """
    status, created = send(sandbox, "POST", "/api/v1/namespaces",
                           {"metadata": {"name": "bare"}, "spec": {"finalizers": finalizers}})
    assert status == 201 and created["spec"]["finalizers"] == [*(finalizers or []), "kubernetes"]
    send(sandbox, "POST", "/api/v1/namespaces/bare/configmaps", configmap("held", HOLD, namespace="bare"))
    send(sandbox, "DELETE", "/api/v1/namespaces/bare")
    status, _ = send(sandbox, "PATCH", "/api/v1/namespaces/bare", {"metadata": {"labels": {"x": "y"}}}, MERGE)
    assert status == 200 and sandbox.get("namespaces", None, "bare") is not None


def test_a_namespace_deleted_with_orphan_keeps_the_orphan_finalizer_while_its_content_remains(
        sandbox: Sandbox, kubectl: Kubectl) -> None:
    """pkg/registry/core/namespace/storage/storage.go Delete: shouldHaveOrphanFinalizer adds "orphan"."""
    kubectl("create", "namespace", "o")
    send(sandbox, "POST", "/api/v1/namespaces/o/configmaps", configmap("held", HOLD, namespace="o"))
    kubectl("delete", "namespace", "o", "--cascade=orphan", "--wait=false")
    terminating = json.loads(kubectl("get", "namespace", "o", "-o", "json").stdout)
    assert terminating["metadata"]["finalizers"] == ["orphan"]
    assert terminating["status"]["phase"] == "Terminating" and terminating["spec"]["finalizers"] == ["kubernetes"]
    status, again = send(sandbox, "DELETE", "/api/v1/namespaces/o", {"propagationPolicy": "Background"})
    assert status == 200 and again["metadata"]["finalizers"] == ["orphan"]  # only the first DELETE sets them
    send(sandbox, "PATCH", "/api/v1/namespaces/o/configmaps/held", {"metadata": {"finalizers": None}}, MERGE)
    assert sandbox.get("namespaces", None, "o") is None  # the stand-ins' finish takes the collector's finalizer too


@pytest.mark.parametrize(("finalizers", "options", "query", "status", "written"), [
    ([HOLD], {"propagationPolicy": "Orphan"}, "", 200, [HOLD, "orphan"]),
    ([HOLD], {"orphanDependents": True}, "", 200, [HOLD, "orphan"]),
    ([HOLD], None, "?propagationPolicy=Orphan", 200, [HOLD, "orphan"]),
    ([HOLD, "orphan"], None, "", 200, [HOLD, "orphan"]),
    ([HOLD, "orphan"], {"propagationPolicy": "Background"}, "", 200, [HOLD]),
    (["orphan", HOLD], {"propagationPolicy": "Foreground"}, "", 200, [HOLD, "foregroundDeletion"]),
    ([HOLD, "orphan"], {"orphanDependents": False}, "", 202, [HOLD, "foregroundDeletion"]),
    ([], {"propagationPolicy": "Orphan"}, "", 200, ["orphan"]),
    ([], {"orphanDependents": False}, "", 202, ["foregroundDeletion"]),
    # Convert_Slice_string_To_Pointer_bool (apimachinery runtime/conversion.go): only "0" and "false" in
    # any case are false; anything else, the empty value included, is true, never refused.
    ([], None, "?orphanDependents=maybe", 200, ["orphan"]),
    ([], None, "?orphanDependents=", 200, ["orphan"]),
    ([], None, "?orphanDependents=FALSE&orphanDependents=true", 202, ["foregroundDeletion"]),
    ([], None, "?orphanDependents=0", 202, ["foregroundDeletion"]),
], ids=["orphan-policy", "orphan-dependents", "orphan-query", "kept", "background-removes", "foreground-swaps",
        "orphan-dependents-false", "empty-orphan", "empty-foreground", "query-maybe-is-true", "query-empty-is-true",
        "query-first-false", "query-zero"])
def test_a_namespaces_first_delete_sets_the_collectors_finalizers_as_its_options_ask(
        sandbox: Sandbox, finalizers: list[str], options: Any, query: str, status: int, written: list[str]) -> None:
    meta: dict[str, Any] = {"name": "f", **({"finalizers": finalizers} if finalizers else {})}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
    assert send(sandbox, "POST", "/api/v1/namespaces", namespace)[0] == 201
    got, reply = send(sandbox, "DELETE", f"/api/v1/namespaces/f{query}", options)
    assert (got, reply["metadata"]["finalizers"], reply["status"]["phase"]) == (status, written, "Terminating")
    # Nothing is in it: the stand-ins finish at once, and only a finalizer not the collector's holds it.
    live = sandbox.get("namespaces", None, "f")
    assert (live and live["metadata"].get("finalizers")) == ([HOLD] if HOLD in finalizers else None)


def test_a_namespaces_delete_replies_with_its_stored_update_which_watchers_see_before_its_content_goes(
        sandbox: Sandbox) -> None:
    """storage.go Delete returns GuaranteedUpdate's namespace; the namespace controller acts on it after."""
    for name in ("w", "e"):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        status, created = send(sandbox, "POST", "/api/v1/namespaces", namespace)
        assert status == 201
    start = created["metadata"]["resourceVersion"]
    send(sandbox, "POST", "/api/v1/namespaces/w/configmaps", configmap("held", HOLD, namespace="w"))
    replies = {name: send(sandbox, "DELETE", f"/api/v1/namespaces/{name}")[1]["metadata"] for name in ("w", "e")}
    # The reply is the update as stored, resourceVersion and all, held or not; no grace period is set on it.
    live = sandbox.get("namespaces", None, "w")
    assert live is not None and live["metadata"]["resourceVersion"] == replies["w"]["resourceVersion"]
    assert all("deletionGracePeriodSeconds" not in meta for meta in replies.values())
    held = sandbox.get("configmaps", "w", "held")
    assert held is not None and int(held["metadata"]["resourceVersion"]) > int(replies["w"]["resourceVersion"])
    connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=10)
    try:
        connection.request("GET", f"/api/v1/namespaces?watch=true&resourceVersion={start}&timeoutSeconds=1")
        events = [(e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
                  for e in map(json.loads, connection.getresponse().read().splitlines())]
    finally:
        connection.close()
    assert events[:2] == [("MODIFIED", "w", replies["w"]["resourceVersion"]),
                          ("MODIFIED", "e", replies["e"]["resourceVersion"])]
    assert [(kind, name) for kind, name, _ in events[2:]] == [("DELETED", "e")]  # w stays: its content is held


def test_namespaces_have_no_deletecollection_so_none_bypasses_their_delete(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """storage.go's REST has no DeleteCollection: the installer offers no such verb and the route is a 405."""
    sandbox.load([{"kind": "Namespace", "metadata": {"name": "kept", "labels": {"team": "t"}}}])
    discovery = send(sandbox, "GET", "/api/v1")[1]
    verbs = {r["name"]: r["verbs"] for r in discovery["resources"]}
    assert "deletecollection" not in verbs["namespaces"] and "deletecollection" in verbs["configmaps"]
    status, refused = send(sandbox, "DELETE", "/api/v1/namespaces?fieldSelector=metadata.name%3Dkept")
    assert (status, refused["reason"]) == (405, "MethodNotAllowed")
    assert sandbox.get("namespaces", None, "kept") is not None
    # kubectl deletes selected namespaces one by one, each by storage.go's Delete.
    assert kubectl("delete", "namespaces", "-l", "team=t", "--wait=false").stdout == 'namespace "kept" deleted\n'
    assert sandbox.get("namespaces", None, "kept") is None


def test_a_terminating_namespace_takes_no_new_content_so_it_still_goes(sandbox: Sandbox) -> None:
    """NamespaceLifecycle admission: content created while it waits would hold it for ever."""
    send(sandbox, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}})
    send(sandbox, "POST", "/api/v1/namespaces/t/configmaps", configmap("held", HOLD, namespace="t"))
    assert send(sandbox, "DELETE", "/api/v1/namespaces/t")[0] == 200
    status, body = send(sandbox, "POST", "/api/v1/namespaces/t/configmaps", configmap("late", namespace="t"))
    assert status == 403 and body["message"] == ('configmaps "late" is forbidden: unable to create new content in '
                                                 "namespace t because it is being terminated")
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    late = configmap("", namespace="t")
    late["metadata"] = {"generateName": "late-"}
    status, body = send(sandbox, "POST", "/api/v1/namespaces/t/configmaps", late)
    assert status == 403 and body["message"].startswith("configmaps is forbidden: unable to create")
    send(sandbox, "PATCH", "/api/v1/namespaces/t/configmaps/held", {"metadata": {"finalizers": None}}, MERGE)
    assert sandbox.get("namespaces", None, "t") is None
    assert send(sandbox, "POST", "/api/v1/namespaces/t/configmaps", configmap("again", namespace="t"))[0] == 201


def test_the_immortal_namespaces_are_never_deleted_a_dry_run_included(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """NamespaceLifecycle admission refuses default, kube-system and kube-public after the lookup and preconditions."""
    names = ("default", "kube-system", "kube-public", "team")
    sandbox.load([{"kind": "Namespace", "metadata": {"name": n}} for n in names])
    for name in ("default", "kube-system", "kube-public"):
        for path, options in ((f"/api/v1/namespaces/{name}", None), (f"/api/v1/namespaces/{name}?dryRun=All", None),
                              (f"/api/v1/namespaces/{name}", {"propagationPolicy": "Orphan"})):
            status, body = send(sandbox, "DELETE", path, options)
            assert (status, body["reason"]) == (403, "Forbidden"), path
            assert body["message"] == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
            assert body["details"] == {"name": name, "kind": "namespaces"}
        kept = sandbox.get("namespaces", None, name)
        assert kept is not None and "deletionTimestamp" not in kept["metadata"]
    uid = {"preconditions": {"uid": "other"}}
    assert send(sandbox, "DELETE", "/api/v1/namespaces/default", uid)[1]["reason"] == "Conflict"
    refused = kubectl("delete", "namespace", "default", check=False)
    assert refused.returncode == 1
    assert 'namespaces "default" is forbidden: this namespace may not be deleted' in refused.stderr
    assert kubectl("delete", "namespace", "team", "--wait=false").stdout == 'namespace "team" deleted\n'


@pytest.mark.parametrize("finalizers, words", [
    (["Bad Name!"], 'metadata.finalizers: Invalid value: "Bad Name!": name part must consist of'),
    (["a" * 5000], "name part must be no more than 63 bytes"),
    (["orphan", "foregroundDeletion"], "finalizer orphan and foregroundDeletion cannot be both set"),
])
def test_a_finalizer_name_is_a_qualified_name_on_create_and_update(sandbox: Sandbox, finalizers: list[str],
                                                                    words: str) -> None:
    """ValidateFinalizers (objectmeta.go): a name that no controller could ever match is a 422."""
    status, body = send(sandbox, "POST", CM, configmap("bad", *finalizers))
    assert status == 422 and words in body["message"]
    status, stored = send(sandbox, "POST", CM, configmap("good", HOLD))
    assert status == 201
    stored["metadata"]["finalizers"] = finalizers
    status, body = send(sandbox, "PUT", f"{CM}/good", stored)
    assert status == 422 and words in body["message"]


@pytest.mark.parametrize("finalizers, words", [
    ("x", "cannot unmarshal string into Go struct field ConfigMap.metadata.finalizers of type []string"),
    ([5], "cannot unmarshal number into Go struct field ConfigMap.metadata.finalizers[] of type string"),
])
def test_finalizers_of_the_wrong_json_type_are_a_400_not_a_hold(sandbox: Sandbox, finalizers: Any, words: str) -> None:
    """A string there was stored and held its object (truthy) with a finalizer no update could name."""
    body = configmap("odd")
    body["metadata"]["finalizers"] = finalizers
    status, reply = send(sandbox, "POST", CM, body)
    assert status == 400 and words in reply["message"]
    assert send(sandbox, "POST", CM, configmap("odd"))[0] == 201
    status, reply = send(sandbox, "PATCH", f"{CM}/odd", {"metadata": {"finalizers": finalizers}}, MERGE)
    assert status == 400 and words in reply["message"]


def test_ten_thousand_valid_finalizers_hold_and_release_quickly(sandbox: Sandbox) -> None:
    many = [f"example.com/f{i}" for i in range(10_000)]
    assert send(sandbox, "POST", CM, configmap("many", *many, "kubernetes"))[0] == 201
    assert send(sandbox, "DELETE", f"{CM}/many")[0] == 200
    assert send(sandbox, "PATCH", f"{CM}/many", {"metadata": {"finalizers": None}}, MERGE)[0] == 200
    assert send(sandbox, "GET", f"{CM}/many")[0] == 404


def test_only_finalize_changes_a_namespaces_spec_finalizers(sandbox: Sandbox) -> None:
    """A patch of spec.finalizers is ignored (namespaceStrategy): it cannot drop a namespace under its content."""
    send(sandbox, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "k"}})
    status, live = send(sandbox, "PATCH", "/api/v1/namespaces/k", {"spec": {"finalizers": []}}, MERGE)
    assert status == 200 and live["spec"]["finalizers"] == ["kubernetes"]
    send(sandbox, "POST", "/api/v1/namespaces/k/configmaps", configmap("held", HOLD, namespace="k"))
    send(sandbox, "DELETE", "/api/v1/namespaces/k")
    status, terminating = send(sandbox, "PATCH", "/api/v1/namespaces/k", {"spec": {"finalizers": None}}, MERGE)
    assert status == 200 and terminating["spec"]["finalizers"] == ["kubernetes"]
    assert sandbox.get("namespaces", None, "k") is not None
    send(sandbox, "PATCH", "/api/v1/namespaces/k/configmaps/held", {"metadata": {"finalizers": None}}, MERGE)
    assert sandbox.get("namespaces", None, "k") is None


def test_the_garbage_collectors_own_finalizers_do_not_hold_a_deletion_for_ever(sandbox: Sandbox) -> None:
    """orphan / foregroundDeletion are the collector's to remove, and it does, once the object is deleted."""
    send(sandbox, "POST", CM, configmap("gc", "orphan"))
    assert send(sandbox, "DELETE", f"{CM}/gc")[0] == 200
    assert send(sandbox, "GET", f"{CM}/gc")[0] == 404
    send(sandbox, "POST", CM, configmap("mixed", "foregroundDeletion", HOLD))
    status, held = send(sandbox, "DELETE", f"{CM}/mixed")
    assert status == 200 and held["metadata"]["finalizers"] == [HOLD] and held["metadata"]["deletionTimestamp"]
    send(sandbox, "PATCH", f"{CM}/mixed", {"metadata": {"finalizers": None}}, MERGE)
    assert send(sandbox, "GET", f"{CM}/mixed")[0] == 404


def test_the_garbage_collector_deletes_dependents_through_their_finalizers(sandbox: Sandbox,
                                                                           kubectl: Kubectl) -> None:
    replica_set = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}},
                            "template": {"metadata": {"labels": {"app": "a"}},
                                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    send(sandbox, "POST", "/apis/apps/v1/namespaces/default/replicasets", replica_set)
    pod = wait_for(lambda: next(iter(sandbox.objects("pods")), None), what="the replica set's pod")
    name = pod["metadata"]["name"]
    kubectl("patch", "pod", name, "--type=merge", "-p", json.dumps({"metadata": {"finalizers": [HOLD]}}))
    kubectl("delete", "replicaset", "rs", "--wait=false")
    held = wait_for(lambda: ((sandbox.get("pods", "default", name) or {}).get("metadata") or {}).get(
        "deletionTimestamp"), what="the pod marked by the collector")
    assert held and sandbox.get("pods", "default", name) is not None
    kubectl("patch", "pod", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert sandbox.get("pods", "default", name) is None


def _claim(pod: dict[str, Any] | None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": protocol.DRA_DRIVER, "pool": "n1", "device": "gpu-0"}]}}}
    if pod is not None:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": "default",
                         "finalizers": ["resource.kubernetes.io/delete-protection"]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": protocol.DRA_DRIVER}}]}},
            "status": status}


def test_a_claim_in_use_is_held_by_delete_protection_until_its_pod_goes(sandbox: Sandbox, kubectl: Kubectl) -> None:
    kubectl("run", "p", "--image=busybox", "--restart=Never")
    pod = sandbox.get("pods", "default", "p")
    sandbox.load([_claim(pod)])
    kubectl("delete", "resourceclaim", "shared", "--wait=false")
    held = sandbox.get("resourceclaims", "default", "shared")
    assert held is not None and held["metadata"]["deletionTimestamp"] and held["status"]["reservedFor"]
    kubectl("delete", "pod", "p", "--wait=false")
    wait_for(lambda: sandbox.get("resourceclaims", "default", "shared") is None,
             what="the claim controller to release the claim and its deletion to complete")


def test_an_allocated_unreserved_claim_is_deallocated_and_goes_when_deleted(sandbox: Sandbox,
                                                                            kubectl: Kubectl) -> None:
    sandbox.load([_claim(None)])
    kubectl("delete", "resourceclaim", "shared", "--wait=false")
    wait_for(lambda: sandbox.get("resourceclaims", "default", "shared") is None,
             what="the claim controller to drop delete-protection from the deleted claim")


def test_an_unscheduled_pod_held_by_a_finalizer_releases_its_generated_claim(sandbox: Sandbox,
                                                                            kubectl: Kubectl) -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": _claim(None)["spec"]}}
    assert send(sandbox, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
                template)[0] == 201
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": [HOLD]},
           "spec": {"schedulerName": "nobody", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                    "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}
    send(sandbox, "POST", "/api/v1/namespaces/default/pods", pod)
    wait_for(lambda: sandbox.objects("resourceclaims"), what="the generated claim")
    kubectl("delete", "pod", "p", "--wait=false")
    wait_for(lambda: not sandbox.objects("resourceclaims"),
             what="the claim of a pod deleted before it was scheduled deleted (isPodDone)")
    assert sandbox.get("pods", "default", "p") is not None  # the pod itself is still held
