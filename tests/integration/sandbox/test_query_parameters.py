"""The sandbox reads a request's query once, as kube-apiserver reads it, and every option comes from that one read.

kube-apiserver reads ``req.URL.Query()``: Go's ``url.ParseQuery`` (``src/net/url/url.go``) skips a pair
holding ``;`` or a ``%`` without two hex digits and keeps the others, and refuses a query of more than
10000 pairs whole. A single-valued option takes the name's first value (``Values.Get``; the
query-to-options conversion, ``runtime.Convert_Slice_string_To_string`` and its siblings in
k8s.io/apimachinery/pkg/runtime/conversion.go, take ``(*in)[0]``); ``dryRun`` is a ``[]string`` and
takes them all. Python's ``parse_qsl`` into a dict did neither: it kept every pair, and the last value won.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def call(sb: Sandbox, method: str, target: str, body: Any = None) -> tuple[int, Any]:
    """Send ``target`` byte for byte (no client re-encodes the query): (status, decoded JSON)."""
    connection = http.client.HTTPConnection("127.0.0.1", sb.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, target, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def names(sb: Sandbox, query: str) -> list[str]:
    status, answer = call(sb, "GET", f"{CONFIGMAPS}?{query}")
    assert status == 200, answer
    return sorted(item["metadata"]["name"] for item in answer["items"])


@pytest.fixture
def seeded(sandbox: Sandbox) -> Sandbox:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": {"app": name}}}
                  for name in ("a", "b", "c")])  # fmt: skip
    return sandbox


@pytest.mark.parametrize(
    ("query", "name", "used", "expected"),
    [
        ("labelSelector=app%3Da&labelSelector=app%3Db", "labelSelector", "app=a", ["a"]),
        ("fieldSelector=metadata.name%3Db&fieldSelector=metadata.name%3Dc", "fieldSelector", "metadata.name=b", ["b"]),
        ("labelSelector=app%3Dc&labelSelector=", "labelSelector", "app=c", ["c"]),
        ("labelSelector=&labelSelector=app%3Dc", "labelSelector", "", ["a", "b", "c"]),
    ],
)
def test_a_repeated_selector_takes_its_first_value(seeded: Sandbox, query: str, name: str, used: str,
                                                   expected: list[str]) -> None:  # fmt: skip
    assert names(seeded, query) == expected
    assert seeded.requests[-1].query[name] == used  # the request log shows the value that counted


def test_a_repeated_limit_and_continue_take_their_first_values(seeded: Sandbox) -> None:
    status, first = call(seeded, "GET", f"{CONFIGMAPS}?limit=1&limit=500")
    assert status == 200 and len(first["items"]) == 1 and first["metadata"]["continue"]
    token = first["metadata"]["continue"]
    status, rest = call(seeded, "GET", f"{CONFIGMAPS}?limit=1&continue={token}&continue=garbage")
    assert status == 200, rest
    assert [item["metadata"]["name"] for item in rest["items"]] == ["b"]


def test_a_repeated_watch_takes_its_first_value(seeded: Sandbox) -> None:
    status, answer = call(seeded, "GET", f"{CONFIGMAPS}?watch=0&watch=1&timeoutSeconds=1")
    assert status == 200 and answer["kind"] == "ConfigMapList"
    assert seeded.requests[-1].verb == "list"


@pytest.mark.parametrize(("value", "verb"), [("yes", "watch"), ("", "watch"), ("TRUE", "watch"), ("FALSE", "list"),
                                            ("0", "list")])  # fmt: skip
def test_watch_is_read_as_go_reads_a_boolean_option(seeded: Sandbox, value: str, verb: str) -> None:
    # runtime.Convert_Slice_string_To_bool: only 0 and false (any case) are false, an empty value is true.
    connection = http.client.HTTPConnection("127.0.0.1", seeded.port, timeout=30)
    try:
        connection.request("GET", f"{CONFIGMAPS}?watch={value}&timeoutSeconds=1")
        response = connection.getresponse()
        body = response.read()  # a watch ends after timeoutSeconds
    finally:
        connection.close()
    assert response.status == 200 and seeded.requests[-1].verb == verb
    assert (b'"type":"ADDED"' in body.replace(b" ", b"")) == (verb == "watch")


def test_a_repeated_resource_version_takes_its_first_value(seeded: Sandbox) -> None:
    status, answer = call(seeded, "GET", f"{CONFIGMAPS}?resourceVersion=0&resourceVersion=999999999")
    assert status == 200 and len(answer["items"]) == 3  # the last would wait for a revision, then 504


def test_every_dry_run_value_counts_so_one_unknown_refuses_the_write(seeded: Sandbox) -> None:
    # CreateOptions.DryRun is a []string: ValidateDryRun sees ["Bogus", "All"] and refuses it.
    status, answer = call(seeded, "POST", f"{CONFIGMAPS}?dryRun=Bogus&dryRun=All", {"metadata": {"name": "new"}})
    assert status == 422 and answer["reason"] == "Invalid", answer
    assert 'dryRun: Unsupported value: []string{"Bogus"' in answer["message"]
    assert seeded.get("configmaps", "default", "new") is None
    status, answer = call(seeded, "POST", f"{CONFIGMAPS}?dryRun=All&dryRun=All", {"metadata": {"name": "new"}})
    assert status == 201 and seeded.get("configmaps", "default", "new") is None  # a dry run all the same


@pytest.mark.parametrize(
    "query",
    [
        "fieldSelector=metadata.name%3Da;",  # "invalid semicolon separator in query"
        "fieldSelector=metadata.name%3Da;x=1",
        "fieldSelector=metadata.name%3Da%",  # url.EscapeError
        "fieldSelector=metadata.name%3Da%zz",
        "field%zzSelector=metadata.name%3Da",  # a bad escape in the name skips the pair too
    ],
)
def test_a_pair_go_cannot_split_or_unescape_is_skipped(seeded: Sandbox, query: str) -> None:
    assert names(seeded, query) == ["a", "b", "c"]  # no selector at all
    assert names(seeded, f"{query}&labelSelector=app%3Db") == ["b"]  # the other pairs still count


def test_a_skipped_pair_does_not_hide_a_later_value_of_its_name(seeded: Sandbox) -> None:
    assert names(seeded, "labelSelector=app%3Da;&labelSelector=app%3Dc") == ["c"]


def test_a_hash_belongs_to_the_query(seeded: Sandbox) -> None:
    # url.ParseRequestURI: a request target has no fragment, so the selector's value is "metadata.name=a#x".
    assert names(seeded, "fieldSelector=metadata.name%3Da#x") == []
    assert names(seeded, "fieldSelector=metadata.name%3Da&x=#") == ["a"]
    # Nor before the '?': the path is "/api/v1/namespaces/default/configmaps#x", which serves nothing.
    assert call(seeded, "GET", f"{CONFIGMAPS}#x?fieldSelector=metadata.name%3Da")[0] == 404


def test_a_query_of_more_than_ten_thousand_pairs_has_no_values_at_all(seeded: Sandbox) -> None:
    # urlParamsWithinMax (Go 1.24+ default): the whole query is refused, the selector with it.
    padding = "x=1&" * 10_000  # with the selector, 10001 pairs
    assert names(seeded, padding + "labelSelector=app%3Db") == ["a", "b", "c"]
    assert names(seeded, padding[4:] + "labelSelector=app%3Db") == ["b"]  # exactly 10000 pairs still parse
