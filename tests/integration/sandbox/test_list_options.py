"""ListOptions kube-apiserver refuses are refused here too, before anything is read or streamed.

``ValidateListOptions`` / ``validateWatchOptions`` (k8s.io/apimachinery/pkg/apis/meta/internalversion/
validation) answer 422 on ``ListOptions.meta.k8s.io``; the etcd3 store refuses a continue token with a
resourceVersion (400). A client that sends these passes nowhere, so it must not pass against the sandbox.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def get(sb: Sandbox, query: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(sb.url + CONFIGMAPS + "?" + query, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    ("query", "cause"),
    [
        ("resourceVersionMatch=Exact", "resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ("resourceVersion=1&resourceVersionMatch=Newest", 'Unsupported value: "Newest"'),
        ("resourceVersion=0&resourceVersionMatch=Exact", 'resourceVersionMatch "exact" is forbidden'),
        ("sendInitialEvents=true", "sendInitialEvents is forbidden for list"),
        ("watch=1&sendInitialEvents=true", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
        ("watch=1&resourceVersionMatch=NotOlderThan", "forbidden for watch unless sendInitialEvents is provided"),
        (
            "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true",
            'Unsupported value: "Exact": supported values: "NotOlderThan"',
        ),
    ],
)
def test_list_options_a_real_server_refuses_are_a_422(sandbox: Sandbox, query: str, cause: str) -> None:
    status, answer = get(sandbox, query + "&timeoutSeconds=1")
    assert status == 422, answer
    assert answer["reason"] == "Invalid" and answer["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    assert cause in answer["message"]
    assert any(c["field"] in ("resourceVersionMatch", "sendInitialEvents") for c in answer["details"]["causes"])


def test_a_continue_token_with_a_resource_version_is_a_400(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}} for i in range(3)])
    status, body = get(sandbox, "limit=1")
    assert status == 200
    token = json.loads(body)["metadata"]["continue"]
    status, answer = get(sandbox, f"limit=1&continue={token}&resourceVersion=2")
    assert status == 400 and answer["message"] == "specifying resource version is not allowed when using continue"
    status, body = get(sandbox, f"limit=1&continue={token}&resourceVersion=0")  # "0" is let through, as upstream
    assert status == 200 and json.loads(body)["items"][0]["metadata"]["name"] == "c1"


def test_valid_combinations_still_serve(sandbox: Sandbox) -> None:
    for query in (
        "resourceVersion=1&resourceVersionMatch=NotOlderThan",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    ):
        status, _ = get(sandbox, query)
        assert status == 200, query
