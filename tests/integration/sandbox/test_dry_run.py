"""Server-side dry run: ``dryRun=All`` never persists, on any write verb; any other value is refused.

kube-apiserver validates ``dryRun`` before a write (API concepts page, "Dry-run": "An invalid or
unrecognized dryRun directive will result in an error response and no further processing of the
request"), so a client that sends ``dryRun=true`` sees a 422 on a real cluster and must see one here.
The other delete options it validates (``propagationPolicy``) are refused the same way.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import golden_files
import pytest

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
Kubectl = Callable[..., subprocess.CompletedProcess[str]]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def call(
    sb: Sandbox, method: str, path: str, body: Any = None, content_type: str = "application/json"
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(sb.url + path, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def call_raw(sb: Sandbox, method: str, path: str, body: bytes) -> tuple[int, bytes]:
    req = urllib.request.Request(sb.url + path, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def seed(sb: Sandbox, *names: str) -> None:
    sb.load([{"kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}, "data": {"k": "v"}} for n in names])


def test_delete_collection_with_dry_run_deletes_nothing(sandbox: Sandbox) -> None:
    seed(sandbox, "a", "b")
    status, answer = call(sandbox, "DELETE", CONFIGMAPS + "?dryRun=All")
    assert status == 200 and sorted(i["metadata"]["name"] for i in answer["items"]) == ["a", "b"]
    status, answer = call(sandbox, "DELETE", CONFIGMAPS, {"dryRun": ["All"]})
    assert status == 200 and len(answer["items"]) == 2
    assert all(sandbox.get("configmaps", "default", name) is not None for name in ("a", "b"))


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "options"),
    [
        ("POST", CONFIGMAPS, {"metadata": {"name": "new"}}, "application/json", "CreateOptions"),
        ("PUT", CONFIGMAPS + "/a", {"metadata": {"name": "a"}, "data": {}}, "application/json", "UpdateOptions"),
        ("PATCH", CONFIGMAPS + "/a", {"data": {"k": "w"}}, "application/merge-patch+json", "PatchOptions"),
        ("DELETE", CONFIGMAPS + "/a", None, "application/json", "DeleteOptions"),
        ("DELETE", CONFIGMAPS, None, "application/json", "DeleteOptions"),
    ],
    ids=["create", "update", "patch", "delete", "deletecollection"],
)
def test_an_unknown_dry_run_value_is_refused_and_writes_nothing(
    sandbox: Sandbox, method: str, path: str, body: Any, content_type: str, options: str
) -> None:
    seed(sandbox, "a")
    before = sandbox.get("configmaps", "default", "a")
    status, answer = call(sandbox, method, path + "?dryRun=true", body, content_type)
    assert status == 422 and answer["reason"] == "Invalid", answer
    assert answer["message"] == (
        f'{options}.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{{"true"}}: supported values: "All"'
    )
    assert sandbox.get("configmaps", "default", "a") == before
    assert sandbox.get("configmaps", "default", "new") is None


def test_delete_options_with_an_unknown_dry_run_value_are_refused(sandbox: Sandbox) -> None:
    # ValidateDryRun (apimachinery meta/v1/validation/validation.go): field.NotSupported(dryRun, <the whole
    # list>, ["All"]), so the supported value it holds is shown too; the Status byte for byte.
    seed(sandbox, "a")
    status, raw = call_raw(sandbox, "DELETE", CONFIGMAPS + "/a", b'{"dryRun": ["All", "Some"]}')
    assert status == 422
    golden_files.golden("sandbox/dry_run_unsupported.json", raw)
    assert sandbox.get("configmaps", "default", "a") is not None


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("dryRun=Bogus&dryRun=All", '[]string{"Bogus", "All"}'),
        ("dryRun=All&dryRun=", '[]string{"All", ""}'),
        # strconv.Quote of each value: printable UTF-8 as it is, a control byte or one that is not UTF-8 as \xNN.
        ("dryRun=%C2%B5%01%FF%22", '[]string{"\u00b5\\x01\\xff\\""}'),
    ],
    ids=["a supported value too", "an empty value", "escapes"],
)
def test_the_dry_run_refusal_shows_every_value_as_go_prints_a_string_slice(sandbox: Sandbox, query: str,
                                                                            shown: str) -> None:  # fmt: skip
    status, answer = call(sandbox, "POST", f"{CONFIGMAPS}?{query}", {"metadata": {"name": "new"}})
    assert status == 422, answer
    assert answer["message"] == f'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: {shown}: ' \
                                'supported values: "All"'
    assert answer["details"]["causes"] == [{"reason": "FieldValueNotSupported", "field": "dryRun",
                                            "message": f'Unsupported value: {shown}: supported values: "All"'}]
    assert sandbox.get("configmaps", "default", "new") is None


@pytest.mark.parametrize("path", [CONFIGMAPS + "/a", CONFIGMAPS], ids=["delete", "deletecollection"])
def test_a_delete_with_a_body_takes_its_options_from_the_body_alone(sandbox: Sandbox, path: str) -> None:
    # DeleteResource and DeleteCollection (apiserver endpoints/handlers/delete.go) decode a non-empty body
    # into DeleteOptions and read the query only when there is none.
    seed(sandbox, "a")
    status, answer = call(sandbox, "DELETE", path + "?dryRun=All", {})
    assert status == 200, answer
    assert sandbox.get("configmaps", "default", "a") is None  # the body's options: a real delete
    seed(sandbox, "a")
    status, answer = call(sandbox, "DELETE", path + "?dryRun=Bogus&propagationPolicy=Bogus", {"dryRun": ["All"]})
    assert status == 200, answer  # the query's bad options are never read
    assert sandbox.get("configmaps", "default", "a") is not None  # the body's dryRun: nothing deleted
    status, answer = call(sandbox, "DELETE", path + "?dryRun=All&orphanDependents=true",
                          {"propagationPolicy": "Bogus"})  # fmt: skip
    assert status == 422 and answer["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Bogus": '
        'supported values: "Foreground", "Background", "Orphan", "nil"'), answer
    status, answer = call(sandbox, "DELETE", path + "?dryRun=All")
    assert status == 200 and sandbox.get("configmaps", "default", "a") is not None  # no body: the query's


@pytest.mark.parametrize("path", [CONFIGMAPS + "/a", CONFIGMAPS], ids=["delete", "deletecollection"])
@pytest.mark.parametrize("body", [b'{"dryRun": "All"}', b"[1]", b'{"dryRun": [', b'{"propagationPolicy": 5}',
                                  b'{"preconditions": 1}'])  # fmt: skip
def test_a_bad_delete_body_is_a_clean_400_even_with_good_query_options(sandbox: Sandbox, path: str,
                                                                        body: bytes) -> None:  # fmt: skip
    seed(sandbox, "a")
    status, raw = call_raw(sandbox, "DELETE", path + "?dryRun=All", body)
    answer = json.loads(raw)
    assert (status, answer["kind"], answer["reason"], answer["code"]) == (400, "Status", "BadRequest", 400), answer
    assert "\n" not in answer["message"]
    assert sandbox.get("configmaps", "default", "a") is not None


@pytest.mark.parametrize(("body", "message"), [
    ({"orphanDependents": "true"}, "string into Go struct field DeleteOptions.orphanDependents of type bool"),
    ({"orphanDependents": 1, "propagationPolicy": "Orphan"},
     "number into Go struct field DeleteOptions.orphanDependents of type bool"),
    ({"gracePeriodSeconds": "0"}, "string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
    ({"gracePeriodSeconds": 1.5}, "number 1.5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
    ({"gracePeriodSeconds": True}, "bool into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
    ({"preconditions": "x"}, "string into Go struct field DeleteOptions.preconditions of type v1.Preconditions"),
    ({"preconditions": {"uid": 7}}, "number into Go struct field Preconditions.preconditions.uid of type types.UID"),
    ({"dryRun": ["All", 1]}, "number into Go struct field DeleteOptions.dryRun of type string"),
    ({"propagationPolicy": ["Orphan"], "orphanDependents": "x"},  # the first in the body is the one named
     "array into Go struct field DeleteOptions.propagationPolicy of type v1.DeletionPropagation"),
], ids=["orphan-string", "orphan-number-with-policy", "grace-string", "grace-float", "grace-bool",
        "preconditions-string", "precondition-uid-number", "dry-run-element", "first-in-body"])
@pytest.mark.parametrize("path", [CONFIGMAPS + "/a", CONFIGMAPS, "/api/v1/namespaces/doomed"],
                         ids=["delete", "deletecollection", "namespace"])
def test_a_mistyped_delete_option_is_a_400_in_go_decoders_words_and_deletes_nothing(
        sandbox: Sandbox, path: str, body: dict[str, Any], message: str) -> None:
    # handlers/delete.go wraps the DeleteOptions decode error as a BadRequest (kubernetes#133358, 1.35):
    # Go's UnmarshalTypeError, never a delete that ignores the field or a 422 about another one.
    seed(sandbox, "a")
    sandbox.load([{"kind": "Namespace", "metadata": {"name": "doomed"}}])
    status, answer = call(sandbox, "DELETE", path, body)
    assert (status, answer["reason"], answer["message"]) == (400, "BadRequest", f"json: cannot unmarshal {message}")
    assert sandbox.get("configmaps", "default", "a") is not None
    assert "deletionTimestamp" not in sandbox.get("namespaces", None, "doomed")["metadata"]


SCHEME = "pkg/apis/meta/internalversion/scheme/register.go:27"


@pytest.mark.parametrize(("body", "message"), [
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}},
     f'no kind "Pod" is registered for version "v1" in scheme "{SCHEME}"'),
    ({"kind": "fixed"}, f'no kind "fixed" is registered for version "meta.k8s.io/v1" in scheme "{SCHEME}"'),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "orphanDependents": "x"},  # the kind is read first
     f'no kind "Deployment" is registered for version "apps/v1" in scheme "{SCHEME}"'),
    ({"apiVersion": "v1", "kind": "APIResourceList"},
     "converting (v1.APIResourceList) to (v1.DeleteOptions): unknown conversion"),
    ({"kind": True}, "couldn't get version/kind; json parse error: json: cannot unmarshal bool into Go struct field "
                     ".kind of type string"),
    ({"apiVersion": "a/b/c", "kind": "DeleteOptions"}, "unexpected GroupVersion string: a/b/c"),
], ids=["pod", "no-api-version", "before-fields", "meta-kind", "kind-bool", "bad-group-version"])
@pytest.mark.parametrize("path", [CONFIGMAPS + "/a", "/api/v1/namespaces/doomed"], ids=["delete", "namespace"])
def test_a_delete_body_of_another_kind_is_a_400_and_deletes_nothing(
        sandbox: Sandbox, path: str, body: dict[str, Any], message: str) -> None:
    # handlers/delete.go decodes the body with the meta scheme, defaulting to meta.k8s.io/v1 DeleteOptions:
    # another kind is never taken as options (kubernetes#139487's words; a 400 since kubernetes#133358).
    seed(sandbox, "a")
    sandbox.load([{"kind": "Namespace", "metadata": {"name": "doomed"}}])
    status, answer = call(sandbox, "DELETE", path, body)
    assert (status, answer["reason"], answer["message"]) == (400, "BadRequest", message)
    assert sandbox.get("configmaps", "default", "a") is not None
    assert "deletionTimestamp" not in sandbox.get("namespaces", None, "doomed")["metadata"]


def test_delete_options_of_any_api_version_are_taken(sandbox: Sandbox, kubectl: Kubectl, tmp_path: Path) -> None:
    # The meta scheme registers DeleteOptions unversioned: every apiVersion names it.
    for api_version in ("v1", "meta.k8s.io/v1", "apps/v1", None):
        seed(sandbox, "a")
        body = {"kind": "DeleteOptions", "apiVersion": api_version, "dryRun": ["All"]}
        status, answer = call(sandbox, "DELETE", CONFIGMAPS + "/a", body)
        assert status == 200 and sandbox.get("configmaps", "default", "a") is not None, answer
        assert call(sandbox, "DELETE", CONFIGMAPS + "/a", {**body, "dryRun": None})[0] == 200
        assert sandbox.get("configmaps", "default", "a") is None
    seed(sandbox, "a")
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}))
    refused = kubectl("delete", "--raw", CONFIGMAPS + "/a", "-f", str(pod), check=False)
    assert refused.returncode == 1 and 'no kind "Pod" is registered for version "v1"' in refused.stderr
    assert sandbox.get("configmaps", "default", "a") is not None
    assert kubectl("delete", "configmap", "a").stdout == 'configmap "a" deleted\n'


@pytest.mark.parametrize(("path", "plural", "namespace", "words"), [
    (CONFIGMAPS + "/a", "configmaps", "default", 'ConfigMap "a": the {f} in the precondition ({want}) does not match '
                                                  "the {f} in record ({got}). The object might have been {why}"),
    ("/apis/coordination.k8s.io/v1/namespaces/default/leases/a", "leases", "default",
     'Lease.coordination.k8s.io "a": the {f} in the precondition ({want}) does not match the {f} in record ({got}). '
     "The object might have been {why}"),
    ("/api/v1/namespaces/a", "namespaces", None,
     'namespaces "a": Precondition failed: {f} in precondition: {want}, {f} in object meta: {got}'),
], ids=["configmap", "grouped-kind", "namespace"])
def test_a_delete_precondition_set_to_empty_still_fails_in_its_stores_words(
        sandbox: Sandbox, path: str, plural: str, namespace: str | None, words: str) -> None:
    # A set precondition is a non-nil pointer, compared as it is: rest.BeforeDelete (registry/rest/delete.go)
    # for store.go's kinds, pkg/registry/core/namespace/storage/storage.go Delete for a namespace.
    seed(sandbox, "a")
    sandbox.load([{"kind": "Namespace", "metadata": {"name": "a"}},
                  {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "a",
                                                                                       "namespace": "default"}}])
    meta = sandbox.get(plural, namespace, "a")["metadata"]
    for pre, label, key, why in (({"uid": ""}, "UID", "uid", "deleted and then recreated"),
                                 ({"uid": meta["uid"], "resourceVersion": ""}, "ResourceVersion", "resourceVersion",
                                  "modified")):
        status, answer = call(sandbox, "DELETE", path, {"preconditions": pre})
        message = "Operation cannot be fulfilled on " + words.format(f=label, want="", got=meta[key], why=why)
        assert (status, answer["reason"], answer["message"]) == (409, "Conflict", message)
        assert "deletionTimestamp" not in sandbox.get(plural, namespace, "a")["metadata"]
    pre = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
    assert call(sandbox, "DELETE", path, {"preconditions": pre})[0] == 200


@pytest.mark.parametrize("path", [CONFIGMAPS + "/a", CONFIGMAPS], ids=["delete", "deletecollection"])
def test_a_refused_query_propagation_policy_is_quoted_as_go_holds_its_bytes(sandbox: Sandbox, path: str) -> None:
    # strconv.Quote of the DeletionPropagation as the query decoded it: a byte that is not UTF-8 is \xNN.
    seed(sandbox, "a")
    status, answer = call(sandbox, "DELETE", path + "?propagationPolicy=%C2%B5%FF%01")
    assert status == 422 and answer["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "\u00b5\\xff\\x01": '
        'supported values: "Foreground", "Background", "Orphan", "nil"')
    status, answer = call(sandbox, "DELETE", path + "?propagationPolicy=%FF&orphanDependents=1")
    assert status == 422 and 'propagationPolicy: Invalid value: "\\xff": orphanDependents and' in answer["message"]
    assert sandbox.get("configmaps", "default", "a") is not None


def test_a_collection_delete_holds_each_object_to_the_preconditions_and_stops_at_the_first_refused(
        sandbox: Sandbox) -> None:
    # store.go DeleteCollection calls Delete per object with the options; kube-apiserver's one worker
    # answers the first error, the objects deleted before it (listed in key order) staying deleted.
    seed(sandbox, "a", "b", "c")
    uids = {n: sandbox.get("configmaps", "default", n)["metadata"]["uid"] for n in "abc"}
    for body in ({"preconditions": {"uid": uids["b"]}, "dryRun": ["All"]}, {"preconditions": {"resourceVersion": ""}}):
        status, answer = call(sandbox, "DELETE", CONFIGMAPS, body)
        assert (status, answer["reason"]) == (409, "Conflict"), answer
        assert answer["message"].startswith('Operation cannot be fulfilled on ConfigMap "a": the ')
        assert all(sandbox.get("configmaps", "default", n) is not None for n in "abc")
    status, answer = call(sandbox, "DELETE", CONFIGMAPS, {"preconditions": {"uid": uids["a"]}})
    assert (status, answer["reason"]) == (409, "Conflict")
    assert answer["message"] == (f'Operation cannot be fulfilled on ConfigMap "b": the UID in the precondition '
                                 f'({uids["a"]}) does not match the UID in record ({uids["b"]}). The object might '
                                 "have been deleted and then recreated")
    assert [n for n in "abc" if sandbox.get("configmaps", "default", n) is not None] == ["b", "c"]
    status, answer = call(sandbox, "DELETE", CONFIGMAPS + "?fieldSelector=metadata.name%3Dc",
                          {"preconditions": {"uid": uids["c"]}})
    assert status == 200 and [i["metadata"]["name"] for i in answer["items"]] == ["c"]
    assert sandbox.get("configmaps", "default", "c") is None


def test_kubectl_server_dry_run_still_works(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed(sandbox, "a")
    out = kubectl("delete", "configmap", "a", "--dry-run=server")
    assert "(server dry run)" in out.stdout
    kubectl("label", "configmap", "a", "x=y", "--dry-run=server")
    assert sandbox.get("configmaps", "default", "a") is not None
    assert "labels" not in sandbox.get("configmaps", "default", "a")["metadata"]


@pytest.mark.parametrize("path", [CONFIGMAPS + "/a", CONFIGMAPS], ids=["delete", "deletecollection"])
def test_an_unknown_propagation_policy_is_refused_and_deletes_nothing(sandbox: Sandbox, path: str) -> None:
    # ValidateDeleteOptions (apimachinery meta/v1/validation): NotSupported, a 422 on DeleteOptions.meta.k8s.io.
    seed(sandbox, "a")
    for query, body in (("?propagationPolicy=Bogus", None), ("", {"propagationPolicy": "Bogus"})):
        status, answer = call(sandbox, "DELETE", path + query, body)
        assert status == 422 and answer["reason"] == "Invalid", answer
        assert answer["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
                                     '"Bogus": supported values: "Foreground", "Background", "Orphan", "nil"')
        assert answer["details"]["causes"][0]["field"] == "propagationPolicy"
    status, answer = call(sandbox, "DELETE", path, {"propagationPolicy": "Background", "orphanDependents": True})
    assert status == 422 and answer["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Background": '
        "orphanDependents and deletionPropagation cannot be both set")
    status, answer = call(sandbox, "DELETE", path, {"propagationPolicy": 5})
    assert status == 400, answer
    assert sandbox.get("configmaps", "default", "a") is not None
    for policy in ("Foreground", "Background", "Orphan"):
        seed(sandbox, "a")
        status, _ = call(sandbox, "DELETE", path + f"?propagationPolicy={policy}")
        assert status == 200 and sandbox.get("configmaps", "default", "a") is None


def test_several_refused_delete_options_are_listed_as_an_aggregate(sandbox: Sandbox) -> None:
    # NewInvalid prints ErrorList.ToAggregate() (apimachinery util/errors aggregate.Error): "[a, b]".
    seed(sandbox, "a")
    status, answer = call(sandbox, "DELETE", CONFIGMAPS + "/a?propagationPolicy=Bogus&dryRun=Bogus")
    assert status == 422 and answer["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Unsupported value: "Bogus": supported values: '
        '"Foreground", "Background", "Orphan", "nil", dryRun: Unsupported value: []string{"Bogus"}: '
        'supported values: "All"]'), answer
    assert [c["field"] for c in answer["details"]["causes"]] == ["propagationPolicy", "dryRun"]
    assert sandbox.get("configmaps", "default", "a") is not None
